// Device memory in the fake libcuda.so.1: finite, shared across processes, every path charged.

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include <gtest/gtest.h>

#include "child.h"
#include "fake_gpu_state.h"

namespace vgpu::fakegpu {
namespace {

using test::runChild;
using test::TempDir;

constexpr uint64_t kMiB = 1ull << 20;

// A 1 GiB device, so exhausting it costs nothing.
class FakeGpuMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    conf_ = dir_.write("gpus.conf",
                       "gpu uuid=GPU-11111111-2222-3333-4444-555555555555 name=\"Fake A\" memory_mib=1024 "
                       "sm_count=8 cc=8.6 pci_bus_id=00000000:3B:00.0\n"
                       "gpu memory_mib=2048\n");
    state_ = dir_.path() + "/state";
  }
  std::map<std::string, std::string> env() const {
    return {{"VGPU_FAKE_GPU_CONFIG", conf_}, {"VGPU_FAKE_GPU_STATE", state_}};
  }
  TempDir dir_;
  std::string conf_, state_;
};

// Opens the fake, cuInit, retains and sets device 0's primary context.
#define OPEN_DEVICE0()                                            \
  void* cuda = test::openLib("libcuda.so.1");                     \
  CU_FN(cuda, cuInit);                                            \
  CU_FN(cuda, cuDevicePrimaryCtxRetain);                          \
  CU_FN(cuda, cuCtxSetCurrent);                                   \
  CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);                         \
  CUcontext ctx0 = nullptr;                                       \
  CHILD_CHECK(cuDevicePrimaryCtxRetain(&ctx0, 0) == CUDA_SUCCESS); \
  CHILD_CHECK(cuCtxSetCurrent(ctx0) == CUDA_SUCCESS)

