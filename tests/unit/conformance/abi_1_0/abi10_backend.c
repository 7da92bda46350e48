/* A backend built against ABI 1.0 (the frozen header beside it), in plain C: what a vendor
 * shipped before 1.1. The newest loader must still load it for the old paths and say which
 * newer capabilities it lacks.
 *
 * Faults for showing that vgpu-backend-check catches a broken backend, switched by
 * VGPU_ABI10_FAULT: "stdout" (discover prints), "silent-error" (discover fails with no
 * words), "unstable-ids" (ids change between calls), "accept-unknown-option". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_abi_1_0.h"

enum { kDevices = 2, kSplit = 4, kMemoryMiB = 8192 };

struct vgpu_backend {
  int calls;
};

static int fault(const char* name) {
  const char* f = getenv("VGPU_ABI10_FAULT");
  return f != NULL && strcmp(f, name) == 0;
}

static vgpu_status fail(vgpu_error_buf* err, vgpu_status status, const char* message) {
  if (err != NULL && err->text != NULL && err->capacity > 0) snprintf(err->text, err->capacity, "%s", message);
  return status;
}

static vgpu_status create(const vgpu_backend_config* config, vgpu_backend** out, vgpu_error_buf* err) {
  char message[256];
  for (size_t i = 0; i < config->options.count; ++i) {
    if (fault("accept-unknown-option")) break;
    snprintf(message, sizeof(message), "backends.abi10.options.%s: unknown option (the abi10 backend has none)",
             config->options.items[i].key);
    return fail(err, VGPU_ERROR_INVALID, message);
  }
  *out = calloc(1, sizeof(vgpu_backend));
  return *out ? VGPU_OK : fail(err, VGPU_ERROR_INTERNAL, "out of memory");
}

static void destroy(vgpu_backend* backend) { free(backend); }

static void resources(vgpu_backend* backend, vgpu_resource_sink sink, void* ctx) {
  (void)backend;
  const vgpu_resource count = {"example.com/abi10", VGPU_RESOURCE_COUNT, 1};
  const vgpu_resource memory = {"example.com/abi10-memory", VGPU_RESOURCE_MEMORY, 0};
  sink(ctx, &count);
  sink(ctx, &memory);
}

static vgpu_status parse_request(vgpu_backend* backend, const vgpu_container_input* container,
                                 const vgpu_kv_list* annotations, vgpu_request_sink sink, void* ctx,
                                 vgpu_error_buf* err) {
  (void)backend;
  (void)annotations;
  vgpu_device_request request;
  memset(&request, 0, sizeof(request));
  request.struct_size = sizeof(request);
  request.priority = -1;
  int asked = 0;
  for (size_t i = 0; i < container->limit_count; ++i) {
    const vgpu_resource_amount* a = &container->limits[i];
    if (strcmp(a->name, "example.com/abi10") == 0) {
      if (a->value < 1) return fail(err, VGPU_ERROR_INVALID, "example.com/abi10 must be at least 1");
      request.count = (uint32_t)a->value;
      asked = 1;
    } else if (strcmp(a->name, "example.com/abi10-memory") == 0) {
      if (a->value < 0) return fail(err, VGPU_ERROR_INVALID, "example.com/abi10-memory must not be negative");
      request.memory_mib = (uint64_t)a->value;
    }
  }
  if (asked) sink(ctx, &request);
  return VGPU_OK;
}

static void fit(vgpu_backend* backend, const vgpu_device_request* request, const vgpu_device* device,
                const vgpu_device_usage* usage, vgpu_fit_result* result) {
  (void)backend;
  memset(result, 0, sizeof(*result));
  const uint64_t memory = request->memory_mib ? request->memory_mib : device->memory_mib;
  if (device->health != VGPU_HEALTHY) {
    result->reason = VGPU_REASON_UNHEALTHY;
  } else if (usage->shares >= device->split_count) {
    result->reason = VGPU_REASON_SHARES_EXHAUSTED;
    result->needed = 1;
    result->available = 0;
  } else if (usage->memory_mib + memory > device->memory_mib) {
    result->reason = VGPU_REASON_INSUFFICIENT_MEMORY;
    result->needed = memory;
    result->available = device->memory_mib - usage->memory_mib;
  } else {
    result->fits = 1;
    result->take.shares = 1;
    result->take.memory_mib = memory;
    result->take.compute = request->compute_percent;
  }
}

static vgpu_status discover(vgpu_backend* backend, vgpu_device_sink sink, void* ctx, vgpu_error_buf* err) {
  if (fault("silent-error")) return VGPU_ERROR_UNAVAILABLE;
  if (fault("stdout")) printf("abi10: discovering\n");
  ++backend->calls;
  for (int i = 0; i < kDevices; ++i) {
    char id[32];
    snprintf(id, sizeof(id), "ABI10-%d", fault("unstable-ids") ? i + 10 * backend->calls : i);
    vgpu_device d;
    memset(&d, 0, sizeof(d));
    d.struct_size = sizeof(d);
    d.id = id;
    d.index = i;
    d.model = "ABI 1.0 Accelerator";
    d.memory_mib = kMemoryMiB;
    d.compute_units = 100;
    d.split_count = kSplit;
    d.numa_node = -1;
    d.health = VGPU_HEALTHY;
    sink(ctx, &d);
  }
  (void)err;
  return VGPU_OK;
}

static vgpu_status wait_health(vgpu_backend* backend, uint32_t timeout_ms, vgpu_health_sink sink, void* ctx,
                               vgpu_error_buf* err) {
  (void)backend, (void)timeout_ms, (void)sink, (void)ctx, (void)err;
  return VGPU_OK;
}

/* Reads only what 1.0 knew of the grant, stepping through devices by the caller's grant_size. */
static vgpu_status container_spec(vgpu_backend* backend, const vgpu_container_grant* grant,
                                  const vgpu_spec_sink* sink, vgpu_error_buf* err) {
  (void)backend;
  char visible[256] = "";
  for (size_t i = 0; i < grant->device_count; ++i) {
    const vgpu_grant* g = (const vgpu_grant*)((const char*)grant->devices + i * grant->grant_size);
    if (g->device_id == NULL || strncmp(g->device_id, "ABI10-", 6) != 0)
      return fail(err, VGPU_ERROR_INVALID, "the grant names a device this backend does not have");
    if (visible[0] != '\0') strncat(visible, ",", sizeof(visible) - strlen(visible) - 1);
    strncat(visible, g->device_id, sizeof(visible) - strlen(visible) - 1);
  }
  sink->env(sink->ctx, "ABI10_VISIBLE_DEVICES", visible);
  return VGPU_OK;
}

