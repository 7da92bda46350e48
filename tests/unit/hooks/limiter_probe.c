/* A small CUDA application for the limiter's tests, run as its own process with or
 * without LD_PRELOAD=libvgpu.so. Like a real application it links only libc (and libdl):
 * it dlopens libcuda.so.1 / libnvidia-ml.so.1 and looks functions up with dlsym.
 *
 * Usage: limiter_probe <scenario> [args]. Results go to stdout as "key=value" lines;
 * failures are explained on stderr and reported by the exit code:
 *   0 ok, 1 check failed, 2 out of memory where the scenario allows it, 3 setup failed. */

#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vgpu/cuda/driver_api.h"
#include "vgpu/cuda/nvml_api.h"

#define MIB (1024ull * 1024ull)

static void* g_cuda;
static void* g_nvml;

#define FN(name) static __typeof__(&name) p_##name;
FN(cuInit)
FN(cuDeviceGet)
FN(cuDeviceGetCount)
FN(cuDeviceGetName)
FN(cuDeviceGetAttribute)
FN(cuDeviceTotalMem_v2)
FN(cuDevicePrimaryCtxRetain)
FN(cuDevicePrimaryCtxRelease_v2)
FN(cuCtxSetCurrent)
FN(cuCtxCreate_v4)
FN(cuCtxCreate_v2)
FN(cuCtxGetCurrent)
FN(cuCtxDestroy_v2)
FN(cuDevicePrimaryCtxReset_v2)
FN(cuStreamCreate)
FN(cuStreamWaitValue32)
FN(cuStreamWriteValue32)
FN(cuMemsetD32_v2)
FN(cuCtxSynchronize)
FN(cuMemGetInfo_v2)
FN(cuMemAlloc_v2)
FN(cuMemFree_v2)
FN(cuMemAllocPitch_v2)
FN(cuMemAllocManaged)
FN(cuMemAllocAsync)
FN(cuMemFreeAsync)
FN(cuMemAllocFromPoolAsync)
FN(cuDeviceGetDefaultMemPool)
FN(cuStreamSynchronize)
FN(cuArrayCreate_v2)
FN(cuArray3DCreate_v2)
FN(cuArrayDestroy)
FN(cuMipmappedArrayCreate)
FN(cuMipmappedArrayDestroy)
FN(cuMemCreate)
FN(cuMemRelease)
FN(cuMemMap)
FN(cuMemUnmap)
FN(cuMemAddressReserve)
FN(cuMemAddressFree)
FN(cuMemGetAllocationGranularity)
FN(cuMemExportToShareableHandle)
FN(cuMemImportFromShareableHandle)
FN(cuIpcGetMemHandle)
FN(cuIpcOpenMemHandle_v2)
FN(cuIpcCloseMemHandle)
FN(cuGraphCreate)
FN(cuGraphAddMemAllocNode)
FN(cuGraphDestroy)
FN(cuGraphInstantiateWithFlags)
FN(cuGraphLaunch)
FN(cuGraphExecDestroy)
FN(cuDeviceGraphMemTrim)
FN(cuGraphAddMemFreeNode)
FN(cuDeviceGetGraphMemAttribute)
FN(cuMemPoolCreate)
FN(cuMemPoolDestroy)
FN(cuMemPoolTrimTo)
FN(cuMemPoolSetAttribute)
FN(cuMemPoolGetAttribute)
FN(cuStreamDestroy_v2)
FN(cuMemcpyHtoD_v2)
FN(cuMemcpyDtoH_v2)
FN(cuModuleLoadData)
FN(cuModuleGetFunction)
FN(cuLaunchKernel)
FN(cuGetProcAddress_v2)
FN(cuGetProcAddress)
FN(cuDriverGetVersion)
FN(cuGetErrorName)

FN(nvmlInit_v2)
FN(nvmlDeviceGetHandleByIndex_v2)
FN(nvmlDeviceGetMemoryInfo)
FN(nvmlDeviceGetMemoryInfo_v2)

static int fail(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "probe: ");
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

static int loadCuda(void) {
  g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!g_cuda) {
    fprintf(stderr, "probe: %s\n", dlerror());
    return 3;
  }
#define LOAD(name) p_##name = (__typeof__(p_##name))dlsym(g_cuda, #name);
  LOAD(cuInit)
  LOAD(cuDeviceGet)
  LOAD(cuDeviceGetCount)
  LOAD(cuDeviceGetName) LOAD(cuDeviceGetAttribute) LOAD(cuDeviceTotalMem_v2) LOAD(cuDevicePrimaryCtxRetain)
      LOAD(cuDevicePrimaryCtxRelease_v2) LOAD(cuCtxSetCurrent) LOAD(cuCtxCreate_v4) LOAD(cuCtxDestroy_v2)
          LOAD(cuCtxSynchronize) LOAD(cuMemGetInfo_v2) LOAD(cuMemAlloc_v2) LOAD(cuMemFree_v2) LOAD(cuMemAllocPitch_v2)
              LOAD(cuMemAllocManaged) LOAD(cuMemAllocAsync) LOAD(cuMemFreeAsync) LOAD(cuMemAllocFromPoolAsync)
                  LOAD(cuDeviceGetDefaultMemPool) LOAD(cuStreamSynchronize) LOAD(cuArrayCreate_v2)
                      LOAD(cuArray3DCreate_v2) LOAD(cuArrayDestroy) LOAD(cuMipmappedArrayCreate)
                          LOAD(cuMipmappedArrayDestroy) LOAD(cuMemCreate) LOAD(cuMemRelease) LOAD(cuMemMap)
                              LOAD(cuMemUnmap) LOAD(cuMemAddressReserve) LOAD(cuMemAddressFree)
                                  LOAD(cuMemGetAllocationGranularity) LOAD(cuMemExportToShareableHandle)
                                      LOAD(cuMemImportFromShareableHandle) LOAD(cuIpcGetMemHandle)
                                          LOAD(cuIpcOpenMemHandle_v2) LOAD(cuIpcCloseMemHandle) LOAD(cuGraphCreate)
                                              LOAD(cuGraphAddMemAllocNode) LOAD(cuGraphDestroy) LOAD(cuMemcpyHtoD_v2)
                                                  LOAD(cuMemcpyDtoH_v2) LOAD(cuModuleLoadData) LOAD(cuModuleGetFunction)
                                                      LOAD(cuLaunchKernel) LOAD(cuGetProcAddress_v2)
                                                          LOAD(cuGetErrorName)
  LOAD(cuCtxCreate_v2)
  LOAD(cuCtxGetCurrent)
  LOAD(cuDevicePrimaryCtxReset_v2)
  LOAD(cuStreamCreate)
  LOAD(cuMemsetD32_v2)
  LOAD(cuGetProcAddress)
  LOAD(cuDriverGetVersion)
  LOAD(cuGraphInstantiateWithFlags)
  LOAD(cuGraphLaunch)
  LOAD(cuGraphExecDestroy)
  LOAD(cuDeviceGraphMemTrim)
  LOAD(cuGraphAddMemFreeNode)
  LOAD(cuDeviceGetGraphMemAttribute)
  LOAD(cuMemPoolCreate)
  LOAD(cuMemPoolDestroy)
  LOAD(cuMemPoolTrimTo)
  LOAD(cuMemPoolSetAttribute)
  LOAD(cuMemPoolGetAttribute)
  LOAD(cuStreamDestroy_v2)
  /* The newest ABI the driver has, as an application built for it would use. */
  p_cuStreamWaitValue32 = (__typeof__(p_cuStreamWaitValue32))dlsym(g_cuda, "cuStreamWaitValue32_v2");
  if (!p_cuStreamWaitValue32) LOAD(cuStreamWaitValue32)
  p_cuStreamWriteValue32 = (__typeof__(p_cuStreamWriteValue32))dlsym(g_cuda, "cuStreamWriteValue32_v2");
  if (!p_cuStreamWriteValue32) LOAD(cuStreamWriteValue32)
