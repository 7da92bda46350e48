/* The application side of the coverage tests (coverage_preload_test.cpp): entry points that
 * take device memory beyond the everyday allocators (the 32-bit cuMemAllocPitch, module and
 * library loading), each called the way an application reaches it: dlsym on libcuda.so.1 or
 * cuGetProcAddress. Links only libc and libdl, like limiter_probe.c.
 *
 * Usage: coverage_probe <scenario> [args]. Results go to stdout as "key=value" lines;
 * failures are explained on stderr and reported by the exit code: 0 ok, 1 check failed,
 * 3 setup failed. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vgpu/cuda/driver_api.h"

#define MIB (1024ull * 1024ull)

static void* g_cuda;

#define FN(name) static __typeof__(&name) p_##name;
FN(cuInit)
FN(cuDeviceGet)
FN(cuDevicePrimaryCtxRetain)
FN(cuCtxSetCurrent)
FN(cuMemGetInfo_v2)
FN(cuGetProcAddress_v2)
FN(cuGetErrorName)
FN(cuCtxCreate_v2)
FN(cuCtxDestroy_v2)
FN(cuModuleLoad)
FN(cuModuleLoadData)
FN(cuModuleLoadDataEx)
FN(cuModuleLoadFatBinary)
FN(cuModuleUnload)
FN(cuLibraryLoadData)
FN(cuLibraryLoadFromFile)
FN(cuLibraryUnload)
FN(cuGreenCtxCreate)
FN(cuGreenCtxDestroy)
FN(cuMemAlloc_v2)
FN(cuMemFree_v2)
FN(cuArrayDestroy)
FN(cuGraphCreate)
FN(cuGraphAddNode)
FN(cuGraphAddNode_v2)
FN(cuGraphInstantiateWithFlags)
FN(cuGraphLaunch)
FN(cuGraphExecDestroy)
FN(cuGraphDestroy)
FN(cuDeviceGraphMemTrim)
FN(cuStreamSynchronize)
FN(cuGraphUpload)
FN(cuGraphUpload_ptsz)
#undef FN

static int fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "coverage_probe: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 1;
}

static const char* errName(CUresult rc) {
  const char* n = "?";
  if (p_cuGetErrorName) p_cuGetErrorName(rc, &n);
  return n;
}

/* `name` as the application asks for it: "dlsym" from the library, "procaddr" from
 * cuGetProcAddress_v2 for CUDA `version` (the ABI of that release). */
static void* entry(const char* how, const char* name, int version) {
  if (!strcmp(how, "procaddr")) {
    void* fn = NULL;
    CUdriverProcAddressQueryResult status;
    if (p_cuGetProcAddress_v2(name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status) != CUDA_SUCCESS) return NULL;
    return fn;
  }
  return dlsym(g_cuda, name);
}

/* cuInit and the primary context of device 0, current on this thread. */
static int setup(void) {
  g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!g_cuda) {
    fprintf(stderr, "coverage_probe: %s\n", dlerror());
    return 3;
  }
#define LOAD(name) p_##name = (__typeof__(p_##name))dlsym(g_cuda, #name);
  LOAD(cuInit)
  LOAD(cuDeviceGet)
  LOAD(cuDevicePrimaryCtxRetain)
  LOAD(cuCtxSetCurrent)
  LOAD(cuMemGetInfo_v2)
  LOAD(cuGetProcAddress_v2)
  LOAD(cuGetErrorName)
  LOAD(cuCtxCreate_v2)
  LOAD(cuCtxDestroy_v2)
  LOAD(cuModuleLoad)
  LOAD(cuModuleLoadData)
  LOAD(cuModuleLoadDataEx)
  LOAD(cuModuleLoadFatBinary)
  LOAD(cuModuleUnload)
  LOAD(cuLibraryLoadData)
  LOAD(cuLibraryLoadFromFile)
  LOAD(cuLibraryUnload)
  LOAD(cuGreenCtxCreate)
  LOAD(cuGreenCtxDestroy)
  LOAD(cuMemAlloc_v2)
  LOAD(cuMemFree_v2)
  LOAD(cuArrayDestroy)
  LOAD(cuGraphCreate)
  LOAD(cuGraphAddNode)
  LOAD(cuGraphAddNode_v2)
  LOAD(cuGraphInstantiateWithFlags)
  LOAD(cuGraphLaunch)
  LOAD(cuGraphExecDestroy)
  LOAD(cuGraphDestroy)
  LOAD(cuDeviceGraphMemTrim)
  LOAD(cuStreamSynchronize)
  LOAD(cuGraphUpload)
  LOAD(cuGraphUpload_ptsz)
