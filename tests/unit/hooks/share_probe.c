/* Processes of one container sharing device memory, for the limiter's sharing tests
 * (share_test.cpp): CUDA IPC handles and VMM handles exported as file descriptors, passed
 * between processes over unix sockets with SCM_RIGHTS as NCCL and PyTorch do.
 *
 * Usage: share_probe <scenario> [args]. The process that runs the scenario never calls CUDA:
 * it starts workers (this program again, "worker", with or without LD_PRELOAD), tells each
 * what to do over a socket and relays handles and descriptors between them. After every step
 * it compares what the container's region says it uses (cuMemGetInfo in a worker) with the
 * device memory the fake driver really holds (vgpuFakeDeviceUsedBytes), so that memory
 * charged twice or not at all is seen where it happens. Exit code 0 ok, 1 a check failed,
 * 3 setup failed; each step is a line on stdout, failures are explained on stderr. */


#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "share_probe.h"
#include "vgpu/shared_region.h"

#define MAX_WORKERS 9

/* ---- the scenario: workers, steps, and the check after each step ---- */

typedef struct {
  pid_t pid;
  int sock;
  int dev;
} Worker;

static Worker g_w[MAX_WORKERS];
static int g_n;
static int g_devices = 1;
static int g_failed;

static void failf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void failf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "share_probe: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  g_failed = 1;
}

/* Starts a worker on device `dev`; `preload` false: without libvgpu.so (unaccounted). */
static int startWorker(const char* self, int dev, int preload) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(sv[1], 3); /* dup2 clears close-on-exec */
    if (!preload) unsetenv("LD_PRELOAD");
    execl(self, self, "worker", (char*)NULL);
    _exit(127);
  }
  close(sv[1]);
  Worker* w = &g_w[g_n];
  w->pid = pid;
  w->sock = sv[0];
  w->dev = dev;
  return g_n++;
}

/* Sends worker w a step (with descriptor `fd`, -1: none); its reply, and in *fdOut (if not
 * NULL) a descriptor that came with it. */
static Reply callFd(int w, const char* op, int64_t a, int64_t b, const void* data, int fd, int* fdOut) {
  Msg m;
  Reply r;
  memset(&m, 0, sizeof m);
  memset(&r, 0, sizeof r);
  snprintf(m.op, sizeof m.op, "%s", op);
  m.a = a;
  m.b = b;
  if (data) memcpy(m.data, data, sizeof m.data);
  r.rc = CUDA_ERROR_UNKNOWN;
  if (sendWithFd(g_w[w].sock, &m, sizeof m, fd) != 0 || recvWithFd(g_w[w].sock, &r, sizeof r, fdOut) != 0) {
    failf("worker %d did not answer %s", w, op);
    r.rc = CUDA_ERROR_UNKNOWN;
  }
  return r;
}

static Reply call(int w, const char* op, int64_t a, int64_t b, const void* data, int fd) {
  return callFd(w, op, a, b, data, fd, NULL);
}

/* Like call(), and the step must succeed. */
static Reply must(int w, const char* op, int64_t a, int64_t b, const void* data, int fd) {
  Reply r = call(w, op, a, b, data, fd);
  if (r.rc != CUDA_SUCCESS)
    failf("worker %d: %s(%lld, %lld) failed with CUresult %d", w, op, (long long)a, (long long)b, r.rc);
  return r;
}

/* Worker w's exported descriptor of handle h (the scenario keeps it until it is passed on). */
static int exportFd(int w, int64_t handle) {
  Msg m;
  Reply r;
  memset(&m, 0, sizeof m);
  snprintf(m.op, sizeof m.op, "export");
  m.a = handle;
  int fd = -1;
  if (sendWithFd(g_w[w].sock, &m, sizeof m, -1) != 0 || recvWithFd(g_w[w].sock, &r, sizeof r, &fd) != 0 ||
      r.rc != CUDA_SUCCESS || fd < 0) {
    failf("worker %d: export of handle %lld failed (CUresult %d)", w, (long long)handle, r.rc);
    return -1;
  }
  return fd;
}

/* Worker w imports `fd` (closed here) and maps `bytes` of it on device dev. */
static Reply importFd(int w, int fd, int64_t bytes, int dev) {
  Reply r = call(w, "import", bytes, dev, NULL, fd);
  if (fd >= 0) close(fd);
  return r;
}

