#pragma once
// A kubeconfig exec credential plugin (client.authentication.k8s.io/v1 or v1beta1): runs
// the command without a shell, hands it KUBERNETES_EXEC_INFO, reads an ExecCredential from
// its stdout and caches the answer until its expirationTimestamp. The client asks it for
// each request and again after a 401.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "vgpu/k8s/config.h"
#include "vgpu/result.h"

namespace vgpu::k8s {

/// What one run of the plugin gave: a token, a client certificate, or both.
struct ExecCredential {
  std::string token;
  std::string clientCertPem;  ///< with clientKeyPem, or both empty
  std::string clientKeyPem;
  /// From status.expirationTimestamp; none = valid until a 401 says otherwise.
  std::optional<std::chrono::system_clock::time_point> expiry;
  std::uint64_t generation = 0;  ///< which run produced it (1, 2, ...)
};

struct ExecPluginOptions {
  std::chrono::milliseconds timeout{60000};  ///< the plugin is killed after this
  /// A credential is renewed this long before its expirationTimestamp, so a request never
  /// leaves with a token about to lapse in flight.
  std::chrono::seconds expiryMargin{10};
  /// Wall-clock time (expiry timestamps are wall-clock); null = system_clock::now.
  std::function<std::chrono::system_clock::time_point()> now;
};

/// Thread-safe. At most one run of the plugin at a time: callers that need a run while one
/// is in flight wait for it and share its result, error included, so a failing plugin is
/// not started once per waiting request.
class ExecCredentialPlugin {
 public:
  /// `config.exec` must be set; its cluster fields feed spec.cluster when the exec config
  /// has provideClusterInfo.
  ExecCredentialPlugin(const ClientConfig& config, ExecPluginOptions options = {});

  /// The cached credential, or a fresh one if there is none or it is (about to be) expired.
  /// Errors say what was wrong: command not found (with the installHint), a non-zero exit
  /// (with the last line of its stderr), a timeout, bad JSON, a wrong apiVersion or kind, no
  /// token and no certificate, a bad expirationTimestamp.
  Result<ExecCredential> get();

  /// After the apiserver answered 401 to a request made with credential `generation`: runs
  /// the plugin again unless a newer credential already exists (another request's 401 got
  /// there first), and returns the credential to retry with.
  Result<ExecCredential> refreshAfterUnauthorized(std::uint64_t generation);

  /// Times the plugin was started.
  std::uint64_t runs() const;
  const std::string& command() const { return exec_.command; }

 private:
  Result<ExecCredential> obtain(std::optional<std::uint64_t> rejected);
  Result<ExecCredential> runOnce() const;
  bool fresh(const ExecCredential& c) const;

  ExecConfig exec_;
  std::string execInfo_;  ///< the KUBERNETES_EXEC_INFO JSON
  ExecPluginOptions options_;

  mutable std::mutex mu_;
  std::condition_variable done_;
  bool running_ = false;
  std::uint64_t started_ = 0;
  std::uint64_t finished_ = 0;
  std::optional<ExecCredential> cached_;
  std::optional<Result<ExecCredential>> last_;  ///< the result of run number finished_
};

}  // namespace vgpu::k8s
