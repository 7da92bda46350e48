/* One CUDA process of the container for the sharing probe (share_probe.c): it loads the
 * driver as an application does (with or without libvgpu.so preloaded) and runs each step the
 * scenario sends it, answering with the CUresult and what the step made. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "share_probe.h"

/* ---- messages ---- */

int sendWithFd(int sock, const void* buf, size_t len, int fd) {
  struct iovec iov = {(void*)buf, len};
  struct msghdr msg = {0};
  char ctrl[CMSG_SPACE(sizeof(int))];
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (fd >= 0) {
    memset(ctrl, 0, sizeof ctrl);
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof ctrl;
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  return sendmsg(sock, &msg, 0) == (ssize_t)len ? 0 : -1;
}

int recvWithFd(int sock, void* buf, size_t len, int* fd) {
  struct iovec iov = {buf, len};
  struct msghdr msg = {0};
  char ctrl[CMSG_SPACE(sizeof(int))];
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  if (fd) *fd = -1;
  ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  if (n != (ssize_t)len) return -1;
  struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
  if (c && c->cmsg_type == SCM_RIGHTS && fd) memcpy(fd, CMSG_DATA(c), sizeof(int));
  return 0;
}


/* ---- the worker: one CUDA process of the container ---- */

#define FN(name) static __typeof__(&name) p_##name;
FN(cuInit)
FN(cuDeviceGet)
FN(cuDevicePrimaryCtxRetain)
FN(cuCtxSetCurrent)
FN(cuCtxGetCurrent)
FN(cuMemGetInfo_v2)
FN(cuMemAlloc_v2)
FN(cuMemFree_v2)
FN(cuIpcGetMemHandle)
FN(cuIpcOpenMemHandle_v2)
FN(cuIpcCloseMemHandle)
FN(cuMemCreate)
FN(cuMemRelease)
FN(cuMemAddressReserve)
FN(cuMemAddressFree)
FN(cuMemMap)
FN(cuMemUnmap)
FN(cuMemSetAccess)
FN(cuMemExportToShareableHandle)
FN(cuMemImportFromShareableHandle)
FN(cuMemRetainAllocationHandle)
FN(cuMemAllocHost_v2)
FN(cuMemHostAlloc)
FN(cuMemFreeHost)
FN(cuMemHostRegister_v2)
FN(cuMemHostUnregister)
FN(cuCtxEnablePeerAccess)
FN(cuMemsetD8_v2)
FN(cuMulticastCreate)
FN(cuMulticastAddDevice)
FN(cuMulticastBindMem)
FN(cuCtxCreate_v2)
FN(cuCtxDestroy_v2)
FN(cuMemPoolCreate)
FN(cuMemPoolDestroy)
FN(cuMemAllocFromPoolAsync)
FN(cuMemFreeAsync)
FN(cuStreamSynchronize)
FN(cuMemPoolExportToShareableHandle)
FN(cuMemPoolImportFromShareableHandle)
FN(cuMemPoolExportPointer)
FN(cuMemPoolImportPointer)
#undef FN
static uint64_t (*p_physical)(int);
static CUcontext g_ctx[2];

static int loadCuda(void) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) return -1;
#define LOAD(name) p_##name = (__typeof__(p_##name))dlsym(h, #name);
  LOAD(cuInit) LOAD(cuDeviceGet) LOAD(cuDevicePrimaryCtxRetain) LOAD(cuCtxSetCurrent) LOAD(cuCtxGetCurrent)
  LOAD(cuMemGetInfo_v2) LOAD(cuMemAlloc_v2) LOAD(cuMemFree_v2) LOAD(cuIpcGetMemHandle) LOAD(cuIpcOpenMemHandle_v2)
  LOAD(cuIpcCloseMemHandle) LOAD(cuMemCreate) LOAD(cuMemRelease) LOAD(cuMemAddressReserve) LOAD(cuMemAddressFree)
  LOAD(cuMemMap) LOAD(cuMemUnmap) LOAD(cuMemSetAccess) LOAD(cuMemExportToShareableHandle)
  LOAD(cuMemImportFromShareableHandle) LOAD(cuMemRetainAllocationHandle) LOAD(cuMemAllocHost_v2) LOAD(cuMemHostAlloc)
  LOAD(cuMemFreeHost) LOAD(cuMemHostRegister_v2) LOAD(cuMemHostUnregister) LOAD(cuCtxEnablePeerAccess)
  LOAD(cuMemsetD8_v2) LOAD(cuMulticastCreate) LOAD(cuMulticastAddDevice) LOAD(cuMulticastBindMem)
  LOAD(cuCtxCreate_v2) LOAD(cuCtxDestroy_v2) LOAD(cuMemPoolCreate) LOAD(cuMemPoolDestroy) LOAD(cuMemAllocFromPoolAsync)
  LOAD(cuMemFreeAsync) LOAD(cuStreamSynchronize) LOAD(cuMemPoolExportToShareableHandle)
  LOAD(cuMemPoolImportFromShareableHandle) LOAD(cuMemPoolExportPointer) LOAD(cuMemPoolImportPointer)
