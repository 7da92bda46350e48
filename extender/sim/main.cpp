// vgpu-sim: where would these pods go, and why is that one pending? The scheduler's
// placement engine and backends, run offline on a cluster described in YAML.
#include <boost/program_options.hpp>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include "cluster_file.h"
#include "simulator.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/pod_info.h"
#include "vgpu/version.h"
#include "vgpu/yaml_json.h"

namespace po = boost::program_options;
using namespace vgpu;

namespace {

Result<std::string> readFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return makeError(path + ": cannot be read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// What the --pods files hold: pods in order, and the DRA objects beside them.
struct Workload {
  std::vector<PodInfo> pods;
  simulator::DraPodInputs dra;
};

/// A DRA object of the stream into `dra`; false when `kind` is not one.
Result<bool> addDraObject(const std::string& kind, const boost::json::object& manifest, simulator::DraInputs& dra) {
  if (kind == "DeviceClass") {
    auto c = simulator::parseDeviceClass(manifest);
    if (!c.ok()) return std::move(c).error();
    dra.classes[c->name] = std::move(*c);
  } else if (kind == "ResourceClaim" || kind == "ResourceClaimTemplate") {
    auto c = kind == "ResourceClaim" ? simulator::parseResourceClaim(manifest)
                                     : simulator::parseResourceClaimTemplate(manifest);
    if (!c.ok()) return std::move(c).error();
    auto& into = kind == "ResourceClaim" ? dra.claims : dra.templates;
    const std::string key = c->key();
    if (!into.emplace(key, std::move(*c)).second) return makeError(kind + " " + key + " is given twice");
    if (kind == "ResourceClaim") dra.claimOrder.push_back(key);
  } else {
    return false;
  }
  return true;
}

/// Pods from a YAML stream of Pod manifests (a `kind: List` of pods is unrolled), with the
/// PriorityClasses, ResourceClaims, ResourceClaimTemplates and DeviceClasses beside them.
Status loadPods(const std::string& path, Workload& out) {
  auto text = readFile(path);
  if (!text.ok()) return std::move(text).error();
  auto docs = yamlDocumentsToJson(*text, path);
  if (!docs.ok()) return std::move(docs).error();
  std::vector<boost::json::value> manifests;
  for (auto& doc : *docs) {
    const auto* kind = doc.is_object() ? doc.as_object().if_contains("kind") : nullptr;
    if (kind && kind->is_string() && kind->as_string() == "List" && doc.as_object().contains("items") &&
        doc.as_object().at("items").is_array()) {
      for (auto& item : doc.as_object().at("items").as_array()) manifests.push_back(item);
    } else {
      manifests.push_back(std::move(doc));
    }
  }
  // PriorityClasses in the same stream give the pods' priorities, as the Priority admission
  // plugin would (priorityClassName, or the globalDefault class; spec.priority given wins).
  std::map<std::string, std::int64_t> classes;
  std::optional<std::int64_t> globalDefault;
  for (size_t i = 0; i < manifests.size(); ++i) {
    const auto* obj = manifests[i].if_object();
    const auto* kind = obj ? obj->if_contains("kind") : nullptr;
    if (!kind || !kind->is_string() || kind->as_string() != "PriorityClass") continue;
    const auto* value = obj->if_contains("value");
    const auto* meta = obj->if_contains("metadata");
    const auto* name = meta && meta->is_object() ? meta->as_object().if_contains("name") : nullptr;
    if (!value || !value->is_int64() || !name || !name->is_string())
      return makeError(path + ": document " + std::to_string(i + 1) +
                       ": a PriorityClass needs metadata.name and an integer value");
    classes[std::string(name->as_string())] = value->as_int64();
    if (const auto* d = obj->if_contains("globalDefault"); d && d->is_bool() && d->as_bool())
      globalDefault = value->as_int64();
  }
  for (size_t i = 0; i < manifests.size(); ++i) {
    auto& m = manifests[i];
    const std::string where = path + ": document " + std::to_string(i + 1);
    const auto* kind = m.is_object() ? m.as_object().if_contains("kind") : nullptr;
    if (kind && kind->is_string() && kind->as_string() == "PriorityClass") continue;
    if (kind && kind->is_string()) {
      auto dra = addDraObject(std::string(kind->as_string()), m.as_object(), out.dra.objects);
      if (!dra.ok()) return std::move(dra).error().prefix(where);
      if (*dra) continue;
    }
    if (!kind || !kind->is_string() || kind->as_string() != "Pod")
      return makeError(where + " is not a Pod, PriorityClass, ResourceClaim, ResourceClaimTemplate or DeviceClass "
                               "(kind: Pod expected)");
    auto* spec = m.as_object().if_contains("spec");
    if (spec && spec->is_object() && !spec->as_object().contains("priority")) {
      auto& sp = spec->as_object();
      if (const auto* cls = sp.if_contains("priorityClassName"); cls && cls->is_string() && !cls->as_string().empty()) {
        auto found = classes.find(std::string(cls->as_string()));
        if (found == classes.end())
          return makeError(path + ": document " + std::to_string(i + 1) + ": priorityClassName \"" +
                           std::string(cls->as_string()) + "\" is not defined (add a PriorityClass document)");
        sp["priority"] = found->second;
      } else if (globalDefault) {
        sp["priority"] = *globalDefault;
      }
    }
    auto pod = parsePod(m);
    if (!pod.ok()) return std::move(pod).error().prefix(where);
    auto claims = simulator::parsePodClaims(m.as_object());
    if (!claims.ok()) return std::move(claims).error().prefix(where + ": Pod " + pod->key());
    out.pods.push_back(std::move(*pod));
    out.dra.podClaims.push_back(std::move(*claims));
  }
  return {};
}

int fail(const std::string& message) {
  std::cerr << "vgpu-sim: " << message << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description options("vgpu-sim: place pods on a simulated cluster with vgpu's scheduler engine");
  options.add_options()("help,h", "show this help")("version", "print the version")(
      "cluster", po::value<std::string>(), "cluster YAML (nodes and their devices)")(
      "pods", po::value<std::vector<std::string>>(),
      "Pod manifests (YAML, several documents), placed in order, with the ResourceClaims, ResourceClaimTemplates "
      "and DeviceClasses they use; may be given more than once")(
      "driver-domain", po::value<std::string>()->default_value("vgpu.io"),
      "DRA drivers are <backend>.<this>, as vgpu-dra-plugin's --driver-domain")(
      "config", po::value<std::string>(), "device-config.yaml (default: <cluster dir>/device-config.yaml)")(
      "backend-dir", po::value<std::vector<std::string>>(),
      "where libvgpu-backend-<name>.so live; may be given more than once (each backend from the first that has it)")(
      "output,o", po::value<std::string>()->default_value("text"), "text or json")(
      "explain-preemption", po::value<std::string>(),
      "for this pending pod (namespace/name): which pods of lower priority would be evicted on each node");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, options), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return fail(std::string(e.what()) + " (see --help)");
  }
  if (vm.count("help")) {
    std::cout << options << "\nExample: vgpu-sim --cluster examples/cluster.yaml --pods examples/pods.yaml\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "vgpu-sim " << versionString() << "\n";
    return 0;
  }
  if (!vm.count("cluster") || !vm.count("pods")) return fail("--cluster and --pods are required (see --help)");
  const std::string output = vm["output"].as<std::string>();
  if (output != "text" && output != "json") return fail("--output must be text or json, got \"" + output + "\"");

