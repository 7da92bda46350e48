// Fake libcuda.so.1: CUDA IPC handles. A handle names the exporter's memfd, which the importer
// maps; the memory stays while any process has it (shared_objects.cpp).

#include "driver.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace vgpu::fakegpu {
namespace {

constexpr uint32_t kIpcMagic = 0x56495043;  // "VIPC"

struct IpcPayload {
  uint32_t magic;
  int32_t pid;
  int32_t fd;
  int32_t dev;
  uint64_t size;
  uint64_t object;  // the memfd's inode: a reused fd number gives another handle
};
static_assert(sizeof(IpcPayload) <= CU_IPC_HANDLE_SIZE);

CUresult ipcOpen(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned flags) {
  Context* ctx = nullptr;
  if (CUresult r = requireContext(ctx)) return r;
  if (pdptr == nullptr || (flags & ~static_cast<unsigned>(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) != 0)
    return CUDA_ERROR_INVALID_VALUE;
  IpcPayload p{};
  std::memcpy(&p, handle.reserved, sizeof p);
  if (p.magic != kIpcMagic || p.size == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (p.pid == static_cast<int32_t>(getpid())) return CUDA_ERROR_INVALID_CONTEXT;
  auto& drv = Driver::get();
  {
    // Opened in this context already: the same address, one more reference (cuIpcCloseMemHandle).
    std::lock_guard lock(drv.mu);
    for (auto& [base, open] : drv.allocations) {
      if (open.kind == AllocKind::kIpcImport && open.object != 0 && open.object == p.object && open.ctx == ctx) {
        ++open.ipcRefs;
        *pdptr = static_cast<CUdeviceptr>(base);
        return CUDA_SUCCESS;
      }
    }
  }
  // The exporting process or its allocation may be gone.
  Allocation a;
  if (CUresult r = mapOtherProcessMemory(p.pid, p.fd, p.size, CUDA_ERROR_INVALID_HANDLE, a)) return r;
  std::lock_guard lock(drv.mu);
  a.dev = p.dev;
  a.ctx = ctx;
  a.kind = AllocKind::kIpcImport;
  if (drv.shared()->holdObject(p.object)) a.object = p.object;  // it stays while this process has it open
  drv.allocations[a.base] = a;
  *pdptr = static_cast<CUdeviceptr>(a.base);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace vgpu::fakegpu

using namespace vgpu::fakegpu;

extern "C" {

CUresult cuIpcGetMemHandle(CUipcMemHandle* pHandle, CUdeviceptr dptr) {
  if (CUresult r = checkInit()) return r;
  if (pHandle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto it = drv.allocations.find(static_cast<uintptr_t>(dptr));
  if (it == drv.allocations.end() || (it->second.kind != AllocKind::kDevice && it->second.kind != AllocKind::kPitch))
    return CUDA_ERROR_INVALID_VALUE;  // only cuMemAlloc'd memory can be exported this way
  Allocation& a = it->second;
  if (a.object == 0 && a.charged != 0 && drv.shared()->exportObject(inodeOf(a.fd), a.dev, a.charged))
    a.object = inodeOf(a.fd);
  IpcPayload p{kIpcMagic, static_cast<int32_t>(getpid()), a.fd, a.dev, a.size, inodeOf(a.fd)};
  std::memset(pHandle, 0, sizeof *pHandle);
  std::memcpy(pHandle->reserved, &p, sizeof p);
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  return ipcOpen(pdptr, handle, flags);
}
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr* pdptr, CUipcMemHandle handle, unsigned int flags) {
  return ipcOpen(pdptr, handle, flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  if (CUresult r = checkInit()) return r;
  auto& drv = Driver::get();
  std::lock_guard lock(drv.mu);
  auto it = drv.allocations.find(static_cast<uintptr_t>(dptr));
  if (it == drv.allocations.end() || it->second.kind != AllocKind::kIpcImport) return CUDA_ERROR_INVALID_VALUE;
  if (it->second.ipcRefs > 0) {
    --it->second.ipcRefs;  // opened more than once: the last close unmaps it
    return CUDA_SUCCESS;
  }
  freeAllocation(it);
  return CUDA_SUCCESS;
}

}  // extern "C"
