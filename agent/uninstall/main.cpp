// vgpu-stop-agents: run by the chart's pre-delete hook Job. Deletes the DaemonSets matching
// a label selector in one namespace and waits until their pods are gone, so each agent's
// SIGTERM cleanup (its Node annotations and node Lease) runs while its RBAC still exists.
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "vgpu/k8s/client.h"
#include "vgpu/k8s/config.h"
#include "vgpu/k8s/object.h"

namespace {
namespace po = boost::program_options;
namespace json = boost::json;
using namespace vgpu;

constexpr k8s::ResourceType kDaemonSets{"/apis/apps/v1", "daemonsets", "DaemonSet", true};

/// "a=b,c=d" from a DaemonSet's spec.selector.matchLabels (the chart uses no expressions).
std::string selectorOf(const json::object& ds) {
  std::string out;
  const auto* labels = k8s::findPath(ds, {"spec", "selector", "matchLabels"});
  if (!labels || !labels->is_object()) return out;
  for (const auto& [k, v] : labels->as_object())
    if (v.is_string()) out += (out.empty() ? "" : ",") + std::string(k) + "=" + std::string(v.as_string());
  return out;
}

int run(const std::string& ns, const std::string& selector, std::chrono::seconds timeout, const std::string& kubeconfig) {
  auto config = k8s::loadDefaultConfig(kubeconfig);
  if (!config.ok()) {
    std::fprintf(stderr, "vgpu-stop-agents: no API credentials: %s\n", config.error().message.c_str());
    return 1;
  }
  auto client = k8s::Client::create(*config);
  if (!client.ok()) {
    std::fprintf(stderr, "vgpu-stop-agents: %s\n", client.error().message.c_str());
    return 1;
  }
  auto& c = **client;
  k8s::ListOptions dsList;
  dsList.ns = ns;
  dsList.labelSelector = selector;
  auto daemonSets = c.list(kDaemonSets, dsList);
  if (!daemonSets.ok()) {
    std::fprintf(stderr, "vgpu-stop-agents: listing DaemonSets in %s (%s): %s\n", ns.c_str(), selector.c_str(),
                 daemonSets.error().describe().c_str());
    return 1;
  }
  std::vector<std::string> podSelectors;
  for (const auto& ds : daemonSets->items) {
    const auto* nameValue = k8s::findPath(ds, {"metadata", "name"});
    const std::string name = nameValue && nameValue->is_string() ? std::string(nameValue->as_string()) : "";
    const std::string pods = selectorOf(ds);
    if (pods.empty()) {
      std::fprintf(stderr, "vgpu-stop-agents: DaemonSet %s/%s has no matchLabels; its pods are not waited for\n",
                   ns.c_str(), name.c_str());
    } else {
      podSelectors.push_back(pods);
    }
    // Background propagation (the default for apps/v1): the garbage collector deletes the
    // pods, each kubelet stops its agent gracefully.
    if (auto s = c.remove(kDaemonSets, ns, name); !s.ok() && !s.error().isNotFound()) {
      std::fprintf(stderr, "vgpu-stop-agents: deleting DaemonSet %s/%s: %s\n", ns.c_str(), name.c_str(),
                   s.error().describe().c_str());
      return 1;
    }
    std::fprintf(stderr, "vgpu-stop-agents: deleted DaemonSet %s/%s\n", ns.c_str(), name.c_str());
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const auto& pods : podSelectors) {
    for (;;) {
      k8s::ListOptions podList;
      podList.ns = ns;
      podList.labelSelector = pods;
      auto left = c.list(k8s::kPods, podList);
      if (left.ok() && left->items.empty()) break;
      if (std::chrono::steady_clock::now() > deadline) {
        // Uninstall goes on; only the agents' node state may be left (docs/install.md).
        std::fprintf(stderr, "vgpu-stop-agents: pods %s still there after %lld s; going on\n", pods.c_str(),
                     static_cast<long long>(timeout.count()));
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    std::fprintf(stderr, "vgpu-stop-agents: pods %s gone\n", pods.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string ns, selector, kubeconfig;
  long long timeout = 120;
  po::options_description desc(
      "vgpu-stop-agents: deletes DaemonSets and waits for their pods (the chart's pre-delete hook)\nOptions");
  desc.add_options()("help", "this text")("namespace", po::value(&ns), "the DaemonSets' namespace (required)")(
      "selector", po::value(&selector), "label selector of the DaemonSets (required)")(
      "timeout-seconds", po::value(&timeout), "how long to wait for their pods")(
      "kubeconfig", po::value(&kubeconfig), "kubeconfig file; default: in-cluster, then $KUBECONFIG");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vgpu-stop-agents: %s\n", e.what());
    return 2;
  }
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  if (ns.empty() || selector.empty()) {
    std::fprintf(stderr, "vgpu-stop-agents: --namespace and --selector are required\n");
    return 2;
  }
  if (timeout <= 0) {
    std::fprintf(stderr, "vgpu-stop-agents: --timeout-seconds must be > 0\n");
    return 2;
  }
  return run(ns, selector, std::chrono::seconds(timeout), kubeconfig);
}
