#pragma once
// Namespace quotas on device memory and compute (issue 28 item 6): a ResourceQuota whose
// spec.hard names `requests.<r>` or `limits.<r>`, where <r> is a backend's memory or cores
// resource (nvidia.com/gpumem, nvidia.com/gpucores, ...: read from the backends' resource
// lists), limits what the namespace's pods really hold: the memory and compute of their
// assignments, so a gpumem-percentage request counts as the MiB it became on its device.
// kube-apiserver's own quota admission sees only the pods' literal requests (and ignores
// `limits.` of extended resources); vgpu-scheduler enforces the rest (docs/scheduler.md).

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

#include "vgpu/assignment.h"
#include "vgpu/backend_loader.h"
#include "vgpu/pod_request.h"

namespace vgpu::scheduler {

/// Per resource name: memory in MiB, compute in percent of a device.
using QuotaUsage = std::map<std::string, std::int64_t>;

/// One limit of one ResourceQuota on one of our resources.
struct QuotaLimit {
  std::string quota;     ///< the ResourceQuota's name
  std::string key;       ///< as written in spec.hard ("limits.nvidia.com/gpumem")
  std::string resource;  ///< "nvidia.com/gpumem"
  std::int64_t hard = 0;      ///< as written, in the resource's unit
  std::int64_t hardAmount = 0;  ///< in QuotaUsage's terms (memory: hard x the resource's MiB per unit)
  bool operator==(const QuotaLimit&) const = default;
};

/// The memory and cores resources of the loaded backends.
class QuotaResources {
 public:
  explicit QuotaResources(const BackendSet& backends);
  /// Whether `resource` is one a quota can limit here.
  bool known(std::string_view resource) const;
  /// MiB per unit of a memory resource (1 for cores and unknown names).
  std::uint64_t unitMiB(std::string_view resource) const;
  /// `amount` in QuotaUsage's terms (MiB, percent) in the resource's own unit, rounded up.
  std::int64_t inUnits(std::string_view resource, std::int64_t amount) const;
  bool isMemory(std::string_view resource) const;
  /// What a placed pod holds: per resource, the larger of the sum over its app containers
  /// and its largest init container (init containers run one at a time, before the others),
  /// as Kubernetes counts a pod's requests.
  QuotaUsage usage(const Assignment& assignment) const;
  /// The least a pod asking `request` can hold wherever it goes (a memory percentage counts
  /// as 0 MiB: its size depends on the device), with the same init rule.
  QuotaUsage leastUsage(const PodRequest& request) const;

 private:
  struct Entry {
    std::string resource;
    bool memory = false;
    std::uint64_t unitMiB = 1;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::pair<std::string, std::string>> byBackend_;  // backend -> memory, cores resource
  const Entry* find(std::string_view resource) const;
  /// Adds `backend`'s memory and compute to its resources in `usage`.
  void add(QuotaUsage& usage, const std::string& backend, std::int64_t memoryMiB, std::int64_t compute) const;
};

/// The limits `quota` (a v1 ResourceQuota) puts on our resources; other keys and values that
/// are not whole numbers are skipped (the latter with a log line).
std::vector<QuotaLimit> parseResourceQuota(const boost::json::object& quota, const QuotaResources& resources);

/// Why `asked` on top of `used` exceeds one of `limits` of namespace `ns`, in words that name
/// the namespace, the quota, the resource, the amounts and the hard limit; "" when it fits.
std::string quotaExceeded(const std::string& ns, const std::vector<QuotaLimit>& limits, const QuotaUsage& used,
                          const QuotaUsage& asked, const QuotaResources& resources);

/// Adds (sign 1) or takes away (sign -1) `delta` from `total`, dropping resources that reach 0.
void addUsage(QuotaUsage& total, const QuotaUsage& delta, int sign);

}  // namespace vgpu::scheduler