/* What the region says the container uses on each device must be what the device holds:
 * `asker[d]` is a worker with a context on device d (-1: not checked). */
static int g_asker[2] = {0, -1};

static void check(const char* step) {
  for (int d = 0; d < g_devices; ++d) {
    if (g_asker[d] < 0) continue;
    Reply r = call(g_asker[d], "usage", d, 0, NULL, -1);
    printf("step=%s dev=%d region=%lld physical=%lld\n", step, d, (long long)r.v1, (long long)r.v2);
    if (r.rc != CUDA_SUCCESS || r.v1 != r.v2)
      failf("after %s: device %d: the region says %lld MiB are used, the device holds %lld MiB", step, d,
            (long long)(r.v1 / (int64_t)MIB), (long long)(r.v2 / (int64_t)MIB));
  }
  fflush(stdout);
}

static int64_t usage(int w, int dev) { return call(w, "usage", dev, 0, NULL, -1).v1; }

static void initAll(void) {
  for (int i = 0; i < g_n; ++i) must(i, "init", g_w[i].dev, 0, NULL, -1);
}

/* One process holds 48 MiB under a 64 MiB limit, another of the container opens it (IPC),
 * the exporter frees while the importer still has it open, then the importer closes it. */
static void scenarioIpc(const char* self) {
  startWorker(self, 0, 1);
  startWorker(self, 0, 1);
  initAll();
  check("contexts");
  Reply a = must(0, "alloc", 48 * MIB, 0, NULL, -1);
  Reply h = must(0, "ipcget", a.v1, 0, NULL, -1);
  check("exported");
  Reply o = must(1, "ipcopen", 48 * MIB, 0, h.data, -1);
  check("opened");
  Reply o2 = must(1, "ipcopen", 48 * MIB, 0, h.data, -1); /* a second open of the same handle */
  if (o2.rc == CUDA_SUCCESS) must(1, "ipcclose", o2.v1, 0, NULL, -1);
  check("opened twice, closed once");
  must(0, "free", a.v1, 0, NULL, -1);
  check("exporter freed, importer still has it open");
  if (call(0, "alloc", 24 * MIB, 0, NULL, -1).rc != CUDA_ERROR_OUT_OF_MEMORY)
    failf("24 MiB on top of 48 MiB that are still open fitted a 64 MiB limit");
  must(1, "ipcclose", o.v1, 0, NULL, -1);
  check("closed");
  Reply b = must(0, "alloc", 48 * MIB, 0, NULL, -1);
  check("the memory is back");
  must(0, "free", b.v1, 0, NULL, -1);
  /* Exported from a context that is destroyed while the importer has it open. */
  Reply c = must(0, "ctxexport", 40 * MIB, 0, NULL, -1);
  Reply oc = must(1, "ipcopen", 40 * MIB, 0, c.data, -1);
  check("exported from a second context, opened");
  must(0, "ctxdestroy", c.v1, 0, NULL, -1);
  check("the exporter's context destroyed, importer still has it open");
  must(1, "ipcclose", oc.v1, 0, NULL, -1);
  check("closed after the exporter's context went");
}

/* The same with a VMM handle exported as a file descriptor: imported, mapped at two
 * addresses, retained and released, bound to a multicast object that both map; the exporter
 * releases first. */