#undef LOAD
  p_physical = (uint64_t(*)(int))dlsym(h, "vgpuFakeDeviceUsedBytes");
  return p_cuInit && p_physical && p_cuMemRetainAllocationHandle ? 0 : -1;
}

/* Reserves `bytes` of address space, maps `handle` there and makes it accessible from `dev`. */
static CUresult mapAt(CUmemGenericAllocationHandle handle, size_t bytes, int dev, CUdeviceptr* out) {
  CUresult rc = p_cuMemAddressReserve(out, bytes, 0, 0, 0);
  if (rc == CUDA_SUCCESS) rc = p_cuMemMap(*out, bytes, 0, handle, 0);
  if (rc == CUDA_SUCCESS) {
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = dev;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    rc = p_cuMemSetAccess(*out, bytes, &a, 1);
    if (rc == CUDA_SUCCESS) rc = p_cuMemsetD8_v2(*out, 0x5a, bytes < MIB ? bytes : MIB); /* it is really there */
  } else if (*out) {
    p_cuMemAddressFree(*out, bytes);
    *out = 0;
  }
  return rc;
}

/* Host memory of every kind the driver has: none of it is device memory. */
static CUresult hostMemory(void) {
  void *a = NULL, *b = NULL;
  static char registered[1 << 16] __attribute__((aligned(4096)));
  CUresult rc = p_cuMemAllocHost_v2(&a, 8 * MIB);
  if (rc == CUDA_SUCCESS) rc = p_cuMemHostAlloc(&b, 8 * MIB, CU_MEMHOSTALLOC_PORTABLE);
  if (rc == CUDA_SUCCESS) rc = p_cuMemHostRegister_v2(registered, sizeof registered, 0);
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr p = 0;
  if (rc == CUDA_SUCCESS) rc = p_cuMemCreate(&h, 32 * MIB, &prop, 0);
  if (rc == CUDA_SUCCESS) rc = p_cuMemAddressReserve(&p, 32 * MIB, 0, 0, 0);
  if (rc == CUDA_SUCCESS) rc = p_cuMemMap(p, 32 * MIB, 0, h, 0);
  return rc;
}

static void reply(int sock, CUresult rc, int64_t v1, int64_t v2, const void* data, int fd) {
  Reply r;
  memset(&r, 0, sizeof r);
  r.rc = rc;
  r.v1 = v1;
  r.v2 = v2;
  if (data) memcpy(r.data, data, sizeof r.data);
  if (sendWithFd(sock, &r, sizeof r, fd) != 0) _exit(3);
}

