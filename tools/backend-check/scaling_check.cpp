// create.memory_scaling and create.core_scaling: a backend applies the scaling settings to
// what discover reports, or refuses them in create (see scaling_check.h).
#include "scaling_check.h"

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vgpu/c_views.h"

namespace vgpu::check {
namespace {

struct Buffer {
  std::array<char, 1024> text{};
  vgpu_error_buf buf{text.data(), text.size()};
  std::string str() const { return std::string(text.data(), strnlen(text.data(), text.size())); }
};

using Instance = std::unique_ptr<vgpu_backend, void (*)(vgpu_backend*)>;

/// Devices of a fresh instance; nullopt with `why` when create or discover fails.
struct Created {
  vgpu_status createStatus = VGPU_OK;
  std::string createError;
  std::optional<std::vector<Device>> devices;
  std::vector<bool> placed;  ///< per device: `places` says its slices sit at fixed places
  std::string discoverError;
};

Created createAndDiscover(const vgpu_backend_table& t, const BackendParams& params) {
  Created out;
  const BackendConfigView config(params);
  Buffer err;
  vgpu_backend* raw = nullptr;
  out.createStatus = t.create(&config.c(), &raw, &err.buf);
  if (out.createStatus != VGPU_OK || raw == nullptr) {
    out.createError = err.str();
    if (out.createStatus == VGPU_OK) out.createStatus = VGPU_ERROR_INTERNAL;
    return out;
  }
  Instance instance(raw, t.destroy);
  if (t.discover == nullptr) {
    out.discoverError = "no discover slot";
    return out;
  }
  struct Ctx { std::vector<Device> list; std::string backend; } ctx{{}, params.name};
  Buffer derr;
  const vgpu_status s = t.discover(instance.get(), [](void* p, const vgpu_device* d) {
    auto* c = static_cast<Ctx*>(p);
    if (d != nullptr && d->struct_size >= offsetof(vgpu_device, attributes)) c->list.push_back(deviceFromC(*d, c->backend));
  }, &ctx, &derr.buf);
  if (s == VGPU_OK) {
    for (const Device& d : ctx.list) {
      const DeviceRecord record(d);
      out.placed.push_back(t.places != nullptr && t.places(instance.get(), &record.c()) != 0);
    }
    out.devices = std::move(ctx.list);
  } else {
    out.discoverError = derr.str().empty() ? "discover failed without words" : derr.str();
  }
  return out;
}

void checkOne(const vgpu_backend_table& t, const BackendParams& params, bool skeleton, Report& r, bool memory) {
  const std::string key = memory ? "memoryScaling" : "coreScaling";
  const std::string name = memory ? "create.memory_scaling" : "create.core_scaling";
  BackendParams base = params, scaled = params;
  (memory ? base.settings.memoryScaling : base.settings.coreScaling).reset();
  (memory ? scaled.settings.memoryScaling : scaled.settings.coreScaling) = 2.0;
  const Created s = createAndDiscover(t, scaled);
  if (s.createStatus != VGPU_OK) {
    r.expect(s.createError.find(key) != std::string::npos, name, "refused: " + s.createError,
             "create with " + key + ": 2 is refused, but its words do not name " + key + ": \"" + s.createError + "\"");
    return;
  }
  const Created b = createAndDiscover(t, base);
  if (!s.devices || !b.devices || b.devices->empty()) {
    const std::string why = "accepts " + key + ": 2 but cannot show it applies it (" +
                            (s.devices ? b.discoverError : s.discoverError) + ")";
    if (skeleton) r.skip(name, why + "; refuse it in create until discover applies it");
    else r.fail(name, why);
    return;
  }
  // A device split at fixed places (a MIG GPU) has the hardware's slice sizes: scaling
  // cannot apply to it, so the first device without fixed places is the one judged.
  const Device* first = nullptr;
  for (size_t i = 0; i < b.devices->size() && first == nullptr; ++i)
    if (!b.placed[i]) first = &(*b.devices)[i];
  if (first == nullptr) {
    r.skip(name, "every device is partitioned at fixed places (their sizes are the hardware's)");
    return;
  }
  const Device& before = *first;
  const Device* after = nullptr;
  for (const Device& d : *s.devices)
    if (d.id == before.id) after = &d;
  if (after == nullptr) {
    r.fail(name, "with " + key + ": 2 discover no longer reports device " + before.id);
    return;
  }
  const double was = memory ? static_cast<double>(before.memoryMiB) : before.computeUnits;
  const double now = memory ? static_cast<double>(after->memoryMiB) : after->computeUnits;
  const std::string field = memory ? "memory" : "compute units";
  r.expect(std::fabs(now - 2 * was) <= 1.0, name,
           "applied: " + before.id + " " + field + " " + std::to_string(static_cast<long long>(was)) + " -> " +
               std::to_string(static_cast<long long>(now)),
           "accepts " + key + ": 2 but device " + before.id + " reports " + field + " " +
               std::to_string(static_cast<long long>(now)) + " (" + std::to_string(static_cast<long long>(was)) +
               " without it); scale what discover reports, or refuse " + key + " in create with words naming it");
}

}  // namespace

void checkScaling(const vgpu_backend_table& table, const BackendParams& params, bool skeleton, Report& report) {
  checkOne(table, params, skeleton, report, true);
  checkOne(table, params, skeleton, report, false);
}

}  // namespace vgpu::check
