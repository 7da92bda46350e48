// Loading device code into the fake: cuModuleLoad / LoadData / LoadDataEx / LoadFatBinary,
// cuModuleUnload, cuLibraryLoadData / LoadFromFile, cuLibraryUnload, and the device memory a
// loaded module takes. A real module's code, constant banks and __device__ globals occupy
// device memory from its load until its unload (or its context's end); the fake takes what
// the image says: an image (or the file's first bytes) holding `device_bytes=<n>` takes n
// bytes of its context's device, any other image none. A device without n free bytes refuses
// the load with CUDA_ERROR_OUT_OF_MEMORY, as the real driver does.

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "driver.h"

namespace vgpu::fakegpu {
namespace {

constexpr size_t kImageScan = 4096;  // how far into an image the fake looks for its size

// The device memory an image asks for (0 when it names none).
uint64_t imageBytes(const char* text, size_t len) {
  std::string s(text, strnlen(text, len));
  size_t at = s.find("device_bytes=");
  return at == std::string::npos ? 0 : strtoull(s.c_str() + at + 13, nullptr, 10);
}

// The same for an image file: its first bytes, or false when it cannot be read.
bool fileBytes(const char* path, uint64_t* bytes) {
  FILE* f = path != nullptr ? fopen(path, "rb") : nullptr;
  if (f == nullptr) return false;
  char buf[kImageScan + 1] = {};
  size_t n = fread(buf, 1, kImageScan, f);
  fclose(f);
  *bytes = imageBytes(buf, n);
  return true;
}

// A module of `bytes` in the current context (nullptr context: none is current).
CUresult loadModule(Module** out, uint64_t bytes, bool needContext) {
  Context* ctx = nullptr;
  if (CUresult r = needContext ? requireContext(ctx) : checkInit()) return r;
  if (!needContext) ctx = currentContext();
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  if (ctx == nullptr) {
    *out = nullptr;
    return CUDA_SUCCESS;
  }
  if (bytes != 0 && !drv.shared()->charge(ctx->dev, bytes)) return CUDA_ERROR_OUT_OF_MEMORY;
  auto* m = new Module();
  m->ctx = ctx;
  m->deviceBytes = bytes;
  drv.modules.insert(m);
  *out = m;
  return CUDA_SUCCESS;
}

CUresult moduleFrom(CUmodule* module, const void* image) {
  if (module == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  CUresult r = loadModule(&m, imageBytes(static_cast<const char*>(image), kImageScan), true);
  if (r == CUDA_SUCCESS) *module = reinterpret_cast<CUmodule>(m);
  return r;
}

CUresult libraryFrom(CUlibrary* library, uint64_t bytes) {
  Module* m = nullptr;
  if (CUresult r = loadModule(&m, bytes, false)) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* lib = new Library();
  lib->module = m;
  drv.libraries.insert(lib);
  *library = reinterpret_cast<CUlibrary>(lib);
  return CUDA_SUCCESS;
}

}  // namespace

void destroyModule(Module* m) {
  auto& drv = Driver::get();
  for (auto it = drv.functions.begin(); it != drv.functions.end();) {
    if ((*it)->mod == m) {
      delete *it;
      it = drv.functions.erase(it);
    } else {
      ++it;
    }
  }
  for (Library* lib : drv.libraries) {
    if (lib->module == m) lib->module = nullptr;
  }
  if (m->deviceBytes != 0) drv.shared()->uncharge(m->ctx->dev, m->deviceBytes);
  drv.modules.erase(m);
  delete m;
}

}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) { return moduleFrom(module, image); }

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                            void** optionValues) {
  if (numOptions != 0 && (options == nullptr || optionValues == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  return moduleFrom(module, image);
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) { return moduleFrom(module, fatCubin); }

CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  if (module == nullptr || fname == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = checkInit()) return r;
  uint64_t bytes = 0;
  if (!fileBytes(fname, &bytes)) return CUDA_ERROR_FILE_NOT_FOUND;
  Module* m = nullptr;
  CUresult r = loadModule(&m, bytes, true);
  if (r == CUDA_SUCCESS) *module = reinterpret_cast<CUmodule>(m);
  return r;
}

CUresult cuModuleUnload(CUmodule hmod) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* m = reinterpret_cast<Module*>(hmod);
  if (!drv.modules.count(m)) return CUDA_ERROR_INVALID_HANDLE;
  destroyModule(m);
  return CUDA_SUCCESS;
}

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions, void** jitOptionsValues,
                           unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,
                           unsigned int numLibraryOptions) {
  if (library == nullptr || code == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((numJitOptions != 0 && (jitOptions == nullptr || jitOptionsValues == nullptr)) ||
      (numLibraryOptions != 0 && (libraryOptions == nullptr || libraryOptionValues == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return libraryFrom(library, imageBytes(static_cast<const char*>(code), kImageScan));
}

CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                               void** libraryOptionValues, unsigned int numLibraryOptions) {
  if (library == nullptr || fileName == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if ((numJitOptions != 0 && (jitOptions == nullptr || jitOptionsValues == nullptr)) ||
      (numLibraryOptions != 0 && (libraryOptions == nullptr || libraryOptionValues == nullptr))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = checkInit()) return r;
  uint64_t bytes = 0;
  if (!fileBytes(fileName, &bytes)) return CUDA_ERROR_FILE_NOT_FOUND;
  return libraryFrom(library, bytes);
}

CUresult cuLibraryUnload(CUlibrary library) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto* lib = reinterpret_cast<Library*>(library);
  if (!drv.libraries.count(lib)) return CUDA_ERROR_INVALID_HANDLE;
  if (lib->module != nullptr) destroyModule(lib->module);  // unless it went with its context
  drv.libraries.erase(lib);
  delete lib;
  return CUDA_SUCCESS;
}

}  // extern "C"