#undef LOAD
                                                              return 0;
}

static int loadNvml(void) {
  g_nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!g_nvml) return 3;
  p_nvmlInit_v2 = (__typeof__(p_nvmlInit_v2))dlsym(g_nvml, "nvmlInit_v2");
  p_nvmlDeviceGetHandleByIndex_v2 =
      (__typeof__(p_nvmlDeviceGetHandleByIndex_v2))dlsym(g_nvml, "nvmlDeviceGetHandleByIndex_v2");
  p_nvmlDeviceGetMemoryInfo = (__typeof__(p_nvmlDeviceGetMemoryInfo))dlsym(g_nvml, "nvmlDeviceGetMemoryInfo");
  p_nvmlDeviceGetMemoryInfo_v2 = (__typeof__(p_nvmlDeviceGetMemoryInfo_v2))dlsym(g_nvml, "nvmlDeviceGetMemoryInfo_v2");
  return p_nvmlInit_v2 && p_nvmlDeviceGetHandleByIndex_v2 && p_nvmlDeviceGetMemoryInfo ? 0 : 3;
}

/* cuInit and the primary context of device 0, current on this thread. */
static int setup(void) {
  if (loadCuda() != 0) return 3;
  CUresult rc = p_cuInit(0);
  if (rc != CUDA_SUCCESS) {
    fprintf(stderr, "probe: cuInit failed: %d %s\n", rc, errName(rc));
    return 3;
  }
  CUdevice dev;
  CUcontext ctx;
  if ((rc = p_cuDeviceGet(&dev, 0)) || (rc = p_cuDevicePrimaryCtxRetain(&ctx, dev)) || (rc = p_cuCtxSetCurrent(ctx))) {
    fprintf(stderr, "probe: no context on device 0: %s\n", errName(rc));
    return rc == CUDA_ERROR_OUT_OF_MEMORY ? 2 : 3;
  }
  return 0;
}

/* Bytes the simulated device really holds (all processes), from the fake's test API. */
static uint64_t physicalUsed(void) {
  uint64_t (*used)(int) = (uint64_t(*)(int))dlsym(g_cuda, "vgpuFakeDeviceUsedBytes");
  return used ? used(0) : 0;
}

static uint64_t containerUsed(void) {
  size_t free = 0, total = 0;
  if (p_cuMemGetInfo_v2(&free, &total) != CUDA_SUCCESS) return UINT64_MAX;
  return total - free;
}

/* A new context on device 0, current on this thread: with the newest ABI the driver has
 * (cuCtxCreate_v4 came with CUDA 12.5). */
static CUresult createContext(CUcontext* ctx) {
  if (p_cuCtxCreate_v4) return p_cuCtxCreate_v4(ctx, NULL, 0, 0);
  return p_cuCtxCreate_v2(ctx, 0, 0);
}

/* ---- one allocation path: allocate `bytes` into *obj, free it ---- */

typedef struct {
  CUdeviceptr ptr;
  CUarray array;
  CUmipmappedArray mipmap;
  CUmemGenericAllocationHandle handle;
  CUgraph graph;
  CUgraphExec exec;
  size_t reserved;
} Obj;

static int g_ipcSock = -1; /* to the exporting child (ipc, import paths) */
/* Physical usage just before the charged call; the ipc and import paths take it after the
 * exporter (another container) has allocated what is to be imported. */
static uint64_t g_physMark;

/* Asks the exporting child for a buffer of `bytes`; gets back an IPC handle or an fd. */
static int requestExport(char kind, size_t bytes, CUipcMemHandle* ipc, int* fd) {
  char req[32];
  snprintf(req, sizeof req, "%c%zu", kind, bytes);
  if (write(g_ipcSock, req, strlen(req) + 1) < 0) return -1;
  char buf[CU_IPC_HANDLE_SIZE + 1];
  struct iovec iov = {buf, sizeof buf};
  char ctrl[CMSG_SPACE(sizeof(int))];
  struct msghdr msg = {0};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof ctrl;
  ssize_t n = recvmsg(g_ipcSock, &msg, 0);
  if (n <= 0 || buf[0] != 'o') return -1;
  if (kind == 'i') {
    memcpy(ipc->reserved, buf + 1, CU_IPC_HANDLE_SIZE);
  } else {
    struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (!c || c->cmsg_type != SCM_RIGHTS) return -1;
    memcpy(fd, CMSG_DATA(c), sizeof(int));
  }
  return 0;
}

static void exporterLoop(int sock) {
  /* Its own region and no limit: the exporter stands for another container. */
  setenv("CUDA_DEVICE_MEMORY_SHARED_CACHE",
         getenv("PROBE_EXPORTER_REGION") ? getenv("PROBE_EXPORTER_REGION") : "/tmp/probe-exporter-region", 1);
  unsetenv("CUDA_DEVICE_MEMORY_LIMIT");
  unsetenv("CUDA_DEVICE_MEMORY_LIMIT_0");
  if (setup() != 0) _exit(3);
  char req[32];
  while (read(sock, req, sizeof req) > 0) {
    char kind = req[0];
    size_t bytes = strtoull(req + 1, NULL, 10);
    char reply[CU_IPC_HANDLE_SIZE + 1];
    reply[0] = 'x';
    struct iovec iov = {reply, sizeof reply};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    char ctrl[CMSG_SPACE(sizeof(int))];
    if (kind == 'i') {
      CUdeviceptr p;
      CUipcMemHandle h;
      if (p_cuMemAlloc_v2(&p, bytes) == CUDA_SUCCESS && p_cuIpcGetMemHandle(&h, p) == CUDA_SUCCESS) {
        reply[0] = 'o';
        memcpy(reply + 1, h.reserved, CU_IPC_HANDLE_SIZE);
      }
    } else {
      CUmemAllocationProp prop;
      memset(&prop, 0, sizeof prop);
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      CUmemGenericAllocationHandle h;
      int fd = -1;
      if (p_cuMemCreate(&h, bytes, &prop, 0) == CUDA_SUCCESS &&
          p_cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) == CUDA_SUCCESS) {
        reply[0] = 'o';
        msg.msg_control = ctrl;
        msg.msg_controllen = sizeof ctrl;
        struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
      }
    }
    if (sendmsg(sock, &msg, 0) < 0) _exit(3);
  }
  _exit(0);
}

