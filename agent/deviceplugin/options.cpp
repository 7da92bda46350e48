// vgpu-device-plugin's flags and environment variables into AgentOptions (agent.h); the
// flags both daemons share come from daemon_support.h.

#include <boost/program_options.hpp>

#include "agent.h"
#include "daemon_support.h"

namespace vgpu::deviceplugin {
namespace po = boost::program_options;

Result<ParsedOptions> parseAgentOptions(int argc, const char* const* argv, const k8s::EnvLookup& env) {
  ParsedOptions out;
  AgentOptions& o = out.options;
  auto envOr = [&](const char* name, std::string fallback) { return env(name).value_or(std::move(fallback)); };
  o.pluginDir = envOr("VGPU_DEVICE_PLUGIN_DIR", o.pluginDir);
  o.podResourcesSocket = envOr("VGPU_POD_RESOURCES_SOCKET", o.podResourcesSocket);
  o.metricsAddress = envOr("VGPU_METRICS_ADDRESS", o.metricsAddress);
  o.stateDir = envOr("VGPU_STATE_DIR", o.stateDir);
  o.leaseNamespace = envOr("VGPU_LEASE_NAMESPACE", o.leaseNamespace);
  o.cdiDir = envOr("VGPU_CDI_DIR", o.cdiDir);
  std::int64_t watchdogMs = o.watchdog.interval.count();
  std::string watchdogAction = toString(o.watchdog.action);
  std::string regionTmpfs = toString(o.regionTmpfs);
  std::int64_t computeWindowMs = o.watchdog.computeWindow.count();
  std::int64_t computeTolerance = o.watchdog.computeTolerancePercent;
  std::int64_t escalateAfter = o.watchdog.escalateAfter, escalateWindow = o.watchdog.escalateWindow.count();
  std::int64_t heartbeat = o.heartbeatInterval.count() / 1000, podWait = o.podWait.count(),
               apiTimeout = o.apiTimeout.count(), rediscover = o.rediscoverInterval.count() / 1000;

  po::options_description desc("vgpu-device-plugin: the vgpu node agent\nOptions (environment variable in brackets)");
  const node::NodeDaemonFlags common{o.nodeName, o.configPath, o.backendDir, o.kubeconfig};
  node::addNodeDaemonFlags(desc, common, env);
  desc.add_options()
      ("device-plugin-dir", po::value(&o.pluginDir), "the kubelet's device plugin folder [VGPU_DEVICE_PLUGIN_DIR]")
      ("pod-resources-socket", po::value(&o.podResourcesSocket),
       "the kubelet's PodResources socket, empty = not read [VGPU_POD_RESOURCES_SOCKET]")
      ("metrics-address", po::value(&o.metricsAddress), "host:port of /metrics and /healthz, empty = off [VGPU_METRICS_ADDRESS]")
      ("hami-metrics", po::bool_switch(&o.hamiMetrics),
       "also export HAMi's per-container metric names and labels (hami_vgpu_*, hami_container_*), for HAMi's "
       "dashboards and alerts")
      ("state-dir", po::value(&o.stateDir), "host folder for per-container files [VGPU_STATE_DIR]")
      ("cdi-dir", po::value(&o.cdiDir),
       "where a CDI spec is written for a container whose backend asks the runtime to run a hook (vgpu-cdi-hook) "
       "[VGPU_CDI_DIR]")
      ("region-tmpfs", po::value(&regionTmpfs),
       "each container's folder a size-limited tmpfs, so a tenant cannot fill the host's disk through its shared "
       "region: required (else Allocate fails), best-effort (else a warning) or off; needs CAP_SYS_ADMIN and a "
       "state folder mounted with Bidirectional propagation")
      ("heartbeat-seconds", po::value(&heartbeat),
       "renew the node's Lease this often (without --lease-namespace: republish the node's devices)")
      ("lease-namespace", po::value(&o.leaseNamespace),
       "namespace of the node's liveness Lease (the chart's); empty = the Node's vgpu.io/heartbeat annotation "
       "is rewritten every --heartbeat-seconds instead [VGPU_LEASE_NAMESPACE]")
      ("rediscover-seconds", po::value(&rediscover),
       "ask backends that serve no devices again this often (a driver loaded late), 0 = only on SIGHUP")
      ("pod-wait-ms", po::value(&podWait), "how long Allocate waits for a pod the watch has not shown yet")
      ("api-timeout-ms", po::value(&apiTimeout),
       "per apiserver request at shutdown and reading a pod the watch has not shown; a pod's outcome gets "
       "max(this, 10 s) per attempt")
      ("api-retries", po::value(&o.apiRetries), "retries of such a request")
      ("watchdog-interval-ms", po::value(&watchdogMs),
       "time between the watchdog's scans of per-process device memory, 0 = watchdog off")
      ("watchdog-tolerance-mib", po::value(&o.watchdog.toleranceMiB),
       "device memory a pod may hold above its slices before the watchdog acts (per device)")
      ("watchdog-compute-tolerance", po::value(&computeTolerance),
       "percentage points of a device a pod may keep busy above its compute share before the watchdog acts")
      ("watchdog-compute-window-ms", po::value(&computeWindowMs),
       "a pod's device utilization is averaged over this long before it is compared with its compute share")
      ("watchdog-action", po::value(&watchdogAction), "what the watchdog does to a pod over its slice: "
       "report, kill-process (SIGKILL its largest processes on the device) or evict-pod")
      ("watchdog-escalate-after", po::value(&escalateAfter),
       "with kill-process: a pod killed this many times within --watchdog-escalate-window-seconds is evicted "
       "(a bypass that restarts), 0 = never")
      ("watchdog-escalate-window-seconds", po::value(&escalateWindow),
       "the window in which a pod's kills are counted for --watchdog-escalate-after")
      ("watchdog-proc-root", po::value(&o.watchdog.procRoot), "the host's /proc, where pids are mapped to pods");
  po::variables_map vm;
  auto help = node::parseNodeDaemonFlags(desc, argc, argv, common, vm, out.usage);
  if (!help.ok()) return help.error();
  out.help = *help;
  if (out.help) return out;
  if (heartbeat <= 0) return makeError("--heartbeat-seconds must be > 0");
  if (rediscover < 0) return makeError("--rediscover-seconds must be >= 0");
  if (podWait < 0 || apiTimeout <= 0 || o.apiRetries < 0)
    return makeError("--pod-wait-ms must be >= 0, --api-timeout-ms > 0 and --api-retries >= 0");
  if (watchdogMs < 0) return makeError("--watchdog-interval-ms must be >= 0 (0 turns the watchdog off)");
  if (computeTolerance < 0 || computeTolerance > 100)
    return makeError("--watchdog-compute-tolerance must be 0..100 (percentage points), not " +
                     std::to_string(computeTolerance));
  if (computeWindowMs < 0) return makeError("--watchdog-compute-window-ms must be >= 0");
  if (escalateAfter < 0 || escalateAfter > 1000)
    return makeError("--watchdog-escalate-after must be 0..1000 kills (0: never evict), not " +
                     std::to_string(escalateAfter));
  if (escalateWindow <= 0 || escalateWindow > 86400)
    return makeError("--watchdog-escalate-window-seconds must be 1..86400, not " + std::to_string(escalateWindow));
  o.watchdog.escalateAfter = static_cast<int>(escalateAfter);
  o.watchdog.escalateWindow = std::chrono::seconds(escalateWindow);
  o.watchdog.computeTolerancePercent = static_cast<std::uint32_t>(computeTolerance);
  o.watchdog.computeWindow = std::chrono::milliseconds(computeWindowMs);
  auto action = parseWatchdogAction(watchdogAction);
  if (!action.ok()) return std::move(action).error().prefix("--watchdog-action");
  o.watchdog.action = *action;
  auto tmpfs = parseFolderTmpfs(regionTmpfs);
  if (!tmpfs.ok()) return std::move(tmpfs).error().prefix("--region-tmpfs");
  o.regionTmpfs = *tmpfs;
  o.watchdog.interval = std::chrono::milliseconds(watchdogMs);
  o.heartbeatInterval = std::chrono::seconds(heartbeat);
  o.rediscoverInterval = std::chrono::seconds(rediscover);
  o.podWait = std::chrono::milliseconds(podWait);
  o.apiTimeout = std::chrono::milliseconds(apiTimeout);
  return out;
}

}  // namespace vgpu::deviceplugin
