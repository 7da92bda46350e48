// Loading device code: cuModuleLoad*, cuLibraryLoad* and their unloads. A module's code,
// constant banks and __device__ globals take device memory the API never states (a 1 GiB
// __device__ array is 1 GiB at load): what each load took is measured and charged to the
// current context (driver_taken.h), a load that does not fit is unloaded again and refused
// with CUDA_ERROR_OUT_OF_MEMORY, and the unload, or the context's end, gives it back.

#include "driver_taken.h"
#include "runtime.h"

using namespace vgpu;

namespace {

// A module loaded into the current context by `load`; unloaded again if it does not fit.
template <class F>
CUresult moduleLoad(CUmodule* module, F&& load) {
  if (module == nullptr) return load();
  return taken::charge(
      Kind::kModule, load, [&] { real::cuModuleUnload(*module); }, [&] { return *module; });
}

// A library: context-independent, it is loaded into the current context (if any) now and into
// other contexts as they use it; what this load took in the current one is charged.
template <class F>
CUresult libraryLoad(CUlibrary* library, F&& load) {
  if (library == nullptr || real::cuLibraryUnload == nullptr) return load();
  return taken::charge(
      Kind::kLibrary, load, [&] { real::cuLibraryUnload(*library); }, [&] { return *library; });
}

}  // namespace

extern "C" {

CUresult cuModuleLoad(CUmodule* module, const char* fname) {
  VGPU_ENTER_CUDA(cuModuleLoad);
  return moduleLoad(module, [&] { return real::cuModuleLoad(module, fname); });
}

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  VGPU_ENTER_CUDA(cuModuleLoadData);
  return moduleLoad(module, [&] { return real::cuModuleLoadData(module, image); });
}

CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int numOptions, CUjit_option* options,
                            void** optionValues) {
  VGPU_ENTER_CUDA(cuModuleLoadDataEx);
  return moduleLoad(module, [&] { return real::cuModuleLoadDataEx(module, image, numOptions, options, optionValues); });
}

CUresult cuModuleLoadFatBinary(CUmodule* module, const void* fatCubin) {
  VGPU_ENTER_CUDA(cuModuleLoadFatBinary);
  return moduleLoad(module, [&] { return real::cuModuleLoadFatBinary(module, fatCubin); });
}

CUresult cuModuleUnload(CUmodule hmod) {
  VGPU_ENTER_CUDA(cuModuleUnload);
  return taken::release(Kind::kModule, hmod, [&] { return real::cuModuleUnload(hmod); });
}

CUresult cuLibraryLoadData(CUlibrary* library, const void* code, CUjit_option* jitOptions, void** jitOptionsValues,
                           unsigned int numJitOptions, CUlibraryOption* libraryOptions, void** libraryOptionValues,
                           unsigned int numLibraryOptions) {
  VGPU_ENTER_CUDA(cuLibraryLoadData);
  return libraryLoad(library, [&] {
    return real::cuLibraryLoadData(library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                                   libraryOptionValues, numLibraryOptions);
  });
}

CUresult cuLibraryLoadFromFile(CUlibrary* library, const char* fileName, CUjit_option* jitOptions,
                               void** jitOptionsValues, unsigned int numJitOptions, CUlibraryOption* libraryOptions,
                               void** libraryOptionValues, unsigned int numLibraryOptions) {
  VGPU_ENTER_CUDA(cuLibraryLoadFromFile);
  return libraryLoad(library, [&] {
    return real::cuLibraryLoadFromFile(library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
                                       libraryOptionValues, numLibraryOptions);
  });
}

CUresult cuLibraryUnload(CUlibrary library) {
  VGPU_ENTER_CUDA(cuLibraryUnload);
  return taken::release(Kind::kLibrary, library, [&] { return real::cuLibraryUnload(library); });
}

}  // extern "C"
