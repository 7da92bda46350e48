// vgpu-dra-plugin's flags and environment variables into its options (dra_agent.h); the
// flags both daemons share come from daemon_support.h.

#include <boost/program_options.hpp>

#include "daemon_support.h"
#include "dra_agent.h"

namespace vgpu::dra {
namespace po = boost::program_options;

Result<ParsedDraOptions> parseDraAgentOptions(int argc, const char* const* argv, const k8s::EnvLookup& env) {
  ParsedDraOptions out;
  DraAgentOptions& o = out.options;
  auto envOr = [&](const char* name, std::string fallback) { return env(name).value_or(std::move(fallback)); };
  o.registrationDir = envOr("VGPU_PLUGINS_REGISTRY_DIR", o.registrationDir);
  o.pluginDir = envOr("VGPU_KUBELET_PLUGINS_DIR", o.pluginDir);
  o.cdiDir = envOr("VGPU_CDI_DIR", o.cdiDir);
  o.stateDir = envOr("VGPU_STATE_DIR", o.stateDir);
  o.driverDomain = envOr("VGPU_DRA_DRIVER_DOMAIN", o.driverDomain);
  o.metricsAddress = envOr("VGPU_DRA_METRICS_ADDRESS", o.metricsAddress);
  std::string regionTmpfs = envOr("VGPU_REGION_TMPFS", deviceplugin::toString(o.regionTmpfs));
  std::int64_t resync = o.resyncInterval.count() / 1000;

  po::options_description desc("vgpu-dra-plugin: the vgpu node agent's DRA front end\nOptions (environment variable in brackets)");
  const node::NodeDaemonFlags common{o.nodeName, o.configPath, o.backendDir, o.kubeconfig};
  node::addNodeDaemonFlags(desc, common, env);
  desc.add_options()
      ("plugins-registry-dir", po::value(&o.registrationDir),
       "the kubelet's plugin watcher folder [VGPU_PLUGINS_REGISTRY_DIR]")
      ("kubelet-plugins-dir", po::value(&o.pluginDir), "folder of the drivers' dra.sock [VGPU_KUBELET_PLUGINS_DIR]")
      ("cdi-dir", po::value(&o.cdiDir), "where CDI specs are written for the runtime [VGPU_CDI_DIR]")
      ("state-dir", po::value(&o.stateDir), "host folder for the checkpoint and per-claim files [VGPU_STATE_DIR]")
      ("driver-domain", po::value(&o.driverDomain), "drivers are named <backend>.<this> [VGPU_DRA_DRIVER_DOMAIN]")
      ("metrics-address", po::value(&o.metricsAddress),
       "host:port of /metrics and /healthz, empty = off [VGPU_DRA_METRICS_ADDRESS]")
      ("region-tmpfs", po::value(&regionTmpfs),
       "each claim's folder a size-limited tmpfs: required, best-effort or off [VGPU_REGION_TMPFS]")
      ("resync-seconds", po::value(&resync), "rediscover devices and check the ResourceSlices this often")
      ("withdraw-on-stop", po::bool_switch(&o.withdrawOnStop),
       "delete the ResourceSlices at shutdown (when taking the node out of DRA mode)");
  po::variables_map vm;
  auto help = node::parseNodeDaemonFlags(desc, argc, argv, common, vm, out.usage);
  if (!help.ok()) return help.error();
  out.help = *help;
  if (out.help) return out;
  if (resync <= 0) return makeError("--resync-seconds must be > 0");
  o.resyncInterval = std::chrono::seconds(resync);
  auto tmpfs = deviceplugin::parseFolderTmpfs(regionTmpfs);
  if (!tmpfs.ok()) return makeError("--region-tmpfs: " + tmpfs.error().message);
  o.regionTmpfs = *tmpfs;
  return out;
}

}  // namespace vgpu::dra