#undef LOAD
  CUdevice dev;
  CUcontext ctx;
  CUresult rc;
  if ((rc = p_cuInit(0)) || (rc = p_cuDeviceGet(&dev, 0)) || (rc = p_cuDevicePrimaryCtxRetain(&ctx, dev)) ||
      (rc = p_cuCtxSetCurrent(ctx))) {
    fprintf(stderr, "coverage_probe: no context on device 0: %s\n", errName(rc));
    return 3;
  }
  return 0;
}

/* Bytes the simulated device really holds (all processes), from the fake's test API. */
static uint64_t physicalUsed(void) {
  uint64_t (*used)(int) = (uint64_t(*)(int))dlsym(g_cuda, "vgpuFakeDeviceUsedBytes");
  return used ? used(0) : 0;
}

/* What the container is charged on device 0, as the limiter's cuMemGetInfo says. */
static uint64_t containerUsed(void) {
  size_t free = 0, total = 0;
  if (p_cuMemGetInfo_v2(&free, &total) != CUDA_SUCCESS) return UINT64_MAX;
  return total - free;
}

/* ---- cuMemAllocPitch (v1): 32-bit sizes and address, charged like _v2 ---- */

static int scenarioPitchV1(const char* how) {
  if (setup() != 0) return 3;
  __typeof__(&cuMemAllocPitch) allocPitch = (__typeof__(&cuMemAllocPitch))entry(how, "cuMemAllocPitch", 2000);
  __typeof__(&cuMemFree) freeV1 = (__typeof__(&cuMemFree))entry(how, "cuMemFree", 2000);
  if (!allocPitch || !freeV1) return fail("%s: no cuMemAllocPitch / cuMemFree v1", how);
  uint64_t used0 = containerUsed(), phys0 = physicalUsed();

  /* 240 MiB under a 64 MiB limit. */
  CUdeviceptr_v1 big = 0;
  unsigned int pitch = 0;
  CUresult rc = allocPitch(&big, &pitch, 4096, 61440, 4);
  if (rc != CUDA_ERROR_OUT_OF_MEMORY) return fail("%s: 240 MiB under a 64 MiB limit gave %s", how, errName(rc));
  if (physicalUsed() != phys0) return fail("%s: the refused request took device memory", how);

  /* A width the driver pads: the charge is the driver's pitch times the height. */
  CUdeviceptr_v1 a = 0;
  rc = allocPitch(&a, &pitch, 1000000, 24, 4);
  if (rc != CUDA_SUCCESS) return fail("%s: 24 rows of 1000000 bytes failed: %s", how, errName(rc));
  uint64_t charged = containerUsed() - used0;
  if (charged != (uint64_t)pitch * 24)
    return fail("%s: charged %llu for pitch %u x 24", how, (unsigned long long)charged, pitch);
  CUdeviceptr_v1 b = 0;
  rc = allocPitch(&b, &pitch, 1000000, 48, 4);
  if (rc != CUDA_ERROR_OUT_OF_MEMORY) return fail("%s: 48 more rows over the limit gave %s", how, errName(rc));
  if ((rc = freeV1(a)) != CUDA_SUCCESS) return fail("%s: cuMemFree (v1) failed: %s", how, errName(rc));
  if (containerUsed() != used0)
    return fail("%s: usage %llu after the free, %llu before", how, (unsigned long long)containerUsed(),
                (unsigned long long)used0);
  printf("charged=%llu\n", (unsigned long long)charged);
  return 0;
}

/* ---- loading code: what a module or library takes on the device is charged ---- */

/* One loaded code object: a module, or a library. */
typedef struct {
  CUmodule mod;
  CUlibrary lib;
} Code;

static char g_file[64]; /* the image file of the "file" loaders */

/* Loads an image whose code and globals take `bytes` on the device (the fake reads
 * device_bytes=), by `loader`: data, dataex, fatbinary, file (modules), library, libraryfile. */
