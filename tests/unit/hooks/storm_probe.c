/* One process of a container for the limiter's kill-storm test (kill_storm_test.cpp), run with
 * LD_PRELOAD=libvgpu.so against the fake driver:
 *   storm_probe churn   allocates and frees 4 MiB blocks (at most four held) until killed;
 *   storm_probe fill    allocates 1 MiB blocks until refused and prints "got=<bytes>";
 *   storm_probe hog     allocates 1 MiB blocks until refused, says "ready" and holds them until killed;
 *   storm_probe spin    asks for 4 MiB again and again without pause, as a program retrying an
 *                       out-of-memory might, says "ready" after its first try, until killed.
 * It dlopens libcuda.so.1 as a program linked against the driver would reach it. Exit code 0
 * ok, 3 setup failed (explained on stderr). */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vgpu/cuda/driver_api.h"

typedef CUresult (*InitFn)(unsigned int);
typedef CUresult (*RetainFn)(CUcontext*, CUdevice);
typedef CUresult (*SetCurrentFn)(CUcontext);
typedef CUresult (*AllocFn)(CUdeviceptr*, size_t);
typedef CUresult (*FreeFn)(CUdeviceptr);

#define MIB (1ull << 20)

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: storm_probe churn|fill\n");
    return 3;
  }
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (cuda == NULL) {
    fprintf(stderr, "storm_probe: %s\n", dlerror());
    return 3;
  }
  InitFn init = (InitFn)dlsym(cuda, "cuInit");
  RetainFn retain = (RetainFn)dlsym(cuda, "cuDevicePrimaryCtxRetain");
  SetCurrentFn setCurrent = (SetCurrentFn)dlsym(cuda, "cuCtxSetCurrent");
  AllocFn alloc = (AllocFn)dlsym(cuda, "cuMemAlloc_v2");
  FreeFn release = (FreeFn)dlsym(cuda, "cuMemFree_v2");
  CUcontext ctx = NULL;
  if (init == NULL || retain == NULL || setCurrent == NULL || alloc == NULL || release == NULL || init(0) != CUDA_SUCCESS ||
      retain(&ctx, 0) != CUDA_SUCCESS || setCurrent(ctx) != CUDA_SUCCESS) {
    fprintf(stderr, "storm_probe: no CUDA context\n");
    return 3;
  }
  if (strcmp(argv[1], "churn") == 0) {
    CUdeviceptr held[4] = {0, 0, 0, 0};
    printf("ready\n");
    fflush(stdout);
    for (unsigned i = 0;; ++i) {  // until killed
      CUdeviceptr* slot = &held[i % 4];
      if (*slot != 0) {
        release(*slot);
        *slot = 0;
      }
      if (alloc(slot, 4 * MIB) != CUDA_SUCCESS) {
        *slot = 0;
        usleep(1000);  // refused: back off as a program would, not spin on the region's lock
      }
    }
  }
  if (strcmp(argv[1], "hog") == 0 || strcmp(argv[1], "spin") == 0) {
    const int spin = strcmp(argv[1], "spin") == 0;
    CUdeviceptr p = 0;
    if (!spin)
      while (alloc(&p, MIB) == CUDA_SUCCESS) {
      }
    for (int said = 0;; said = 1) {  // until killed
      if (spin && alloc(&p, 4 * MIB) == CUDA_SUCCESS) release(p);
      if (!said) {
        printf("ready\n");
        fflush(stdout);
      }
      if (!spin) pause();
    }
  }
  if (strcmp(argv[1], "fill") == 0) {
    unsigned long long got = 0;
    CUdeviceptr p = 0;
    while (got < (1ull << 34) && alloc(&p, MIB) == CUDA_SUCCESS) got += MIB;
    printf("got=%llu\n", got);
    return 0;
  }
  fprintf(stderr, "storm_probe: unknown mode %s\n", argv[1]);
  return 3;
}
