// Per-call cost added by libvgpu.so: the same driver calls made straight to the fake
// libcuda and through libvgpu's wrappers, in one process (libvgpu is dlopened, not
// preloaded, so both paths can be timed side by side).
//
//   vgpu_limiter_bench                          no compute limit
//   CUDA_DEVICE_SM_LIMIT=50 vgpu_limiter_bench  launches go through the throttle

#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "vgpu/cuda/driver_api.h"

namespace {

struct Api {
  decltype(&cuInit) init = nullptr;
  decltype(&cuDeviceGet) deviceGet = nullptr;
  decltype(&cuDevicePrimaryCtxRetain) retain = nullptr;
  decltype(&cuCtxSetCurrent) setCurrent = nullptr;
  decltype(&cuModuleLoadData) moduleLoad = nullptr;
  decltype(&cuModuleGetFunction) getFunction = nullptr;
  decltype(&cuLaunchKernel) launch = nullptr;
  decltype(&cuMemAlloc_v2) alloc = nullptr;
  decltype(&cuMemFree_v2) free = nullptr;
  decltype(&cuMemGetInfo_v2) memGetInfo = nullptr;
  decltype(&cuCtxSynchronize) sync = nullptr;
};

template <class T>
void load(void* lib, void* fallback, const char* name, T* out) {
  void* p = dlsym(lib, name);
  if (p == nullptr) p = dlsym(fallback, name);
  *out = reinterpret_cast<T>(p);
}

Api loadApi(void* lib, void* driver) {
  Api a;
  load(lib, driver, "cuInit", &a.init);
  load(lib, driver, "cuDeviceGet", &a.deviceGet);
  load(lib, driver, "cuDevicePrimaryCtxRetain", &a.retain);
  load(lib, driver, "cuCtxSetCurrent", &a.setCurrent);
  load(lib, driver, "cuModuleLoadData", &a.moduleLoad);
  load(lib, driver, "cuModuleGetFunction", &a.getFunction);
  load(lib, driver, "cuLaunchKernel", &a.launch);
  load(lib, driver, "cuMemAlloc_v2", &a.alloc);
  load(lib, driver, "cuMemFree_v2", &a.free);
  load(lib, driver, "cuMemGetInfo_v2", &a.memGetInfo);
  load(lib, driver, "cuCtxSynchronize", &a.sync);
  return a;
}

struct Setup {
  Api direct;
  Api vgpu;
  CUfunction spin = nullptr;
  bool ok = false;

  Setup() {
    char region[] = "/tmp/vgpu-bench-region-XXXXXX";
    int fd = mkstemp(region);
    if (fd >= 0) close(fd);
    unlink(region);
    setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE", region, 0);
    setenv("CUDA_DEVICE_MEMORY_LIMIT", "64g", 0);
    void* driver = dlopen(VGPU_FAKE_CUDA, RTLD_NOW | RTLD_GLOBAL);
    void* vgpu = dlopen(VGPU_LIBVGPU, RTLD_NOW | RTLD_LOCAL);
    if (driver == nullptr || vgpu == nullptr) {
      fprintf(stderr, "bench: %s\n", dlerror());
      return;
    }
    direct = loadApi(driver, driver);
    this->vgpu = loadApi(vgpu, driver);
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    static const char image[] = "spin";
    ok = this->vgpu.init(0) == CUDA_SUCCESS && direct.deviceGet(&dev, 0) == CUDA_SUCCESS &&
         this->vgpu.retain(&ctx, dev) == CUDA_SUCCESS && direct.setCurrent(ctx) == CUDA_SUCCESS &&
         direct.moduleLoad(&mod, image) == CUDA_SUCCESS && direct.getFunction(&spin, mod, "spin") == CUDA_SUCCESS;
    if (!ok) fprintf(stderr, "bench: driver setup failed\n");
  }
};

Setup& setup() {
  static Setup s;
  return s;
}

void launches(benchmark::State& state, bool throughVgpu) {
  Setup& s = setup();
  if (!s.ok) return state.SkipWithError("no driver");
  const Api& api = throughVgpu ? s.vgpu : s.direct;
  uint64_t micros = 0;  // a kernel that takes no simulated time: only the call is measured
  void* params[] = {&micros};
  for (auto _ : state) {
    benchmark::DoNotOptimize(api.launch(s.spin, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  }
  api.sync();
}

void allocFree(benchmark::State& state, bool throughVgpu) {
  Setup& s = setup();
  if (!s.ok) return state.SkipWithError("no driver");
  const Api& api = throughVgpu ? s.vgpu : s.direct;
  CUdeviceptr p;
  for (auto _ : state) {
    api.alloc(&p, 1 << 20);
    api.free(p);
  }
}

void memGetInfo(benchmark::State& state, bool throughVgpu) {
  Setup& s = setup();
  if (!s.ok) return state.SkipWithError("no driver");
  const Api& api = throughVgpu ? s.vgpu : s.direct;
  size_t free = 0, total = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(api.memGetInfo(&free, &total));
  }
}

}  // namespace

// VGPU_BENCH_ITERATIONS=N runs each case exactly N times, so that an instruction count
// from `valgrind --tool=callgrind` divides into a per-call figure.
int main(int argc, char** argv) {
  const char* fixed = getenv("VGPU_BENCH_ITERATIONS");
  for (bool vgpu : {false, true}) {
    const char* path = vgpu ? "vgpu" : "direct";
    benchmark::internal::Benchmark* cases[] = {
        benchmark::RegisterBenchmark((std::string("launches/") + path).c_str(), launches, vgpu),
        benchmark::RegisterBenchmark((std::string("allocFree/") + path).c_str(), allocFree, vgpu),
        benchmark::RegisterBenchmark((std::string("memGetInfo/") + path).c_str(), memGetInfo, vgpu)};
    if (fixed != nullptr) {
      for (auto* c : cases) c->Iterations(strtoll(fixed, nullptr, 10));
    }
  }
  benchmark::Initialize(&argc, argv);
  setup();  // loading and initialising the libraries is not part of any measurement
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