static CUresult load(const char* loader, uint64_t bytes, Code* c) {
  char image[64];
  snprintf(image, sizeof image, "vgpu-fake-module device_bytes=%llu", (unsigned long long)bytes);
  memset(c, 0, sizeof *c);
  if (!strcmp(loader, "file") || !strcmp(loader, "libraryfile")) {
    strcpy(g_file, "/tmp/vgpu-coverage-image-XXXXXX");
    int fd = mkstemp(g_file);
    if (fd < 0 || write(fd, image, strlen(image) + 1) < 0) return CUDA_ERROR_OPERATING_SYSTEM;
    close(fd);
    CUresult rc = !strcmp(loader, "file") ? p_cuModuleLoad(&c->mod, g_file)
                                          : p_cuLibraryLoadFromFile(&c->lib, g_file, NULL, NULL, 0, NULL, NULL, 0);
    unlink(g_file);
    return rc;
  }
  if (!strcmp(loader, "data")) return p_cuModuleLoadData(&c->mod, image);
  if (!strcmp(loader, "dataex")) {
    CUjit_option opt = CU_JIT_MAX_REGISTERS;
    void* value = (void*)(uintptr_t)32;
    return p_cuModuleLoadDataEx(&c->mod, image, 1, &opt, &value);
  }
  if (!strcmp(loader, "fatbinary")) return p_cuModuleLoadFatBinary(&c->mod, image);
  if (!strcmp(loader, "library")) return p_cuLibraryLoadData(&c->lib, image, NULL, NULL, 0, NULL, NULL, 0);
  return CUDA_ERROR_INVALID_VALUE;
}

static CUresult unload(const Code* c) { return c->lib ? p_cuLibraryUnload(c->lib) : p_cuModuleUnload(c->mod); }

/* Under a 64 MiB limit (8 MiB of it the context): 24 MiB of code loads and is charged
 * exactly; 48 MiB more is refused with nothing left on the device; the unload gives the
 * 24 MiB back; then the 48 MiB load fits. */
static int scenarioLoad(const char* loader) {
  if (setup() != 0) return 3;
  uint64_t used0 = containerUsed(), phys0 = physicalUsed();
  Code a, b;
  CUresult rc = load(loader, 24 * MIB, &a);
  if (rc != CUDA_SUCCESS) return fail("%s: 24 MiB of code within the limit failed: %s", loader, errName(rc));
  uint64_t charged = containerUsed() - used0;
  if (charged != 24 * MIB) return fail("%s: 24 MiB of code charged %llu bytes", loader, (unsigned long long)charged);
  uint64_t phys1 = physicalUsed();
  rc = load(loader, 48 * MIB, &b);
  if (rc != CUDA_ERROR_OUT_OF_MEMORY) return fail("%s: 48 MiB more over the limit gave %s", loader, errName(rc));
  if (physicalUsed() != phys1)
    return fail("%s: the refused load left %llu bytes on the device", loader,
                (unsigned long long)(physicalUsed() - phys1));
  if (containerUsed() != used0 + charged) return fail("%s: the refused load changed the usage", loader);
  if ((rc = unload(&a)) != CUDA_SUCCESS) return fail("%s: unload failed: %s", loader, errName(rc));
  if (containerUsed() != used0 || physicalUsed() != phys0)
    return fail("%s: usage %llu after the unload, %llu before", loader, (unsigned long long)containerUsed(),
                (unsigned long long)used0);
  if ((rc = load(loader, 48 * MIB, &b)) != CUDA_SUCCESS)
    return fail("%s: 48 MiB alone failed: %s", loader, errName(rc));
  unload(&b);
  printf("charged=%llu\n", (unsigned long long)charged);
  return 0;
}

