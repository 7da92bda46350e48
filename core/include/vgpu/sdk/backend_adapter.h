#pragma once
// Header-only adapter: write a backend as an ordinary C++ class, export it over the C ABI
// with one macro. Only C types cross the boundary; C++ exceptions are caught here.
//
//   class MyBackend {
//    public:
//     static vgpu::Result<std::unique_ptr<MyBackend>> create(const vgpu::BackendParams&);
//     const std::vector<vgpu::ResourceName>& resources() const;
//     vgpu::Result<std::optional<vgpu::DeviceRequest>> parseRequest(
//         const vgpu::ContainerResources&, const vgpu::Annotations&) const;
//     void fit(const vgpu_device_request&, const vgpu_device&, const vgpu_device_usage&,
//              vgpu_fit_result&) const;
//     // Optional, detected at compile time: explain, admissionDefaults, protectedEnv (a
//     // std::vector<vgpu::ProtectedEnv>), fitReads (VGPU_FIT_READS_* bits), splitCountFor
//     // (std::optional<std::uint32_t> for a model, ABI 1.10), placesGrants
//     // with fitPlaced (devices partitioned at fixed places, ABI 1.6), discover, waitForHealthEvents, containerSpec,
//     // release, reconcile, containerUsage, deviceProcesses (same signatures as the
//     // vgpu::Allocator / Discovery / Limiter / UsageReporter / ProcessReporter interfaces).
//     // A method not written yet throws sdk::Unsupported: the C answer is VGPU_ERROR_UNSUPPORTED.
//   };
//   VGPU_DEFINE_BACKEND(MyBackend, "mine", "What it drives")

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "vgpu/allocator.h"
#include "vgpu/backend_abi.h"
#include "vgpu/backend_params.h"
#include "vgpu/c_views.h"
#include "vgpu/container_spec.h"
#include "vgpu/device_process.h"
#include "vgpu/discovery.h"
#include "vgpu/limiter.h"
#include "vgpu/resources.h"
#include "vgpu/result.h"

namespace vgpu::sdk {

/// Thrown by a method that is not written yet (the template's stubs): the adapter answers
/// VGPU_ERROR_UNSUPPORTED with its message. It never leaves the library.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Writes `text` into a C buffer of `capacity` bytes, cut to fit, NUL-terminated; nothing
/// when there is no buffer.
inline void writeText(char* buf, size_t capacity, std::string_view text) {
  if (buf == nullptr || capacity == 0) return;
  const size_t n = std::min(text.size(), capacity - 1);
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
}

inline vgpu_status fail(vgpu_error_buf* err, vgpu_status status, const std::string& message) {
  if (err != nullptr) writeText(err->text, err->capacity, message);
  return status;
}

inline ContainerResources containerFromC(const vgpu_container_input& c) {
  ContainerResources out;
  out.name = c.name ? c.name : "";
  out.init = c.init != 0;
  for (size_t i = 0; i < c.limit_count; ++i)
    if (c.limits[i].name) out.limits[c.limits[i].name] = c.limits[i].value;
  return out;
}

inline Annotations annotationsFromC(const vgpu_kv_list* list) {
  Annotations out;
  if (list == nullptr) return out;
  for (size_t i = 0; i < list->count; ++i)
    if (list->items[i].key) out[list->items[i].key] = list->items[i].value ? list->items[i].value : "";
  return out;
}

inline ContainerGrant grantFromC(const vgpu_container_grant& g, const std::string& backend) {
  ContainerGrant out;
  out.container = {g.holder ? g.holder : "", g.container_name ? g.container_name : ""};
  out.podNamespace = g.pod_namespace ? g.pod_namespace : "";
  out.podName = g.pod_name ? g.pod_name : "";
  out.containerIndex = g.container_index;
  // A caller built against a different vgpu_grant says its size; older callers did not.
  const bool sized = g.struct_size >= offsetof(vgpu_container_grant, grant_size) + sizeof(size_t) && g.grant_size != 0;
  const size_t stride = sized ? g.grant_size : sizeof(vgpu_grant);
  for (size_t i = 0; i < g.device_count; ++i) {
    vgpu_grant d{};
    d.priority = -1;
    std::memcpy(&d, reinterpret_cast<const char*>(g.devices) + i * stride, std::min(stride, sizeof(vgpu_grant)));
    out.devices.push_back({backend, d.device_id ? d.device_id : "", d.device_index, d.memory_mib,
                           d.compute, d.slot, d.priority, d.placement ? d.placement : ""});
  }
  out.hostDir = g.host_dir ? g.host_dir : "";
  out.podAnnotations = annotationsFromC(&g.pod_annotations);
  // 1.1: a 1.0 agent's grant ends before pod_uid.
  if (g.struct_size >= offsetof(vgpu_container_grant, pod_uid) + sizeof(const char*) && g.pod_uid)
    out.podUid = g.pod_uid;
  return out;
}

/// Builds the C table for backend class B. Each thunk turns C++ results into C and
/// exceptions into VGPU_ERROR_INTERNAL, so nothing C++ escapes the library.
template <class B>
struct Adapter {
  static B& self(vgpu_backend* b) { return *reinterpret_cast<B*>(b); }
  static inline std::string name;
  /// The ABI version of the loader that filled the table: what its structs hold.
  static inline uint32_t loaderVersion = 0;

