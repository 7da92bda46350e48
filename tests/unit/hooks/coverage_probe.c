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

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: coverage_probe <scenario> [args]\n");
    return 3;
  }
  const char* s = argv[1];
  const char* arg = argc > 2 ? argv[2] : "dlsym";
  if (!strcmp(s, "pitch_v1")) return scenarioPitchV1(arg);
  fprintf(stderr, "coverage_probe: unknown scenario %s\n", s);
  return 3;
}
