// Exec credential plugins: the process (posix_spawn, no shell, stdin /dev/null, its own
// process group so a timeout kills its children too), the ExecCredential exchange and the
// cache with single-flight runs.

#include "vgpu/k8s/exec_credential.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include "vgpu/codec/base64.h"
#include "vgpu/codec/timestamp.h"

extern char** environ;

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using std::chrono::steady_clock;

constexpr std::size_t kMaxOutput = 1 << 20;  // an ExecCredential is a few KiB

struct ProcessResult {
  int waitStatus = 0;
  std::string out;
  std::string err;
};

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

std::string errnoText(int e) { return std::strerror(e); }

// Runs `argv` with `envp`; reads stdout and stderr until both close or `timeout` passes
// (then the process group is killed). Errors: could not start (errno kept in `spawnErrno`).
Result<ProcessResult> runProcess(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& envp,
                                 std::chrono::milliseconds timeout, int& spawnErrno) {
  spawnErrno = 0;
  std::array<int, 2> outPipe{}, errPipe{};
  if (::pipe2(outPipe.data(), O_CLOEXEC) != 0) return makeError("pipe: " + errnoText(errno));
  Fd outRead(outPipe[0]), outWrite(outPipe[1]);
  if (::pipe2(errPipe.data(), O_CLOEXEC) != 0) return makeError("pipe: " + errnoText(errno));
  Fd errRead(errPipe[0]), errWrite(errPipe[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, outWrite.get(), 1);
  posix_spawn_file_actions_adddup2(&actions, errWrite.get(), 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // A daemon may block or ignore signals (SIGPIPE); the plugin starts with the defaults,
  // in a process group of its own so a timeout can kill whatever it started.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  std::vector<char*> av, ev;
  for (const auto& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  for (const auto& e : envp) ev.push_back(const_cast<char*>(e.c_str()));
  ev.push_back(nullptr);
  pid_t pid = -1;
  // A bare name is looked up in the daemon's $PATH (as Go's exec.LookPath does), a path is used as is.
  int rc = argv[0].find('/') == std::string::npos
               ? ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, av.data(), ev.data())
               : ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, av.data(), ev.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    spawnErrno = rc;
    return makeError(errnoText(rc));
  }
  outWrite.reset();
  errWrite.reset();

  ProcessResult result;
  auto deadline = steady_clock::now() + timeout;
  bool outOpen = true, errOpen = true, timedOut = false;
  char buf[8192];
  while (outOpen || errOpen) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady_clock::now());
    if (left.count() <= 0) {
      timedOut = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    std::array<pollfd, 2> fds{pollfd{outOpen ? outRead.get() : -1, POLLIN, 0},
                              pollfd{errOpen ? errRead.get() : -1, POLLIN, 0}};
    int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left.count(), 1000)));
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      ssize_t got = ::read(fds[i].fd, buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      std::string& sink = i == 0 ? result.out : result.err;
      if (got <= 0) {
        (i == 0 ? outOpen : errOpen) = false;
      } else if (sink.size() < kMaxOutput) {
        sink.append(buf, static_cast<std::size_t>(got));
      }
    }
  }
  // It may have closed its output and still be running: wait for it up to the deadline too.
  int status = 0;
  for (;;) {
    pid_t w = ::waitpid(pid, &status, timedOut ? 0 : WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    if (w == 0 && steady_clock::now() >= deadline) {
      timedOut = true;
      ::kill(-pid, SIGKILL);
    } else if (w == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  if (timedOut) {
    return makeError("did not finish within " + std::to_string(timeout.count()) + " ms and was killed");
  }
  result.waitStatus = status;
  return result;
}

std::string lastLine(const std::string& text) {
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  std::size_t start = text.find_last_of('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  std::string line = text.substr(start, end + 1 - start);
  if (line.size() > 300) line = line.substr(0, 300) + "...";
  return line;
}

// A string field of `o`: absent or null → "", another type → error.
Result<std::string> stringField(const json::object& o, const char* key, const std::string& where) {
  const json::value* v = o.if_contains(key);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string()) return makeError(where + "." + key + " is not a string");
  return std::string(v->get_string());
}

std::string buildExecInfo(const ClientConfig& config) {
  json::object spec{{"interactive", false}};
  if (config.exec->provideClusterInfo) {
    json::object cluster{{"server", config.server}};
    if (!config.tlsServerName.empty()) cluster["tls-server-name"] = config.tlsServerName;
    if (config.insecureSkipTlsVerify) cluster["insecure-skip-tls-verify"] = true;
    // []byte in client-go's types, so base64 in JSON.
    if (!config.caPem.empty()) cluster["certificate-authority-data"] = base64Encode(config.caPem);
    spec["cluster"] = std::move(cluster);
  }
  json::object info{{"kind", "ExecCredential"}, {"apiVersion", config.exec->apiVersion}, {"spec", std::move(spec)}};
  return json::serialize(info);
}

}  // namespace

ExecCredentialPlugin::ExecCredentialPlugin(const ClientConfig& config, ExecPluginOptions options)
    : exec_(config.exec.value()), execInfo_(buildExecInfo(config)), options_(std::move(options)) {
  if (!options_.now) options_.now = [] { return std::chrono::system_clock::now(); };
}

std::uint64_t ExecCredentialPlugin::runs() const {
  std::lock_guard lock(mu_);
  return started_;
}

bool ExecCredentialPlugin::fresh(const ExecCredential& c) const {
  return !c.expiry || options_.now() < *c.expiry - options_.expiryMargin;
}

Result<ExecCredential> ExecCredentialPlugin::get() { return obtain(std::nullopt); }

Result<ExecCredential> ExecCredentialPlugin::refreshAfterUnauthorized(std::uint64_t generation) {
  return obtain(generation);
}

Result<ExecCredential> ExecCredentialPlugin::obtain(std::optional<std::uint64_t> rejected) {
  std::unique_lock lock(mu_);
  if (running_) {
    // Share the run in flight (it started after whatever credential the caller rejected)
    // rather than start another after it.
    std::uint64_t awaited = started_;
    done_.wait(lock, [&] { return finished_ >= awaited; });
    return *last_;
  }
  if (cached_) {
    if (rejected ? cached_->generation != *rejected : fresh(*cached_)) return *cached_;
  }
  running_ = true;
  std::uint64_t run = ++started_;
  lock.unlock();
  auto r = runOnce();
  lock.lock();
  if (r) {
    r->generation = run;
    cached_ = *r;
  }
  last_ = r;
  finished_ = run;
  running_ = false;
  done_.notify_all();
  return r;
}

Result<ExecCredential> ExecCredentialPlugin::runOnce() const {
  std::string what = "exec credential plugin " + exec_.command;
  std::vector<std::string> argv{exec_.command};
  argv.insert(argv.end(), exec_.args.begin(), exec_.args.end());
  // The daemon's environment, then the kubeconfig's env entries, then KUBERNETES_EXEC_INFO;
  // a later name replaces an earlier one.
  std::vector<std::pair<std::string, std::string>> overrides = exec_.env;
  overrides.emplace_back("KUBERNETES_EXEC_INFO", execInfo_);
  std::vector<std::string> envp;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry(*e);
    std::string name = entry.substr(0, entry.find('='));
    bool replaced = false;
    for (const auto& [k, v] : overrides) replaced = replaced || k == name;
    if (!replaced) envp.push_back(std::move(entry));
  }
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    bool later = false;
    for (std::size_t j = i + 1; j < overrides.size(); ++j) later = later || overrides[j].first == overrides[i].first;
    if (!later) envp.push_back(overrides[i].first + "=" + overrides[i].second);
  }

  int spawnErrno = 0;
  auto proc = runProcess(argv, envp, options_.timeout, spawnErrno);
  if (!proc) {
    if (spawnErrno == ENOENT) {
      std::string msg = what + ": executable not found" +
                        (exec_.command.find('/') == std::string::npos ? " in $PATH" : "");
      if (!exec_.installHint.empty()) msg += ". " + exec_.installHint;
      return makeError(msg);
    }
    if (spawnErrno == EACCES) return makeError(what + ": not executable (permission denied)");
    return makeError(what + ": " + proc.error().message);
  }
  int st = proc->waitStatus;
  if (WIFSIGNALED(st)) {
    std::string line = lastLine(proc->err);
    return makeError(what + ": killed by signal " + std::to_string(WTERMSIG(st)) +
                     (line.empty() ? "" : ": " + line));
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
    std::string line = lastLine(proc->err);
    return makeError(what + ": failed with exit code " + std::to_string(WEXITSTATUS(st)) +
                     (line.empty() ? " (no stderr)" : ": " + line));
  }

  boost::system::error_code ec;
  auto v = json::parse(proc->out, ec);
  if (ec || !v.is_object()) {
    std::string start = proc->out.substr(0, 80);
    return makeError(what + ": its output is not a JSON ExecCredential" +
                     (ec ? " (" + ec.message() + ")" : "") + "; it began: \"" + start + "\"");
  }
  const auto& obj = v.get_object();
  auto apiVersion = stringField(obj, "apiVersion", "output");
  auto kind = stringField(obj, "kind", "output");
  if (!apiVersion || !kind) return makeError(what + ": " + (!apiVersion ? apiVersion : kind).error().message);
  if (*kind != "ExecCredential") {
    return makeError(what + ": answered kind \"" + *kind + "\", expected ExecCredential");
  }
  if (*apiVersion != exec_.apiVersion) {
    return makeError(what + ": answered apiVersion \"" + *apiVersion + "\" but the kubeconfig asks for " +
                     exec_.apiVersion + " (set users[].user.exec.apiVersion to what the plugin speaks)");
  }
  const json::value* status = obj.if_contains("status");
  if (status == nullptr || !status->is_object()) return makeError(what + ": the answer has no status");
  const auto& s = status->get_object();
  ExecCredential c;
  for (auto [key, field] : {std::pair{"token", &c.token}, std::pair{"clientCertificateData", &c.clientCertPem},
                            std::pair{"clientKeyData", &c.clientKeyPem}}) {
    auto f = stringField(s, key, "status");
    if (!f) return makeError(what + ": " + f.error().message);
    *field = std::move(*f);
  }
  if (c.token.empty() && c.clientCertPem.empty() && c.clientKeyPem.empty()) {
    return makeError(what + ": the answer has neither status.token nor status.clientCertificateData and "
                     "status.clientKeyData");
  }
  if (c.clientCertPem.empty() != c.clientKeyPem.empty()) {
    return makeError(what + ": the answer has only one of status.clientCertificateData and "
                     "status.clientKeyData");
  }
  auto exp = stringField(s, "expirationTimestamp", "status");
  if (!exp) return makeError(what + ": " + exp.error().message);
  if (!exp->empty()) {
    auto t = parseTimestamp(*exp);
    if (!t) return makeError(what + ": status.expirationTimestamp: " + t.error().message);
    c.expiry = *t;
  }
  return c;
}

}  // namespace vgpu::k8s
