#pragma once
// The kubelet-facing gRPC of one DRA driver: the plugin watcher's Registration service on
// <registrationDir>/<driver>-reg.sock (type DRAPlugin, versions v1 and v1beta1) and, on
// <pluginDir>/<driver>/dra.sock, the DRAPlugin service of both versions answering from a
// ClaimPreparer and the DRAResourceHealth service (v1, v1alpha1) streaming a HealthBoard.
// No gRPC type appears here.

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "claim_preparer.h"
#include "device_health.h"
#include "vgpu/result.h"

namespace vgpu::dra {

struct KubeletServerOptions {
  std::string driver;
  std::string registrationDir = "/var/lib/kubelet/plugins_registry";
  std::string pluginDir = "/var/lib/kubelet/plugins";
  /// NodeWatchResources sends the whole list at every change and at least this often: the
  /// kubelet reads a device as Unknown once no report came for the timeout sent with it
  /// (three of these, at least 1 s).
  std::chrono::milliseconds healthResend{10000};
};

/// "<registrationDir>/<driver>-reg.sock" and "<pluginDir>/<driver>/dra.sock".
std::string registrationSocket(const KubeletServerOptions& options);
std::string draSocket(const KubeletServerOptions& options);

/// What GetInfo advertises: the DRAPlugin versions, newest first (the kubelet takes the
/// first it speaks), then the optional health service (a 1.37 kubelet picks the newest it
/// speaks; unknown entries are ignored by every kubelet).
inline constexpr const char* kSupportedVersions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                                                     "v1alpha1.DRAResourceHealth"};

class KubeletServer {
 public:
  /// Listens on both sockets (stale files removed first). Errors name the socket.
  static Result<std::unique_ptr<KubeletServer>> start(KubeletServerOptions options, ClaimPreparer& preparer,
                                                      const HealthBoard& health);
  ~KubeletServer();  ///< stop()
  /// Stops serving and removes the sockets; safe to call twice.
  void stop();
  /// What the kubelet last said in NotifyRegistrationStatus.
  bool registered() const;
  std::string registrationError() const;

  struct Impl;

 private:
  explicit KubeletServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::dra