  static vgpu_status create(const vgpu_backend_config* config, vgpu_backend** out, vgpu_error_buf* err) {
    try {
      auto created = B::create(paramsFromC(*config));
      if (!created.ok()) return fail(err, VGPU_ERROR_INVALID, created.error().message);
      *out = reinterpret_cast<vgpu_backend*>(std::move(created).value().release());
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("create threw: ") + e.what());
    }
  }

  static void destroy(vgpu_backend* b) { delete reinterpret_cast<B*>(b); }

  static void resources(vgpu_backend* b, vgpu_resource_sink sink, void* ctx) {
    for (const auto& r : self(b).resources()) {
      const vgpu_resource c{r.name.c_str(), static_cast<uint32_t>(r.role), r.advertised ? 1u : 0u};
      sink(ctx, &c);
    }
  }

  static vgpu_status parseRequest(vgpu_backend* b, const vgpu_container_input* container,
                                  const vgpu_kv_list* annotations, vgpu_request_sink sink, void* ctx,
                                  vgpu_error_buf* err) {
    try {
      auto parsed = self(b).parseRequest(containerFromC(*container), annotationsFromC(annotations));
      if (!parsed.ok()) return fail(err, VGPU_ERROR_INVALID, parsed.error().message);
      if (parsed->has_value()) {
        const RequestRecord record(**parsed);
        sink(ctx, &record.c());
      }
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("parse_request threw: ") + e.what());
    }
  }

  static void fit(vgpu_backend* b, const vgpu_device_request* request, const vgpu_device* device,
                  const vgpu_device_usage* usage, vgpu_fit_result* result) {
    *result = vgpu_fit_result{};
    self(b).fit(*request, *device, *usage, *result);
  }

  static uint32_t fitReads(vgpu_backend* b) { return self(b).fitReads(); }

  static uint32_t splitCount(vgpu_backend* b, const char* model) {
    try {
      return self(b).splitCountFor(model ? model : "").value_or(0);
    } catch (const std::exception&) {
      return 0;
    }
  }

  static uint32_t places(vgpu_backend* b, const vgpu_device* device) {
    try {
      return self(b).placesGrants(*device) ? 1u : 0u;
    } catch (const std::exception&) {
      return 0;
    }
  }

  static void fitPlaced(vgpu_backend* b, const vgpu_device_request* request, const vgpu_device* device,
                        const vgpu_device_usage* usage, vgpu_placement* placement, vgpu_fit_result* result) {
    *result = vgpu_fit_result{};
    writeText(placement->token, placement->token_capacity, "");
    writeText(placement->why, placement->why_capacity, "");
    self(b).fitPlaced(*request, *device, *usage, *placement, *result);
  }

  static size_t explain(vgpu_backend* b, const vgpu_fit_result* result, char* buf, size_t capacity) {
    try {
      const std::string text = self(b).explain(*result);
      writeText(buf, capacity, text);
      return text.size();
    } catch (const std::exception&) {
      return 0;
    }
  }

  static vgpu_status admissionDefaults(vgpu_backend* b, const vgpu_container_input* container,
                                       const vgpu_kv_list* annotations, vgpu_amount_sink sink, void* ctx,
                                       vgpu_error_buf* err) {
    try {
      auto defaults = self(b).admissionDefaults(containerFromC(*container), annotationsFromC(annotations));
      if (!defaults.ok()) return fail(err, VGPU_ERROR_INVALID, defaults.error().message);
      for (const auto& [resource, value] : *defaults) sink(ctx, resource.c_str(), value);
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("admission_defaults threw: ") + e.what());
    }
  }

  static void protectedEnv(vgpu_backend* b, vgpu_env_sink sink, void* ctx) {
    try {
      for (const auto& e : self(b).protectedEnv())
        sink(ctx, e.pattern.c_str(), e.scope == ProtectedEnv::Scope::kEveryContainer ? VGPU_ENV_SCOPE_EVERY_CONTAINER
                                                                                    : VGPU_ENV_SCOPE_BACKEND_CONTAINERS);
    } catch (const std::exception&) {
    }
  }

  static vgpu_status discover(vgpu_backend* b, vgpu_device_sink sink, void* ctx, vgpu_error_buf* err) {
    try {
      auto devices = self(b).discover();
      if (!devices.ok()) return fail(err, VGPU_ERROR_UNAVAILABLE, devices.error().message);
      for (auto& d : *devices) {
        const DeviceRecord record(std::move(d));
        sink(ctx, &record.c());
      }
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("discover threw: ") + e.what());
    }
  }

  static vgpu_status waitHealth(vgpu_backend* b, uint32_t timeoutMs, vgpu_health_sink sink, void* ctx,
                                vgpu_error_buf* err) {
    try {
      auto events = self(b).waitForHealthEvents(std::chrono::milliseconds(timeoutMs));
      if (!events.ok()) return fail(err, VGPU_ERROR_UNAVAILABLE, events.error().message);
      for (const auto& e : *events) {
        const uint32_t h = e.health == Health::kHealthy     ? VGPU_HEALTHY
                           : e.health == Health::kUnhealthy ? VGPU_UNHEALTHY
                                                            : VGPU_HEALTH_UNKNOWN;
        sink(ctx, e.deviceId.c_str(), h, e.reason.c_str());
      }
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("wait_health threw: ") + e.what());
    }
  }

  static vgpu_status containerSpec(vgpu_backend* b, const vgpu_container_grant* grant,
                                   const vgpu_spec_sink* sink, vgpu_error_buf* err) {
    try {
      auto spec = self(b).containerSpec(grantFromC(*grant, name));
      if (!spec.ok()) return fail(err, VGPU_ERROR_INVALID, spec.error().message);
      if (!spec->podAnnotations.empty() && !sink->pod_annotation)
        return fail(err, VGPU_ERROR_UNSUPPORTED,
                    "the backend needs pod annotations written (" + spec->podAnnotations.begin()->first +
                        "), but this node agent does not write them");
      const bool hooksHeard = VGPU_ABI_MINOR_OF(loaderVersion) >= 8 && sink->hook;
      if (!spec->hooks.empty() && !hooksHeard)
        return fail(err, VGPU_ERROR_UNSUPPORTED,
                    "the backend needs the container runtime to run " + spec->hooks.front().path +
                        " as a " + spec->hooks.front().hookName + " hook, but this node agent cannot declare hooks "
                        "(it is older than backend ABI 1.8)");
      for (const auto& [k, v] : spec->env) sink->env(sink->ctx, k.c_str(), v.c_str());
      for (const auto& m : spec->mounts)
        sink->mount(sink->ctx, m.hostPath.c_str(), m.containerPath.c_str(), m.readOnly ? 1u : 0u);
      for (const auto& d : spec->devices)
        sink->device(sink->ctx, d.hostPath.c_str(), d.containerPath.c_str(), d.permissions.c_str());
      for (const auto& [k, v] : spec->annotations) sink->annotation(sink->ctx, k.c_str(), v.c_str());
      for (const auto& [k, v] : spec->podAnnotations) sink->pod_annotation(sink->ctx, k.c_str(), v.c_str());
      // An older agent's sink ends before `notice`: its notes are not shown there.
      if (VGPU_ABI_MINOR_OF(loaderVersion) >= 2 && sink->notice)
        for (const auto& n : spec->notices) sink->notice(sink->ctx, n.reason.c_str(), n.message.c_str());
      // An older agent's sink ends before `region`: it reads no usage from the container's files.
      if (VGPU_ABI_MINOR_OF(loaderVersion) >= 7 && sink->region && spec->region)
        sink->region(sink->ctx, spec->region->path.c_str(), spec->region->inode);
      for (const auto& h : spec->hooks) {
        std::vector<const char*> args, env;
        for (const auto& a : h.args) args.push_back(a.c_str());
        for (const auto& e : h.env) env.push_back(e.c_str());
        sink->hook(sink->ctx, h.hookName.c_str(), h.path.c_str(), args.data(), args.size(), env.data(), env.size());
      }
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("container_spec threw: ") + e.what());
    }
  }

  static vgpu_status release(vgpu_backend* b, const vgpu_container_ref* ref, vgpu_error_buf* err) {
    try {
      auto status = self(b).release(ContainerRef{ref->holder ? ref->holder : "",
                                                 ref->container_name ? ref->container_name : ""});
      return status.ok() ? VGPU_OK : fail(err, VGPU_ERROR_UNAVAILABLE, status.error().message);
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("release threw: ") + e.what());
    }
  }

  static vgpu_status reconcile(vgpu_backend* b, const vgpu_container_ref* live, size_t count,
                               vgpu_error_buf* err) {
    try {
      std::vector<ContainerRef> refs;
      refs.reserve(count);
      for (size_t i = 0; i < count; ++i)
        refs.push_back({live[i].holder ? live[i].holder : "",
                        live[i].container_name ? live[i].container_name : ""});
      auto status = self(b).reconcile(refs);
      return status.ok() ? VGPU_OK : fail(err, VGPU_ERROR_UNAVAILABLE, status.error().message);
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("reconcile threw: ") + e.what());
    }
  }

  static vgpu_status containerUsage(vgpu_backend* b, vgpu_usage_sink sink, void* ctx, vgpu_error_buf* err) {
    try {
      auto usage = self(b).containerUsage();
      if (!usage.ok()) return fail(err, VGPU_ERROR_UNAVAILABLE, usage.error().message);
      for (const auto& u : *usage) {
        vgpu_container_usage c{};
        c.struct_size = sizeof(c);
        c.holder = u.container.holder.c_str();
        c.container_name = u.container.containerName.c_str();
        c.device_id = u.deviceId.c_str();
        c.device_index = u.deviceIndex;
        c.memory_limit_bytes = u.memoryLimitBytes;
        c.memory_used_bytes = u.memoryUsedBytes ? static_cast<int64_t>(*u.memoryUsedBytes) : -1;
        c.compute_limit_percent = u.computeLimitPercent;
        c.utilization_percent = u.utilizationPercent ? static_cast<int32_t>(*u.utilizationPercent) : -1;
        sink(ctx, &c);
      }
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("container_usage threw: ") + e.what());
    }
  }

  static vgpu_status deviceProcesses(vgpu_backend* b, vgpu_process_sink sink, void* ctx, vgpu_error_buf* err) {
    try {
      auto processes = self(b).deviceProcesses();
      if (!processes.ok()) return fail(err, VGPU_ERROR_UNAVAILABLE, processes.error().message);
      for (const auto& p : *processes) {
        vgpu_device_process c{};
        c.struct_size = sizeof(c);
        c.pid = p.pid;
        c.device_id = p.deviceId.c_str();
        c.device_index = p.deviceIndex;
        c.memory_used_bytes = p.memoryUsedBytes ? static_cast<int64_t>(*p.memoryUsedBytes) : -1;
        c.utilization_percent = p.utilizationPercent ? static_cast<int32_t>(*p.utilizationPercent) : -1;
        sink(ctx, &c);
      }
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("device_processes threw: ") + e.what());
    }
  }

  static vgpu_status cgroupMemoryUsed(vgpu_backend* b, const char* procCgroup, const char* deviceId,
                                      uint64_t* usedBytes, int* known, vgpu_error_buf* err) {
    if (usedBytes == nullptr || known == nullptr) return fail(err, VGPU_ERROR_INVALID, "cgroup_memory_used: null output");
    *usedBytes = 0;
    *known = 0;
    try {
      auto used = self(b).cgroupMemoryUsed(procCgroup ? procCgroup : "", deviceId ? deviceId : "");
      if (!used.ok()) return fail(err, VGPU_ERROR_UNAVAILABLE, used.error().message);
      if (*used) {
        *usedBytes = **used;
        *known = 1;
      }
      return VGPU_OK;
    } catch (const Unsupported& e) {
      return fail(err, VGPU_ERROR_UNSUPPORTED, e.what());
    } catch (const std::exception& e) {
      return fail(err, VGPU_ERROR_INTERNAL, std::string("cgroup_memory_used threw: ") + e.what());
    }
  }
};

