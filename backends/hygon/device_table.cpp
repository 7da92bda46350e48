#include "device_table.h"

#include <array>
#include <cctype>
#include <utility>

namespace vgpu::hygon {
namespace {

constexpr std::array<std::pair<std::uint16_t, std::string_view>, 3> kModels{{
    {0x54b7, "Z100"},
    {0x62b7, "K100"},
    {0x6210, "K100_AI"},
}};

constexpr std::array<std::pair<std::string_view, std::uint32_t>, 6> kComputeUnits{{
    {"Z100", 60},
    {"Z100L", 60},
    {"K100", 120},
    {"K100_AI", 120},
    {"K100_LC_AI", 120},
    {"K100_LC_E_AI", 128},
}};

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

}  // namespace

std::optional<std::string> modelForPciDeviceId(std::uint16_t pciDeviceId) {
  for (const auto& [id, model] : kModels)
    if (id == pciDeviceId) return std::string(model);
  return std::nullopt;
}

std::uint32_t computeUnitsForModel(std::string_view model) {
  if (model.size() > 4 && equalsIgnoringCase(model.substr(0, 4), "DCU-")) model.remove_prefix(4);
  for (const auto& [name, cus] : kComputeUnits)
    if (equalsIgnoringCase(name, model)) return cus;
  return 0;
}

std::string dcuType(std::string_view model) {
  if (model.size() > 4 && equalsIgnoringCase(model.substr(0, 4), "DCU-")) return std::string(model);
  return "DCU-" + std::string(model);
}

}  // namespace vgpu::hygon
