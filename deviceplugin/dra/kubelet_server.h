#pragma once
// The kubelet-facing gRPC of one DRA driver: the plugin watcher's Registration service on
// <registrationDir>/<driver>-reg.sock (type DRAPlugin, versions v1 and v1beta1) and the
// DRAPlugin service of both versions on <pluginDir>/<driver>/dra.sock, answering from a
// ClaimPreparer. No gRPC type appears here.

#include <atomic>
#include <memory>
#include <string>

#include "claim_preparer.h"
#include "vgpu/result.h"

namespace vgpu::dra {

struct KubeletServerOptions {
  std::string driver;
  std::string registrationDir = "/var/lib/kubelet/plugins_registry";
  std::string pluginDir = "/var/lib/kubelet/plugins";
};

/// "<registrationDir>/<driver>-reg.sock" and "<pluginDir>/<driver>/dra.sock".
std::string registrationSocket(const KubeletServerOptions& options);
std::string draSocket(const KubeletServerOptions& options);

/// What GetInfo advertises, newest first.
inline constexpr const char* kSupportedVersions[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};

class KubeletServer {
 public:
  /// Listens on both sockets (stale files removed first). Errors name the socket.
  static Result<std::unique_ptr<KubeletServer>> start(KubeletServerOptions options, ClaimPreparer& preparer);
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