static CUresult allocPath(const char* path, size_t bytes, Obj* o) {
  memset(o, 0, sizeof *o);
  g_physMark = physicalUsed();
  if (!strcmp(path, "plain")) return p_cuMemAlloc_v2(&o->ptr, bytes);
  if (!strcmp(path, "managed")) return p_cuMemAllocManaged(&o->ptr, bytes, CU_MEM_ATTACH_GLOBAL);
  if (!strcmp(path, "pitch")) {
    size_t pitch = 0;
    return p_cuMemAllocPitch_v2(&o->ptr, &pitch, MIB, bytes / MIB, 4);
  }
  if (!strcmp(path, "async")) {
    CUresult rc = p_cuMemAllocAsync(&o->ptr, bytes, NULL);
    return rc == CUDA_SUCCESS ? p_cuStreamSynchronize(NULL) : rc;
  }
  if (!strcmp(path, "pool")) {
    CUmemoryPool pool;
    CUresult rc = p_cuDeviceGetDefaultMemPool(&pool, 0);
    if (rc == CUDA_SUCCESS) rc = p_cuMemAllocFromPoolAsync(&o->ptr, bytes, pool, NULL);
    return rc == CUDA_SUCCESS ? p_cuStreamSynchronize(NULL) : rc;
  }
  if (!strcmp(path, "array")) {
    CUDA_ARRAY_DESCRIPTOR d = {bytes / 4 / 1024, 1024, CU_AD_FORMAT_FLOAT, 1};
    return p_cuArrayCreate_v2(&o->array, &d);
  }
  if (!strcmp(path, "array3d")) {
    CUDA_ARRAY3D_DESCRIPTOR d = {bytes / 4 / 256 / 4, 256, 4, CU_AD_FORMAT_FLOAT, 1, 0};
    return p_cuArray3DCreate_v2(&o->array, &d);
  }
  if (!strcmp(path, "mipmap")) {
    CUDA_ARRAY3D_DESCRIPTOR d = {bytes / 4 / 1024, 1024, 0, CU_AD_FORMAT_FLOAT, 1, 0};
    return p_cuMipmappedArrayCreate(&o->mipmap, &d, 3);
  }
  if (!strcmp(path, "vmm")) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUresult rc = p_cuMemCreate(&o->handle, bytes, &prop, 0);
    if (rc != CUDA_SUCCESS) return rc;
    o->reserved = bytes;
    rc = p_cuMemAddressReserve(&o->ptr, bytes, 0, 0, 0);
    return rc == CUDA_SUCCESS ? p_cuMemMap(o->ptr, bytes, 0, o->handle, 0) : rc;
  }
  if (!strcmp(path, "graph")) {
    /* Graph memory is taken when the graph runs: a graph that allocates and keeps it. */
    CUresult rc = p_cuGraphCreate(&o->graph, 0);
    if (rc != CUDA_SUCCESS) return rc;
    CUDA_MEM_ALLOC_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    params.bytesize = bytes;
    CUgraphNode node;
    rc = p_cuGraphAddMemAllocNode(&node, o->graph, NULL, 0, &params);
    if (rc == CUDA_SUCCESS) rc = p_cuGraphInstantiateWithFlags(&o->exec, o->graph, 0);
    if (rc == CUDA_SUCCESS) rc = p_cuGraphLaunch(o->exec, NULL);
    if (rc == CUDA_SUCCESS) rc = p_cuStreamSynchronize(NULL);
    o->ptr = params.dptr;
    if (rc != CUDA_SUCCESS) {
      if (o->exec) p_cuGraphExecDestroy(o->exec);
      p_cuGraphDestroy(o->graph);
      o->graph = NULL;
      o->exec = NULL;
    }
    return rc;
  }
  if (!strcmp(path, "ipc")) {
    CUipcMemHandle h;
    if (requestExport('i', bytes, &h, NULL) != 0) return CUDA_ERROR_UNKNOWN;
    g_physMark = physicalUsed();
    return p_cuIpcOpenMemHandle_v2(&o->ptr, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
  }
  if (!strcmp(path, "import")) {
    int fd = -1;
    if (requestExport('f', bytes, NULL, &fd) != 0) return CUDA_ERROR_UNKNOWN;
    g_physMark = physicalUsed();
    CUresult rc =
        p_cuMemImportFromShareableHandle(&o->handle, (void*)(uintptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(fd);
    if (rc != CUDA_SUCCESS) return rc;
    o->reserved = bytes;
    rc = p_cuMemAddressReserve(&o->ptr, bytes, 0, 0, 0);
    if (rc == CUDA_SUCCESS) rc = p_cuMemMap(o->ptr, bytes, 0, o->handle, 0);
    if (rc != CUDA_SUCCESS) {
      if (o->ptr) p_cuMemAddressFree(o->ptr, bytes);
      p_cuMemRelease(o->handle);
      memset(o, 0, sizeof *o);
    }
    return rc;
  }
  if (!strcmp(path, "context")) {
    CUcontext ctx;
    CUresult rc = createContext(&ctx);
    if (rc == CUDA_SUCCESS) {
      o->ptr = (CUdeviceptr)(uintptr_t)ctx;
      CUcontext primary;
      CUdevice dev;
      p_cuDeviceGet(&dev, 0);
      p_cuDevicePrimaryCtxRetain(&primary, dev); /* back to the primary for the queries */
      p_cuCtxSetCurrent(primary);
      p_cuDevicePrimaryCtxRelease_v2(dev);
    }
    return rc;
  }
  return CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult freePath(const char* path, Obj* o) {
  if (!strcmp(path, "array") || !strcmp(path, "array3d")) return p_cuArrayDestroy(o->array);
  if (!strcmp(path, "mipmap")) return p_cuMipmappedArrayDestroy(o->mipmap);
  if (!strcmp(path, "async") || !strcmp(path, "pool")) {
    CUresult rc = p_cuMemFreeAsync(o->ptr, NULL);
    return rc == CUDA_SUCCESS ? p_cuStreamSynchronize(NULL) : rc;
  }
  if (!strcmp(path, "vmm") || !strcmp(path, "import")) {
    p_cuMemUnmap(o->ptr, o->reserved);
    p_cuMemAddressFree(o->ptr, o->reserved);
    return p_cuMemRelease(o->handle);
  }
  if (!strcmp(path, "graph")) {
    /* The allocation outlives the graph until freed; the graph allocator keeps the memory
     * until trimmed. */
    CUresult rc = p_cuGraphExecDestroy(o->exec);
    if (rc == CUDA_SUCCESS) rc = p_cuGraphDestroy(o->graph);
    if (rc == CUDA_SUCCESS) rc = p_cuMemFree_v2(o->ptr);
    return rc == CUDA_SUCCESS ? p_cuDeviceGraphMemTrim(0) : rc;
  }
  if (!strcmp(path, "ipc")) return p_cuIpcCloseMemHandle(o->ptr);
  if (!strcmp(path, "context")) return p_cuCtxDestroy_v2((CUcontext)(uintptr_t)o->ptr);
  return p_cuMemFree_v2(o->ptr);
}

/* path <name> <a_mib> <b_mib>: A fits, B on top of A does not, B alone does. */
static int scenarioPath(const char* path, size_t a, size_t b) {
  if (!strcmp(path, "ipc") || !strcmp(path, "import")) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) return 3;
    pid_t kid = fork();
    if (kid == 0) {
      close(sv[0]);
      exporterLoop(sv[1]);
    }
    close(sv[1]);
    g_ipcSock = sv[0];
  }
  int rc = setup();
  if (rc != 0) return rc;
  uint64_t used0 = containerUsed();
  Obj A, B;
  CUresult r = allocPath(path, a, &A);
  if (r != CUDA_SUCCESS) return fail("%s: %zu bytes within the limit failed: %s", path, a, errName(r));
  uint64_t used1 = containerUsed();
  if (used1 < used0 + a)
    return fail("%s: usage went %llu -> %llu for %zu bytes", path, (unsigned long long)used0, (unsigned long long)used1,
                a);
  r = allocPath(path, b, &B);
  if (r != CUDA_ERROR_OUT_OF_MEMORY)
    return fail("%s: %zu bytes over the limit gave %s, not out of memory", path, b, errName(r));
  if (physicalUsed() != g_physMark)
    return fail("%s: the refused request changed device memory %llu -> %llu", path, (unsigned long long)g_physMark,
                (unsigned long long)physicalUsed());
  if (containerUsed() != used1) return fail("%s: the refused request changed the usage", path);
  r = freePath(path, &A);
  if (r != CUDA_SUCCESS) return fail("%s: free failed: %s", path, errName(r));
  if (containerUsed() != used0)
    return fail("%s: usage after free %llu, before %llu", path, (unsigned long long)containerUsed(),
                (unsigned long long)used0);
  r = allocPath(path, b, &B);
  if (r != CUDA_SUCCESS) return fail("%s: %zu bytes alone failed: %s", path, b, errName(r));
  printf("charged_a=%llu\n", (unsigned long long)(used1 - used0));
  freePath(path, &B);
  return 0;
}

/* ---- the other scenarios ---- */

static int scenarioMeminfo(void) {
  int rc = setup();
  if (rc) return rc;
  size_t free = 0, total = 0, devTotal = 0;
  if (p_cuMemGetInfo_v2(&free, &total) != CUDA_SUCCESS) return fail("cuMemGetInfo failed");
  p_cuDeviceTotalMem_v2(&devTotal, 0);
  printf("total=%zu\nfree=%zu\ndevice_total=%zu\n", total, free, devTotal);
  return 0;
}

/* meminfo2: cuMemGetInfo as the current context moves between devices 0 and 1
 * (cuCtxSetCurrent): each answer is for the device of the context current at the time. */
static int scenarioMeminfoTwoDevices(void) {
  int rc = setup();
  if (rc) return rc;
  CUcontext ctx0 = NULL, ctx1 = NULL;
  CUdevice dev1;
  size_t free = 0, total = 0;
  if (p_cuCtxGetCurrent(&ctx0) != CUDA_SUCCESS || p_cuDeviceGet(&dev1, 1) != CUDA_SUCCESS ||
      p_cuDevicePrimaryCtxRetain(&ctx1, dev1) != CUDA_SUCCESS) {
    return fail("no context on device 1");
  }
  CUcontext order[] = {ctx0, ctx1, ctx0, ctx1};
  for (int i = 0; i < 4; ++i) {
    if (p_cuCtxSetCurrent(order[i]) != CUDA_SUCCESS) return fail("cuCtxSetCurrent failed");
    if (p_cuMemGetInfo_v2(&free, &total) != CUDA_SUCCESS) return fail("cuMemGetInfo failed");
    printf("total%d=%zu\n", i, total);
  }
  return 0;
}

/* alloc <mib> [managed]: one allocation. hold <mib>: the same, kept until killed. */
static int scenarioAlloc(size_t bytes, int hold, int managed) {
  int rc = setup();
  if (rc) return rc;
  CUdeviceptr p;
  CUresult r = managed ? p_cuMemAllocManaged(&p, bytes, CU_MEM_ATTACH_GLOBAL) : p_cuMemAlloc_v2(&p, bytes);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return 2;
  if (r != CUDA_SUCCESS) return fail("alloc: %s", errName(r));
  if (hold) {
    printf("held\n");
    fflush(stdout);
    for (;;) pause();
  }
  return 0;
}

/* race <chunk_mib>: once "g" arrives on stdin, allocate until refused, report how much,
 * and keep it until stdin closes. */
static int scenarioRace(size_t chunk) {
  int rc = setup();
  if (rc != 0 && rc != 2) return rc;
  printf("ready\n");
  fflush(stdout);
  char go = 0;
  if (read(0, &go, 1) != 1 || go != 'g') return fail("race: no start signal");
  unsigned long long got = 0;
  CUdeviceptr p;
  CUresult r = CUDA_ERROR_OUT_OF_MEMORY; /* no room left even for its context */
  while (rc == 0 && (r = p_cuMemAlloc_v2(&p, chunk)) == CUDA_SUCCESS) got += chunk;
  if (r != CUDA_ERROR_OUT_OF_MEMORY) return fail("race: %s", errName(r));
  printf("got=%llu\n", got);
  fflush(stdout);
  char c;
  while (read(0, &c, 1) > 0) { /* "p": report the device's physical usage now */
    if (c == 'p') printf("phys=%llu\n", (unsigned long long)physicalUsed());
    fflush(stdout);
  }
  return 0;
}

static int scenarioNvml(size_t bytes) {
  int rc = setup();
  if (rc) return rc;
  CUdeviceptr p;
  if (bytes && p_cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS) return fail("nvml: alloc failed");
  if (loadNvml() != 0 || p_nvmlInit_v2() != NVML_SUCCESS) return fail("nvml: cannot initialise NVML");
  nvmlDevice_t dev = NULL;
  nvmlMemory_t m;
  nvmlMemory_v2_t m2;
  memset(&m2, 0, sizeof m2);
  m2.version = nvmlMemory_v2;
  if (p_nvmlDeviceGetHandleByIndex_v2(0, &dev) != NVML_SUCCESS || p_nvmlDeviceGetMemoryInfo(dev, &m) != NVML_SUCCESS) {
    return fail("nvml: memory info failed");
  }
  printf("total=%llu\nfree=%llu\nused=%llu\n", m.total, m.free, m.used);
  if (p_nvmlDeviceGetMemoryInfo_v2 && p_nvmlDeviceGetMemoryInfo_v2(dev, &m2) == NVML_SUCCESS) {
    printf("v2_total=%llu\nv2_free=%llu\nv2_used=%llu\n", m2.total, m2.free, m2.used);
  }
  return 0;
}

/* procaddr: which exported variant each (symbol, version, flags) request resolves to, and
 * whose it is: libvgpu's wrapper (its exported name) or the driver's own entry point (named
 * by the fake driver's vgpuFakeProcName, since it is not the exported symbol). Requests above
 * the driver's version fail alike with and without the library. */
static int scenarioProcAddr(void) {
  int rc = setup();
  if (rc) return rc;
  const char* (*procName)(const void*) = (const char* (*)(const void*))dlsym(g_cuda, "vgpuFakeProcName");
  if (!procName) return fail("procaddr: the driver has no vgpuFakeProcName");
  struct {
    const char* symbol;
    int version;
    cuuint64_t flags;
  } cases[] = {
      {"cuMemAlloc", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuMemAlloc", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuMemAlloc", 3000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuMemFree", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuMemGetInfo", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuMemGetInfo", 3000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuLaunchKernel", 11040, CU_GET_PROC_ADDRESS_LEGACY_STREAM},
      {"cuLaunchKernel", 11040, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuLaunchKernel", 6050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuLaunchKernelEx", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuLaunchCooperativeKernel", 11040, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuGraphLaunch", 11040, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemAllocAsync", 11040, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemAllocAsync", 11040, CU_GET_PROC_ADDRESS_LEGACY_STREAM},
      {"cuMemFreeAsync", 11040, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuCtxCreate", 3000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuCtxCreate", 11000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuCtxCreate", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuCtxCreate", 13000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuCtxDestroy", 3000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuCtxDestroy", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuDevicePrimaryCtxRelease", 10000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuDevicePrimaryCtxRelease", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuDeviceTotalMem", 3000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuIpcOpenMemHandle", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuGetProcAddress", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuGetProcAddress", 12000, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuDeviceGetName", 11040, CU_GET_PROC_ADDRESS_DEFAULT},
      {"cuMemcpyHtoD", 11040, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
    void* fn = NULL;
    CUresult r = p_cuGetProcAddress_v2
                     ? p_cuGetProcAddress_v2(cases[i].symbol, &fn, cases[i].version, cases[i].flags, NULL)
                     : p_cuGetProcAddress(cases[i].symbol, &fn, cases[i].version, cases[i].flags);
    const char* which = "none";
    const char* lib = "driver";
    Dl_info info;
    if (fn && dladdr(fn, &info) && strstr(info.dli_fname, "libvgpu")) {
      lib = "vgpu";
      which = info.dli_sname && info.dli_saddr == fn ? info.dli_sname : "unnamed";
    } else if (fn) {
      which = procName(fn) ? procName(fn) : "unknown";
    }
    printf("%s@%d/%llu -> rc=%d %s %s\n", cases[i].symbol, cases[i].version, (unsigned long long)cases[i].flags, (int)r,
           which, lib);
  }
  return 0;
}

/* passthrough: calls libvgpu does not wrap; the output must not depend on the preload. */
static int scenarioPassthrough(void) {
  int rc = setup();
  if (rc) return rc;
  int count = 0;
  char name[256] = "";
  int sms = 0, major = 0;
  printf("count rc=%d n=%d\n", (int)p_cuDeviceGetCount(&count), count);
  printf("name rc=%d %s\n", (int)p_cuDeviceGetName(name, sizeof name, 0), name);
  printf("sms rc=%d %d\n", (int)p_cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0), sms);
  printf("cc rc=%d %d\n", (int)p_cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0), major);
  printf("bad attribute rc=%d\n", (int)p_cuDeviceGetAttribute(&major, (CUdevice_attribute)100000, 0));
  printf("bad device rc=%d\n", (int)p_cuDeviceGetName(name, sizeof name, 99));
  CUdeviceptr p;
  int in[4] = {1, 2, 3, 4}, out[4] = {0};
  printf("alloc rc=%d\n", (int)p_cuMemAlloc_v2(&p, sizeof in));
  printf("h2d rc=%d\n", (int)p_cuMemcpyHtoD_v2(p, in, sizeof in));
  printf("d2h rc=%d %d %d %d %d\n", (int)p_cuMemcpyDtoH_v2(out, p, sizeof out), out[0], out[1], out[2], out[3]);
  printf("sync rc=%d\n", (int)p_cuCtxSynchronize());
  printf("free rc=%d\n", (int)p_cuMemFree_v2(p));
  printf("free again rc=%d\n", (int)p_cuMemFree_v2(p));
  printf("free unknown rc=%d\n", (int)p_cuMemFree_v2((CUdeviceptr)0x1234));
  /* RTLD_NEXT must still resolve relative to this program, not to an interposer. */
  printf("rtld_next matches default: %s\n", dlsym(RTLD_NEXT, "cuInit") == dlsym(RTLD_DEFAULT, "cuInit") ? "yes" : "no");
  Dl_info info;
  void* fn = dlsym(g_cuda, "cuDeviceGetName");
  printf("unwrapped symbol from %s\n",
         fn && dladdr(fn, &info) && strstr(info.dli_fname, "libvgpu") ? "vgpu" : "driver");
  return 0;
}

static uint64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The spin kernel in the current context. */
static int loadSpin(CUfunction* spin) {
  CUmodule mod;
  static const char image[] = "spin";
  if (p_cuModuleLoadData(&mod, image) != CUDA_SUCCESS || p_cuModuleGetFunction(spin, mod, "spin") != CUDA_SUCCESS) {
    return fail("no spin kernel");
  }
  return 0;
}

/* Keeps the current context's device busy with "spin" kernels for `ms` (after `warmupMs` that
 * are not measured); prints the share of wall time the device was busy (the fake's schedule,
 * all processes, not our own figure) as <key>=, this process's own share (its kernels' run
 * time: all have run by the end) as own=, and the launch count. */
static unsigned g_syncEvery = 32; /* launches between two waits for the device */

static int runComputeAfter(unsigned warmupMs, unsigned ms, unsigned long long kernelUs, const char* key) {
  uint64_t (*busyNs)(int) = (uint64_t(*)(int))dlsym(g_cuda, "vgpuFakeDeviceBusyNs");
  if (!busyNs) return fail("compute: the driver has no vgpuFakeDeviceBusyNs");
  CUfunction spin;
  if (loadSpin(&spin) != 0) return 1;
  void* params[] = {&kernelUs};
  /* Warm up one burst (or longer) so the measurement starts in the steady state. */
  uint64_t w0 = nowNs();
  unsigned warm = 0;
  do {
    p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
    if (++warm % g_syncEvery == 0) p_cuCtxSynchronize();
  } while (warm < 3 || nowNs() - w0 < (uint64_t)warmupMs * 1000000ull);
  p_cuCtxSynchronize();
  uint64_t b0 = busyNs(0), t0 = nowNs();
  unsigned launches = 0;
  while (nowNs() - t0 < (uint64_t)ms * 1000000ull) {
    CUresult r = p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
    if (r != CUDA_SUCCESS) return fail("compute: launch failed: %s", errName(r));
    /* Like a training step: a few kernels, then wait for them (bounds the queue). */
    if (++launches % g_syncEvery == 0) p_cuCtxSynchronize();
  }
  p_cuCtxSynchronize();
  uint64_t b1 = busyNs(0), t1 = nowNs();
  printf("%s=%.4f\nown=%.4f\nlaunches=%u\n", key, (double)(b1 - b0) / (double)(t1 - t0),
         (double)launches * (double)kernelUs * 1000.0 / (double)(t1 - t0), launches);
  fflush(stdout);
  return 0;
}

static int runCompute(unsigned ms, unsigned long long kernelUs, const char* key) {
  return runComputeAfter(0, ms, kernelUs, key);
}

/* compute <ms> <kernel_us> [warmup_ms [sync_every]]: runCompute on device 0's primary context,
 * waiting for the device every sync_every launches (32). */
static int scenarioCompute(unsigned ms, unsigned long long kernelUs, unsigned warmupMs) {
  int rc = setup();
  if (rc) return rc;
  return runComputeAfter(warmupMs, ms, kernelUs, "share");
}

/* manyctx <n> <ms>: n contexts of its own on device 0, each running a kernel, then compute on
 * the last one. */
static int scenarioManyContexts(unsigned n, unsigned ms) {
  int rc = setup();
  if (rc) return rc;
  CUcontext ctx = NULL;
  unsigned long long us = 100;
  void* params[] = {&us};
  for (unsigned i = 0; i < n; ++i) {
    CUfunction spin;
    CUresult r = createContext(&ctx); /* each becomes current */
    if (r != CUDA_SUCCESS) return fail("manyctx: context %u: %s", i, errName(r));
    if (loadSpin(&spin) != 0) return 1;
    if ((r = p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL)) != CUDA_SUCCESS) {
      return fail("manyctx: launch in context %u: %s", i, errName(r));
    }
  }
  p_cuCtxSynchronize();
  return runCompute(ms, 1000, "share");
}

