#pragma once
// A child process for the end-to-end tests: started with an explicit environment (nothing
// inherited, so one test's fake-driver settings never leak into another process), its
// output in a log file or on pipes, and always killed and reaped: by stop(), kill() or the
// destructor, also when an assertion ends the test early. The child dies with the test
// process too (PR_SET_PDEATHSIG), so nothing outlives a crashed test; as that signal follows
// the thread that forked, start children from a thread that lives as long as they do.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::e2e {

struct ProcessOptions {
  std::string program;                     ///< absolute path
  std::vector<std::string> args;           ///< without argv[0]
  std::map<std::string, std::string> env;  ///< the whole environment
  std::string logFile;                     ///< stdout and stderr are appended here (stderr only with pipeStdout)
  bool pipeStdin = false;                  ///< writeStdin()/closeStdin() feed the child
  bool pipeStdout = false;                 ///< readLine() reads the child's stdout
  /// Runs in the child between fork and exec. The parent is multi-threaded, so it may only
  /// make system calls on data prepared before start() (no allocation, no locks). Returns
  /// false to fail the start; the child then exits with 127 before exec.
  std::function<bool()> beforeExec;
};

class ChildProcess {
 public:
  /// Forks and execs. Errors: fork or pipe failure (an exec failure shows as exit 127).
  static Result<std::unique_ptr<ChildProcess>> start(ProcessOptions options);
  ~ChildProcess();  ///< kill()
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  /// Still running (not yet reaped)?
  bool running();
  /// The wait status once it exited within `timeout`, else nullopt (it keeps running).
  std::optional<int> waitExit(std::chrono::milliseconds timeout);
  /// SIGTERM, then SIGKILL after `grace`; reaps. Returns the wait status. Safe to call twice.
  int stop(std::chrono::milliseconds grace = std::chrono::seconds(10));
  /// SIGKILL and reap (an agent that crashed, a node that lost power).
  int kill();

  /// The log file so far.
  std::string log() const;
  /// Polls the log until `needle` appears; false at the deadline or when the child exited.
  bool waitForLog(const std::string& needle, std::chrono::milliseconds timeout);

  /// One line of stdout (without the newline); nullopt at EOF or after `timeout`.
  std::optional<std::string> readLine(std::chrono::milliseconds timeout);
  bool writeStdin(const std::string& text);
  void closeStdin();

 private:
  ChildProcess() = default;
  ProcessOptions options_;
  pid_t pid_ = -1;
  std::optional<int> status_;
  int stdinFd_ = -1, stdoutFd_ = -1;
  std::string stdoutBuffer_;
};

/// The exit code of a wait status, or 128 + signal when a signal ended it.
int exitCodeOf(int waitStatus);

}  // namespace vgpu::e2e