TEST_F(FakeGpuMemory, AllocationBeyondFreeMemoryFailsWithOutOfMemory) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuMemFree_v2);
    CU_FN(cuda, cuMemGetInfo_v2);
    size_t freeB = 0, total = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&freeB, &total) == CUDA_SUCCESS);
    CHILD_CHECK(total == 1024 * kMiB && freeB == total);
    CUdeviceptr a = 0, b = 0;
    CHILD_CHECK(cuMemAlloc_v2(&a, 700 * kMiB) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemGetInfo_v2(&freeB, &total) == CUDA_SUCCESS && freeB == 324 * kMiB);
    CHILD_CHECK(cuMemAlloc_v2(&b, 400 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHILD_CHECK(cuMemAlloc_v2(&b, 324 * kMiB) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAlloc_v2(&b, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    CHILD_CHECK(cuMemFree_v2(a) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemFree_v2(a) == CUDA_ERROR_INVALID_VALUE);  // double free
    CHILD_CHECK(cuMemGetInfo_v2(&freeB, &total) == CUDA_SUCCESS && freeB == 700 * kMiB);
    CHILD_CHECK(cuMemAlloc_v2(&a, 0) == CUDA_ERROR_INVALID_VALUE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, NeedsInitAndAContext) {
  auto r = runChild(env(), [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuMemAlloc_v2);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_NOT_INITIALIZED);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAlloc_v2(&p, 1) == CUDA_ERROR_INVALID_CONTEXT);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, CopiesAndMemsetReachTheMemory) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuMemcpyHtoD_v2);
    CU_FN(cuda, cuMemcpyDtoD_v2);
    CU_FN(cuda, cuMemcpyDtoH_v2);
    CU_FN(cuda, cuMemsetD8_v2);
    CUdeviceptr a = 0, b = 0;
    CHILD_CHECK(cuMemAlloc_v2(&a, 64) == CUDA_SUCCESS && cuMemAlloc_v2(&b, 64) == CUDA_SUCCESS);
    char in[64], out[64] = {};
    for (int i = 0; i < 64; ++i) in[i] = static_cast<char>(i);
    CHILD_CHECK(cuMemcpyHtoD_v2(a, in, 64) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemcpyDtoD_v2(b, a, 64) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemcpyDtoH_v2(out, b, 64) == CUDA_SUCCESS && std::memcmp(in, out, 64) == 0);
    CHILD_CHECK(cuMemsetD8_v2(b + 8, 0x5a, 8) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemcpyDtoH_v2(out, b, 64) == CUDA_SUCCESS && out[8] == 0x5a && out[15] == 0x5a && out[16] == 16);
    CHILD_CHECK(cuMemcpyHtoD_v2(a + 60, in, 8) == CUDA_ERROR_INVALID_VALUE);  // runs past the allocation

    CU_FN(cuda, cuStreamCreate);
    CU_FN(cuda, cuMemcpyHtoDAsync_v2);
    CU_FN(cuda, cuMemcpyDtoHAsync_v2);
    CU_FN(cuda, cuMemcpyAsync);
    CU_FN(cuda, cuMemsetD32Async);
    CU_FN(cuda, cuMemsetD32_v2);
    CU_FN(cuda, cuStreamSynchronize);
    CUstream s = nullptr;
    CHILD_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemsetD32Async(a, 0x01020304u, 16, s) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemcpyAsync(b, a, 64, s) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemcpyDtoHAsync_v2(out, b, 64, s) == CUDA_SUCCESS && cuStreamSynchronize(s) == CUDA_SUCCESS);
    unsigned int word = 0;
    std::memcpy(&word, out + 60, 4);
    CHILD_CHECK(word == 0x01020304u);
    CHILD_CHECK(cuMemcpyHtoDAsync_v2(a, in, 65, s) == CUDA_ERROR_INVALID_VALUE);
    CHILD_CHECK(cuMemsetD32_v2(a + 2, 0, 1) == CUDA_ERROR_INVALID_VALUE);  // misaligned

    CU_FN(cuda, cuMemHostRegister_v2);
    CU_FN(cuda, cuMemHostUnregister);
    CU_FN(cuda, cuMemGetInfo_v2);
    static char pinned[1 << 16];
    size_t f0 = 0, f1 = 0, t = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&f0, &t) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemHostRegister_v2(pinned, sizeof pinned, CU_MEMHOSTREGISTER_PORTABLE) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemHostRegister_v2(pinned + 100, 10, 0) == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CHILD_CHECK(cuMemGetInfo_v2(&f1, &t) == CUDA_SUCCESS && f1 == f0);  // host memory: nothing on the device
    CHILD_CHECK(cuMemHostUnregister(pinned) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemHostUnregister(pinned) == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, PitchAllocationChargesPitchTimesHeight) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAllocPitch_v2);
    CU_FN(cuda, cuMemGetInfo_v2);
    CU_FN(cuda, cuMemFree_v2);
    CUdeviceptr p = 0;
    size_t pitch = 0, freeB = 0, total = 0;
    CHILD_CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, 1000, 4) == CUDA_SUCCESS);
    CHILD_CHECK(pitch == 1024);  // rounded up to the 512-byte pitch alignment
    CHILD_CHECK(cuMemGetInfo_v2(&freeB, &total) == CUDA_SUCCESS && total - freeB == 1024 * 1000);
    CHILD_CHECK(cuMemFree_v2(p) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAllocPitch_v2(&p, &pitch, 1000, 10, 3) == CUDA_ERROR_INVALID_VALUE);  // element size
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, LegacyCuMemAllocGivesA32BitPointer) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    using LegacyAlloc = CUresult(unsigned int*, unsigned int);
    using LegacyFree = CUresult(unsigned int);
    auto* alloc = test::sym<LegacyAlloc>(cuda, "cuMemAlloc");
    auto* release = test::sym<LegacyFree>(cuda, "cuMemFree");
    CU_FN(cuda, cuMemGetInfo_v2);
    CHILD_CHECK(alloc != nullptr && release != nullptr);
    unsigned int p = 0;
    CHILD_CHECK(alloc(&p, 4096) == CUDA_SUCCESS && p != 0);
    std::memset(reinterpret_cast<void*>(static_cast<uintptr_t>(p)), 1, 4096);  // it is real memory
    size_t freeB = 0, total = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&freeB, &total) == CUDA_SUCCESS && total - freeB == 4096);
    CHILD_CHECK(release(p) == CUDA_SUCCESS);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, EveryDevicePathIsChargedAndHostMemoryIsNot) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemGetInfo_v2);
    CU_FN(cuda, cuMemAllocManaged);
    CU_FN(cuda, cuMemAllocAsync);
    CU_FN(cuda, cuMemFreeAsync);
    CU_FN(cuda, cuMemPoolCreate);
    CU_FN(cuda, cuMemAllocFromPoolAsync);
    CU_FN(cuda, cuMemPoolDestroy);
    CU_FN(cuda, cuMemPoolSetAttribute);
    CU_FN(cuda, cuMemPoolGetAttribute);
    CU_FN(cuda, cuMemPoolTrimTo);
    CU_FN(cuda, cuArrayCreate_v2);
    CU_FN(cuda, cuArray3DCreate_v2);
    CU_FN(cuda, cuArrayDestroy);
    CU_FN(cuda, cuMipmappedArrayCreate);
    CU_FN(cuda, cuMipmappedArrayDestroy);
    CU_FN(cuda, cuMemAllocHost_v2);
    CU_FN(cuda, cuMemHostAlloc);
    CU_FN(cuda, cuMemFreeHost);
    CU_FN(cuda, cuMemFree_v2);
    CU_FN(cuda, cuStreamSynchronize);
    auto used = [&] {
      size_t f = 0, t = 0;
      cuMemGetInfo_v2(&f, &t);
      return static_cast<uint64_t>(t - f);
    };
    CUdeviceptr p = 0, q = 0;
    // Managed memory is host memory until migrated: it may exceed the device and takes none of it.
    CHILD_CHECK(cuMemAllocManaged(&p, 3000 * kMiB, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS && used() == 0);
    std::memset(reinterpret_cast<void*>(p + 2000 * kMiB), 1, 4096);
    CHILD_CHECK(cuMemFree_v2(p) == CUDA_SUCCESS && used() == 0);
    CHILD_CHECK(cuMemAllocManaged(&p, 1, 7) == CUDA_ERROR_INVALID_VALUE);

    CHILD_CHECK(cuMemAllocAsync(&p, 5 * kMiB, nullptr) == CUDA_SUCCESS && used() == 5 * kMiB);
    // Freed into the pool; with release threshold 0 the pool gives it back at the next sync.
    CHILD_CHECK(cuMemFreeAsync(p, nullptr) == CUDA_SUCCESS && used() == 5 * kMiB);
    CHILD_CHECK(cuStreamSynchronize(nullptr) == CUDA_SUCCESS && used() == 0);

    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool = nullptr;
    CHILD_CHECK(cuMemPoolCreate(&pool, &props) == CUDA_SUCCESS);
    cuuint64_t keep = 8 * kMiB;
    CHILD_CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAllocFromPoolAsync(&p, 6 * kMiB, pool, nullptr) == CUDA_SUCCESS && used() == 6 * kMiB);
    CHILD_CHECK(cuMemFreeAsync(p, nullptr) == CUDA_SUCCESS && used() == 6 * kMiB);  // the pool keeps it
    cuuint64_t reserved = 0;
    CHILD_CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == CUDA_SUCCESS);
    CHILD_CHECK(reserved == 6 * kMiB);
    CHILD_CHECK(cuMemAllocFromPoolAsync(&p, 4 * kMiB, pool, nullptr) == CUDA_SUCCESS && used() == 6 * kMiB);
    CHILD_CHECK(cuMemFreeAsync(p, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamSynchronize(nullptr) == CUDA_SUCCESS && used() == 6 * kMiB);  // under the threshold
    CHILD_CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS && used() == 0);
    CHILD_CHECK(cuMemAllocFromPoolAsync(&q, 2 * kMiB, pool, nullptr) == CUDA_SUCCESS && used() == 2 * kMiB);
    CHILD_CHECK(cuMemPoolDestroy(pool) == CUDA_SUCCESS && used() == 2 * kMiB);  // still allocated
    CHILD_CHECK(cuMemFree_v2(q) == CUDA_SUCCESS && used() == 0);

    // Arrays: rows padded to 512 bytes, times height and depth (documented in README.md).
    CUDA_ARRAY_DESCRIPTOR d2{};
    d2.Width = 100;
    d2.Height = 10;
    d2.Format = CU_AD_FORMAT_FLOAT;
    d2.NumChannels = 4;
    CUarray arr = nullptr;
    CHILD_CHECK(cuArrayCreate_v2(&arr, &d2) == CUDA_SUCCESS && used() == 2048 * 10);
    CHILD_CHECK(cuArrayDestroy(arr) == CUDA_SUCCESS && used() == 0);
    CUDA_ARRAY3D_DESCRIPTOR d3{};
    d3.Width = 256;
    d3.Height = 4;
    d3.Depth = 2;
    d3.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    d3.NumChannels = 1;
    CHILD_CHECK(cuArray3DCreate_v2(&arr, &d3) == CUDA_SUCCESS && used() == 512 * 4 * 2);
    CHILD_CHECK(cuArrayDestroy(arr) == CUDA_SUCCESS && used() == 0);
    CUmipmappedArray mip = nullptr;
    d3.Depth = 0;
    d3.Width = 1024;
    d3.Height = 2;
    // Levels 1024x2, 512x1, 256x1: 1024*2 + 512 + 512 bytes.
    CHILD_CHECK(cuMipmappedArrayCreate(&mip, &d3, 3) == CUDA_SUCCESS && used() == 2048 + 512 + 512);
    CHILD_CHECK(cuMipmappedArrayDestroy(mip) == CUDA_SUCCESS && used() == 0);
    d2.Format = static_cast<CUarray_format>(0x7777);
    CHILD_CHECK(cuArrayCreate_v2(&arr, &d2) == CUDA_ERROR_INVALID_VALUE);

    void* h = nullptr;
    CHILD_CHECK(cuMemAllocHost_v2(&h, 64 * kMiB) == CUDA_SUCCESS && used() == 0);
    CHILD_CHECK(cuMemFreeHost(h) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemHostAlloc(&h, 64 * kMiB, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS && used() == 0);
    CHILD_CHECK(cuMemFreeHost(h) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemFreeHost(h) == CUDA_ERROR_INVALID_VALUE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// cuMemFreeAsync is stream-ordered: the pool gets the memory back when the device reaches
// the free, and gives it back to the device at the next synchronisation after that.
TEST_F(FakeGpuMemory, AStreamOrderedFreeHappensWhenTheDeviceReachesIt) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAllocAsync);
    CU_FN(cuda, cuMemFreeAsync);
    CU_FN(cuda, cuDeviceGetDefaultMemPool);
    CU_FN(cuda, cuMemPoolGetAttribute);
    CU_FN(cuda, cuMemPoolTrimTo);
    CU_FN(cuda, cuStreamCreate);
    CU_FN(cuda, cuStreamSynchronize);
    CU_FN(cuda, cuModuleLoadData);
    CU_FN(cuda, cuModuleGetFunction);
    CU_FN(cuda, cuLaunchKernel);
    auto* used = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceUsedBytes");
    CHILD_CHECK(used != nullptr);
    CUmodule mod = nullptr;
    CUfunction spin = nullptr;
    CHILD_CHECK(cuModuleLoadData(&mod, "x") == CUDA_SUCCESS && cuModuleGetFunction(&spin, mod, "spin") == CUDA_SUCCESS);
    CUmemoryPool pool = nullptr;
    CHILD_CHECK(cuDeviceGetDefaultMemPool(&pool, 0) == CUDA_SUCCESS);
    auto poolUsed = [&] {
      cuuint64_t v = ~0ull;
      return cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v) == CUDA_SUCCESS ? v : ~0ull;
    };
    CUstream s = nullptr;
    CHILD_CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAllocAsync(&p, 64 * kMiB, s) == CUDA_SUCCESS && used(0) == 64 * kMiB);
    uint64_t us = 300000;
    void* args[] = {&us};
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemFreeAsync(p, s) == CUDA_SUCCESS);
    // Queued behind a 300 ms kernel: still in use, nothing a trim could release.
    CHILD_CHECK(poolUsed() == 64 * kMiB && used(0) == 64 * kMiB);
    CHILD_CHECK(cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS && used(0) == 64 * kMiB);
    // A new allocation cannot reuse it yet: the pool grows.
    CUdeviceptr q = 0;
    CHILD_CHECK(cuMemAllocAsync(&q, 8 * kMiB, nullptr) == CUDA_SUCCESS && used(0) == 72 * kMiB);
    CHILD_CHECK(cuMemFreeAsync(q, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHILD_CHECK(poolUsed() == 0 && used(0) == 0);  // reached, and released at the synchronisation
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// The driver API reference (cuCtxDestroy): memory from cuMemCreate, cuMemAllocAsync and
// cuMemAllocFromPoolAsync is not associated with a context and is not freed with it.
TEST_F(FakeGpuMemory, DestroyingAContextLeavesPoolAndVirtualMemoryAllocations) {
  auto r = runChild(env(), [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuCtxCreate_v4);
    CU_FN(cuda, cuCtxDestroy_v2);
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuMemAllocAsync);
    CU_FN(cuda, cuMemFreeAsync);
    CU_FN(cuda, cuMemCreate);
    CU_FN(cuda, cuMemRelease);
    CU_FN(cuda, cuStreamSynchronize);
    auto* used = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceUsedBytes");
    CHILD_CHECK(used != nullptr && cuInit(0) == CUDA_SUCCESS);
    CUcontext a = nullptr, b = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&a, nullptr, 0, 0) == CUDA_SUCCESS);
    CUdeviceptr plain = 0, async = 0;
    CHILD_CHECK(cuMemAlloc_v2(&plain, 4 * kMiB) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemAllocAsync(&async, 10 * kMiB, nullptr) == CUDA_SUCCESS);
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h = 0;
    CHILD_CHECK(cuMemCreate(&h, 2 * kMiB, &prop, 0) == CUDA_SUCCESS && used(0) == 16 * kMiB);
    CHILD_CHECK(cuCtxDestroy_v2(a) == CUDA_SUCCESS && used(0) == 12 * kMiB);
    CHILD_CHECK(cuCtxCreate_v4(&b, nullptr, 0, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemFreeAsync(async, nullptr) == CUDA_SUCCESS && cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemRelease(h) == CUDA_SUCCESS && used(0) == 0);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, VirtualMemoryIsChargedAtCreateAndMapsRealMemory) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemGetInfo_v2);
    CU_FN(cuda, cuMemGetAllocationGranularity);
    CU_FN(cuda, cuMemCreate);
    CU_FN(cuda, cuMemRelease);
    CU_FN(cuda, cuMemAddressReserve);
    CU_FN(cuda, cuMemAddressFree);
    CU_FN(cuda, cuMemMap);
    CU_FN(cuda, cuMemUnmap);
    CU_FN(cuda, cuMemSetAccess);
    CU_FN(cuda, cuMemGetAllocationPropertiesFromHandle);
    CU_FN(cuda, cuMemExportToShareableHandle);
    CU_FN(cuda, cuMemImportFromShareableHandle);
    CU_FN(cuda, cuMemcpyHtoD_v2);
    auto used = [&] {
      size_t f = 0, t = 0;
      cuMemGetInfo_v2(&f, &t);
      return static_cast<uint64_t>(t - f);
    };
    CUmemAllocationProp prop{};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t gran = 0;
    CHILD_CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) == CUDA_SUCCESS);
    CHILD_CHECK(gran == 2 * kMiB);
    CUmemGenericAllocationHandle h = 0;
    CHILD_CHECK(cuMemCreate(&h, gran + 1, &prop, 0) == CUDA_ERROR_INVALID_VALUE);
    CHILD_CHECK(cuMemCreate(&h, 2 * gran, &prop, 0) == CUDA_SUCCESS && used() == 2 * gran);
    CUdeviceptr va = 0;
    CHILD_CHECK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0) == CUDA_SUCCESS && va % gran == 0);
    CHILD_CHECK(used() == 2 * gran);  // reserving address space takes no memory
    CHILD_CHECK(cuMemMap(va, 2 * gran, 0, h, 0) == CUDA_SUCCESS);
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHILD_CHECK(cuMemSetAccess(va, 2 * gran, &access, 1) == CUDA_SUCCESS);
    int v = 42;
    CHILD_CHECK(cuMemcpyHtoD_v2(va + gran, &v, sizeof v) == CUDA_SUCCESS);
    CUmemAllocationProp got{};
    CHILD_CHECK(cuMemGetAllocationPropertiesFromHandle(&got, h) == CUDA_SUCCESS && got.location.id == 0);
    int fd = -1;
    CHILD_CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS);
    CUmemGenericAllocationHandle imported = 0;
    CHILD_CHECK(cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == CUDA_SUCCESS);
    CHILD_CHECK(used() == 2 * gran);  // an import is the same physical memory
    CHILD_CHECK(cuMemGetAllocationPropertiesFromHandle(&got, imported) == CUDA_SUCCESS);
    CHILD_CHECK(got.location.type == CU_MEM_LOCATION_TYPE_DEVICE && got.location.id == 0);
    CHILD_CHECK(cuMemRelease(imported) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemRelease(h) == CUDA_SUCCESS && used() == 2 * gran);  // still mapped
    CHILD_CHECK(cuMemUnmap(va, 2 * gran) == CUDA_SUCCESS && used() == 0);
    CHILD_CHECK(cuMemAddressFree(va, 2 * gran) == CUDA_SUCCESS);
    close(fd);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, DestroyingAContextFreesItsMemory) {
  auto r = runChild(env(), [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuInit);
    CU_FN(cuda, cuCtxCreate_v4);
    CU_FN(cuda, cuCtxDestroy_v2);
    CU_FN(cuda, cuCtxGetCurrent);
    CU_FN(cuda, cuCtxGetDevice);
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuMemGetInfo_v2);
    CHILD_CHECK(cuInit(0) == CUDA_SUCCESS);
    CUcontext c = nullptr, cur = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 1) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == c);
    CUdevice d = -1;
    CHILD_CHECK(cuCtxGetDevice(&d) == CUDA_SUCCESS && d == 1);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 100 * kMiB) == CUDA_SUCCESS);
    size_t f = 0, t = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && t == 2048 * kMiB && t - f == 100 * kMiB);
    CU_FN(cuda, cuModuleLoadData);
    CU_FN(cuda, cuModuleGetFunction);
    CU_FN(cuda, cuLaunchKernel);
    CUmodule mod = nullptr;
    CUfunction spin = nullptr;
    CHILD_CHECK(cuModuleLoadData(&mod, "x") == CUDA_SUCCESS && cuModuleGetFunction(&spin, mod, "spin") == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxDestroy_v2(c) == CUDA_SUCCESS);
    CHILD_CHECK(cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == nullptr);
    auto* used = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceUsedBytes");
    CHILD_CHECK(used != nullptr && used(1) == 0);
    CU_FN(cuda, cuMemFree_v2);
    CHILD_CHECK(cuMemFree_v2(p) == CUDA_ERROR_INVALID_VALUE);  // went with the context
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 1) == CUDA_SUCCESS);
    uint64_t us = 1;
    void* args[] = {&us};
    CHILD_CHECK(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) == CUDA_ERROR_INVALID_HANDLE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// The driver API reference: a reset destroys the primary context's allocations and state but
