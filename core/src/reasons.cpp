#include "vgpu/allocator.h"

namespace vgpu {

std::string explainCoreReason(const vgpu_fit_result& r) {
  const auto n = std::to_string(r.needed);
  const auto a = std::to_string(r.available);
  switch (r.reason) {
    case VGPU_REASON_NONE: return "fits";
    case VGPU_REASON_UNHEALTHY: return "device is unhealthy";
    case VGPU_REASON_CORDONED: return "device is cordoned by an operator";
    case VGPU_REASON_MODEL_MISMATCH:
      return r.needed == 0 ? "device model is not in the pod's list of models"
                           : "device model is excluded by the pod";
    case VGPU_REASON_ID_MISMATCH:
      return r.needed == 0 ? "device is not in the pod's list of device ids" : "device id is excluded by the pod";
    case VGPU_REASON_SHARES_EXHAUSTED: return "all " + a + " shares of the device are taken";
    case VGPU_REASON_INSUFFICIENT_MEMORY: return "not enough free memory (needs " + n + " MiB, " + a + " MiB free)";
    case VGPU_REASON_INSUFFICIENT_COMPUTE:
      // "percent", never '%': kube-scheduler prints these words through a printf format.
      return "not enough free compute (needs " + n + " percent, " + a + " percent free)";
    case VGPU_REASON_EXCLUSIVE_CONFLICT:
      // needed 0: a request of no compute on a device whose compute other containers
      // have taken in full, together (available = how many containers).
      return r.needed >= 100 ? "wants the device alone but " + a + " container(s) already use it"
                             : "all of the device's compute is taken (by " + a + " container(s))";
    case VGPU_REASON_REQUEST_TOO_LARGE: return "asks for " + n + " MiB but the whole device has " + a + " MiB";
    case VGPU_REASON_NUMA_MISMATCH: return "not enough fitting devices on one NUMA node";
    default: return {};
  }
}

std::string_view categorizeCoreReason(const vgpu_fit_result& r) {
  switch (r.reason) {
    case VGPU_REASON_UNHEALTHY: return "devices unhealthy";
    case VGPU_REASON_CORDONED: return "devices cordoned";
    case VGPU_REASON_MODEL_MISMATCH: return "no device of the models the pod allows";
    case VGPU_REASON_ID_MISMATCH: return "no device the pod's device ids allow";
    case VGPU_REASON_SHARES_EXHAUSTED: return "every share of the devices taken";
    case VGPU_REASON_INSUFFICIENT_MEMORY: return "not enough free device memory";
    case VGPU_REASON_INSUFFICIENT_COMPUTE: return "not enough free device compute";
    case VGPU_REASON_EXCLUSIVE_CONFLICT:
      return r.needed >= 100 ? "devices in use, the pod wants them alone" : "devices with all their compute taken";
    case VGPU_REASON_REQUEST_TOO_LARGE: return "devices too small for the request";
    case VGPU_REASON_NUMA_MISMATCH: return "not enough fitting devices on one NUMA node";
    default: return {};
  }
}

std::string_view hamiReasonName(const vgpu_fit_result& r) {
  switch (r.reason) {
    case VGPU_REASON_UNHEALTHY: return "CardNotHealth";
    case VGPU_REASON_CORDONED: return "CardCordoned";
    case VGPU_REASON_MODEL_MISMATCH: return "CardTypeMismatch";
    case VGPU_REASON_ID_MISMATCH: return "CardUuidMismatch";
    case VGPU_REASON_SHARES_EXHAUSTED: return "CardTimeSlicingExhausted";
    // HAMi has no reason for a device smaller than the request: its memory check says this.
    case VGPU_REASON_REQUEST_TOO_LARGE:
    case VGPU_REASON_INSUFFICIENT_MEMORY: return "CardInsufficientMemory";
    case VGPU_REASON_INSUFFICIENT_COMPUTE: return "CardInsufficientCore";
    case VGPU_REASON_EXCLUSIVE_CONFLICT:
      return r.needed >= 100 ? "ExclusiveDeviceAllocateConflict" : "CardComputeUnitsExhausted";
    case VGPU_REASON_NUMA_MISMATCH: return "NumaNotFit";
    default: return {};
  }
}

}  // namespace vgpu
