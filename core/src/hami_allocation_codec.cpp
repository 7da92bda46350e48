// HAMi's pod device lists (shared/reference/hami.md section 2, "Device list encoding").

#include <charconv>
#include <limits>

#include "json_codec.h"
#include "text_codec.h"
#include "vgpu/codec/hami_allocation.h"

namespace vgpu::hami {
namespace {

constexpr std::string_view kPrefix = "hami.io/";
constexpr std::string_view kSuffix = "-devices-allocated";

std::vector<std::string_view> split(std::string_view text, char sep) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto at = text.find(sep);
    out.push_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

template <class T>
Result<T> number(std::string_view field, const std::string& where, const char* what) {
  T value{};
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size())
    return makeError(where + ": " + what + " " + detail::quoteForMessage(field) + " is not a non-negative integer");
  return value;
}

Result<Device> decodeDevice(std::string_view text, const std::string& where) {
  const auto fields = split(text, ',');
  if (fields.size() < 4)
    return makeError(where + ": " + detail::quoteForMessage(text) + " has " + std::to_string(fields.size()) +
                     " comma-separated fields, expected UUID,TYPE,memory,cores");
  Device d;
  if (fields[0].empty()) return makeError(where + ": the device UUID is empty");
  d.uuid = std::string(fields[0]);
  d.type = std::string(fields[1]);
  auto memory = number<std::uint64_t>(fields[2], where, "memory");
  if (!memory.ok()) return std::move(memory).error();
  auto cores = number<std::uint32_t>(fields[3], where, "cores");
  if (!cores.ok()) return std::move(cores).error();
  d.memoryMiB = *memory;
  d.cores = *cores;
  return d;
}

}  // namespace

bool isAllocatedKey(std::string_view key) {
  return key.size() > kPrefix.size() + kSuffix.size() && key.substr(0, kPrefix.size()) == kPrefix &&
         key.substr(key.size() - kSuffix.size()) == kSuffix;
}

Result<ContainerDevices> decodeDeviceList(std::string_view text) {
  ContainerDevices out;
  auto containers = split(text, ';');
  if (containers.size() > 1 && containers.back().empty()) containers.pop_back();  // the last ';' ends a container
  for (std::size_t c = 0; c < containers.size(); ++c) {
    std::vector<Device> devices;
    const auto entries = split(containers[c], ':');
    for (std::size_t d = 0; d < entries.size(); ++d) {
      if (entries[d].empty()) continue;  // after the last ':'
      auto device = decodeDevice(entries[d], "container " + std::to_string(c) + ", device " + std::to_string(d));
      if (!device.ok()) return std::move(device).error();
      devices.push_back(std::move(*device));
    }
    out.push_back(std::move(devices));
  }
  return out;
}

std::string encodeDeviceList(const ContainerDevices& containers) {
  std::string out;
  for (const auto& devices : containers) {
    for (const auto& d : devices)
      out += d.uuid + "," + d.type + "," + std::to_string(d.memoryMiB) + "," + std::to_string(d.cores) + ":";
    out += ';';
  }
  return out;
}

Result<std::vector<MigAllocation>> decodeMigAllocations(std::string_view text) {
  constexpr std::string_view kDocument = "hami.io/vgpu-mig-allocations annotation";
  auto root = detail::parseJson(text, kDocument);
  if (!root.ok()) return std::move(root).error();
  if (!root->is_array()) return makeError(std::string(kDocument) + ": expected a JSON array");
  std::vector<MigAllocation> out;
  constexpr auto kMax = std::numeric_limits<std::int32_t>::max();
  const auto& entries = root->as_array();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string path = "[" + std::to_string(i) + "]";
    if (!entries[i].is_object()) return makeError(std::string(kDocument) + ": " + path + ": expected an object");
    detail::JsonFields f(entries[i].as_object(), kDocument, path);
    MigAllocation m;
    Status st;
    if (st = f.integer("containerIndex", detail::Need::kRequired, 0, kMax, m.containerIndex); !st) return st.error();
    if (st = f.integer("deviceIndex", detail::Need::kOptional, 0, kMax, m.deviceIndex); !st) return st.error();
    if (st = f.string("gpuUUID", detail::Need::kRequired, false, m.gpuUuid); !st) return st.error();
    if (st = f.string("profile", detail::Need::kRequired, false, m.profile); !st) return st.error();
    const boost::json::object* placement = f.object("placement", detail::Need::kOptional, st);
    if (!st) return st.error();
    if (placement) {
      detail::JsonFields p(*placement, kDocument, path + ".placement");
      if (st = p.integer("start", detail::Need::kOptional, 0, kMax, m.placementStart); !st) return st.error();
      if (st = p.integer("size", detail::Need::kOptional, 0, kMax, m.placementSize); !st) return st.error();
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace vgpu::hami
