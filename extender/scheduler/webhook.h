#pragma once
// The mutating admission webhook (admission.k8s.io/v1, k8s-protocols.md section 3): pods
// that ask for a managed resource get our scheduler name and the backends' defaults, or a
// clear refusal when they cannot work. Every pod, whatever it asks for and whatever its
// labels, is also checked for the escape hatches of docs/security.md: environment variables
// that choose devices or limits (the backends' protectedEnv) and annotations only vgpu
// writes (keys::kReservedPodAnnotations).

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "namespace_quota.h"
#include "scheduler_metrics.h"
#include "vgpu/backend_loader.h"
#include "vgpu/http/server.h"
#include "vgpu/result.h"

namespace vgpu::scheduler {

/// What the webhook does with a container that sets a protected environment variable.
enum class EnvPolicy {
  kRefuse,  ///< the pod is refused, naming the container and the variable
  kStrip,   ///< the variable is removed from the container, with a warning to the client
};

/// "refuse" or "strip"; errors name the value.
Result<EnvPolicy> parseEnvPolicy(std::string_view text);

/// A comma-separated list of user names ("" = none); spaces around names are ignored.
/// Errors: an empty entry or one with a space inside, naming it.
Result<std::vector<std::string>> parseTrustedUsers(std::string_view text);

struct WebhookOptions {
  std::string schedulerName = "vgpu-scheduler";
  EnvPolicy envPolicy = EnvPolicy::kRefuse;
  /// Users (AdmissionReview request.userInfo.username) that may write reserved annotations:
  /// vgpu-scheduler's and the node agent's service accounts,
  /// "system:serviceaccount:<namespace>:<name>". Pods that run as one of these service
  /// accounts may also set protected variables (the node agent sees every GPU).
  std::vector<std::string> trustedUsers;
  /// HAMi-compatibility mode (--hami-compat): pods HAMi accepts and vgpu would refuse are
  /// taken as HAMi takes them, with a warning saying so: a compute request (the backends'
  /// cores resource, e.g. nvidia.com/gpucores) above 100 becomes 100, the whole device.
  bool hamiCompat = false;
};

/// A namespace's ResourceQuota limits on device memory and compute.
using QuotaLookup = std::function<std::vector<QuotaLimit>(const std::string& ns)>;

class Webhook {
 public:
  /// `quotaLimits` (null = none): a pod that asks for more than one of its namespace's limits
  /// allows, whatever else runs, is refused.
  Webhook(const BackendSet& backends, WebhookOptions options, SchedulerMetrics& metrics, QuotaLookup quotaLimits = {});

  /// POST /webhook: an AdmissionReview in, an AdmissionReview out (HTTP 200), or HTTP 400
  /// when the body is not a review we can answer (no uid to echo).
  http::Response review(const http::Request& request);

 private:
  bool trusted(std::string_view user) const;

  const BackendSet& backends_;
  WebhookOptions options_;
  QuotaResources quotaResources_;
  QuotaLookup quotaLimits_;
  SchedulerMetrics& metrics_;
};

/// RFC 6901 escaping of one JSON-pointer segment: "~" -> "~0", "/" -> "~1".
std::string jsonPointerEscape(std::string_view segment);

}  // namespace vgpu::scheduler
