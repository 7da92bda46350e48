/* Broken and foreign backends, built from this one file with different macros, to test
 * that the loader refuses each kind with a clear message. Written in C on purpose: a
 * backend needs nothing of vgpu's C++. */
#include <string.h>

#include "vgpu/backend_abi.h"

static vgpu_status create(const vgpu_backend_config* c, vgpu_backend** out, vgpu_error_buf* e) {
  (void)c;
  (void)e;
  static int instance;
  *out = (vgpu_backend*)&instance;
  return VGPU_OK;
}
static void destroy(vgpu_backend* b) { (void)b; }
static void resources(vgpu_backend* b, vgpu_resource_sink sink, void* ctx) {
  (void)b;
  vgpu_resource r = {"example.com/thing", VGPU_RESOURCE_COUNT, 1};
  sink(ctx, &r);
}
static vgpu_status parse(vgpu_backend* b, const vgpu_container_input* c, const vgpu_kv_list* a,
                         vgpu_request_sink sink, void* ctx, vgpu_error_buf* e) {
  (void)b; (void)c; (void)a; (void)sink; (void)ctx; (void)e;
  return VGPU_OK;
}
static void fit(vgpu_backend* b, const vgpu_device_request* q, const vgpu_device* d,
                const vgpu_device_usage* u, vgpu_fit_result* r) {
  (void)b; (void)q; (void)d; (void)u;
  r->fits = 1;
}

#ifdef FIT_READS
/* 1.5: what fit reads (it reads nothing, so any answer is true). */
static uint32_t fit_reads(vgpu_backend* b) {
  (void)b;
  return FIT_READS;
}
#endif

#ifdef SPLIT_COUNT
/* 1.10: SPLIT_COUNT for every model but "unknown", of which it cannot tell. */
static uint32_t split_count(vgpu_backend* b, const char* model) {
  (void)b;
  return model != NULL && strcmp(model, "unknown") == 0 ? 0u : (uint32_t)SPLIT_COUNT;
}
#endif

#ifdef WITH_PLACES
/* 1.6: every device is placed; a grant goes to "slot-<n>", n = the grants already on it. */
static uint32_t places(vgpu_backend* b, const vgpu_device* d) {
  (void)b;
  (void)d;
  return 1;
}
#endif
#ifdef WITH_FIT_PLACED
static void fit_placed(vgpu_backend* b, const vgpu_device_request* q, const vgpu_device* d,
                       const vgpu_device_usage* u, vgpu_placement* p, vgpu_fit_result* r) {
  (void)b; (void)q; (void)d; (void)u;
  r->fits = 1;
  if (p->token != NULL && p->token_capacity >= 8) {
    memcpy(p->token, "slot-", 5);
    p->token[5] = (char)('0' + (p->placed.count % 10));
    p->token[6] = '\0';
  }
}
#endif

#ifdef WITH_PROCESSES
/* 1.3: one process of 1 MiB on one device. */
static vgpu_status processes(vgpu_backend* b, vgpu_process_sink sink, void* ctx, vgpu_error_buf* e) {
  (void)b;
  (void)e;
  vgpu_device_process p;
  memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.pid = 4242;
  p.device_id = "dev-0";
  p.memory_used_bytes = 1048576;
  p.utilization_percent = -1;
  sink(ctx, &p);
  return VGPU_OK;
}
#endif

#ifdef WITH_DEVICES
/* Two devices; with WITH_LINKS (1.4) linked to each other; DEVICE_STRUCT_SIZE: a
 * vgpu_device as an older header built it. */
static vgpu_status discover(vgpu_backend* b, vgpu_device_sink sink, void* ctx, vgpu_error_buf* e) {
  (void)b;
  (void)e;
  static const char* ids[2] = {"dev-0", "dev-1"};
  for (int i = 0; i < 2; ++i) {
    vgpu_device d;
    vgpu_device_link link;
    memset(&d, 0, sizeof d);
    memset(&link, 0, sizeof link);
    d.struct_size = sizeof d;
    d.id = ids[i];
    d.index = i;
    d.model = "thing";
    d.memory_mib = 1024;
    d.compute_units = 100;
    d.split_count = 1;
    d.numa_node = -1;
    d.health = VGPU_HEALTHY;
    link.peer_id = ids[1 - i];
    link.link_class = VGPU_LINK_DIRECT;
    link.lanes = 2;
    link.rank = 150;
    d.links = &link;
    d.link_count = 1;
    d.link_size = sizeof link;
#ifdef DEVICE_STRUCT_SIZE
    d.struct_size = DEVICE_STRUCT_SIZE;
#endif
    sink(ctx, &d);
  }
  return VGPU_OK;
}
static vgpu_status wait_health(vgpu_backend* b, uint32_t ms, vgpu_health_sink sink, void* ctx, vgpu_error_buf* e) {
  (void)b; (void)ms; (void)sink; (void)ctx; (void)e;
  return VGPU_OK;
}
#endif

#ifndef NO_ENTRY
VGPU_BACKEND_EXPORT int VGPU_BACKEND_ENTRY(unsigned loader, vgpu_backend_table* t) {
  (void)loader;
#ifdef REFUSE_LOADER
  return 1;
#endif
  vgpu_backend_table table;
  memset(&table, 0, sizeof table);
  table.struct_size = sizeof table;
  table.abi_version = TABLE_ABI_VERSION;
  table.name = TABLE_NAME;
  table.description = "a test backend";
  table.create = create;
  table.destroy = destroy;
  table.resources = resources;
  table.parse_request = parse;
#ifndef NO_FIT
  table.fit = fit;
#endif
#ifdef WITH_PROCESSES
  table.device_processes = processes;
#endif
#ifdef FIT_READS
  table.fit_reads = fit_reads;
#endif
#ifdef SPLIT_COUNT
  table.split_count = split_count;
#endif
#ifdef WITH_PLACES
  table.places = places;
#endif
#ifdef WITH_FIT_PLACED
  table.fit_placed = fit_placed;
#endif
#ifdef WITH_DEVICES
  table.discover = discover;
  table.wait_health = wait_health;
#endif
#ifdef TABLE_STRUCT_SIZE
  /* A backend built against an older header: its table ends earlier. */
  table.struct_size = TABLE_STRUCT_SIZE;
#endif
  memcpy(t, &table, t->struct_size < table.struct_size ? t->struct_size : table.struct_size);
  return 0;
}
#endif
