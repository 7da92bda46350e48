#pragma once
// A loaded backend seen through another Allocator (ForwardingBackend); DeclaringBackend
// gives it another Allocator::fitReads(), counting the calls of `fit`:
// declaring VGPU_FIT_READS_ALL gives the per-device path that the placement engine's
// shortcut for alike devices (ABI 1.5 fit_reads) must agree with, in the same binary.

#include <memory>

#include "vgpu/backend.h"

namespace vgpu::testing {

/// A loaded backend seen through another Allocator that passes every call on: derive and
/// override what a test changes.
class ForwardingBackend : public Backend, public Allocator {
 public:
  explicit ForwardingBackend(std::unique_ptr<Backend> inner) : inner_(std::move(inner)) {}

  const std::string& name() const override { return inner_->name(); }
  const Allocator& allocator() const override { return *this; }
  Discovery* discovery() override { return nullptr; }
  Limiter* limiter() override { return nullptr; }

  const std::vector<ResourceName>& resources() const override { return inner().resources(); }
  Result<std::optional<DeviceRequest>> parseRequest(const ContainerResources& c, const Annotations& a) const override {
    return inner().parseRequest(c, a);
  }
  void fit(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
           vgpu_fit_result& r) const override {
    inner().fit(q, d, u, r);
  }
  std::uint32_t fitReads() const override { return inner().fitReads(); }
  std::string explain(const vgpu_fit_result& r) const override { return inner().explain(r); }
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& c,
                                                                const Annotations& a) const override {
    return inner().admissionDefaults(c, a);
  }

 protected:
  const Allocator& inner() const { return inner_->allocator(); }

 private:
  std::unique_ptr<Backend> inner_;
};

class DeclaringBackend final : public ForwardingBackend {
 public:
  DeclaringBackend(std::unique_ptr<Backend> inner, std::uint32_t reads)
      : ForwardingBackend(std::move(inner)), reads_(reads) {}

  void fit(const vgpu_device_request& q, const vgpu_device& d, const vgpu_device_usage& u,
           vgpu_fit_result& r) const override {
    ++fitCalls;
    inner().fit(q, d, u, r);
  }
  std::uint32_t fitReads() const override { return reads_; }

  mutable long fitCalls = 0;  ///< Not synchronized: for one thread.

 private:
  std::uint32_t reads_;
};

}  // namespace vgpu::testing
