#include "mig_profiles.h"

namespace vgpu::fakegpu {
namespace {

// NVIDIA MIG user guide, "Supported MIG Profiles" (A100-SXM4-40GB, H100-SXM5-80GB) and the
// nvidia-smi mig -lgip / -lgipp listings of those products. Memory in MiB as NVML reports it.
const std::vector<MigModel>& models() {
  static const std::vector<MigModel> kModels = {
      {"a100-40gb", 8, 7,
       {
           {0x0, 19, "MIG 1g.5gb", 1, 7, 14, 1, 0, 0, 0, 0, 4864, 1, {0, 1, 2, 3, 4, 5, 6}},
           {0x1, 14, "MIG 2g.10gb", 2, 3, 28, 2, 1, 0, 0, 0, 9856, 2, {0, 2, 4}},
           {0x2, 9, "MIG 3g.20gb", 3, 2, 42, 3, 2, 0, 0, 0, 19968, 4, {0, 4}},
           {0x3, 5, "MIG 4g.20gb", 4, 1, 56, 4, 2, 0, 0, 0, 19968, 4, {0}},
           {0x4, 0, "MIG 7g.40gb", 7, 1, 98, 7, 5, 0, 1, 1, 40192, 8, {0}},
           {0x7, 20, "MIG 1g.5gb+me", 1, 1, 14, 1, 1, 0, 1, 1, 4864, 1, {0, 1, 2, 3, 4, 5, 6}},
           {0x9, 15, "MIG 1g.10gb", 1, 4, 14, 1, 1, 0, 0, 0, 9856, 2, {0, 2, 4, 6}},
       }},
      {"h100-80gb", 8, 7,
       {
           {0x0, 19, "MIG 1g.10gb", 1, 7, 16, 1, 1, 0, 1, 0, 9984, 1, {0, 1, 2, 3, 4, 5, 6}},
           {0x1, 14, "MIG 2g.20gb", 2, 3, 32, 2, 2, 0, 2, 0, 20096, 2, {0, 2, 4}},
           {0x2, 9, "MIG 3g.40gb", 3, 2, 60, 3, 3, 0, 3, 0, 40448, 4, {0, 4}},
           {0x3, 5, "MIG 4g.40gb", 4, 1, 64, 4, 4, 0, 4, 0, 40448, 4, {0}},
           {0x4, 0, "MIG 7g.80gb", 7, 1, 132, 8, 7, 0, 7, 1, 81152, 8, {0}},
           {0x7, 20, "MIG 1g.10gb+me", 1, 1, 16, 1, 1, 0, 1, 1, 9984, 1, {0, 1, 2, 3, 4, 5, 6}},
           {0x9, 15, "MIG 1g.20gb", 1, 4, 26, 1, 1, 0, 1, 0, 20096, 2, {0, 2, 4, 6}},
       }},
  };
  return kModels;
}

}  // namespace

const MigModel* findMigModel(const std::string& key) {
  for (const auto& m : models())
    if (key == m.key) return &m;
  return nullptr;
}

std::string migModelKeys() {
  std::string out;
  for (const auto& m : models()) out += (out.empty() ? "" : ", ") + std::string(m.key);
  return out;
}

}  // namespace vgpu::fakegpu
