// cuGetProcAddress in the fake libcuda.so.1 returns the variant the real driver would, as
// an entry point of its own (not the exported symbol), and an older driver has nothing newer.

#include <gtest/gtest.h>

#include <cstring>

#include "child.h"
#include "fake_gpu_control.h"

namespace vgpu::fakegpu {
namespace {

struct ProcCase {
  const char* symbol;
  int version;
  cuuint64_t flags;
  const char* expect;  // exported name of the function returned; nullptr: none
  CUresult result;
  CUdriverProcAddressQueryResult status;
};

constexpr cuuint64_t kDefault = CU_GET_PROC_ADDRESS_DEFAULT;
constexpr cuuint64_t kLegacy = CU_GET_PROC_ADDRESS_LEGACY_STREAM;
constexpr cuuint64_t kPtds = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;

const ProcCase kCases[] = {
    {"cuMemAlloc", 3000, kDefault, "cuMemAlloc", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAlloc", 3020, kDefault, "cuMemAlloc_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAlloc", 13000, kPtds, "cuMemAlloc_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemGetInfo", 3000, kDefault, "cuMemGetInfo", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemGetInfo", 12000, kDefault, "cuMemGetInfo_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxCreate", 3000, kDefault, "cuCtxCreate", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxCreate", 11000, kDefault, "cuCtxCreate_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxCreate", 12000, kDefault, "cuCtxCreate_v3", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxCreate", 13000, kDefault, "cuCtxCreate_v4", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 12000, kLegacy, "cuLaunchKernel", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 12000, kDefault, "cuLaunchKernel", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 12000, kPtds, "cuLaunchKernel_ptsz", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernel", 6050, kPtds, "cuLaunchKernel", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchKernelEx", 12000, kPtds, "cuLaunchKernelEx_ptsz", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchCooperativeKernel", 12000, kPtds, "cuLaunchCooperativeKernel_ptsz", CUDA_SUCCESS,
     CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuLaunchCooperativeKernel", 8000, kPtds, nullptr, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuCtxSynchronize", 12080, kDefault, "cuCtxSynchronize", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuCtxSynchronize", 13000, kDefault, "cuCtxSynchronize_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemcpyHtoD", 12000, kPtds, "cuMemcpyHtoD_v2_ptds", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemcpyHtoD", 12000, kLegacy, "cuMemcpyHtoD_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocAsync", 12000, kPtds, "cuMemAllocAsync_ptsz", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocAsync", 12000, kLegacy, "cuMemAllocAsync", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGraphLaunch", 12000, kPtds, "cuGraphLaunch_ptsz", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuStreamSynchronize", 12000, kPtds, "cuStreamSynchronize_ptsz", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuEventElapsedTime", 12000, kDefault, "cuEventElapsedTime", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuEventElapsedTime", 12080, kDefault, "cuEventElapsedTime_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcOpenMemHandle", 10000, kDefault, "cuIpcOpenMemHandle", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuIpcOpenMemHandle", 11000, kDefault, "cuIpcOpenMemHandle_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGraphInstantiate", 11000, kDefault, "cuGraphInstantiate_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGraphInstantiate", 12000, kDefault, "cuGraphInstantiateWithFlags", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGetProcAddress", 11030, kDefault, "cuGetProcAddress", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuGetProcAddress", 12000, kDefault, "cuGetProcAddress_v2", CUDA_SUCCESS, CU_GET_PROC_ADDRESS_SUCCESS},
    {"cuMemAllocAsync", 11000, kDefault, nullptr, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT},
    {"cuNoSuchFunction", 12000, kDefault, nullptr, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
    {"cuMemAlloc_v2", 12000, kDefault, nullptr, CUDA_ERROR_NOT_FOUND, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
    {"cuMemAlloc", 14000, kDefault, nullptr, CUDA_ERROR_INVALID_VALUE, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
    {"cuMemAlloc", 12000, 1u << 5, nullptr, CUDA_ERROR_INVALID_VALUE, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND},
};

TEST(FakeGpuProcAddress, ReturnsTheVariantForVersionAndFlags) {
  auto r = test::runChild({}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuGetProcAddress_v2);
    using V1 = CUresult(const char*, void**, int, cuuint64_t);
    auto* v1 = test::sym<V1>(cuda, "cuGetProcAddress");
    auto* nameOf = test::sym<decltype(vgpuFakeProcName)>(cuda, "vgpuFakeProcName");
    CHILD_CHECK(v1 != nullptr && nameOf != nullptr);
    auto sameName = [&](void* fn, const char* want) {
      const char* got = nameOf(fn);
      return want == nullptr ? fn == nullptr : got != nullptr && std::strcmp(got, want) == 0;
    };
    int failures = 0;
    for (const ProcCase& c : kCases) {
      void* fn = reinterpret_cast<void*>(1);
      CUdriverProcAddressQueryResult status = static_cast<CUdriverProcAddressQueryResult>(99);
      CUresult res = cuGetProcAddress_v2(c.symbol, &fn, c.version, c.flags, &status);
      void* fn1 = reinterpret_cast<void*>(1);
      CUresult res1 = v1(c.symbol, &fn1, c.version, c.flags);
      if (res != c.result || status != c.status || !sameName(fn, c.expect) || res1 != c.result ||
          !sameName(fn1, c.expect)) {
        std::fprintf(stderr, "%s %d flags=%llu: got %d/%d/%s (v1 %d/%s), want %d/%d/%s\n", c.symbol, c.version,
                     static_cast<unsigned long long>(c.flags), res, status, fn ? nameOf(fn) : "null", res1,
                     fn1 ? nameOf(fn1) : "null", c.result, c.status, c.expect ? c.expect : "null");
        ++failures;
      }
    }
    void* fn = nullptr;
    CHILD_CHECK(cuGetProcAddress_v2(nullptr, &fn, 12000, kDefault, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHILD_CHECK(cuGetProcAddress_v2("cuInit", nullptr, 12000, kDefault, nullptr) == CUDA_ERROR_INVALID_VALUE);
    return failures;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST(FakeGpuProcAddress, WorksBeforeCuInit) {
  auto r = test::runChild({}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuGetProcAddress_v2);
    auto* nameOf = test::sym<decltype(vgpuFakeProcName)>(cuda, "vgpuFakeProcName");
    void* fn = nullptr;
    CHILD_CHECK(cuGetProcAddress_v2("cuInit", &fn, 12000, kDefault, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(std::strcmp(nameOf(fn), "cuInit") == 0);
    CHILD_CHECK(reinterpret_cast<CUresult (*)(unsigned)>(fn)(0) == CUDA_SUCCESS);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// As from the real driver, what cuGetProcAddress hands out is the driver's own entry point,
// not the exported symbol: a library preloaded to interpose the exports does not see it.
TEST(FakeGpuProcAddress, HandsOutTheDriversOwnEntryPointsNotTheExports) {
  auto r = test::runChild({}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuGetProcAddress_v2);
    auto* nameOf = test::sym<decltype(vgpuFakeProcName)>(cuda, "vgpuFakeProcName");
    void* fn = nullptr;
    CHILD_CHECK(cuGetProcAddress_v2("cuDriverGetVersion", &fn, 12000, kDefault, nullptr) == CUDA_SUCCESS);
    CHILD_CHECK(fn != nullptr && fn != dlsym(cuda, "cuDriverGetVersion"));
    CHILD_CHECK(std::strcmp(nameOf(fn), "cuDriverGetVersion") == 0);
    CHILD_CHECK(std::strcmp(nameOf(dlsym(cuda, "cuDriverGetVersion")), "cuDriverGetVersion") == 0);
    CHILD_CHECK(nameOf(reinterpret_cast<void*>(&std::strcmp)) == nullptr);
    int version = 0;
    CHILD_CHECK(reinterpret_cast<CUresult (*)(int*)>(fn)(&version) == CUDA_SUCCESS && version == 13000);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

// Entry points newer than CUDA 11.4, by the version that introduced them. The R470-like fake
// (lib/fakegpu-r470) exports none of them and its cuGetProcAddress never returns one; the
// default fake has them all. Runs against whichever fake is on LD_LIBRARY_PATH (ctest runs
// it against both).
TEST(FakeGpuDriverVersion, ExportsNothingNewerThanItself) {
  auto r = test::runChild({}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    void* nvml = test::openLib("libnvidia-ml.so.1");
    CU_FN(cuda, cuDriverGetVersion);
    CU_FN(cuda, cuGetProcAddress);
    auto* nameOf = test::sym<decltype(vgpuFakeProcName)>(cuda, "vgpuFakeProcName");
    int driver = 0;
    CHILD_CHECK(cuDriverGetVersion(&driver) == CUDA_SUCCESS);
    CHILD_CHECK(driver == 13000 || driver == 11040);
    struct Newer {
      const char* name;
      const char* base;
      int version;
    } newer[] = {
        {"cuArrayGetMemoryRequirements", "cuArrayGetMemoryRequirements", 11060},
        {"cuLaunchKernelEx", "cuLaunchKernelEx", 11060},
        {"cuLaunchKernelEx_ptsz", "cuLaunchKernelEx", 11060},
        {"cuStreamWaitValue32_v2", "cuStreamWaitValue32", 11070},
        {"cuStreamWriteValue32_v2", "cuStreamWriteValue32", 11070},
        {"cuGetProcAddress_v2", "cuGetProcAddress", 12000},
        {"cuGraphInstantiateWithParams", "cuGraphInstantiateWithParams", 12000},
        {"cuCtxCreate_v4", "cuCtxCreate", 12050},
        {"cuEventElapsedTime_v2", "cuEventElapsedTime", 12080},
        {"cuCtxSynchronize_v2", "cuCtxSynchronize", 13000},
    };
    int failures = 0;
    for (const Newer& n : newer) {
      bool exported = dlsym(cuda, n.name) != nullptr;
      void* fn = nullptr;
      for (cuuint64_t flags : {CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) {
        void* f = nullptr;
        if (cuGetProcAddress(n.base, &f, driver, flags) == CUDA_SUCCESS && f && std::strcmp(nameOf(f), n.name) == 0)
          fn = f;
      }
      if (exported != (n.version <= driver) || (fn != nullptr) != (n.version <= driver)) {
        std::fprintf(stderr, "driver %d: %s (CUDA %d) exported=%d, from cuGetProcAddress=%d\n", driver, n.name,
                     n.version, exported, fn != nullptr);
        ++failures;
      }
    }
    // The older equivalents are there in both.
    for (const char* old : {"cuEventElapsedTime", "cuGetProcAddress", "cuCtxCreate_v3", "cuStreamWaitValue32"})
      CHILD_CHECK(dlsym(cuda, old) != nullptr);
    CHILD_CHECK((dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2") != nullptr) == (driver > 11040));
    CHILD_CHECK(dlsym(nvml, "nvmlDeviceGetMemoryInfo") != nullptr);
    CU_FN(nvml, nvmlInit_v2);
    CU_FN(nvml, nvmlSystemGetCudaDriverVersion);
    int nvmlCuda = 0;
    CHILD_CHECK(nvmlInit_v2() == NVML_SUCCESS && nvmlSystemGetCudaDriverVersion(&nvmlCuda) == NVML_SUCCESS);
    CHILD_CHECK(nvmlCuda == driver);
    return failures;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

TEST(FakeGpuProcAddress, ErrorNamesAndStrings) {
  auto r = test::runChild({}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    CU_FN(cuda, cuGetErrorName);
    CU_FN(cuda, cuGetErrorString);
    const char* s = nullptr;
    CHILD_CHECK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS &&
                std::string(s) == "CUDA_ERROR_OUT_OF_MEMORY");
    CHILD_CHECK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s) == CUDA_SUCCESS && std::string(s) == "out of memory");
    CHILD_CHECK(cuGetErrorName(static_cast<CUresult>(12345), &s) == CUDA_ERROR_INVALID_VALUE && s == nullptr);
    return 0;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu

#include <elf.h>

#include <fstream>
#include <iterator>
#include <regex>
#include <vector>

namespace vgpu::fakegpu {
namespace {

// The dynamic symbols a shared library defines, read from its ELF file.
std::vector<std::string> definedDynamicSymbols(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> img((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  if (img.size() < sizeof(Elf64_Ehdr)) return out;
  auto* eh = reinterpret_cast<const Elf64_Ehdr*>(img.data());
  auto* sh = reinterpret_cast<const Elf64_Shdr*>(img.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM) continue;
    const char* names = img.data() + sh[sh[i].sh_link].sh_offset;
    auto* syms = reinterpret_cast<const Elf64_Sym*>(img.data() + sh[i].sh_offset);
    for (size_t k = 0; k < sh[i].sh_size / sizeof(Elf64_Sym); ++k) {
      if (syms[k].st_shndx != SHN_UNDEF && ELF64_ST_TYPE(syms[k].st_info) == STT_FUNC)
        out.emplace_back(names + syms[k].st_name);
    }
  }
  return out;
}

// Every driver function the fake exports is what cuGetProcAddress gives for its base name at
// some version, with or without the per-thread flag: the table misses nothing that exists.
TEST(FakeGpuProcAddress, ReachesEveryExportedDriverFunction) {
  auto r = test::runChild({}, [] {
    void* cuda = test::openLib("libcuda.so.1");
    Dl_info info{};
    CHILD_CHECK(dladdr(dlsym(cuda, "cuInit"), &info) != 0);
    std::vector<std::string> exported = definedDynamicSymbols(info.dli_fname);
    CHILD_CHECK(exported.size() > 100);
    CU_FN(cuda, cuGetProcAddress_v2);
    std::regex suffix("(_v[0-9]+)?(_ptsz|_ptds)?$");
    int missing = 0;
    auto* nameOf = test::sym<decltype(vgpuFakeProcName)>(cuda, "vgpuFakeProcName");
    CU_FN(cuda, cuDriverGetVersion);
    int driver = 0;
    CHILD_CHECK(cuDriverGetVersion(&driver) == CUDA_SUCCESS);
    for (const std::string& name : exported) {
      if (name.rfind("cu", 0) != 0) continue;
      std::string base = std::regex_replace(name, suffix, "");
      if (name == "cuGraphInstantiateWithFlags") base = name;
      bool found = false;
      for (int version = 2000; version <= driver && !found; version += 10) {
        for (cuuint64_t flags : {CU_GET_PROC_ADDRESS_LEGACY_STREAM, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) {
          void* fn = nullptr;
          if (cuGetProcAddress_v2(base.c_str(), &fn, version, flags, nullptr) == CUDA_SUCCESS && fn != nullptr &&
              name == nameOf(fn))
            found = true;
        }
      }
      if (!found) {
        std::fprintf(stderr, "%s (base %s) is exported but cuGetProcAddress never returns it\n", name.c_str(),
                     base.c_str());
        ++missing;
      }
    }
    return missing;
  });
  EXPECT_EQ(r.exitCode, 0) << r.stderrText;
}

}  // namespace
}  // namespace vgpu::fakegpu