static void scenarioVmm(const char* self) {
  startWorker(self, 0, 1);
  startWorker(self, 0, 1);
  initAll();
  Reply a = must(0, "vmm", 48 * MIB, 0, NULL, -1);
  int fd = exportFd(0, a.v2);
  check("exported");
  Reply i = importFd(1, fd, 48 * MIB, 0);
  if (i.rc != CUDA_SUCCESS) failf("import and map of 48 MiB the container holds failed: CUresult %d", i.rc);
  check("imported and mapped");
  /* A multicast object with that memory bound to it, mapped by both (NCCL's NVLS buffers). */
  Reply mc = must(0, "mc", 48 * MIB, a.v2, NULL, -1);
  check("multicast object bound and mapped");
  Reply mi = importFd(1, exportFd(0, mc.v2), 48 * MIB, 0);
  if (mi.rc != CUDA_SUCCESS) failf("import and map of a multicast object failed: CUresult %d", mi.rc);
  check("multicast object imported and mapped");
  must(1, "unmap", mi.v1, 48 * MIB, NULL, -1);
  must(1, "release", mi.v2, 0, NULL, -1);
  must(0, "unmap", mc.v1, 48 * MIB, NULL, -1);
  must(0, "release", mc.v2, 0, NULL, -1);
  check("multicast object let go");
  Reply second = must(1, "map", i.v2, 48 * MIB, NULL, -1);
  check("mapped at a second address");
  Reply kept = must(1, "retain", i.v1, 0, NULL, -1);
  must(1, "release", kept.v1, 0, NULL, -1);
  check("retained and released");
  must(0, "unmap", a.v1, 48 * MIB, NULL, -1);
  must(0, "release", a.v2, 0, NULL, -1);
  check("exporter released, importer still maps it");
  if (call(0, "alloc", 24 * MIB, 0, NULL, -1).rc != CUDA_ERROR_OUT_OF_MEMORY)
    failf("24 MiB on top of 48 MiB that are still mapped fitted a 64 MiB limit");
  must(1, "unmap", second.v1, 48 * MIB, NULL, -1);
  check("one mapping left");
  must(1, "release", i.v2, 0, NULL, -1);
  check("released, still mapped");
  must(1, "unmap", i.v1, 48 * MIB, NULL, -1);
  check("unmapped");
  Reply b = must(0, "alloc", 48 * MIB, 0, NULL, -1);
  check("the memory is back");
  must(0, "free", b.v1, 0, NULL, -1);
}

/* NCCL/vLLM-shaped: n processes under one limit; the first pre-allocates 90 % of the slice
 * and shares it by IPC; each then makes a buffer, exports it as a descriptor and imports and
 * maps every other one's (all-to-all), as NCCL's cuMem P2P buffers; then all let go. */
static void scenarioRing(const char* self, int n, int64_t limit) {
  for (int i = 0; i < n; ++i) startWorker(self, 0, 1);
  initAll();
  check("contexts");
  int64_t big = limit / 10 * 9;
  int64_t buf = 4 * MIB;
  Reply pre = must(0, "alloc", big, 0, NULL, -1);
  Reply h = must(0, "ipcget", pre.v1, 0, NULL, -1);
  check("pre-allocated 90 %");
  int64_t opened[MAX_WORKERS] = {0};
  for (int i = 1; i < n; ++i) opened[i] = must(i, "ipcopen", big, 0, h.data, -1).v1;
  check("every process opened the pre-allocation");
  Reply own[MAX_WORKERS];
  for (int i = 0; i < n; ++i) own[i] = must(i, "vmm", buf, 0, NULL, -1);
  check("buffers");
  int64_t peer[MAX_WORKERS][MAX_WORKERS][2];
  memset(peer, 0, sizeof peer);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j) continue;
      int fd = exportFd(j, own[j].v2);
      Reply r = importFd(i, fd, buf, 0);
      if (r.rc != CUDA_SUCCESS) failf("worker %d: import of worker %d's buffer failed: CUresult %d", i, j, r.rc);
      peer[i][j][0] = r.v1;
      peer[i][j][1] = r.v2;
    }
    char step[32];
    snprintf(step, sizeof step, "worker %d imported all", i);
    check(step);
  }
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      if (i == j || !peer[i][j][0]) continue;
      must(i, "unmap", peer[i][j][0], buf, NULL, -1);
      must(i, "release", peer[i][j][1], 0, NULL, -1);
    }
    must(i, "unmap", own[i].v1, buf, NULL, -1);
    must(i, "release", own[i].v2, 0, NULL, -1);
  }
  check("buffers let go");
  for (int i = 1; i < n; ++i) must(i, "ipcclose", opened[i], 0, NULL, -1);
  must(0, "free", pre.v1, 0, NULL, -1);
  check("pre-allocation let go");
}

/* A process without libvgpu.so (unaccounted) exports; a limited process that imports is
 * charged: refused over the limit, counted within it. */
