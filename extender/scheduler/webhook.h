#pragma once
// The mutating admission webhook (admission.k8s.io/v1, k8s-protocols.md section 3): pods
// that ask for a managed resource get our scheduler name and the backends' defaults, or a
// clear refusal when they cannot work. Everything else passes untouched.

#include <string>

#include "scheduler_metrics.h"
#include "vgpu/backend_loader.h"
#include "vgpu/http/server.h"

namespace vgpu::scheduler {

class Webhook {
 public:
  Webhook(const BackendSet& backends, std::string schedulerName, SchedulerMetrics& metrics);

  /// POST /webhook: an AdmissionReview in, an AdmissionReview out (HTTP 200), or HTTP 400
  /// when the body is not a review we can answer (no uid to echo).
  http::Response review(const http::Request& request);

 private:
  const BackendSet& backends_;
  std::string schedulerName_;
  SchedulerMetrics& metrics_;
};

/// RFC 6901 escaping of one JSON-pointer segment: "~" -> "~0", "/" -> "~1".
std::string jsonPointerEscape(std::string_view segment);

}  // namespace vgpu::scheduler