template <class B>
concept HasExplain = requires(const B& b, const vgpu_fit_result& r) { { b.explain(r) } -> std::convertible_to<std::string>; };
template <class B>
concept HasAdmissionDefaults = requires(const B& b, const ContainerResources& c, const Annotations& a) {
  b.admissionDefaults(c, a);
};
template <class B>
concept HasProtectedEnv = requires(const B& b) {
  { b.protectedEnv() } -> std::convertible_to<std::vector<ProtectedEnv>>;
};
template <class B>
concept HasFitReads = requires(const B& b) { { b.fitReads() } -> std::convertible_to<std::uint32_t>; };
template <class B>
concept HasSplitCount = requires(const B& b, const std::string& model) {
  { b.splitCountFor(model) } -> std::convertible_to<std::optional<std::uint32_t>>;
};
template <class B>
concept HasPlacements = requires(const B& b, const vgpu_device_request& q, const vgpu_device& d,
                                 const vgpu_device_usage& u, vgpu_placement& p, vgpu_fit_result& r) {
  { b.placesGrants(d) } -> std::convertible_to<bool>;
  b.fitPlaced(q, d, u, p, r);
};
template <class B>
concept HasDiscovery = requires(B& b) {
  b.discover();
  b.waitForHealthEvents(std::chrono::milliseconds(0));
};
template <class B>
concept HasLimiter = requires(B& b, const ContainerGrant& g, const ContainerRef& r,
                              const std::vector<ContainerRef>& live) {
  b.containerSpec(g);
  b.release(r);
  b.reconcile(live);
};