static void scenarioSmuggle(const char* self) {
  startWorker(self, 0, 1); /* limited, 64 MiB */
  startWorker(self, 0, 0); /* no libvgpu.so */
  initAll();
  g_asker[0] = -1; /* the device also holds the unaccounted process's memory */
  Reply big = must(1, "alloc", 48 * MIB, 0, NULL, -1);
  Reply h = must(1, "ipcget", big.v1, 0, NULL, -1);
  Reply vmm = must(1, "vmm", 48 * MIB, 0, NULL, -1);
  Reply own = must(0, "alloc", 16 * MIB, 0, NULL, -1); /* 48 MiB more would not fit */
  /* An export of the container's own, kept open: the outside one must not pass for it (with
   * device-node exports both are the same inode). */
  Reply mine = must(0, "vmm", 8 * MIB, 0, NULL, -1);
  int mineFd = exportFd(0, mine.v2);
  int64_t before = usage(0, 0);
  Reply o = call(0, "ipcopen", 48 * MIB, 0, h.data, -1);
  if (o.rc != CUDA_ERROR_OUT_OF_MEMORY)
    failf("opening 48 MiB from outside the container gave CUresult %d, not out of memory", o.rc);
  Reply i = importFd(0, exportFd(1, vmm.v2), 48 * MIB, 0);
  if (i.rc != CUDA_ERROR_OUT_OF_MEMORY)
    failf("mapping 48 MiB from outside the container gave CUresult %d, not out of memory", i.rc);
  if (usage(0, 0) != before) failf("refused imports changed the usage");
  Reply small = must(1, "alloc", 16 * MIB, 0, NULL, -1);
  Reply hs = must(1, "ipcget", small.v1, 0, NULL, -1);
  Reply os = must(0, "ipcopen", 16 * MIB, 0, hs.data, -1);
  int64_t after = usage(0, 0);
  printf("smuggle before=%lld after=%lld\n", (long long)before, (long long)after);
  if (after - before != (int64_t)(16 * MIB))
    failf("an open of 16 MiB from outside the container was charged %lld bytes", (long long)(after - before));
  must(0, "ipcclose", os.v1, 0, NULL, -1);
  if (usage(0, 0) != before) failf("closing what was charged did not give it back");
  must(0, "free", own.v1, 0, NULL, -1);
  if (mineFd >= 0) close(mineFd);
}

/* A pool exported by a limited process of the container: another one imports it and a 40 MiB
 * pointer of it under a 64 MiB limit, and allocates 16 MiB besides (charged once, it fits);
 * both free, the pools go. */
static void scenarioPool(const char* self) {
  startWorker(self, 0, 1);
  startWorker(self, 0, 1);
  initAll();
  int pfd = -1;
  Reply pool = callFd(0, "pool", 0, 0, NULL, -1, &pfd);
  if (pool.rc != CUDA_SUCCESS || pfd < 0) {
    failf("worker 0: an exported pool failed: CUresult %d", pool.rc);
    return;
  }
  check("pool created and exported");
  Reply a = must(0, "poolalloc", pool.v2, 40 * MIB, NULL, -1);
  check("40 MiB from the exported pool");
  Reply ip = must(1, "poolimport", 0, 0, NULL, pfd);
  close(pfd);
  check("pool imported");
  Reply o = must(1, "poolptr", ip.v2, 0, a.data, -1);
  check("pointer imported");
  Reply b = must(1, "alloc", 16 * MIB, 0, NULL, -1);
  check("16 MiB besides");
  must(1, "free", b.v1, 0, NULL, -1);
  must(1, "freeasync", o.v1, 0, NULL, -1);
  check("importer freed the pointer");
  must(0, "freeasync", a.v1, 0, NULL, -1);
  check("exporter freed it");
  must(1, "pooldestroy", ip.v2, 0, NULL, -1);
  must(0, "pooldestroy", pool.v2, 0, NULL, -1);
  check("pools destroyed");
}

/* A pool exported by a process without libvgpu.so: pointers a limited process imports from it
 * are charged to the importer (refused over its limit), and given back by cuMemFreeAsync or
 * cuMemFree; an exported pool of the container's own, kept open, is not taken for it. */
