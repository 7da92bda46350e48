#pragma once
// vgpu-dra-plugin: the node agent's DRA front end (DESIGN.md 8a). For every backend whose
// frontEnd is `dra` on this node (device-config.yaml), one DRA driver "<backend>.vgpu.io":
// its ResourceSlice pool kept up to date with the node's devices (SlicePublisher), the
// kubelet's registration, NodePrepare/Unprepare and health stream served (KubeletServer,
// ClaimPreparer, HealthBoard), what the apiserver dropped of the sharing fields or of the
// taints of unhealthy devices said in the log, on /metrics and as a Warning event on the
// Node. A health thread per driver waits for the backend's health events and publishes at
// once.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "folder_bound.h"
#include "vgpu/k8s/config.h"
#include "vgpu/result.h"

namespace vgpu::dra {

struct DraAgentOptions {
  std::string nodeName;
  std::string configPath = "/etc/vgpu/device-config.yaml";
  std::string backendDir;  ///< empty = defaultBackendDir()
  std::string registrationDir = "/var/lib/kubelet/plugins_registry";
  std::string pluginDir = "/var/lib/kubelet/plugins";
  std::string cdiDir = "/var/run/cdi";
  std::string stateDir = "/var/lib/vgpu";  ///< <stateDir>/dra/<driver>/
  std::string driverDomain = "vgpu.io";    ///< drivers are "<backend>.<driverDomain>"
  std::string metricsAddress = "0.0.0.0:9395";  ///< empty = off
  std::string kubeconfig;
  k8s::ClientConfig apiConfig;  ///< server empty = load from kubeconfig / in-cluster
  /// How often devices are rediscovered and the slices checked (the kubelet deletes a
  /// node's slices when it starts).
  std::chrono::milliseconds resyncInterval{30000};
  /// Whether each claim's folder is a size-limited tmpfs (--region-tmpfs).
  deviceplugin::FolderTmpfs regionTmpfs = deviceplugin::FolderTmpfs::kBestEffort;
  bool withdrawOnStop = false;  ///< delete the slices at stop (a node leaving DRA mode)
  /// How often the health stream repeats the devices' health to the kubelet (KubeletServerOptions).
  std::chrono::milliseconds healthResend{10000};
};

struct ParsedDraOptions {
  DraAgentOptions options;
  bool help = false;
  std::string usage;
};
/// Flags override environment variables, which override defaults.
Result<ParsedDraOptions> parseDraAgentOptions(int argc, const char* const* argv, const k8s::EnvLookup& env);

/// Per driver, for tests and /metrics.
struct DriverStatus {
  std::string driver;
  std::int64_t generation = 0;
  std::size_t publishedDevices = 0;
  /// False when the apiserver dropped allowMultipleAllocations or a request policy.
  bool sharingKept = true;
  std::vector<std::string> dropped;
  std::size_t unhealthyDevices = 0;
  /// False when the apiserver dropped the taints of unhealthy devices (DRADeviceTaints
  /// off): they are withdrawn from the pool instead.
  bool taintsKept = true;
  std::size_t preparedClaims = 0;
  bool registered = false;
  std::string lastError;
};

class DraAgent {
 public:
  /// Reads the config, loads the backends in DRA mode on this node and makes the apiserver
  /// client. Errors: config, client, no backend in DRA mode, a backend without discovery or
  /// limiter, an unreadable checkpoint.
  static Result<std::unique_ptr<DraAgent>> create(DraAgentOptions options);
  ~DraAgent();
  DraAgent(const DraAgent&) = delete;
  DraAgent& operator=(const DraAgent&) = delete;

  /// Restores prepared claims, publishes the slices, starts the kubelet sockets, the
  /// resync thread and /metrics.
  Status start();
  void stop();
  /// One discovery + publish pass now, for every driver.
  void resyncNow();
  std::vector<DriverStatus> status() const;
  std::vector<std::string> drivers() const;
  std::string metricsUrl() const;
  std::string renderMetrics();

  struct Impl;

 private:
  explicit DraAgent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::dra