// does not release it; releasing it afterwards is safe.
TEST_F(FakeGpuMemory, AResetPrimaryContextIsEmptyButStillRetained) {
  conf_ = dir_.write("ctx.conf", "gpu memory_mib=1024 context_mib=8\n");
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuDevicePrimaryCtxReset_v2);
    CU_FN(cuda, cuDevicePrimaryCtxRelease_v2);
    CU_FN(cuda, cuDevicePrimaryCtxGetState);
    auto* used = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceUsedBytes");
    CHILD_CHECK(used != nullptr);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 16 * kMiB) == CUDA_SUCCESS && used(0) == 24 * kMiB);
    CHILD_CHECK(cuDevicePrimaryCtxReset_v2(0) == CUDA_SUCCESS && used(0) == 0);
    unsigned flags = 0;
    int active = 1;
    CHILD_CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS && active == 0);
    CUcontext again = nullptr;
    CHILD_CHECK(cuDevicePrimaryCtxRetain(&again, 0) == CUDA_SUCCESS && again == ctx0 && used(0) == 8 * kMiB);
    CHILD_CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS && used(0) == 8 * kMiB);  // one retain left
    CHILD_CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS && used(0) == 0);
    CHILD_CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_ERROR_INVALID_CONTEXT);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, ContextsTakeTheirConfiguredOverhead) {
  conf_ = dir_.write("ctx.conf", "gpu memory_mib=1024 context_mib=300\n");
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemGetInfo_v2);
    CU_FN(cuda, cuDevicePrimaryCtxRelease_v2);
    CU_FN(cuda, cuCtxCreate_v4);
    size_t f = 0, t = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && t - f == 300 * kMiB);
    CUcontext c = nullptr;
    CHILD_CHECK(cuCtxCreate_v4(&c, nullptr, 0, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && t - f == 600 * kMiB);
    auto* used = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceUsedBytes");
    CHILD_CHECK(cuDevicePrimaryCtxRelease_v2(0) == CUDA_SUCCESS && used(0) == 300 * kMiB);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// Two processes share the device's physical memory through the state file.
TEST_F(FakeGpuMemory, MemoryIsSharedAcrossProcesses) {
  int toHolder[2], fromHolder[2];
  ASSERT_EQ(pipe(toHolder), 0);
  ASSERT_EQ(pipe(fromHolder), 0);
  int holder = test::spawnChild(env(), [&] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 600 * kMiB) == CUDA_SUCCESS);
    char c = 'r';
    CHILD_CHECK(write(fromHolder[1], &c, 1) == 1);
    CHILD_CHECK(read(toHolder[0], &c, 1) == 1);  // hold the memory until told to exit
    return 0;
  });
  char c = 0;
  ASSERT_EQ(read(fromHolder[0], &c, 1), 1);
  auto other = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuMemGetInfo_v2);
    size_t f = 0, t = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && f == 424 * kMiB);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 500 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CHILD_CHECK(cuMemAlloc_v2(&p, 424 * kMiB) == CUDA_SUCCESS);
    return 0;
  });
  EXPECT_EQ(other.exitCode, 0) << other.stderrText;
  ASSERT_EQ(write(toHolder[1], &c, 1), 1);
  auto held = test::waitChild(holder);
  EXPECT_EQ(held.exitCode, 0) << held.stderrText;
  // Both exited: the driver gave everything back.
  auto after = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemGetInfo_v2);
    size_t f = 0, t = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && f == t);
    return 0;
  });
  EXPECT_EQ(after.exitCode, 0) << after.stderrText;
  for (int fd : {toHolder[0], toHolder[1], fromHolder[0], fromHolder[1]}) close(fd);
}