/* A module's memory goes with its context: cuCtxDestroy gives its charge back. */
static int scenarioLoadContextDestroy(void) {
  if (setup() != 0) return 3;
  uint64_t used0 = containerUsed();
  CUcontext ctx;
  CUresult rc = p_cuCtxCreate_v2(&ctx, 0, 0);
  if (rc != CUDA_SUCCESS) return fail("cuCtxCreate_v2: %s", errName(rc));
  uint64_t withContext = containerUsed();
  Code a;
  if ((rc = load("data", 24 * MIB, &a)) != CUDA_SUCCESS) return fail("24 MiB of code failed: %s", errName(rc));
  if (containerUsed() != withContext + 24 * MIB) return fail("24 MiB of code in a created context not charged");
  if ((rc = p_cuCtxDestroy_v2(ctx)) != CUDA_SUCCESS) return fail("cuCtxDestroy_v2: %s", errName(rc));
  CUcontext primary;
  CUdevice dev;
  if (p_cuDeviceGet(&dev, 0) || p_cuDevicePrimaryCtxRetain(&primary, dev) || p_cuCtxSetCurrent(primary)) return 3;
  if (containerUsed() != used0)
    return fail("usage %llu after the context went, %llu before", (unsigned long long)containerUsed(),
                (unsigned long long)used0);
  /* All 56 MiB left fit again. */
  if ((rc = load("data", 56 * MIB, &a)) != CUDA_SUCCESS) return fail("56 MiB after the context went: %s", errName(rc));
  return 0;
}

/* ---- green contexts: their own state is charged like a context's overhead ---- */

/* Under a 64 MiB limit with the primary context (8 MiB) current: a green context takes its
 * 8 MiB; with 44 MiB allocated a second one does not fit and is refused with nothing left on
 * the device; destroying the first gives its 8 MiB back. */
static int scenarioGreenContext(void) {
  if (setup() != 0) return 3;
  CUdevResourceDesc desc = (CUdevResourceDesc)(uintptr_t)0x1000; /* the fake takes any */
  uint64_t used0 = containerUsed();
  CUgreenCtx a, b;
  CUresult rc = p_cuGreenCtxCreate(&a, desc, 0, 0);
  if (rc != CUDA_SUCCESS) return fail("a green context within the limit failed: %s", errName(rc));
  uint64_t charged = containerUsed() - used0;
  if (charged != 8 * MIB) return fail("a green context charged %llu bytes, not its 8 MiB", (unsigned long long)charged);
  CUdeviceptr p;
  if ((rc = p_cuMemAlloc_v2(&p, 44 * MIB)) != CUDA_SUCCESS) return fail("44 MiB failed: %s", errName(rc));
  uint64_t phys = physicalUsed();
  rc = p_cuGreenCtxCreate(&b, desc, 0, 0);
  if (rc != CUDA_ERROR_OUT_OF_MEMORY) return fail("a green context over the limit gave %s", errName(rc));
  if (physicalUsed() != phys) return fail("the refused green context left memory on the device");
  if ((rc = p_cuGreenCtxDestroy(a)) != CUDA_SUCCESS) return fail("cuGreenCtxDestroy: %s", errName(rc));
  if (containerUsed() != used0 + 44 * MIB) return fail("cuGreenCtxDestroy did not give its 8 MiB back");
  if ((rc = p_cuGreenCtxCreate(&b, desc, 0, 0)) != CUDA_SUCCESS)
    return fail("a green context after the first went: %s", errName(rc));
  p_cuGreenCtxDestroy(b);
  p_cuMemFree_v2(p);
  if (containerUsed() != used0) return fail("usage %llu at the end, %llu at the start",
                                            (unsigned long long)containerUsed(), (unsigned long long)used0);
  printf("charged=%llu\n", (unsigned long long)charged);
  return 0;
}

/* ---- the oldest ABIs of hooked functions ---- */

/* A float array of `rows` rows of 4 KiB by the 32-bit cuArrayCreate or cuArray3DCreate. */
static CUresult arrayV1(const char* how, const char* dims, unsigned rows, CUarray* out) {
  if (!strcmp(dims, "3d")) {
    __typeof__(&cuArray3DCreate) create = (__typeof__(&cuArray3DCreate))entry(how, "cuArray3DCreate", 2000);
    CUDA_ARRAY3D_DESCRIPTOR_v1 d = {1024, rows, 1, CU_AD_FORMAT_FLOAT, 1, 0};
    return create ? create(out, &d) : CUDA_ERROR_NOT_FOUND;
  }
  __typeof__(&cuArrayCreate) create = (__typeof__(&cuArrayCreate))entry(how, "cuArrayCreate", 2000);
  CUDA_ARRAY_DESCRIPTOR_v1 d = {1024, rows, CU_AD_FORMAT_FLOAT, 1};
  return create ? create(out, &d) : CUDA_ERROR_NOT_FOUND;
}

