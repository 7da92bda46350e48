// discovery.split_count: what the split_count slot states for a model is what discover
// publishes for each device of that model (see split_count_check.h).
#include "split_count_check.h"

#include <string>

namespace vgpu::check {

void checkSplitCount(const vgpu_backend_table& table, bool present, vgpu_backend* instance,
                     const std::vector<Device>& devices, Report& report) {
  if (!present || table.split_count == nullptr) {
    report.skip("discovery.split_count", "no split_count slot (1.10): vgpu-sim assumes a split count unless told");
    return;
  }
  if (devices.empty()) {
    report.skip("discovery.split_count", "discover found no device to compare with");
    return;
  }
  std::string problem;
  int stated = 0;
  for (const Device& d : devices) {
    const uint32_t n = table.split_count(instance, d.model.c_str());
    if (n == 0) continue;
    ++stated;
    if (n != d.splitCount && problem.empty())
      problem = "split_count(\"" + d.model + "\") says " + std::to_string(n) + " but discover publishes device " +
                d.id + " with " + std::to_string(d.splitCount) + ": vgpu-sim would place another number of tenants";
  }
  report.expect(problem.empty(), "discovery.split_count",
                std::to_string(stated) + " of " + std::to_string(devices.size()) +
                    " devices' split counts stated by model, each as discovered",
                problem);
}

}  // namespace vgpu::check