template <class B>
concept HasUsage = requires(B& b) { b.containerUsage(); };

template <class B>
concept HasProcesses = requires(B& b) { b.deviceProcesses(); };

template <class B>
concept HasCgroupMemory = requires(B& b, const std::string& s) { b.cgroupMemoryUsed(s, s); };

/// Fills `table` for backend class B; the body of VGPU_DEFINE_BACKEND's entry function.
template <class B>
int fillTable(uint32_t loaderVersion, vgpu_backend_table* table, const char* name, const char* description) {
  if (table == nullptr || VGPU_ABI_MAJOR_OF(loaderVersion) != VGPU_BACKEND_ABI_MAJOR) return 1;
  using A = Adapter<B>;
  A::name = name;
  A::loaderVersion = loaderVersion;
  vgpu_backend_table t{};
  t.struct_size = sizeof(vgpu_backend_table);
  t.abi_version = VGPU_BACKEND_ABI_VERSION;
  t.name = name;
  t.description = description;
  t.create = &A::create;
  t.destroy = &A::destroy;
  t.resources = &A::resources;
  t.parse_request = &A::parseRequest;
  t.fit = &A::fit;
  if constexpr (HasExplain<B>) t.explain = &A::explain;
  if constexpr (HasAdmissionDefaults<B>) t.admission_defaults = &A::admissionDefaults;
  if constexpr (HasDiscovery<B>) {
    t.discover = &A::discover;
    t.wait_health = &A::waitHealth;
  }
  if constexpr (HasLimiter<B>) {
    t.container_spec = &A::containerSpec;
    t.release = &A::release;
    t.reconcile = &A::reconcile;
  }
  if constexpr (HasUsage<B>) t.container_usage = &A::containerUsage;
  if constexpr (HasProtectedEnv<B>) t.protected_env = &A::protectedEnv;
  if constexpr (HasProcesses<B>) t.device_processes = &A::deviceProcesses;
  if constexpr (HasCgroupMemory<B>) t.cgroup_memory_used = &A::cgroupMemoryUsed;
  if constexpr (HasFitReads<B>) t.fit_reads = &A::fitReads;
  if constexpr (HasSplitCount<B>) t.split_count = &A::splitCount;
  if constexpr (HasPlacements<B>) {
    t.places = &A::places;
    t.fit_placed = &A::fitPlaced;
  }
  // An older loader knows a shorter table: give it the prefix it knows.
  const uint32_t size = std::min<uint32_t>(table->struct_size, sizeof(vgpu_backend_table));
  std::memcpy(table, &t, size);
  table->struct_size = size;
  return 0;
}

}  // namespace vgpu::sdk

#define VGPU_DEFINE_BACKEND(Class, name, description)                                        \
  extern "C" VGPU_BACKEND_EXPORT int VGPU_BACKEND_ENTRY(uint32_t loaderVersion,               \
                                                        vgpu_backend_table* table) {          \
    return ::vgpu::sdk::fillTable<Class>(loaderVersion, table, name, description);            \
  }