static vgpu_status release(vgpu_backend* backend, const vgpu_container_ref* container, vgpu_error_buf* err) {
  (void)backend, (void)container, (void)err;
  return VGPU_OK; /* holds nothing per container */
}

static vgpu_status reconcile(vgpu_backend* backend, const vgpu_container_ref* live, size_t count, vgpu_error_buf* err) {
  (void)backend, (void)live, (void)count, (void)err;
  return VGPU_OK;
}

VGPU_BACKEND_EXPORT int VGPU_BACKEND_ENTRY(uint32_t loader_abi_version, vgpu_backend_table* table) {
  if (table == NULL || VGPU_ABI_MAJOR_OF(loader_abi_version) != VGPU_BACKEND_ABI_MAJOR) return 1;
  vgpu_backend_table t;
  memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.abi_version = VGPU_BACKEND_ABI_VERSION;
  t.name = "abi10";
  t.description = "a backend built against ABI 1.0 (test fixture)";
  t.create = create;
  t.destroy = destroy;
  t.resources = resources;
  t.parse_request = parse_request;
  t.fit = fit;
  t.discover = discover;
  t.wait_health = wait_health;
  t.container_spec = container_spec;
  t.release = release;
  t.reconcile = reconcile;
  const uint32_t size = table->struct_size < sizeof(t) ? table->struct_size : (uint32_t)sizeof(t);
  memcpy(table, &t, size);
  table->struct_size = size;
  return 0;
}