  const std::string clusterPath = vm["cluster"].as<std::string>();
  std::string configPath = vm.count("config") ? vm["config"].as<std::string>()
                                              : (std::filesystem::path(clusterPath).parent_path() / "device-config.yaml").string();
  auto config = loadDeviceConfig(configPath);
  if (!config.ok()) return fail(config.error().message);
  std::vector<std::filesystem::path> backendDirs;
  if (vm.count("backend-dir"))
    for (const auto& dir : vm["backend-dir"].as<std::vector<std::string>>()) backendDirs.emplace_back(dir);
  else
    backendDirs.push_back(defaultBackendDir());
  BackendLoadOutcome loaded = loadEnabledBackends(*config, backendDirs, "");
  for (const auto& failure : loaded.failures) std::cerr << "vgpu-sim: warning: " << failure.message << "\n";
  if (loaded.backends.empty()) {
    std::string dirs;
    for (const auto& dir : backendDirs) dirs += (dirs.empty() ? "" : ", ") + dir.string();
    return fail("no backend could be loaded from " + dirs);
  }

  auto clusterText = readFile(clusterPath);
  if (!clusterText.ok()) return fail(clusterText.error().message);
  const BackendSet& backends = loaded.backends;
  auto cluster = simulator::parseClusterFile(*clusterText, clusterPath, *config,
                                             [&backends](const std::string& backend, const std::string& model) {
                                               const Backend* b = backends.find(backend);
                                               return b ? b->allocator().splitCountFor(model) : std::nullopt;
                                             });
  if (!cluster.ok()) return fail(cluster.error().message);
  Workload workload;
  workload.dra.driverDomain = vm["driver-domain"].as<std::string>();
  for (const auto& path : vm["pods"].as<std::vector<std::string>>())
    if (auto s = loadPods(path, workload); !s.ok()) return fail(s.error().message);
  const auto& pods = workload.pods;

  const auto result = simulator::simulate(*cluster, pods, *config, loaded.backends, workload.dra);
  if (vm.count("explain-preemption")) {
    auto explained =
        simulator::explainPreemption(result, pods, vm["explain-preemption"].as<std::string>(), *config,
                                     loaded.backends);
    if (!explained.ok()) return fail(explained.error().message);
    std::cout << *explained;
    return 0;
  }
  std::cout << (output == "json" ? simulator::renderJson(result) : simulator::renderText(result));
  return 0;
}