/* primaryreset <ms>: compute, reset device 0's primary context (its events go with it),
 * retain it again and compute once more: share_before=, share_after=. */
static int scenarioPrimaryReset(unsigned ms) {
  int rc = setup();
  if (rc) return rc;
  if ((rc = runCompute(ms, 1000, "share_before")) != 0) return rc;
  CUdevice dev;
  CUcontext ctx;
  CUresult r;
  p_cuDeviceGet(&dev, 0);
  if ((r = p_cuDevicePrimaryCtxReset_v2(dev)) != CUDA_SUCCESS) return fail("reset: %s", errName(r));
  if ((r = p_cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS || (r = p_cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) {
    return fail("retain after reset: %s", errName(r));
  }
  return runCompute(ms, 1000, "share_after");
}

/* twostreams: a kernel on stream A waits (cuStreamWaitValue32) for a value that another
 * thread writes on stream B after launching kernels of its own there, as NCCL's kernels wait
 * for their peers. With a compute limit the launches go through the throttle; nothing of it
 * may wait for A's kernel while B needs to get through. Prints done=1. */
static CUstream g_streamB;
static CUdeviceptr g_flag;
static CUfunction g_spin;
static CUcontext g_ctx;
static CUresult g_writerResult = CUDA_ERROR_UNKNOWN;

static void* writerThread(void* arg) {
  (void)arg;
  p_cuCtxSetCurrent(g_ctx);
  unsigned long long us = 500;
  void* params[] = {&us};
  CUresult r = CUDA_SUCCESS;
  for (int i = 0; i < 32 && r == CUDA_SUCCESS; ++i) {
    r = p_cuLaunchKernel(g_spin, 1, 1, 1, 1, 1, 1, 0, g_streamB, params, NULL);
  }
  if (r == CUDA_SUCCESS) r = p_cuStreamWriteValue32(g_streamB, g_flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  g_writerResult = r;
  return NULL;
}

static int scenarioTwoStreams(void) {
  int rc = setup();
  if (rc) return rc;
  if (!p_cuStreamWaitValue32 || !p_cuStreamWriteValue32) return fail("twostreams: no stream memory operations");
  CUstream a;
  CUresult r;
  p_cuCtxGetCurrent(&g_ctx);
  if ((r = p_cuStreamCreate(&a, CU_STREAM_NON_BLOCKING)) ||
      (r = p_cuStreamCreate(&g_streamB, CU_STREAM_NON_BLOCKING)) || (r = p_cuMemAlloc_v2(&g_flag, 4)) ||
      (r = p_cuMemsetD32_v2(g_flag, 0, 1))) {
    return fail("twostreams: setup: %s", errName(r));
  }
  if (loadSpin(&g_spin) != 0) return 1;
  unsigned long long us = 500;
  void* params[] = {&us};
  /* Measured bursts first, on both streams, so the throttle is in its steady state. */
  for (int i = 0; i < 16; ++i) {
    p_cuLaunchKernel(g_spin, 1, 1, 1, 1, 1, 1, 0, a, params, NULL);
    p_cuLaunchKernel(g_spin, 1, 1, 1, 1, 1, 1, 0, g_streamB, params, NULL);
  }
  p_cuCtxSynchronize();
  if ((r = p_cuStreamWaitValue32(a, g_flag, 1, CU_STREAM_WAIT_VALUE_GEQ)) != CUDA_SUCCESS) {
    return fail("twostreams: wait value: %s", errName(r));
  }
  for (int i = 0; i < 32; ++i) {
    if ((r = p_cuLaunchKernel(g_spin, 1, 1, 1, 1, 1, 1, 0, a, params, NULL)) != CUDA_SUCCESS) {
      return fail("twostreams: launch on A: %s", errName(r));
    }
  }
  pthread_t writer;
  if (pthread_create(&writer, NULL, writerThread, NULL) != 0) return fail("twostreams: no thread");
  pthread_join(writer, NULL);
  if (g_writerResult != CUDA_SUCCESS) return fail("twostreams: writer: %s", errName(g_writerResult));
  if ((r = p_cuCtxSynchronize()) != CUDA_SUCCESS) return fail("twostreams: sync: %s", errName(r));
  printf("done=1\n");
  return 0;
}

/* ---- accounting across contexts, handles, graphs and pools (the tests set a 64 MiB limit
 * and 8 MiB of context overhead) ---- */

#define CHECK(cond, ...)       \
  do {                         \
    if (!(cond)) {             \
      fail(__VA_ARGS__);       \
      return 1;                \
    }                          \
  } while (0)

static CUresult allocMiB(CUdeviceptr* p, unsigned mib) { return p_cuMemAlloc_v2(p, (size_t)mib * MIB); }

static int usedIs(unsigned mib, const char* when) {
  unsigned long long used = containerUsed();
  if (used != (unsigned long long)mib * MIB) return fail("%s: the container uses %llu MiB, expected %u", when, used / MIB, mib);
  return 0;
}

static CUcontext primaryOf0(void) {
  CUcontext c = NULL;
  p_cuCtxGetCurrent(&c);
  return c;
}

/* ctxdestroy: what a destroyed context held comes back, all of it. */
static int scenarioContextDestroy(void) {
  int rc = setup();
  if (rc) return rc;
  CUcontext primary = primaryOf0(), c;
  CUdeviceptr p;
  CHECK(createContext(&c) == CUDA_SUCCESS, "ctxdestroy: no context");
  CHECK(allocMiB(&p, 40) == CUDA_SUCCESS, "ctxdestroy: 40 MiB in the new context");
  if (usedIs(56, "with the context")) return 1;
  CHECK(p_cuCtxDestroy_v2(c) == CUDA_SUCCESS, "ctxdestroy: destroy");
  p_cuCtxSetCurrent(primary);
  if (usedIs(8, "after cuCtxDestroy")) return 1;
  CHECK(allocMiB(&p, 40) == CUDA_SUCCESS, "ctxdestroy: 40 MiB after the context that held 40 is gone: refused");
  return 0;
}

/* ctxreset: a reset primary context gives back what it held, and only that. */
static int scenarioContextReset(void) {
  int rc = setup();
  if (rc) return rc;
  CUcontext primary = primaryOf0(), c;
  CUdeviceptr p, q;
  CUdevice dev;
  p_cuDeviceGet(&dev, 0);
  CHECK(createContext(&c) == CUDA_SUCCESS, "ctxreset: no context");
  CHECK(allocMiB(&p, 24) == CUDA_SUCCESS, "ctxreset: 24 MiB in the created context");
  p_cuCtxSetCurrent(primary);
  CHECK(allocMiB(&q, 16) == CUDA_SUCCESS, "ctxreset: 16 MiB in the primary context");
  if (usedIs(56, "before the reset")) return 1;
  CHECK(p_cuDevicePrimaryCtxReset_v2(dev) == CUDA_SUCCESS, "ctxreset: reset");
  CHECK(p_cuDevicePrimaryCtxRetain(&primary, dev) == CUDA_SUCCESS && p_cuCtxSetCurrent(primary) == CUDA_SUCCESS,
        "ctxreset: retain after the reset");
  /* the created context's 8 + 24, the primary context's new 8 */
  if (usedIs(40, "after the reset")) return 1;
  CHECK(physicalUsed() == 40 * MIB, "ctxreset: the device holds %llu MiB", (unsigned long long)(physicalUsed() / MIB));
  return 0;
}

/* primaryrelease: the last release of the primary context gives back what it held, not what
 * another context of the device holds. */
static int scenarioPrimaryRelease(void) {
  int rc = setup();
  if (rc) return rc;
  CUcontext c;
  CUdeviceptr p;
  CUdevice dev;
  p_cuDeviceGet(&dev, 0);
  CHECK(createContext(&c) == CUDA_SUCCESS, "primaryrelease: no context");
  CHECK(allocMiB(&p, 40) == CUDA_SUCCESS, "primaryrelease: 40 MiB in the created context");
  CHECK(p_cuDevicePrimaryCtxRelease_v2(dev) == CUDA_SUCCESS, "primaryrelease: release");
  if (usedIs(48, "after the primary context's last release")) return 1;
  CHECK(allocMiB(&p, 20) == CUDA_ERROR_OUT_OF_MEMORY, "primaryrelease: 20 MiB more than the limit allowed");
  return 0;
}

/* vmmrelease: create, map, release (NVIDIA's idiom): the memory stays until it is unmapped. */
static int scenarioVmmRelease(void) {
  int rc = setup();
  if (rc) return rc;
  CUmemAllocationProp prop;
  memset(&prop, 0, sizeof prop);
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  CUmemGenericAllocationHandle h;
  CUdeviceptr va, p;
  CHECK(p_cuMemCreate(&h, 32 * MIB, &prop, 0) == CUDA_SUCCESS, "vmmrelease: create");
  CHECK(p_cuMemAddressReserve(&va, 32 * MIB, 0, 0, 0) == CUDA_SUCCESS, "vmmrelease: reserve");
  CHECK(p_cuMemMap(va, 32 * MIB, 0, h, 0) == CUDA_SUCCESS, "vmmrelease: map");
  CHECK(p_cuMemRelease(h) == CUDA_SUCCESS, "vmmrelease: release");
  if (usedIs(40, "released but mapped")) return 1;
  CHECK(allocMiB(&p, 32) == CUDA_ERROR_OUT_OF_MEMORY, "vmmrelease: 32 MiB more than the limit allowed");
  CHECK(p_cuMemUnmap(va, 32 * MIB) == CUDA_SUCCESS, "vmmrelease: unmap");
  if (usedIs(8, "unmapped")) return 1;
  CHECK(allocMiB(&p, 32) == CUDA_SUCCESS, "vmmrelease: 32 MiB after the unmap");
  return p_cuMemAddressFree(va, 32 * MIB) == CUDA_SUCCESS ? 0 : fail("vmmrelease: address free");
}

/* graphexec: an executable graph allocates when it runs, also after its graph is destroyed;
 * the graph allocator keeps the memory after the allocation is freed, until trimmed. */
static int scenarioGraphExec(void) {
  int rc = setup();
  if (rc) return rc;
  CUgraph g;
  CUgraphExec exec;
  CUgraphNode node;
  CUdeviceptr p;
  CUDA_MEM_ALLOC_NODE_PARAMS params;
  memset(&params, 0, sizeof params);
  params.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  params.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  params.bytesize = 32 * MIB;
  CHECK(p_cuGraphCreate(&g, 0) == CUDA_SUCCESS, "graphexec: graph");
  CHECK(p_cuGraphAddMemAllocNode(&node, g, NULL, 0, &params) == CUDA_SUCCESS, "graphexec: allocation node");
  CHECK(p_cuGraphInstantiateWithFlags(&exec, g, 0) == CUDA_SUCCESS, "graphexec: instantiate");
  CHECK(p_cuGraphDestroy(g) == CUDA_SUCCESS, "graphexec: destroy the graph");
  CHECK(p_cuGraphLaunch(exec, NULL) == CUDA_SUCCESS && p_cuStreamSynchronize(NULL) == CUDA_SUCCESS,
        "graphexec: launch");
  if (usedIs(40, "after the launch")) return 1;
  CHECK(allocMiB(&p, 32) == CUDA_ERROR_OUT_OF_MEMORY, "graphexec: 32 MiB more than the limit allowed");
  CHECK(p_cuMemFree_v2(params.dptr) == CUDA_SUCCESS, "graphexec: free the graph's allocation");
  if (usedIs(40, "freed: the graph allocator keeps it")) return 1;
  CHECK(allocMiB(&p, 32) == CUDA_SUCCESS, "graphexec: 32 MiB once the graph memory can be trimmed");
  if (usedIs(40, "trimmed for the allocation")) return 1;
  CHECK(physicalUsed() <= 64 * MIB, "graphexec: the device holds %llu MiB", (unsigned long long)(physicalUsed() / MIB));
  return p_cuGraphExecDestroy(exec) == CUDA_SUCCESS ? 0 : fail("graphexec: exec destroy");
}

static CUresult setThreshold(CUmemoryPool pool, cuuint64_t bytes) {
  return p_cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &bytes);
}

/* pools: what pools hold is charged: kept over their release threshold, trimmed, and never
 * more than the limit together. */
static int scenarioPools(void) {
  int rc = setup();
  if (rc) return rc;
  CUmemoryPool def, pools[8];
  CUdeviceptr p;
  CHECK(p_cuDeviceGetDefaultMemPool(&def, 0) == CUDA_SUCCESS, "pools: default pool");
  CHECK(setThreshold(def, ~0ull) == CUDA_SUCCESS, "pools: threshold");
  CHECK(p_cuMemAllocAsync(&p, 32 * MIB, NULL) == CUDA_SUCCESS, "pools: 32 MiB from the default pool");
  CHECK(p_cuMemFreeAsync(p, NULL) == CUDA_SUCCESS && p_cuStreamSynchronize(NULL) == CUDA_SUCCESS, "pools: free");
  if (usedIs(40, "freed into a pool that keeps everything")) return 1;
  CHECK(p_cuMemPoolTrimTo(def, 0) == CUDA_SUCCESS, "pools: trim");
  if (usedIs(8, "trimmed")) return 1;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  for (int i = 0; i < 8; ++i) {
    CHECK(p_cuMemPoolCreate(&pools[i], &props) == CUDA_SUCCESS && setThreshold(pools[i], ~0ull) == CUDA_SUCCESS,
          "pools: pool %d", i);
    /* fits only once what the other pools keep is trimmed */
    CHECK(p_cuMemAllocFromPoolAsync(&p, 32 * MIB, pools[i], NULL) == CUDA_SUCCESS, "pools: 32 MiB from pool %d", i);
    CHECK(p_cuMemFreeAsync(p, NULL) == CUDA_SUCCESS && p_cuStreamSynchronize(NULL) == CUDA_SUCCESS,
          "pools: free into pool %d", i);
    CHECK(physicalUsed() <= 64 * MIB, "pools: with %d pools the device holds %llu MiB", i + 1,
          (unsigned long long)(physicalUsed() / MIB));
    CHECK(containerUsed() <= 64 * MIB, "pools: with %d pools the container uses %llu MiB", i + 1,
          (unsigned long long)(containerUsed() / MIB));
  }
  if (usedIs(40, "eight pools, the last one keeping 32 MiB")) return 1;
  for (int i = 0; i < 8; ++i) CHECK(p_cuMemPoolDestroy(pools[i]) == CUDA_SUCCESS, "pools: destroy %d", i);
  if (usedIs(8, "the pools destroyed")) return 1;
  /* A release threshold: the pool keeps that much at a synchronisation, not more. */
  CHECK(setThreshold(def, 16 * MIB) == CUDA_SUCCESS, "pools: threshold 16 MiB");
  CHECK(p_cuMemAllocAsync(&p, 32 * MIB, NULL) == CUDA_SUCCESS, "pools: 32 MiB again");
  CHECK(p_cuMemFreeAsync(p, NULL) == CUDA_SUCCESS && p_cuStreamSynchronize(NULL) == CUDA_SUCCESS, "pools: free");
  if (usedIs(24, "kept up to the threshold")) return 1;
  CHECK(setThreshold(def, 0) == CUDA_SUCCESS && p_cuCtxSynchronize() == CUDA_SUCCESS, "pools: threshold 0");
  return usedIs(8, "threshold 0 after a synchronisation");
}

/* freeasync: a stream-ordered free gives the memory back when the device reaches it. */
static int scenarioFreeAsync(void) {
  int rc = setup();
  if (rc) return rc;
  CUstream s;
  CUfunction spin;
  CUdeviceptr p, q;
  unsigned long long us = 300000;
  void* params[] = {&us};
  CHECK(p_cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS, "freeasync: stream");
  if (loadSpin(&spin) != 0) return 1;
  CHECK(p_cuMemAllocAsync(&p, 32 * MIB, s) == CUDA_SUCCESS, "freeasync: 32 MiB");
  CHECK(p_cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == CUDA_SUCCESS, "freeasync: kernel");
  CHECK(p_cuMemFreeAsync(p, s) == CUDA_SUCCESS, "freeasync: free behind a 300 ms kernel");
  CHECK(allocMiB(&q, 32) == CUDA_ERROR_OUT_OF_MEMORY,
        "freeasync: 32 MiB allowed while the freed 32 MiB are still in use (the device holds %llu MiB)",
        (unsigned long long)(physicalUsed() / MIB));
  CHECK(p_cuStreamSynchronize(s) == CUDA_SUCCESS, "freeasync: sync");
  CHECK(allocMiB(&q, 32) == CUDA_SUCCESS, "freeasync: 32 MiB once the free has happened");
  return 0;
}

/* driverversion: what the driver says it is. */
static int scenarioDriverVersion(void) {
  if (loadCuda() != 0) return 3;
  int v = 0;
  if (p_cuDriverGetVersion(&v) != CUDA_SUCCESS) return fail("cuDriverGetVersion failed");
  printf("driver=%d\n", v);
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: limiter_probe <scenario> [args]\n");
    return 3;
  }
  const char* s = argv[1];
  size_t arg = argc > 2 ? strtoull(argv[2], NULL, 10) : 0;
  size_t arg2 = argc > 3 ? strtoull(argv[3], NULL, 10) : 0;
  if (!strcmp(s, "init")) {
    if (loadCuda()) return 3;
    CUresult r = p_cuInit(0);
    if (r != CUDA_SUCCESS) {
      fprintf(stderr, "probe: cuInit failed: %d\n", (int)r);
      return 3;
    }
    return 0;
  }
  if (!strcmp(s, "path") && argc > 4) return scenarioPath(argv[2], arg2 * MIB, strtoull(argv[4], NULL, 10) * MIB);
  if (!strcmp(s, "nothing")) return 0; /* a process of the container that never uses CUDA */
  if (!strcmp(s, "meminfo")) return scenarioMeminfo();
  if (!strcmp(s, "meminfo2")) return scenarioMeminfoTwoDevices();
  if (!strcmp(s, "alloc")) return scenarioAlloc(arg * MIB, 0, argc > 3 && !strcmp(argv[3], "managed"));
  if (!strcmp(s, "hold")) return scenarioAlloc(arg * MIB, 1, 0);
  if (!strcmp(s, "race")) return scenarioRace(arg * MIB);
  if (!strcmp(s, "nvml")) return scenarioNvml(arg * MIB);
  if (!strcmp(s, "procaddr")) return scenarioProcAddr();
  if (!strcmp(s, "passthrough")) return scenarioPassthrough();
  if (!strcmp(s, "compute")) {
    if (argc > 5 && atoi(argv[5]) > 0) g_syncEvery = (unsigned)atoi(argv[5]);
    return scenarioCompute((unsigned)arg, arg2, argc > 4 ? (unsigned)atoi(argv[4]) : 0);
  }
  if (!strcmp(s, "manyctx")) return scenarioManyContexts((unsigned)arg, (unsigned)arg2);
  if (!strcmp(s, "primaryreset")) return scenarioPrimaryReset((unsigned)arg);
  if (!strcmp(s, "twostreams")) return scenarioTwoStreams();
  if (!strcmp(s, "driverversion")) return scenarioDriverVersion();
  if (!strcmp(s, "ctxdestroy")) return scenarioContextDestroy();
  if (!strcmp(s, "ctxreset")) return scenarioContextReset();
  if (!strcmp(s, "primaryrelease")) return scenarioPrimaryRelease();
  if (!strcmp(s, "vmmrelease")) return scenarioVmmRelease();
  if (!strcmp(s, "graphexec")) return scenarioGraphExec();
  if (!strcmp(s, "pools")) return scenarioPools();
  if (!strcmp(s, "freeasync")) return scenarioFreeAsync();
  fprintf(stderr, "probe: unknown scenario %s\n", s);
  return 3;
}
