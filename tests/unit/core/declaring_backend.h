#pragma once
// A loaded backend seen through another Allocator::fitReads(), counting the calls of `fit`:
// declaring VGPU_FIT_READS_ALL gives the per-device path that the placement engine's
// shortcut for alike devices (ABI 1.5 fit_reads) must agree with, in the same binary.

#include <memory>

#include "vgpu/backend.h"

namespace vgpu::testing {

class DeclaringBackend final : public Backend, public Allocator {
 public:
  DeclaringBackend(std::unique_ptr<Backend> inner, std::uint32_t reads) : inner_(std::move(inner)), reads_(reads) {}

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
    ++fitCalls;
    inner().fit(q, d, u, r);
  }
  std::uint32_t fitReads() const override { return reads_; }
  std::string explain(const vgpu_fit_result& r) const override { return inner().explain(r); }
  Result<std::map<std::string, std::int64_t>> admissionDefaults(const ContainerResources& c,
                                                                const Annotations& a) const override {
    return inner().admissionDefaults(c, a);
  }

  mutable long fitCalls = 0;  ///< Not synchronized: for one thread.

 private:
  const Allocator& inner() const { return inner_->allocator(); }
  std::unique_ptr<Backend> inner_;
  std::uint32_t reads_;
};

}  // namespace vgpu::testing
