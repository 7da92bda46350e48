#include "smi_xml.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <pugixml.hpp>

extern char** environ;

namespace vgpu::nvidia {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// The text of a child element, trimmed; nullopt when absent, empty or "N/A".
std::optional<std::string> field(const pugi::xml_node& node, const char* path) {
  const pugi::xml_node n = node.first_element_by_path(path);
  if (!n) return std::nullopt;
  const std::string_view text = trim(n.child_value());
  if (text.empty() || text == "N/A" || text == "Unknown Error" || text == "[N/A]") return std::nullopt;
  return std::string(text);
}

std::optional<int> parseInt(std::string_view text) {
  int v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

bool looksLikeUuid(std::string_view s) { return (s.starts_with("GPU-") || s.starts_with("MIG-")) && s.size() > 4; }

}  // namespace

std::optional<std::uint64_t> parseMiB(std::string_view text) {
  text = trim(text);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  const std::string_view unit = trim(std::string_view(end, static_cast<size_t>(text.data() + text.size() - end)));
  if (unit == "MiB") return v;
  if (unit == "GiB") return v > (UINT64_MAX >> 10) ? std::nullopt : std::optional<std::uint64_t>(v << 10);
  if (unit == "KiB") return v >> 10;
  return std::nullopt;
}

Result<std::vector<GpuInfo>> parseSmiXml(std::string_view xml) {
  pugi::xml_document doc;
  const pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size());
  if (!parsed)
    return makeError("nvidia-smi -q -x output is not valid XML: " + std::string(parsed.description()) +
                     " at byte " + std::to_string(parsed.offset));
  const pugi::xml_node root = doc.child("nvidia_smi_log");
  if (!root) return makeError("nvidia-smi -q -x output has no <nvidia_smi_log> element");

  std::vector<GpuInfo> gpus;
  int index = 0;
  for (const pugi::xml_node gpu : root.children("gpu")) {
    GpuInfo g;
    g.index = index++;
    const std::string where = "nvidia-smi GPU " + std::to_string(g.index);
    if (auto id = field(gpu, "pci/pci_bus_id")) {
      g.pciBusId = *id;
    } else if (const char* attr = gpu.attribute("id").value(); *attr != '\0') {
      g.pciBusId = attr;
    }
    if (auto uuid = field(gpu, "uuid"); uuid && looksLikeUuid(*uuid)) {
      g.uuid = *uuid;
    } else {
      g.error = where + (uuid ? " has a malformed <uuid> \"" + *uuid + "\"" : " reports no <uuid>");
    }
    g.name = field(gpu, "product_name").value_or("");
    if (auto total = field(gpu, "fb_memory_usage/total")) {
      if (auto mib = parseMiB(*total)) g.memoryMiB = *mib;
      else if (g.error.empty()) g.error = where + ": cannot read memory size \"" + *total + "\"";
    } else if (g.error.empty()) {
      g.error = where + " reports no memory size (<fb_memory_usage><total>)";
    }
    if (auto minor = field(gpu, "minor_number")) g.minor = parseInt(*minor).value_or(-1);
    if (auto mig = field(gpu, "mig_mode/current_mig")) {
      if (*mig == "Enabled") g.mig = MigMode::kEnabled;
      else if (*mig == "Disabled") g.mig = MigMode::kDisabled;
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

Result<std::string> runProgram(const std::string& program, const std::vector<std::string>& args,
                               std::chrono::milliseconds timeout) {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return makeError("cannot run " + program + ": pipe: " + std::strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return makeError("cannot run " + program + ": pipe: " + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  // Its own process group, so a timeout also kills whatever a wrapper script started.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid = 0;
  const bool searchPath = program.find('/') == std::string::npos;
  const int rc = searchPath ? posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), environ)
                            : posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    close(out[0]);
    close(err[0]);
    return makeError("cannot run " + program + ": " + std::strerror(rc));
  }

  std::string stdoutText, stderrText;
  constexpr size_t kMaxOutput = 64u << 20;  // a runaway child must not exhaust the agent
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool timedOut = false;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open = 2;
  char buf[65536];
  while (open > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timedOut = true;
      break;
    }
    const int n = poll(fds, 2, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        std::string& target = i == 0 ? stdoutText : stderrText;
        if (target.size() < kMaxOutput) target.append(buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  // A child may close its output and keep running: the deadline holds for its exit too.
  int status = 0;
  while (!timedOut) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      timedOut = true;
      break;
    }
    usleep(5000);
  }
  if (timedOut) {
    kill(-pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (timedOut)
    return makeError(program + " did not finish within " + std::to_string(timeout.count()) + " ms and was killed");
  std::string_view errText = trim(stderrText);
  if (errText.size() > 500) errText = errText.substr(0, 500);
  if (WIFSIGNALED(status))
    return makeError(program + " was killed by signal " + std::to_string(WTERMSIG(status)));
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    std::string message = program + " exited with status " + std::to_string(WEXITSTATUS(status));
    if (WEXITSTATUS(status) == 127 && searchPath) message += " (not found on PATH?)";
    if (!errText.empty()) message += ": " + std::string(errText);
    else if (auto o = trim(stdoutText); !o.empty()) message += ": " + std::string(o.substr(0, 500));
    return makeError(message);
  }
  return stdoutText;
}

}  // namespace vgpu::nvidia