/* As pitch_v1, for the 32-bit array descriptors: 240 MiB refused under 64 MiB, 24 MiB charged
 * as the device takes it, 48 MiB more refused, cuArrayDestroy gives it back. */
static int scenarioArrayV1(const char* how, const char* dims) {
  if (setup() != 0) return 3;
  uint64_t used0 = containerUsed(), phys0 = physicalUsed();
  CUarray a, b;
  CUresult rc = arrayV1(how, dims, 61440, &b);
  if (rc != CUDA_ERROR_OUT_OF_MEMORY) return fail("%s %s: 240 MiB under a 64 MiB limit gave %s", how, dims, errName(rc));
  if (physicalUsed() != phys0) return fail("%s %s: the refused array took device memory", how, dims);
  if ((rc = arrayV1(how, dims, 6144, &a)) != CUDA_SUCCESS) return fail("%s %s: 24 MiB failed: %s", how, dims, errName(rc));
  uint64_t charged = containerUsed() - used0;
  if (charged != physicalUsed() - phys0)
    return fail("%s %s: charged %llu for %llu on the device", how, dims, (unsigned long long)charged,
                (unsigned long long)(physicalUsed() - phys0));
  if ((rc = arrayV1(how, dims, 12288, &b)) != CUDA_ERROR_OUT_OF_MEMORY)
    return fail("%s %s: 48 MiB more gave %s", how, dims, errName(rc));
  if ((rc = p_cuArrayDestroy(a)) != CUDA_SUCCESS) return fail("cuArrayDestroy: %s", errName(rc));
  if (containerUsed() != used0) return fail("%s %s: usage after cuArrayDestroy is not what it was", how, dims);
  printf("charged=%llu\n", (unsigned long long)charged);
  return 0;
}

/* cuCtxDestroy (v1) gives back what the context held, its overhead included. */
static int scenarioContextDestroyV1(const char* how) {
  if (setup() != 0) return 3;
  __typeof__(&cuCtxDestroy) destroyV1 = (__typeof__(&cuCtxDestroy))entry(how, "cuCtxDestroy", 2000);
  if (!destroyV1) return fail("%s: no cuCtxDestroy (v1)", how);
  uint64_t used0 = containerUsed();
  CUcontext ctx;
  CUresult rc = p_cuCtxCreate_v2(&ctx, 0, 0);
  if (rc != CUDA_SUCCESS) return fail("cuCtxCreate_v2: %s", errName(rc));
  CUdeviceptr p;
  if ((rc = p_cuMemAlloc_v2(&p, 24 * MIB)) != CUDA_SUCCESS) return fail("24 MiB: %s", errName(rc));
  if ((rc = destroyV1(ctx)) != CUDA_SUCCESS) return fail("%s: cuCtxDestroy (v1): %s", how, errName(rc));
  CUcontext primary;
  CUdevice dev;
  if (p_cuDeviceGet(&dev, 0) || p_cuDevicePrimaryCtxRetain(&primary, dev) || p_cuCtxSetCurrent(primary)) return 3;
  if (containerUsed() != used0)
    return fail("%s: usage %llu after cuCtxDestroy (v1), %llu before the context", how,
                (unsigned long long)containerUsed(), (unsigned long long)used0);
  return 0;
}

/* ---- graph allocation nodes added through cuGraphAddNode ---- */

typedef struct {
  CUgraph graph;
  CUgraphExec exec;
  CUdeviceptr ptr;
} GraphRun;

/* A graph with one allocation node of `bytes` added by cuGraphAddNode `variant` (v1 or v2),
 * instantiated (not launched). */
static CUresult graphBuild(const char* variant, size_t bytes, GraphRun* g, CUgraphNodeParams* params) {
  memset(g, 0, sizeof *g);
  CUresult rc = p_cuGraphCreate(&g->graph, 0);
  if (rc != CUDA_SUCCESS) return rc;
  memset(params, 0, sizeof *params);
  params->type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  params->alloc.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params->alloc.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params->alloc.bytesize = bytes;
  CUgraphNode node;
  rc = !strcmp(variant, "v2") ? p_cuGraphAddNode_v2(&node, g->graph, NULL, NULL, 0, params)
                              : p_cuGraphAddNode(&node, g->graph, NULL, 0, params);
  if (rc == CUDA_SUCCESS) rc = p_cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
  return rc;
}