int workerMain(int sock) {
  Msg m;
  int fd;
  while (recvWithFd(sock, &m, sizeof m, &fd) == 0) {
    CUresult rc = CUDA_SUCCESS;
    if (!strcmp(m.op, "quit")) {
      reply(sock, CUDA_SUCCESS, 0, 0, NULL, -1);
      return 0;
    } else if (!strcmp(m.op, "init")) {
      /* Device m.a's primary context, current; a second device's too (peer access), if any. */
      CUdevice d;
      if (loadCuda() != 0) return 3;
      rc = p_cuInit(0);
      if (rc == CUDA_SUCCESS) rc = p_cuDeviceGet(&d, (int)m.a);
      if (rc == CUDA_SUCCESS) rc = p_cuDevicePrimaryCtxRetain(&g_ctx[m.a], d);
      if (rc == CUDA_SUCCESS) rc = p_cuCtxSetCurrent(g_ctx[m.a]);
      reply(sock, rc, 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "usage")) {
      size_t free = 0, total = 0;
      rc = p_cuMemGetInfo_v2(&free, &total);
      reply(sock, rc, (int64_t)(total - free), (int64_t)p_physical((int)m.a), NULL, -1);
    } else if (!strcmp(m.op, "alloc")) {
      CUdeviceptr p = 0;
      rc = p_cuMemAlloc_v2(&p, (size_t)m.a);
      reply(sock, rc, (int64_t)p, 0, NULL, -1);
    } else if (!strcmp(m.op, "free")) {
      reply(sock, p_cuMemFree_v2((CUdeviceptr)m.a), 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "ipcget")) {
      CUipcMemHandle h;
      memset(&h, 0, sizeof h);
      rc = p_cuIpcGetMemHandle(&h, (CUdeviceptr)m.a);
      reply(sock, rc, 0, 0, h.reserved, -1);
    } else if (!strcmp(m.op, "ipcopen")) {
      CUipcMemHandle h;
      CUdeviceptr p = 0;
      memcpy(h.reserved, m.data, sizeof h.reserved);
      rc = p_cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
      if (rc == CUDA_SUCCESS) rc = p_cuMemsetD8_v2(p, 0x5a, m.a < (int64_t)MIB ? (size_t)m.a : MIB);
      reply(sock, rc, (int64_t)p, 0, NULL, -1);
    } else if (!strcmp(m.op, "ipcclose")) {
      reply(sock, p_cuIpcCloseMemHandle((CUdeviceptr)m.a), 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "vmm")) {
      /* A handle of m.a bytes on device m.b that can be exported as a file descriptor, mapped. */
      CUmemAllocationProp prop;
      memset(&prop, 0, sizeof prop);
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = (int)m.b;
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      CUmemGenericAllocationHandle h = 0;
      CUdeviceptr p = 0;
      rc = p_cuMemCreate(&h, (size_t)m.a, &prop, 0);
      if (rc == CUDA_SUCCESS) rc = mapAt(h, (size_t)m.a, (int)m.b, &p);
      reply(sock, rc, (int64_t)p, (int64_t)h, NULL, -1);
    } else if (!strcmp(m.op, "export")) {
      int out = -1;
      rc = p_cuMemExportToShareableHandle(&out, (CUmemGenericAllocationHandle)m.a,
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      reply(sock, rc, 0, 0, NULL, rc == CUDA_SUCCESS ? out : -1);
      if (out >= 0) close(out); /* as NCCL does once it is sent */
    } else if (!strcmp(m.op, "import")) {
      /* The descriptor that came with the message: imported, mapped (m.a bytes, device m.b). */
      CUmemGenericAllocationHandle h = 0;
      CUdeviceptr p = 0;
      rc = p_cuMemImportFromShareableHandle(&h, (void*)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
      if (fd >= 0) close(fd);
      if (rc == CUDA_SUCCESS) rc = mapAt(h, (size_t)m.a, (int)m.b, &p);
      reply(sock, rc, (int64_t)p, (int64_t)h, NULL, -1);
    } else if (!strcmp(m.op, "map")) {
      CUdeviceptr p = 0;
      rc = mapAt((CUmemGenericAllocationHandle)m.a, (size_t)m.b, 0, &p);
      reply(sock, rc, (int64_t)p, 0, NULL, -1);
    } else if (!strcmp(m.op, "unmap")) {
      rc = p_cuMemUnmap((CUdeviceptr)m.a, (size_t)m.b);
      if (rc == CUDA_SUCCESS) rc = p_cuMemAddressFree((CUdeviceptr)m.a, (size_t)m.b);
      reply(sock, rc, 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "release")) {
      reply(sock, p_cuMemRelease((CUmemGenericAllocationHandle)m.a), 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "retain")) {
      CUmemGenericAllocationHandle h = 0;
      rc = p_cuMemRetainAllocationHandle(&h, (void*)(uintptr_t)m.a);
      reply(sock, rc, (int64_t)h, 0, NULL, -1);
    } else if (!strcmp(m.op, "mc")) {
      /* A multicast object of m.a bytes with allocation handle m.b bound to it, mapped here. */
      CUmulticastObjectProp prop;
      memset(&prop, 0, sizeof prop);
      prop.numDevices = 1;
      prop.size = (size_t)m.a;
      prop.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      CUmemGenericAllocationHandle mc = 0;
      CUdeviceptr p = 0;
      rc = p_cuMulticastCreate ? p_cuMulticastCreate(&mc, &prop) : CUDA_ERROR_NOT_SUPPORTED; /* before 12.1 */
      if (rc == CUDA_SUCCESS) rc = p_cuMulticastAddDevice(mc, 0);
      if (rc == CUDA_SUCCESS) rc = p_cuMulticastBindMem(mc, 0, (CUmemGenericAllocationHandle)m.b, 0, (size_t)m.a, 0);
      if (rc == CUDA_SUCCESS) rc = mapAt(mc, (size_t)m.a, 0, &p);
      reply(sock, rc, (int64_t)p, (int64_t)mc, NULL, -1);
    } else if (!strcmp(m.op, "ctxexport")) {
      /* m.a bytes allocated and exported by IPC in a context of its own (then the primary again). */
      CUcontext cur = NULL, ctx = NULL;
      CUdeviceptr p = 0;
      CUipcMemHandle h;
      memset(&h, 0, sizeof h);
      p_cuCtxGetCurrent(&cur);
      rc = p_cuCtxCreate_v2(&ctx, 0, 0);
      if (rc == CUDA_SUCCESS) rc = p_cuMemAlloc_v2(&p, (size_t)m.a);
      if (rc == CUDA_SUCCESS) rc = p_cuIpcGetMemHandle(&h, p);
      p_cuCtxSetCurrent(cur);
      reply(sock, rc, (int64_t)(uintptr_t)ctx, 0, h.reserved, -1);
    } else if (!strcmp(m.op, "ctxdestroy")) {
      reply(sock, p_cuCtxDestroy_v2((CUcontext)(uintptr_t)m.a), 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "host")) {
      reply(sock, hostMemory(), 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "peer")) {
      /* A context on device m.a besides the current one, and peer access to it. */
      CUcontext cur = NULL;
      CUdevice d;
      p_cuCtxGetCurrent(&cur);
      rc = p_cuDeviceGet(&d, (int)m.a);
      if (rc == CUDA_SUCCESS && !g_ctx[m.a]) rc = p_cuDevicePrimaryCtxRetain(&g_ctx[m.a], d);
      if (rc == CUDA_SUCCESS) rc = p_cuCtxSetCurrent(cur);
      reply(sock, rc, 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "pool")) {
      /* A pool on device 0 that can be exported as a descriptor, exported. */
      CUmemPoolProps props;
      memset(&props, 0, sizeof props);
      props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
      props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      CUmemoryPool pool = NULL;
      int out = -1;
      rc = p_cuMemPoolCreate(&pool, &props);
      if (rc == CUDA_SUCCESS)
        rc = p_cuMemPoolExportToShareableHandle(&out, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
      reply(sock, rc, 0, (int64_t)(uintptr_t)pool, NULL, rc == CUDA_SUCCESS ? out : -1);
      if (out >= 0) close(out);
    } else if (!strcmp(m.op, "poolalloc")) {
      /* m.b bytes from pool m.a, exported: the pointer and its export data. */
      CUdeviceptr p = 0;
      CUmemPoolPtrExportData d;
      memset(&d, 0, sizeof d);
      rc = p_cuMemAllocFromPoolAsync(&p, (size_t)m.b, (CUmemoryPool)(uintptr_t)m.a, NULL);
      if (rc == CUDA_SUCCESS) rc = p_cuStreamSynchronize(NULL);
      if (rc == CUDA_SUCCESS) rc = p_cuMemPoolExportPointer(&d, p);
      reply(sock, rc, (int64_t)p, 0, d.reserved, -1);
    } else if (!strcmp(m.op, "poolimport")) {
      /* The pool whose descriptor came with the message. */
      CUmemoryPool pool = NULL;
      rc = p_cuMemPoolImportFromShareableHandle(&pool, (void*)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                                0);
      if (fd >= 0) close(fd);
      reply(sock, rc, 0, (int64_t)(uintptr_t)pool, NULL, -1);
    } else if (!strcmp(m.op, "poolptr")) {
      /* The pointer of imported pool m.a that m.data describes, touched. */
      CUdeviceptr p = 0;
      CUmemPoolPtrExportData d;
      memcpy(d.reserved, m.data, sizeof d.reserved);
      rc = p_cuMemPoolImportPointer(&p, (CUmemoryPool)(uintptr_t)m.a, &d);
      if (rc == CUDA_SUCCESS) rc = p_cuMemsetD8_v2(p, 0x5a, MIB);
      reply(sock, rc, (int64_t)p, 0, NULL, -1);
    } else if (!strcmp(m.op, "freeasync")) {
      rc = p_cuMemFreeAsync((CUdeviceptr)m.a, NULL);
      if (rc == CUDA_SUCCESS) rc = p_cuStreamSynchronize(NULL);
      reply(sock, rc, 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "pooldestroy")) {
      reply(sock, p_cuMemPoolDestroy((CUmemoryPool)(uintptr_t)m.a), 0, 0, NULL, -1);
    } else if (!strcmp(m.op, "enablepeer")) {
      reply(sock, p_cuCtxEnablePeerAccess(g_ctx[m.a], 0), 0, 0, NULL, -1);
    } else {
      reply(sock, CUDA_ERROR_NOT_SUPPORTED, 0, 0, NULL, -1);
    }
  }
  return 0;
}
