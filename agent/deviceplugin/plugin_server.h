#pragma once
// One kubelet device plugin (v1beta1) for one resource: a gRPC server on a unix socket in
// the kubelet's device plugin directory, registered with the kubelet after it serves, and
// re-registered when the kubelet restarts (its kubelet.sock recreated or our socket
// deleted; checked every 100 ms). The RPCs are answered by a PluginHandler, so this class
// knows nothing of pods or backends. No gRPC type appears here.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "vgpu/container_spec.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// One device as the kubelet sees it (a slot of a physical device).
struct VirtualDevice {
  std::string id;
  bool healthy = true;
  int numaNode = -1;
};

/// gRPC status codes the handler may ask for (values as in grpc::StatusCode).
enum class RpcCode : int { kInvalidArgument = 3, kNotFound = 5, kFailedPrecondition = 9, kInternal = 13, kUnavailable = 14 };

struct RpcError {
  RpcCode code = RpcCode::kInternal;
  std::string message;
};

/// Answers the RPCs of every plugin. Called on gRPC threads: must be thread-safe.
class PluginHandler {
 public:
  virtual ~PluginHandler() = default;
  /// The full device list of `resource` and its version (bumped on every change).
  virtual std::vector<VirtualDevice> devices(const std::string& resource, std::uint64_t& version) = 0;
  /// Blocks until the list's version differs from `seen` or `timeout`; false on timeout.
  virtual bool waitForDevices(const std::string& resource, std::uint64_t seen, std::chrono::milliseconds timeout) = 0;
  virtual std::vector<std::string> preferred(const std::string& resource, const std::vector<std::string>& available,
                                             const std::vector<std::string>& mustInclude, std::size_t size) = 0;
  /// One container's devices (the kubelet sends one container per call).
  virtual std::variant<ContainerSpec, RpcError> allocate(const std::string& resource,
                                                         const std::vector<std::string>& ids) = 0;
};

struct PluginServerOptions {
  std::string resource;         ///< "nvidia.com/gpu"
  std::string pluginDir;        ///< the kubelet's device plugin directory
  std::string socketName;       ///< our socket's file name in pluginDir
  std::string kubeletSocket = "kubelet.sock";  ///< file name in pluginDir
  std::chrono::milliseconds watchInterval{100};
  std::chrono::milliseconds retryInterval{200};  ///< between failed Register attempts
};

struct PluginServerStats {
  std::uint64_t registrations = 0;  ///< successful Register calls
  std::uint64_t restarts = 0;       ///< kubelet restarts noticed
  std::string lastError;            ///< the last Register failure, for logs and /healthz
};

class PluginServer {
 public:
  PluginServer(PluginServerOptions options, PluginHandler& handler);
  ~PluginServer();  ///< stop()
  PluginServer(const PluginServer&) = delete;
  PluginServer& operator=(const PluginServer&) = delete;

  /// Serves, then starts the thread that registers (retrying until the kubelet answers)
  /// and watches for kubelet restarts. Errors: the socket cannot be created.
  Status start();
  /// Stops serving (ListAndWatch streams end) and removes our socket; safe to call twice.
  void stop();
  bool registered() const { return registered_.load(); }
  PluginServerStats stats() const;
  std::string socketPath() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> registered_{false};
};

}  // namespace vgpu::deviceplugin