/* The same, launched; the allocation is kept. */
static CUresult graphAlloc(const char* variant, size_t bytes, GraphRun* g) {
  CUgraphNodeParams params;
  CUresult rc = graphBuild(variant, bytes, g, &params);
  if (rc == CUDA_SUCCESS) rc = p_cuGraphLaunch(g->exec, NULL);
  if (rc == CUDA_SUCCESS) rc = p_cuStreamSynchronize(NULL);
  g->ptr = params.alloc.dptr;
  return rc;
}

static void graphFree(GraphRun* g) {
  if (g->exec) p_cuGraphExecDestroy(g->exec);
  if (g->graph) p_cuGraphDestroy(g->graph);
  memset(g, 0, sizeof *g);
}

/* Under 64 MiB: a 24 MiB allocation node runs and is charged as the device takes it; a graph
 * whose node would pass the limit is refused at its launch with nothing taken; freed and
 * trimmed, the memory is given back and that graph runs. */
static int scenarioGraphNode(const char* variant) {
  if (setup() != 0) return 3;
  uint64_t used0 = containerUsed(), phys0 = physicalUsed();
  GraphRun a, b;
  CUresult rc = graphAlloc(variant, 24 * MIB, &a);
  if (rc != CUDA_SUCCESS) return fail("%s: a 24 MiB allocation node failed: %s", variant, errName(rc));
  uint64_t charged = containerUsed() - used0;
  if (charged < 24 * MIB || charged != physicalUsed() - phys0)
    return fail("%s: charged %llu for %llu on the device", variant, (unsigned long long)charged,
                (unsigned long long)(physicalUsed() - phys0));
  uint64_t phys1 = physicalUsed();
  rc = graphAlloc(variant, 48 * MIB, &b);
  if (rc != CUDA_ERROR_OUT_OF_MEMORY) return fail("%s: a 48 MiB node over the limit gave %s", variant, errName(rc));
  if (physicalUsed() != phys1) return fail("%s: the refused launch took device memory", variant);
  CUdeviceptr kept = a.ptr;
  graphFree(&b);
  graphFree(&a);
  if ((rc = p_cuMemFree_v2(kept)) != CUDA_SUCCESS) return fail("cuMemFree of the graph allocation: %s", errName(rc));
  if ((rc = p_cuDeviceGraphMemTrim(0)) != CUDA_SUCCESS) return fail("cuDeviceGraphMemTrim: %s", errName(rc));
  if (containerUsed() != used0) return fail("%s: usage after free and trim is not what it was", variant);
  if ((rc = graphAlloc(variant, 48 * MIB, &b)) != CUDA_SUCCESS)
    return fail("%s: the 48 MiB node alone failed: %s", variant, errName(rc));
  printf("charged=%llu\n", (unsigned long long)charged);
  return 0;
}

/* ---- cuGraphUpload: it maps a graph's allocation memory before the launch ---- */

/* Under 64 MiB: uploading a graph with a 24 MiB allocation node (by cuGraphUpload or its
 * _ptsz twin) is charged what the device maps then; its launch charges nothing more; a graph
 * whose node would pass the limit is refused at its upload with nothing taken. */