static void scenarioPoolSmuggle(const char* self) {
  startWorker(self, 0, 1); /* limited, 64 MiB */
  startWorker(self, 0, 0); /* no libvgpu.so */
  initAll();
  g_asker[0] = -1; /* the device also holds the unaccounted process's memory */
  int pfd = -1, mineFd = -1;
  Reply pool = callFd(1, "pool", 0, 0, NULL, -1, &pfd);
  Reply mine = callFd(0, "pool", 0, 0, NULL, -1, &mineFd);
  if (pool.rc != CUDA_SUCCESS || pfd < 0 || mine.rc != CUDA_SUCCESS) {
    failf("exported pools failed: CUresult %d, %d", pool.rc, mine.rc);
    return;
  }
  Reply big = must(1, "poolalloc", pool.v2, 48 * MIB, NULL, -1);
  Reply small = must(1, "poolalloc", pool.v2, 16 * MIB, NULL, -1);
  Reply own = must(0, "alloc", 16 * MIB, 0, NULL, -1); /* 48 MiB more would not fit */
  Reply ip = must(0, "poolimport", 0, 0, NULL, pfd);
  close(pfd);
  int64_t before = usage(0, 0);
  Reply o = call(0, "poolptr", ip.v2, 0, big.data, -1);
  if (o.rc != CUDA_ERROR_OUT_OF_MEMORY)
    failf("importing a 48 MiB pool pointer from outside the container gave CUresult %d, not out of memory", o.rc);
  if (usage(0, 0) != before) failf("the refused import changed the usage");
  const char* frees[] = {"freeasync", "free"};
  for (int i = 0; i < 2; ++i) {
    Reply os = must(0, "poolptr", ip.v2, 0, small.data, -1);
    int64_t after = usage(0, 0);
    printf("poolsmuggle %s before=%lld after=%lld\n", frees[i], (long long)before, (long long)after);
    if (after - before != (int64_t)(16 * MIB))
      failf("a 16 MiB pool pointer from outside the container was charged %lld bytes", (long long)(after - before));
    must(0, frees[i], os.v1, 0, NULL, -1);
    if (usage(0, 0) != before) failf("%s of the imported pointer did not give its charge back", frees[i]);
  }
  must(0, "free", own.v1, 0, NULL, -1);
  if (mineFd >= 0) close(mineFd);
}

/* Two devices with a limit each: a process on device 1 opens and maps device 0's memory and
 * enables peer access; neither device is charged again. Host memory is never device memory. */
static void scenarioTwoDevices(const char* self) {
  g_devices = 2;
  startWorker(self, 0, 1);
  startWorker(self, 1, 1);
  g_asker[0] = 0;
  g_asker[1] = 1;
  initAll();
  check("contexts");
  Reply a = must(0, "alloc", 48 * MIB, 0, NULL, -1);
  Reply h = must(0, "ipcget", a.v1, 0, NULL, -1);
  Reply v = must(0, "vmm", 48 * MIB, 0, NULL, -1);
  check("device 0 holds 96 MiB");
  Reply o = must(1, "ipcopen", 48 * MIB, 0, h.data, -1);
  check("opened on device 1");
  Reply i = importFd(1, exportFd(0, v.v2), 48 * MIB, 0);
  if (i.rc != CUDA_SUCCESS) failf("import on device 1 of device 0's memory failed: CUresult %d", i.rc);
  check("imported on device 1");
  must(0, "peer", 1, 0, NULL, -1); /* device 1's context in the process of device 0 */
  check("a second context");
  int64_t u0 = usage(0, 0);
  must(0, "enablepeer", 1, 0, NULL, -1);
  if (usage(0, 0) != u0) failf("peer access changed the usage");
  check("peer access");
  must(1, "host", 0, 0, NULL, -1);
  check("host memory");
  must(1, "unmap", i.v1, 48 * MIB, NULL, -1);
  must(1, "release", i.v2, 0, NULL, -1);
  must(1, "ipcclose", o.v1, 0, NULL, -1);
  check("device 1 let go");
}

/* What a hostile process of the container can write into the region's share table: entries
 * naming memory from outside the container with a device out of range, tags at offsets no
 * file has, every holder bit set, absurd sizes. Imports from outside are still charged (and
 * refused over the limit), bad descriptors and handles are errors, nothing crashes. */
