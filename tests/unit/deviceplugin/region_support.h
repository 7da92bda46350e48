#pragma once
// Shared regions as libvgpu.so leaves them, for the metrics tests.

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <string>

#include "vgpu/shared_region.h"

namespace vgpu::deviceplugin::testing {

/// A region with this process attached and `used` bytes taken on device 0.
inline void writeRegion(const std::string& path, const std::string& uuid, std::uint64_t used, std::uint64_t limit,
                        std::uint32_t sm) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  vgpu_region* region = nullptr;
  char err[256];
  ASSERT_EQ(vgpu_region_open(path.c_str(), &region, err, sizeof err), VGPU_REGION_OK) << err;
  int slot = -1;
  ASSERT_EQ(vgpu_region_attach(region, &slot, err, sizeof err), VGPU_REGION_OK) << err;
  vgpu_region_publish_device(region, 0, uuid.c_str(), limit, sm);
  ASSERT_EQ(vgpu_region_try_add(region, slot, 0, used, limit), VGPU_REGION_OK);
  vgpu_region_close(region);
}

}  // namespace vgpu::deviceplugin::testing