TEST_F(FakeGpuMemory, MemoryOfAKilledProcessComesBack) {
  int fromHolder[2];
  ASSERT_EQ(pipe(fromHolder), 0);
  int holder = test::spawnChild(env(), [&] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 900 * kMiB) == CUDA_SUCCESS);
    char c = 'r';
    CHILD_CHECK(write(fromHolder[1], &c, 1) == 1);
    pause();
    return 0;
  });
  char c = 0;
  ASSERT_EQ(read(fromHolder[0], &c, 1), 1);
  kill(holder, SIGKILL);
  test::waitChild(holder);
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 1000 * kMiB) == CUDA_SUCCESS);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
  close(fromHolder[0]);
  close(fromHolder[1]);
}

// A slot left by a dead process whose pid was since reused (here: our own pid with another
// start time) is that dead process's, and its memory comes back.
TEST_F(FakeGpuMemory, AStaleSlotOfAReusedPidIsReclaimed) {
  auto create = runChild(env(), [] {
    OPEN_DEVICE0();
    return 0;
  });
  ASSERT_EQ(create.exitCode, 0) << create.stderrText;
  auto r = runChild(env(), [this] {
    int fd = open(state_.c_str(), O_RDWR);
    CHILD_CHECK(fd >= 0);
    void* m = mmap(nullptr, sizeof(vgpu_fake_gpu_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHILD_CHECK(m != MAP_FAILED);
    auto* st = static_cast<vgpu_fake_gpu_state*>(m);
    CHILD_CHECK(st->magic == VGPU_FAKE_STATE_MAGIC && st->device_count == 2);
    vgpu_fake_process_slot& slot = st->procs[VGPU_FAKE_STATE_MAX_PROCS - 1];
    slot.start_ticks = 1;  // no process of ours started one tick after boot
    slot.used_bytes[0] = 900 * kMiB;
    __atomic_add_fetch(&st->devices[0].used_bytes, 900 * kMiB, __ATOMIC_SEQ_CST);
    __atomic_store_n(&slot.pid, static_cast<int32_t>(getpid()), __ATOMIC_SEQ_CST);
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 1000 * kMiB) == CUDA_SUCCESS);
    CHILD_CHECK(st->devices[0].used_bytes == 1000 * kMiB);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST_F(FakeGpuMemory, IpcImportMapsTheExportersMemoryWithoutCharging) {
  int toExporter[2], fromExporter[2];
  ASSERT_EQ(pipe(toExporter), 0);
  ASSERT_EQ(pipe(fromExporter), 0);
  int exporter = test::spawnChild(env(), [&] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuMemAlloc_v2);
    CU_FN(cuda, cuMemcpyHtoD_v2);
    CU_FN(cuda, cuIpcGetMemHandle);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuMemAlloc_v2(&p, 10 * kMiB) == CUDA_SUCCESS);
    int v = 1234;
    CHILD_CHECK(cuMemcpyHtoD_v2(p, &v, sizeof v) == CUDA_SUCCESS);
    CUipcMemHandle h{};
    CHILD_CHECK(cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS);
    CHILD_CHECK(write(fromExporter[1], &h, sizeof h) == static_cast<ssize_t>(sizeof h));
    char c = 0;
    CHILD_CHECK(read(toExporter[0], &c, 1) == 1);
    return 0;
  });
  CUipcMemHandle h{};
  ASSERT_EQ(read(fromExporter[0], &h, sizeof h), static_cast<ssize_t>(sizeof h));
  auto r = runChild(env(), [&] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuIpcOpenMemHandle_v2);
    CU_FN(cuda, cuIpcCloseMemHandle);
    CU_FN(cuda, cuMemcpyDtoH_v2);
    CU_FN(cuda, cuMemGetInfo_v2);
    CUdeviceptr p = 0;
    CHILD_CHECK(cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_SUCCESS);
    int v = 0;
    CHILD_CHECK(cuMemcpyDtoH_v2(&v, p, sizeof v) == CUDA_SUCCESS && v == 1234);
    size_t f = 0, t = 0;
    CHILD_CHECK(cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS && t - f == 10 * kMiB);  // only the exporter's
    CHILD_CHECK(cuIpcCloseMemHandle(p) == CUDA_SUCCESS);
    CUipcMemHandle bogus{};
    CHILD_CHECK(cuIpcOpenMemHandle_v2(&p, bogus, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) == CUDA_ERROR_INVALID_HANDLE);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
  char c = 'x';
  ASSERT_EQ(write(toExporter[1], &c, 1), 1);
  auto e = test::waitChild(exporter);
  EXPECT_EQ(e.exitCode, 0) << e.stderrText;
  for (int fd : {toExporter[0], toExporter[1], fromExporter[0], fromExporter[1]}) close(fd);
}

