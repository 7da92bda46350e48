#include "child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace vgpu::e2e {
namespace {

using Clock = std::chrono::steady_clock;

void closeFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

int exitCodeOf(int waitStatus) {
  if (WIFEXITED(waitStatus)) return WEXITSTATUS(waitStatus);
  if (WIFSIGNALED(waitStatus)) return 128 + WTERMSIG(waitStatus);
  return -1;
}

Result<std::unique_ptr<ChildProcess>> ChildProcess::start(ProcessOptions options) {
  std::unique_ptr<ChildProcess> child(new ChildProcess());
  child->options_ = std::move(options);
  const ProcessOptions& o = child->options_;

  // Everything the child touches is built here: after fork only system calls are safe.
  std::vector<std::string> argStrings{o.program};
  argStrings.insert(argStrings.end(), o.args.begin(), o.args.end());
  std::vector<std::string> envStrings;
  for (const auto& [k, v] : o.env) envStrings.push_back(k + "=" + v);
  std::vector<char*> argv, envp;
  for (auto& s : argStrings) argv.push_back(s.data());
  for (auto& s : envStrings) envp.push_back(s.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);

  int logFd = -1;
  if (!o.logFile.empty()) {
    logFd = ::open(o.logFile.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logFd < 0) return makeError("cannot open " + o.logFile + ": " + std::strerror(errno));
  }
  int in[2] = {-1, -1}, out[2] = {-1, -1};
  if ((o.pipeStdin && ::pipe2(in, O_CLOEXEC) != 0) || (o.pipeStdout && ::pipe2(out, O_CLOEXEC) != 0)) {
    closeFd(logFd);
    return makeError(std::string("pipe: ") + std::strerror(errno));
  }
  // A child that exits early must not kill the test with SIGPIPE on a write to its stdin.
  ::signal(SIGPIPE, SIG_IGN);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    closeFd(logFd);
    for (int* fd : {&in[0], &in[1], &out[0], &out[1]}) closeFd(*fd);
    return makeError(std::string("fork: ") + std::strerror(errno));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the test died before the line above
    // Signals blocked by the test's threads must not stay blocked in the daemons.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGPIPE, SIG_DFL);
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(o.pipeStdin ? in[0] : devnull, 0);
    ::dup2(o.pipeStdout ? out[1] : (logFd >= 0 ? logFd : devnull), 1);
    ::dup2(logFd >= 0 ? logFd : devnull, 2);
    if (o.beforeExec && !o.beforeExec()) ::_exit(127);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  closeFd(logFd);
  closeFd(in[0]);
  closeFd(out[1]);
  child->pid_ = pid;
  child->stdinFd_ = in[1];
  child->stdoutFd_ = out[0];
  return child;
}

ChildProcess::~ChildProcess() {
  kill();
  closeFd(stdinFd_);
  closeFd(stdoutFd_);
}

bool ChildProcess::running() {
  if (status_ || pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) status_ = status;
  return !status_;
}

std::optional<int> ChildProcess::waitExit(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (running() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  running();
  return status_;
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (running()) {
    ::kill(pid_, SIGTERM);
    if (!waitExit(grace)) return kill();
  }
  return status_.value_or(-1);
}

int ChildProcess::kill() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    status_ = status;
  }
  return status_.value_or(-1);
}

std::string ChildProcess::log() const {
  std::ifstream in(options_.logFile);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool ChildProcess::waitForLog(const std::string& needle, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (log().find(needle) != std::string::npos) return true;
    if (!running() || Clock::now() >= deadline) return log().find(needle) != std::string::npos;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::optional<std::string> ChildProcess::readLine(std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto nl = stdoutBuffer_.find('\n'); nl != std::string::npos) {
      std::string line = stdoutBuffer_.substr(0, nl);
      stdoutBuffer_.erase(0, nl + 1);
      return line;
    }
    if (stdoutFd_ < 0) return std::nullopt;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{stdoutFd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(stdoutFd_, buf, sizeof buf);
    if (n <= 0) {
      closeFd(stdoutFd_);
      if (stdoutBuffer_.empty()) return std::nullopt;
      return std::exchange(stdoutBuffer_, {});
    }
    stdoutBuffer_.append(buf, static_cast<size_t>(n));
  }
}

bool ChildProcess::writeStdin(const std::string& text) {
  if (stdinFd_ < 0) return false;
  return ::write(stdinFd_, text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

void ChildProcess::closeStdin() { closeFd(stdinFd_); }

}  // namespace vgpu::e2e
