#pragma once
// The live cluster as kubectl-vgpu reads it, once per run and read-only: the device config
// (a file or the chart's ConfigMap), the backends it enables, every Node, Pod and node Lease,
// fed into the scheduler's own cache so usage and refusals are counted as vgpu-scheduler
// counts them.

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <boost/json/object.hpp>

#include "cli.h"
#include "cluster_cache.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/k8s/client.h"
#include "vgpu/result.h"

namespace vgpu::kubectl {

/// The client for `inv`'s --kubeconfig/--context (kubectl's order: flag, $KUBECONFIG,
/// ~/.kube/config), with a rate limit fit for a command line tool.
Result<std::unique_ptr<k8s::Client>> connect(const Invocation& inv);

/// The namespace a namespaced verb reads: -n, else the context's namespace.
std::string namespaceFor(const Invocation& inv, const k8s::Client& client);

struct LiveState {
  DeviceConfig config;
  BackendSet backends;
  std::vector<boost::json::object> nodes;  ///< every Node, sorted by name
  std::vector<boost::json::object> pods;   ///< every Pod, sorted by namespace/name
  std::unique_ptr<scheduler::ClusterCache> cache;  ///< nodes and pods as the scheduler counts them
  std::vector<std::string> warnings;       ///< what could not be read (a garbled annotation...)
};

/// Reads the cluster. Errors: no device config, no backend loaded, an API call refused.
Result<std::unique_ptr<LiveState>> loadLiveState(const Invocation& inv, k8s::Client& client);

/// loadLiveState() with its warnings written to `err`; null (the error written) when it failed.
std::unique_ptr<LiveState> loadLiveStateOrSay(const Invocation& inv, k8s::Client& client, std::ostream& err);

/// An API error in kubectl's words: `Error from server (NotFound): pods "x" not found`.
std::string describeApiError(const k8s::ApiError& error);

}  // namespace vgpu::kubectl
