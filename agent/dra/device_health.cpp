// One driver's device health for the kubelet's DRAResourceHealth stream (device_health.h):
// the latest list and its check time, waited on by each open stream.

#include "device_health.h"

namespace vgpu::dra {

void HealthBoard::set(std::vector<DeviceHealthReport> devices, std::int64_t checkedAt) {
  for (auto& d : devices)
    if (d.message.size() > kMaxHealthMessage) d.message.resize(kMaxHealthMessage);
  {
    std::lock_guard lock(mu_);
    current_.checkedAt = checkedAt;
    if (current_.version != 0 && devices == current_.devices) return;
    current_.devices = std::move(devices);
    ++current_.version;
  }
  cv_.notify_all();
}

void HealthBoard::touch(std::int64_t checkedAt) {
  std::lock_guard lock(mu_);
  current_.checkedAt = checkedAt;
}

HealthBoard::Snapshot HealthBoard::snapshot() const {
  std::lock_guard lock(mu_);
  return current_;
}

bool HealthBoard::waitNewer(std::uint64_t version, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return current_.version > version; });
  return current_.version > version;
}

std::int64_t unixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace vgpu::dra