static int scenarioGraphUpload(const char* which) {
  if (setup() != 0) return 3;
  __typeof__(&cuGraphUpload) upload = !strcmp(which, "ptsz") ? p_cuGraphUpload_ptsz : p_cuGraphUpload;
  if (!upload) return fail("no cuGraphUpload%s", !strcmp(which, "ptsz") ? "_ptsz" : "");
  uint64_t used0 = containerUsed(), phys0 = physicalUsed();
  GraphRun a, b;
  CUgraphNodeParams pa, pb;
  CUresult rc = graphBuild("v2", 24 * MIB, &a, &pa);
  if (rc == CUDA_SUCCESS) rc = upload(a.exec, NULL);
  if (rc != CUDA_SUCCESS) return fail("%s: uploading a 24 MiB allocation node failed: %s", which, errName(rc));
  uint64_t phys1 = physicalUsed();
  if (phys1 == phys0) return fail("%s: the fake driver mapped nothing at the upload", which);
  if (containerUsed() - used0 != phys1 - phys0)
    return fail("%s: the upload was charged %llu for %llu on the device", which,
                (unsigned long long)(containerUsed() - used0), (unsigned long long)(phys1 - phys0));
  if ((rc = p_cuGraphLaunch(a.exec, NULL)) != CUDA_SUCCESS || (rc = p_cuStreamSynchronize(NULL)) != CUDA_SUCCESS)
    return fail("%s: the uploaded graph's launch failed: %s", which, errName(rc));
  if (physicalUsed() != phys1 || containerUsed() - used0 != phys1 - phys0)
    return fail("%s: the launch after the upload changed the charge", which);
  rc = graphBuild("v2", 48 * MIB, &b, &pb);
  if (rc == CUDA_SUCCESS) rc = upload(b.exec, NULL);
  if (rc != CUDA_ERROR_OUT_OF_MEMORY)
    return fail("%s: uploading a 48 MiB node over the limit gave %s", which, errName(rc));
  if (physicalUsed() != phys1) return fail("%s: the refused upload took device memory", which);
  graphFree(&a);
  if ((rc = p_cuMemFree_v2(pa.alloc.dptr)) != CUDA_SUCCESS) return fail("cuMemFree: %s", errName(rc));
  if ((rc = p_cuDeviceGraphMemTrim(0)) != CUDA_SUCCESS) return fail("cuDeviceGraphMemTrim: %s", errName(rc));
  if (containerUsed() != used0) return fail("%s: usage after free and trim is not what it was", which);
  if ((rc = upload(b.exec, NULL)) != CUDA_SUCCESS)
    return fail("%s: the 48 MiB upload alone failed: %s", which, errName(rc));
  graphFree(&b);
  printf("charged=%llu\n", (unsigned long long)(phys1 - phys0));
  return 0;
}

/* ---- cuDevicePrimaryCtxRelease / cuDevicePrimaryCtxReset (v1, before CUDA 11.0) ---- */

/* 16 MiB allocated in the primary context, then the context's last release (or its reset)
 * by the v1 ABI: what it held is given back (retained again, the usage is what it was). */
static int scenarioPrimaryV1(const char* how, const char* op) {
  if (setup() != 0) return 3;
  int release = !strcmp(op, "release");
  const char* name = release ? "cuDevicePrimaryCtxRelease" : "cuDevicePrimaryCtxReset";
  __typeof__(&cuDevicePrimaryCtxRelease) call = (__typeof__(&cuDevicePrimaryCtxRelease))entry(how, name, 7000);
  if (!call) return fail("%s: no %s (v1)", how, name);
  uint64_t used0 = containerUsed();
  CUdeviceptr p;
  CUresult rc = p_cuMemAlloc_v2(&p, 16 * MIB);
  if (rc != CUDA_SUCCESS) return fail("16 MiB: %s", errName(rc));
  if ((rc = call(0)) != CUDA_SUCCESS) return fail("%s: %s (v1): %s", how, name, errName(rc));
  CUcontext primary;
  if (p_cuDevicePrimaryCtxRetain(&primary, 0) || p_cuCtxSetCurrent(primary)) return 3;
  if (containerUsed() != used0)
    return fail("%s: usage %llu after %s (v1), %llu before the allocation", how, (unsigned long long)containerUsed(),
                name, (unsigned long long)used0);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: coverage_probe <scenario> [args]\n");
    return 3;
  }
  const char* s = argv[1];
  const char* arg = argc > 2 ? argv[2] : "dlsym";
  if (!strcmp(s, "pitch_v1")) return scenarioPitchV1(arg);
  if (!strcmp(s, "load")) return scenarioLoad(arg);
  if (!strcmp(s, "load_ctxdestroy")) return scenarioLoadContextDestroy();
  if (!strcmp(s, "greenctx")) return scenarioGreenContext();
  if (!strcmp(s, "array_v1")) return scenarioArrayV1(arg, argc > 3 ? argv[3] : "2d");
  if (!strcmp(s, "ctxdestroy_v1")) return scenarioContextDestroyV1(arg);
  if (!strcmp(s, "graphnode")) return scenarioGraphNode(arg);
  if (!strcmp(s, "graphupload")) return scenarioGraphUpload(arg);
  if (!strcmp(s, "primary_v1")) return scenarioPrimaryV1(arg, argc > 3 ? argv[3] : "release");
  fprintf(stderr, "coverage_probe: unknown scenario %s\n", s);
  return 3;
}
