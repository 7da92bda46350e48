// The workload of the end-to-end test: a CUDA driver-API program as a user would run it in
// a container. It loads libcuda.so.1 by soname (whatever the container's loader finds; with
// /etc/ld.so.preload naming libvgpu.so, its wrappers come first), creates a context on
// device 0, and tries to take `bytes` and then one byte more.
//
// Usage: vgpu_e2e_cuda_app <bytes>
// stdout, one key=value per line: total= free= (cuMemGetInfo before), alloc= extra= (the
// CUresult of cuMemAlloc(bytes) and of cuMemAlloc(1) after it), then "holding". It keeps
// the memory until stdin closes, so the test can read the usage from outside, then frees
// everything and exits 0. Exit 3: the driver could not be set up (reason on stderr).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "vgpu/cuda/driver_api.h"

namespace {

template <class Fn>
Fn lookup(void* lib, const char* name) {
  auto fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (fn == nullptr) {
    std::fprintf(stderr, "cuda_app: %s not found in libcuda.so.1\n", name);
    std::exit(3);
  }
  return fn;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: vgpu_e2e_cuda_app <bytes>\n");
    return 3;
  }
  const size_t bytes = std::strtoull(argv[1], nullptr, 10);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW);
  if (lib == nullptr) {
    std::fprintf(stderr, "cuda_app: %s\n", dlerror());
    return 3;
  }
  auto cuInit = lookup<decltype(&::cuInit)>(lib, "cuInit");
  auto cuDeviceGet = lookup<decltype(&::cuDeviceGet)>(lib, "cuDeviceGet");
  auto cuCtxCreate = lookup<decltype(&::cuCtxCreate_v2)>(lib, "cuCtxCreate_v2");
  auto cuCtxDestroy = lookup<decltype(&::cuCtxDestroy_v2)>(lib, "cuCtxDestroy_v2");
  auto cuMemGetInfo = lookup<decltype(&::cuMemGetInfo_v2)>(lib, "cuMemGetInfo_v2");
  auto cuMemAlloc = lookup<decltype(&::cuMemAlloc_v2)>(lib, "cuMemAlloc_v2");
  auto cuMemFree = lookup<decltype(&::cuMemFree_v2)>(lib, "cuMemFree_v2");

  CUdevice device = 0;
  CUcontext context = nullptr;
  if (CUresult r = cuInit(0); r != CUDA_SUCCESS) return std::fprintf(stderr, "cuda_app: cuInit: %d\n", r), 3;
  if (CUresult r = cuDeviceGet(&device, 0); r != CUDA_SUCCESS)
    return std::fprintf(stderr, "cuda_app: cuDeviceGet: %d\n", r), 3;
  if (CUresult r = cuCtxCreate(&context, 0, device); r != CUDA_SUCCESS)
    return std::fprintf(stderr, "cuda_app: cuCtxCreate: %d\n", r), 3;

  size_t freeBytes = 0, totalBytes = 0;
  const CUresult info = cuMemGetInfo(&freeBytes, &totalBytes);
  std::printf("info=%d\ntotal=%zu\nfree=%zu\n", info, totalBytes, freeBytes);
  CUdeviceptr big = 0, extra = 0;
  const CUresult bigResult = cuMemAlloc(&big, bytes);
  const CUresult extraResult = cuMemAlloc(&extra, 1);
  std::printf("alloc=%d\nextra=%d\nholding\n", bigResult, extraResult);
  std::fflush(stdout);

  char buf[64];
  while (read(0, buf, sizeof buf) > 0) {
  }
  if (bigResult == CUDA_SUCCESS) cuMemFree(big);
  if (extraResult == CUDA_SUCCESS) cuMemFree(extra);
  cuCtxDestroy(context);
  return 0;
}