TEST_F(FakeGpuMemory, GraphMemoryIsTakenWhenTheGraphRunsAndKeptUntilTrimmed) {
  auto r = runChild(env(), [] {
    OPEN_DEVICE0();
    CU_FN(cuda, cuGraphCreate);
    CU_FN(cuda, cuGraphAddMemAllocNode);
    CU_FN(cuda, cuGraphAddMemFreeNode);
    CU_FN(cuda, cuGraphInstantiateWithFlags);
    CU_FN(cuda, cuGraphLaunch);
    CU_FN(cuda, cuGraphExecDestroy);
    CU_FN(cuda, cuGraphDestroy);
    CU_FN(cuda, cuStreamSynchronize);
    CU_FN(cuda, cuMemFree_v2);
    CU_FN(cuda, cuDeviceGraphMemTrim);
    CU_FN(cuda, cuDeviceGetGraphMemAttribute);
    CU_FN(cuda, cuDeviceSetGraphMemAttribute);
    auto* used = test::sym<uint64_t(int)>(cuda, "vgpuFakeDeviceUsedBytes");
    CHILD_CHECK(used != nullptr);
    CUgraph g = nullptr;
    CHILD_CHECK(cuGraphCreate(&g, 0) == CUDA_SUCCESS);
    CUDA_MEM_ALLOC_NODE_PARAMS p{};
    p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.poolProps.location.id = 0;
    p.bytesize = 256 * kMiB;
    CUgraphNode alloc = nullptr;
    CHILD_CHECK(cuGraphAddMemAllocNode(&alloc, g, nullptr, 0, &p) == CUDA_SUCCESS && p.dptr != 0);
    CHILD_CHECK(used(0) == 0);  // adding the node takes nothing
    CUgraphExec exec = nullptr;
    CHILD_CHECK(cuGraphInstantiateWithFlags(&exec, g, 0) == CUDA_SUCCESS && used(0) == 0);
    CHILD_CHECK(cuGraphLaunch(exec, nullptr) == CUDA_SUCCESS && used(0) == 256 * kMiB);
    CHILD_CHECK(cuGraphLaunch(exec, nullptr) == CUDA_ERROR_INVALID_VALUE);  // never freed
    auto attr = [&](CUgraphMem_attribute a) {
      cuuint64_t v = ~0ull;
      return cuDeviceGetGraphMemAttribute(0, a, &v) == CUDA_SUCCESS ? v : ~0ull;
    };
    CHILD_CHECK(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) == 256 * kMiB);
    // Freed, the memory stays mapped for graphs until trimmed.
    CHILD_CHECK(cuMemFree_v2(p.dptr) == CUDA_SUCCESS && used(0) == 256 * kMiB);
    CHILD_CHECK(attr(CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT) == 0);
    CHILD_CHECK(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 256 * kMiB);
    CHILD_CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS && used(0) == 0);
    CHILD_CHECK(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT) == 0);
    CHILD_CHECK(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) == 256 * kMiB);
    cuuint64_t zero = 0;
    CHILD_CHECK(cuDeviceSetGraphMemAttribute(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH, &zero) == CUDA_SUCCESS);
    CHILD_CHECK(attr(CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH) == 0);
    CHILD_CHECK(cuGraphExecDestroy(exec) == CUDA_SUCCESS);

    // With a free node in the same graph the allocation lives only while the graph runs; the
    // memory behind it stays with the graph allocator, reused by the next launch.
    CUgraphNode freeNode = nullptr;
    CHILD_CHECK(cuGraphAddMemFreeNode(&freeNode, g, &alloc, 1, p.dptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuGraphInstantiateWithFlags(&exec, g, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuGraphLaunch(exec, nullptr) == CUDA_SUCCESS && used(0) == 256 * kMiB);
    CHILD_CHECK(cuGraphLaunch(exec, nullptr) == CUDA_SUCCESS && used(0) == 256 * kMiB);
    CHILD_CHECK(cuStreamSynchronize(nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(cuGraphExecDestroy(exec) == CUDA_SUCCESS && used(0) == 256 * kMiB);
    CHILD_CHECK(cuDeviceGraphMemTrim(0) == CUDA_SUCCESS && used(0) == 0);

    // A graph whose allocation does not fit fails at launch with out-of-memory.
    CUgraph big = nullptr;
    CHILD_CHECK(cuGraphCreate(&big, 0) == CUDA_SUCCESS);
    p.bytesize = 2048 * kMiB;
    CHILD_CHECK(cuGraphAddMemAllocNode(&alloc, big, nullptr, 0, &p) == CUDA_SUCCESS);
    CUgraphExec bigExec = nullptr;
    CHILD_CHECK(cuGraphInstantiateWithFlags(&bigExec, big, 0) == CUDA_SUCCESS);
    CHILD_CHECK(cuGraphLaunch(bigExec, nullptr) == CUDA_ERROR_OUT_OF_MEMORY && used(0) == 0);
    CHILD_CHECK(cuGraphDestroy(g) == CUDA_SUCCESS && cuGraphDestroy(big) == CUDA_SUCCESS);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu
