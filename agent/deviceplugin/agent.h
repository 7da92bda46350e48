#pragma once
// The node agent: loads the enabled backends, discovers devices, publishes them on the
// Node, serves one kubelet device plugin per advertised resource, answers Allocate by
// finding the pod (DESIGN.md 6a, PodTracker), asks the backend's limiter for the container
// spec, records the outcome on the pod, corrects annotations from the kubelet's
// PodResources API, exports usage from libvgpu.so's shared regions on /metrics and cleans
// up after containers that are gone.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "handout_store.h"
#include "pod_tracker.h"
#include "watchdog.h"
#include "vgpu/k8s/config.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

struct AgentOptions {
  std::string nodeName;
  std::string configPath = "/etc/vgpu/device-config.yaml";
  std::string backendDir;  ///< empty = defaultBackendDir()
  std::string pluginDir = "/var/lib/kubelet/device-plugins";
  std::string podResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock";  ///< empty = not read
  std::string metricsAddress = "0.0.0.0:9394";  ///< host:port for /metrics and /healthz; empty = off
  bool hamiMetrics = false;  ///< also export HAMi's per-container metric names (docs/metrics.md)
  /// Where the agent writes a CDI spec for a container whose backend asks for OCI hooks
  /// (vgpu-cdi-hook); the runtime must read CDI specs there.
  std::string cdiDir = "/var/run/cdi";
  std::string stateDir = "/var/lib/vgpu";       ///< <stateDir>/containers/<handout id>/ and handouts.journal
  /// Whether each container's folder is a size-limited tmpfs the agent mounts (--region-tmpfs).
  FolderTmpfs regionTmpfs = FolderTmpfs::kBestEffort;
  std::string kubeconfig;                       ///< empty = in-cluster, else $KUBECONFIG
  k8s::ClientConfig apiConfig;                  ///< set by main (or a test); server empty = load from kubeconfig
  /// How often the node's liveness is renewed: its Lease (leaseNamespace), else the Node's
  /// vgpu.io/heartbeat annotation.
  std::chrono::milliseconds heartbeatInterval{30000};
  /// Where the node's Lease lives (vgpu/k8s/node_lease.h; the chart's namespace); empty = no
  /// Lease, the Node's annotation is rewritten every heartbeatInterval as before.
  std::string leaseNamespace;
  /// How long Allocate waits for the watch to show a pod it cannot find yet.
  std::chrono::milliseconds podWait{3000};
  /// Per apiserver request at shutdown, and how often it retries; each write of a pod's
  /// outcome after Allocate gets max(apiTimeout, 10 s) and is retried until it lands.
  std::chrono::milliseconds apiTimeout{2000};
  int apiRetries = 1;
  std::chrono::milliseconds podResourcesInterval{2000};
  std::chrono::milliseconds cleanupInterval{10000};
  /// How often backends that serve no devices are asked again (a driver loaded late);
  /// 0 = only when asked (SIGHUP, requestRediscovery).
  std::chrono::milliseconds rediscoverInterval{30000};
  /// The watchdog (watchdog.h): per-process device memory against each pod's slices.
  WatchdogOptions watchdog;
  /// Null = killProcess (SIGKILL); tests give their own.
  ProcessKiller watchdogKiller;
};

/// Flags override environment variables, which override defaults. `--help` yields an
/// Error whose message is the usage text (and `help` set).
struct ParsedOptions {
  AgentOptions options;
  bool help = false;
  std::string usage;
};
Result<ParsedOptions> parseAgentOptions(int argc, const char* const* argv, const k8s::EnvLookup& env);

/// Counters for tests and /metrics.
struct AgentStats {
  std::uint64_t allocations = 0;        ///< Allocate calls answered with devices
  std::uint64_t allocateFailures = 0;
  std::uint64_t corrections = 0;        ///< pods whose assignment PodResources corrected
  std::uint64_t nodePublishes = 0;
  std::uint64_t leaseRenewals = 0;
  std::uint64_t regionsCleaned = 0;  ///< container folders removed
  std::uint64_t watchdogScans = 0;
  std::uint64_t watchdogViolations = 0;
};

class Agent {
 public:
  /// Reads the config (a bad file is an error naming it), loads the backends and
  /// discovers devices: a backend that fails to load is reported and skipped; one whose
  /// driver or devices are missing is reported and asked again by every rediscovery.
  /// Errors: config, apiserver client, backends enabled but none loaded.
  static Result<std::unique_ptr<Agent>> create(AgentOptions options);
  ~Agent();  ///< stop()
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  /// Starts the pod watch, node publishing, the plugin servers, health watching, metrics.
  Status start();
  /// Clean shutdown: plugins stop, the node's device annotations are removed.
  void stop();

  /// The resources served to the kubelet.
  std::vector<std::string> resources() const;
  /// Problems found at start-up (backends skipped), for logs and tests.
  std::vector<std::string> warnings() const;
  /// http://address:port of /metrics, empty when off.
  std::string metricsUrl() const;
  std::string renderMetrics();
  /// One PodResources pass (handouts attributed, pods corrected) and one cleanup pass, now,
  /// after the background pass in progress (if any) has finished; returns once what it
  /// wrote on pods is on the apiserver (or after 10 s).
  void maintainNow();
  /// Waits until every pod annotation queued so far (Allocate's outcomes, corrections) is on
  /// the apiserver, at most `timeout`; true when nothing is left to write.
  bool flushWrites(std::chrono::milliseconds timeout);
  bool podsSynced() const;
  PodTracker& tracker();
  AgentStats stats() const;
  /// Whether every plugin is registered with the kubelet.
  bool registered() const;
  /// What /healthz says: a backend serves devices and every plugin is registered, or no
  /// backend is enabled.
  bool ready() const;
  /// Asks the backends that serve nothing for their devices again, now (SIGHUP does this
  /// through requestRediscovery, the periodic pass every rediscoverInterval).
  void rediscoverNow();
  /// The same on the agent's own thread, soon; safe from a signal-waiting thread.
  void requestRediscovery();
  /// One watchdog scan now (and its actions), beside the periodic ones; false when it is off.
  bool watchdogScanNow();
  /// Devices each loaded backend serves (0: none yet).
  std::map<std::string, std::size_t> servedDevices() const;

  struct Impl;

 private:
  explicit Agent(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// The socket file name of a resource's plugin: "vgpu-nvidia.com-gpu.sock".
std::string pluginSocketName(const std::string& resource);

}  // namespace vgpu::deviceplugin