static void scenarioHostile(const char* self) {
  startWorker(self, 0, 1); /* limited, 64 MiB */
  startWorker(self, 0, 0); /* no libvgpu.so */
  initAll();
  g_asker[0] = -1;
  Reply big = must(1, "alloc", 48 * MIB, 0, NULL, -1);
  Reply h = must(1, "ipcget", big.v1, 0, NULL, -1);
  Reply vmm = must(1, "vmm", 48 * MIB, 0, NULL, -1);
  Reply own = must(0, "alloc", 16 * MIB, 0, NULL, -1);
  const char* path = getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE");
  int rfd = path ? open(path, O_RDWR | O_CLOEXEC) : -1;
  vgpu_region* r = rfd < 0 ? MAP_FAILED : mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED, rfd, 0);
  struct stat null;
  if (r == MAP_FAILED || stat("/dev/null", &null) != 0) {
    failf("cannot map the region %s", path ? path : "(unset)");
    return;
  }
  for (int i = 0; i < VGPU_REGION_MAX_SHARES; ++i) {
    vgpu_region_share* e = &r->shares.entries[i];
    memset(e->holders, 0xff, sizeof e->holders);
    e->dev = i % 2 ? 999 : -5;
    e->bytes = UINT64_MAX - (uint64_t)i;
    memset(e->key, 0x77, sizeof e->key);
    if (i == 0) {
      memcpy(e->key, h.data, sizeof e->key); /* the outside IPC handle, on no device */
      e->kind = VGPU_SHARE_IPC;
      continue;
    }
    struct {
      char tag[8];
      uint64_t dev, ino, rdev, base;
    } k = {{'v', 'g', 'p', 'u', '-', 'f', 'd', 't'}, (uint64_t)null.st_dev, (uint64_t)null.st_ino,
           (uint64_t)null.st_rdev, UINT64_MAX - (uint64_t)i};
    if (i % 2) memcpy(e->key, &k, sizeof k); /* /dev/null tagged at offsets no file can have */
    e->kind = VGPU_SHARE_FD;
  }
  int64_t before = usage(0, 0);
  Reply o = call(0, "ipcopen", 48 * MIB, 0, h.data, -1);
  if (o.rc != CUDA_ERROR_OUT_OF_MEMORY) failf("opening 48 MiB from outside gave CUresult %d, not out of memory", o.rc);
  Reply i = importFd(0, exportFd(1, vmm.v2), 48 * MIB, 0);
  if (i.rc != CUDA_ERROR_OUT_OF_MEMORY) failf("mapping 48 MiB from outside gave CUresult %d, not out of memory", i.rc);
  Reply bad = call(0, "import", 48 * MIB, 0, NULL, -1); /* no descriptor: -1 */
  if (bad.rc == CUDA_SUCCESS) failf("importing descriptor -1 succeeded");
  unsigned char junk[CU_IPC_HANDLE_SIZE];
  memset(junk, 0x42, sizeof junk);
  Reply bj = call(0, "ipcopen", 48 * MIB, 0, junk, -1);
  if (bj.rc == CUDA_SUCCESS) failf("opening a handle of junk succeeded");
  if (usage(0, 0) != before) failf("refused imports changed the usage");
  must(0, "free", own.v1, 0, NULL, -1);
  munmap(r, sizeof *r);
  close(rfd);
}

int main(int argc, char** argv) {
  if (argc >= 2 && !strcmp(argv[1], "worker")) return workerMain(3);
  if (argc < 2) {
    fprintf(stderr, "usage: share_probe ipc|vmm|ring <n> <limit_mib>|smuggle|two-devices|hostile|pool|poolsmuggle\n");
    return 3;
  }
  const char* self = "/proc/self/exe";
  char path[4096];
  ssize_t len = readlink(self, path, sizeof path - 1);
  if (len > 0) {
    path[len] = '\0';
    self = path;
  }
  const char* s = argv[1];
  if (!strcmp(s, "ipc")) {
    scenarioIpc(self);
  } else if (!strcmp(s, "vmm")) {
    scenarioVmm(self);
  } else if (!strcmp(s, "ring") && argc >= 4) {
    int n = atoi(argv[2]);
    if (n < 2 || n > MAX_WORKERS - 1) return 3;
    scenarioRing(self, n, (int64_t)atoll(argv[3]) * (int64_t)MIB);
  } else if (!strcmp(s, "smuggle")) {
    scenarioSmuggle(self);
  } else if (!strcmp(s, "two-devices")) {
    scenarioTwoDevices(self);
  } else if (!strcmp(s, "hostile")) {
    scenarioHostile(self);
  } else if (!strcmp(s, "pool")) {
    scenarioPool(self);
  } else if (!strcmp(s, "poolsmuggle")) {
    scenarioPoolSmuggle(self);
  } else {
    fprintf(stderr, "share_probe: unknown scenario %s\n", s);
    return 3;
  }
  for (int i = 0; i < g_n; ++i) {
    call(i, "quit", 0, 0, NULL, -1);
    close(g_w[i].sock);
    int status = 0;
    waitpid(g_w[i].pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failf("worker %d ended with status %d", i, status);
  }
  return g_failed ? 1 : 0;
}
