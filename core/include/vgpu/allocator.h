#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/backend_abi.h"
#include "vgpu/device_request.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu {

/// An environment variable a pod may not set itself (Allocator::protectedEnv).
struct ProtectedEnv {
  enum class Scope { kEveryContainer, kBackendContainers };
  std::string pattern;  ///< a name, or a prefix followed by '*'
  Scope scope = Scope::kBackendContainers;

  /// Whether the variable `name` is covered.
  bool matches(std::string_view name) const;
  bool operator==(const ProtectedEnv&) const = default;
};

/// Scheduler side ("splitting"): which resources a backend owns, how a container's limits
/// become a DeviceRequest, and whether a request fits one device. The placement engine in
/// core does everything across devices and nodes and calls `fit` per device.
/// All methods are const and thread-safe: the scheduler evaluates nodes in parallel.
class Allocator {
 public:
  virtual ~Allocator() = default;

  /// The extended resources this backend owns.
  virtual const std::vector<ResourceName>& resources() const = 0;

  /// The container's request to this backend, or nullopt when it asks for none of its
  /// resources. Errors: invalid values (memory 0, cores over 100...), in words.
  virtual Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& container,
                                                            const Annotations& podAnnotations) const = 0;

  /// Whether `request` fits a device with `usage` already taken, and what it would take.
  /// The hot path: plain structs, no allocation, no text.
  virtual void fit(const vgpu_device_request& request, const vgpu_device& device,
                   const vgpu_device_usage& usage, vgpu_fit_result& result) const = 0;

  /// The vgpu_device fields `fit` reads (VGPU_FIT_READS_* bits), a promise that `fit` is a
  /// function of the request, the usage and those fields alone (the id compared only with
  /// the request's id lists unless VGPU_FIT_READS_ID). The placement engine asks `fit` once
  /// for a node's devices that agree on them and on their usage. Default: everything, so
  /// every device is judged on its own. Must not change while the backend is loaded.
  virtual std::uint32_t fitReads() const { return VGPU_FIT_READS_ALL; }

  /// The split count discovery would publish for a device of `model` under the loaded
  /// settings, for tools without a node (vgpu-sim); nullopt where only the device itself can
  /// tell (a mode it is set to). Default: never told.
  virtual std::optional<std::uint32_t> splitCountFor(const std::string& /*model*/) const { return std::nullopt; }

  /// Whether a request's fit on `device` depends on where the grants already on it sit (a
  /// device partitioned at fixed places): the placement engine then judges it with
  /// fitPlaced, alone, and keeps each grant's placement token. Asked once per device when
  /// an inventory is built. Default: no device.
  virtual bool placesGrants(const vgpu_device& /*device*/) const { return false; }

  /// fit() for a device placesGrants named: `placement.placed` holds the tokens of the
  /// grants on it; when the request fits, writes this grant's token to `placement.token`;
  /// when not and `placement.why` is set, the refusal in words. Default: fit(), no token.
  virtual void fitPlaced(const vgpu_device_request& request, const vgpu_device& device,
                         const vgpu_device_usage& usage, vgpu_placement& /*placement*/,
                         vgpu_fit_result& result) const {
    fit(request, device, usage, result);
  }

  /// Words a user understands for a refusal `fit` returned (any reason code).
  virtual std::string explain(const vgpu_fit_result& result) const = 0;

  /// Limits the admission webhook should add to the container (e.g. a bare device count
  /// becomes a whole card). Empty when nothing is to add.
  virtual Result<std::map<std::string, std::int64_t>> admissionDefaults(
      const ContainerResources& container, const Annotations& podAnnotations) const = 0;

  /// Environment variables that choose devices or limits only the node agent may choose: a
  /// pod that sets one is refused (or has it removed) by the admission webhook. Empty by
  /// default. Must not change while the backend is loaded.
  virtual const std::vector<ProtectedEnv>& protectedEnv() const;
};

/// Words for the reasons core knows (codes below VGPU_REASON_BACKEND); empty otherwise.
std::string explainCoreReason(const vgpu_fit_result& result);

/// The kind of a refusal in a few words, without numbers, the same for every node that
/// refuses for this reason (kube-scheduler counts identical node messages into one line);
/// empty for codes core does not know. No '%' (kube-scheduler prints it through a format).
std::string_view categorizeCoreReason(const vgpu_fit_result& result);

/// HAMi's name for the same refusal (pkg/device/common: "CardInsufficientMemory", ...), so
/// that a HAMi user's searches and alerts find ours; empty for codes core does not know.
std::string_view hamiReasonName(const vgpu_fit_result& result);

}  // namespace vgpu
