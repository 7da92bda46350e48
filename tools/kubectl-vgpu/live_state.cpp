// Reads the live cluster for kubectl-vgpu: connection, device config, backends, and the
// Nodes, Pods and Leases fed into the scheduler's cache, as vgpu-scheduler's informers would.
#include "live_state.h"

#include <algorithm>

#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/k8s/config.h"
#include "vgpu/k8s/node_lease.h"
#include "vgpu/k8s/object.h"
#include "vgpu/pod_info.h"
#include "vgpu/version.h"

namespace vgpu::kubectl {

namespace json = boost::json;

namespace {

constexpr k8s::ResourceType kConfigMaps{"/api/v1", "configmaps", "ConfigMap", true};
/// The key of the chart's device-config ConfigMap (charts/vgpu/templates/device-config.yaml).
constexpr const char* kDeviceConfigKey = "device-config.yaml";
constexpr const char* kChartLabel = "app.kubernetes.io/name=vgpu";

std::string dataOf(const json::object& configMap, const std::string& key) {
  if (const auto* data = configMap.if_contains("data"); data && data->is_object())
    if (const auto* v = data->as_object().if_contains(key); v && v->is_string()) return std::string(v->as_string());
  return {};
}

/// --device-config, else --config-map, else the chart's ConfigMap found by its label.
Result<DeviceConfig> readDeviceConfig(const Invocation& inv, k8s::Client& client) {
  if (!inv.deviceConfig.empty()) return loadDeviceConfig(inv.deviceConfig);
  if (!inv.configMap.empty()) {
    const auto slash = inv.configMap.find('/');
    const std::string ns = inv.configMap.substr(0, slash), name = inv.configMap.substr(slash + 1);
    auto cm = client.get(kConfigMaps, ns, name);
    if (!cm.ok()) return makeError(describeApiError(cm.error()));
    const std::string text = dataOf(*cm, kDeviceConfigKey);
    if (text.empty()) return makeError("configmap " + inv.configMap + " has no data key " + kDeviceConfigKey);
    return parseDeviceConfig(text, "configmap " + inv.configMap);
  }
  k8s::ListOptions options;
  options.labelSelector = kChartLabel;
  auto list = client.list(kConfigMaps, options);
  if (!list.ok()) return makeError(describeApiError(list.error()));
  for (const auto& cm : list->items) {
    const std::string text = dataOf(cm, kDeviceConfigKey);
    if (text.empty()) continue;
    const std::string where = "configmap " + std::string(k8s::namespaceOf(cm)) + "/" + std::string(k8s::name(cm));
    return parseDeviceConfig(text, where);
  }
  return makeError("no vgpu device config found: no ConfigMap labelled " + std::string(kChartLabel) +
                   " has a " + kDeviceConfigKey + " key (is the chart installed?); name one with "
                   "--config-map NAMESPACE/NAME or a file with --device-config FILE");
}

Result<std::vector<json::object>> listAll(k8s::Client& client, const k8s::ResourceType& type,
                                          const std::string& labelSelector = "") {
  k8s::ListOptions options;
  options.labelSelector = labelSelector;
  auto list = client.list(type, options);
  if (!list.ok()) return makeError(describeApiError(list.error()));
  auto items = std::move(list->items);
  std::sort(items.begin(), items.end(), [](const json::object& a, const json::object& b) {
    return std::pair(k8s::namespaceOf(a), k8s::name(a)) < std::pair(k8s::namespaceOf(b), k8s::name(b));
  });
  return items;
}

}  // namespace

std::string describeApiError(const k8s::ApiError& error) {
  if (error.httpStatus == 0) return "unable to reach the server: " + error.message;
  if (!error.reason.empty()) return "Error from server (" + error.reason + "): " + error.message;
  return "Error from server: " + error.describe();
}

Result<std::unique_ptr<k8s::Client>> connect(const Invocation& inv) {
  auto config = k8s::loadDefaultConfig(inv.kubeconfig, inv.context);
  if (!config.ok()) return config.error();
  k8s::ClientOptions options;
  options.qps = 50;  // kubectl's own default rate
  options.burst = 300;
  options.maxRetries = 2;
  options.requestTimeout = std::chrono::seconds(30);
  options.userAgent = std::string("kubectl-vgpu/") + versionString();
  auto client = k8s::Client::create(std::move(*config), options);
  if (!client.ok()) return client.error();
  return std::move(*client);
}

std::string namespaceFor(const Invocation& inv, const k8s::Client& client) {
  if (inv.ns) return *inv.ns;
  return client.config().defaultNamespace.empty() ? "default" : client.config().defaultNamespace;
}

Result<std::unique_ptr<LiveState>> loadLiveState(const Invocation& inv, k8s::Client& client) {
  auto state = std::make_unique<LiveState>();
  auto config = readDeviceConfig(inv, client);
  if (!config.ok()) return config.error();
  state->config = std::move(*config);
  const std::filesystem::path backendDir = inv.backendDir.empty() ? defaultBackendDir() : std::filesystem::path(inv.backendDir);
  BackendLoadOutcome loaded = loadEnabledBackends(state->config, backendDir, "");
  for (const auto& failure : loaded.failures) state->warnings.push_back("backend not loaded: " + failure.message);
  if (loaded.backends.empty()) return makeError("no backend could be loaded from " + backendDir.string() + " (--backend-dir)");
  state->backends = std::move(loaded.backends);

  auto nodes = listAll(client, k8s::kNodes);
  if (!nodes.ok()) return nodes.error();
  auto pods = listAll(client, k8s::kPods);
  if (!pods.ok()) return pods.error();
  // Leases keep an idle node's heartbeat fresh (vgpu/k8s/node_lease.h); without the right to
  // read them, the heartbeat annotation alone decides, as on a scheduler without leases.
  auto leases = listAll(client, k8s::kLeases, std::string(kNodeLeaseLabel) + "=true");
  if (!leases.ok()) state->warnings.push_back("node leases not read: " + leases.error().message);

  scheduler::ClusterCache::Options options;
  options.scheduler = state->config.scheduler;
  state->cache = std::make_unique<scheduler::ClusterCache>(state->backends, options);
  if (leases.ok())
    for (const auto& lease : *leases)
      if (auto renewal = parseNodeLease(lease)) state->cache->renewNode(renewal->node, renewal->renewed);
  for (const auto& node : *nodes) state->cache->upsertNode(node);
  for (const auto& pod : *pods) {
    state->cache->upsertPod(pod);
    // The cache counts a pod whose assignment cannot be read as a foreign pod; say so.
    if (auto text = k8s::annotation(pod, keys::kPodAssignment))
      if (auto decoded = decodeAssignment(*text); !decoded.ok())
        state->warnings.push_back("pod " + k8s::objectKey(pod) + ": annotation " + std::string(keys::kPodAssignment) +
                                  " cannot be read: " + decoded.error().message);
  }
  state->nodes = std::move(*nodes);
  state->pods = std::move(*pods);
  return state;
}

std::unique_ptr<LiveState> loadLiveStateOrSay(const Invocation& inv, k8s::Client& client, std::ostream& err) {
  auto state = loadLiveState(inv, client);
  if (!state.ok()) {
    err << "error: " << state.error().message << "\n";
    return nullptr;
  }
  for (const auto& w : (*state)->warnings) err << "warning: " << w << "\n";
  return std::move(*state);
}

}  // namespace vgpu::kubectl
