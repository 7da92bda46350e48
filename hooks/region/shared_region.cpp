// The shared region: mapping, initialisation, the robust lock and the accounting.
// Written without exceptions or the C++ library's allocating types because it is linked
// into libvgpu.so, which runs inside every process of a container.

#include "vgpu/shared_region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

void setError(char* err, size_t len, const char* fmt, ...) {
  if (err == nullptr || len == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

uint64_t loadU64(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
void storeU64(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

bool validDevice(int dev) { return dev >= 0 && dev < VGPU_REGION_MAX_DEVICES; }
bool validSlot(int slot) { return slot >= 0 && slot < VGPU_REGION_MAX_PROCS; }

// Reads state and start time (field 22) of /proc/<pid>/stat. False if unreadable.
bool readProcStat(int32_t pid, char* state, uint64_t* startTime) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[1024];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // The command name may hold spaces and parentheses: fields resume after the last ')'.
  char* p = strrchr(buf, ')');
  if (p == nullptr || p[1] == '\0') return false;
  p += 2;
  *state = *p;
  // Field 3 is the state; skip to field 22.
  for (int field = 3; field < 22 && *p != '\0'; ++p) {
    if (*p == ' ') ++field;
  }
  *startTime = strtoull(p, nullptr, 10);
  return true;
}

bool processAlive(int32_t pid, uint64_t startTime) {
  char state = 0;
  uint64_t st = 0;
  if (readProcStat(pid, &state, &st)) {
    if (state == 'Z' || state == 'X') return false;  // exited; its driver memory is gone
    return startTime == 0 || st == startTime;        // another process reusing the PID
  }
  // No /proc: fall back to existence only.
  return kill(pid, 0) == 0 || errno == EPERM;
}

uint64_t ownStartTime() {
  char state = 0;
  uint64_t st = 0;
  return readProcStat(getpid(), &state, &st) ? st : 0;
}

void clearSlotLocked(vgpu_region* r, int slot) {
  vgpu_region_proc* p = &r->procs[slot];
  for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) {
    uint64_t held = loadU64(&p->memory_used[d]);
    if (held == 0) continue;
    uint64_t used = loadU64(&r->devices[d].memory_used);
    storeU64(&r->devices[d].memory_used, used > held ? used - held : 0);
    storeU64(&p->memory_used[d], 0);
  }
  p->start_time = 0;
  __atomic_store_n(&p->pid, 0, __ATOMIC_RELEASE);
}

int reclaimDeadLocked(vgpu_region* r) {
  int reclaimed = 0;
  int32_t self = getpid();
  for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
    int32_t pid = r->procs[s].pid;
    if (pid == 0 || pid == self) continue;
    if (!processAlive(pid, r->procs[s].start_time)) {
      clearSlotLocked(r, s);
      ++reclaimed;
    }
  }
  return reclaimed;
}

// After a holder died mid-update the per-device sums may disagree with the slots; the
// slots are the truth because each is written only by its owner.
void recoverLocked(vgpu_region* r) {
  reclaimDeadLocked(r);
  for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) {
    uint64_t sum = 0;
    for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
      if (r->procs[s].pid != 0) sum += loadU64(&r->procs[s].memory_used[d]);
    }
    storeU64(&r->devices[d].memory_used, sum);
  }
}

int initMutex(vgpu_region* r, bool shared, char* err, size_t len) {
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  int rc = pthread_mutexattr_setpshared(&attr, shared ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE);
  if (rc == 0) rc = pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  if (rc == 0) rc = pthread_mutex_init(&r->lock.mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0) {
    setError(err, len, "initialising the region lock: %s", strerror(rc));
    return VGPU_REGION_ERROR;
  }
  return VGPU_REGION_OK;
}

void initHeader(vgpu_region* r) {
  r->version = VGPU_REGION_VERSION;
  r->header_size = sizeof(vgpu_region);
  r->max_devices = VGPU_REGION_MAX_DEVICES;
  r->max_procs = VGPU_REGION_MAX_PROCS;
}

int checkHeader(const vgpu_region* r, const char* path, char* err, size_t len) {
  if (r->magic != VGPU_REGION_MAGIC) {
    setError(err, len, "%s is not a vgpu shared region (magic %#llx, expected %#llx)", path,
             static_cast<unsigned long long>(r->magic), static_cast<unsigned long long>(VGPU_REGION_MAGIC));
    return VGPU_REGION_ERROR;
  }
  if (r->version < VGPU_REGION_OLDEST_VERSION || r->version > VGPU_REGION_VERSION ||
      r->header_size != sizeof(vgpu_region) ||
      r->max_devices != VGPU_REGION_MAX_DEVICES || r->max_procs != VGPU_REGION_MAX_PROCS) {
    setError(err, len, "%s has region version %u (size %u), this build reads version %u (size %zu)", path, r->version,
             r->header_size, VGPU_REGION_VERSION, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  return VGPU_REGION_OK;
}

}  // namespace

extern "C" {

int vgpu_region_open(const char* path, vgpu_region** out, char* err, size_t err_len) {
  *out = nullptr;
  if (path == nullptr || path[0] == '\0') {
    setError(err, err_len, "no shared region path given");
    return VGPU_REGION_ERROR;
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) {
    setError(err, err_len, "opening shared region %s: %s", path, strerror(errno));
    return VGPU_REGION_ERROR;
  }
  // flock is dropped by the kernel if this process dies, so a crash here blocks no one.
  if (flock(fd, LOCK_EX) != 0) {
    setError(err, err_len, "locking shared region %s: %s", path, strerror(errno));
    close(fd);
    return VGPU_REGION_ERROR;
  }
  int rc = VGPU_REGION_ERROR;
  void* mem = MAP_FAILED;
  do {
    // lseek, not fstat: fstat is a GLIBC_2.33 symbol, and libvgpu.so loads with glibc 2.17.
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0) {
      setError(err, err_len, "sizing up shared region %s: %s", path, strerror(errno));
      break;
    }
    bool fresh = size == 0;
    if (!fresh && static_cast<size_t>(size) != sizeof(vgpu_region)) {
      setError(err, err_len, "%s has %lld bytes, a version %u region has %zu", path, static_cast<long long>(size),
               VGPU_REGION_VERSION, sizeof(vgpu_region));
      break;
    }
    if (fresh) {
      fchmod(fd, 0666);  // every user of the container shares it, whatever the umask
      if (ftruncate(fd, sizeof(vgpu_region)) != 0) {
        setError(err, err_len, "sizing shared region %s: %s", path, strerror(errno));
        break;
      }
    }
    mem = mmap(nullptr, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
      setError(err, err_len, "mapping shared region %s: %s", path, strerror(errno));
      break;
    }
    auto* r = static_cast<vgpu_region*>(mem);
    if (r->magic == 0) {  // fresh, or a creator died before finishing: start over
      memset(r, 0, sizeof(vgpu_region));
      initHeader(r);
      if (initMutex(r, true, err, err_len) != VGPU_REGION_OK) break;
      __atomic_store_n(&r->magic, VGPU_REGION_MAGIC, __ATOMIC_RELEASE);
    }
    if (checkHeader(r, path, err, err_len) != VGPU_REGION_OK) break;
    *out = r;
    rc = VGPU_REGION_OK;
  } while (false);
  if (rc != VGPU_REGION_OK && mem != MAP_FAILED) munmap(mem, sizeof(vgpu_region));
  flock(fd, LOCK_UN);
  close(fd);
  return rc;
}

int vgpu_region_open_readonly(const char* path, const vgpu_region** out, char* err, size_t err_len) {
  *out = nullptr;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    setError(err, err_len, "opening shared region %s: %s", path, strerror(errno));
    return VGPU_REGION_ERROR;
  }
  off_t size = lseek(fd, 0, SEEK_END);
  if (size < 0 || static_cast<size_t>(size) != sizeof(vgpu_region)) {
    setError(err, err_len, "%s is not a version %u shared region (size %lld, expected %zu)", path, VGPU_REGION_VERSION,
             static_cast<long long>(size), sizeof(vgpu_region));
    close(fd);
    return VGPU_REGION_ERROR;
  }
  void* mem = mmap(nullptr, sizeof(vgpu_region), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) {
    setError(err, err_len, "mapping shared region %s: %s", path, strerror(errno));
    return VGPU_REGION_ERROR;
  }
  auto* r = static_cast<const vgpu_region*>(mem);
  if (checkHeader(r, path, err, err_len) != VGPU_REGION_OK) {
    munmap(mem, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  *out = r;
  return VGPU_REGION_OK;
}

int vgpu_region_open_private(vgpu_region** out, char* err, size_t err_len) {
  *out = nullptr;
  void* mem = mmap(nullptr, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    setError(err, err_len, "allocating a private region: %s", strerror(errno));
    return VGPU_REGION_ERROR;
  }
  auto* r = static_cast<vgpu_region*>(mem);
  initHeader(r);
  if (initMutex(r, false, err, err_len) != VGPU_REGION_OK) {
    munmap(mem, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  r->magic = VGPU_REGION_MAGIC;
  *out = r;
  return VGPU_REGION_OK;
}

void vgpu_region_close(const vgpu_region* region) {
  if (region != nullptr) munmap(const_cast<vgpu_region*>(region), sizeof(vgpu_region));
}

int vgpu_region_lock(vgpu_region* r) {
  int rc = pthread_mutex_lock(&r->lock.mutex);
  if (rc == EOWNERDEAD) {
    recoverLocked(r);
    pthread_mutex_consistent(&r->lock.mutex);
    return VGPU_REGION_OK;
  }
  return rc == 0 ? VGPU_REGION_OK : VGPU_REGION_ERROR;
}

void vgpu_region_unlock(vgpu_region* r) { pthread_mutex_unlock(&r->lock.mutex); }

int vgpu_region_attach(vgpu_region* r, int* slot, char* err, size_t err_len) {
  *slot = -1;
  if (vgpu_region_lock(r) != VGPU_REGION_OK) {
    setError(err, err_len, "the shared region lock is unusable");
    return VGPU_REGION_ERROR;
  }
  reclaimDeadLocked(r);
  int32_t self = getpid();
  int freeSlot = -1;
  for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
    int32_t pid = r->procs[s].pid;
    if (pid == self) clearSlotLocked(r, s);  // left by our image before an exec
    if (r->procs[s].pid == 0 && freeSlot < 0) freeSlot = s;
  }
  if (freeSlot >= 0) {
    vgpu_region_proc* p = &r->procs[freeSlot];
    memset(p->memory_used, 0, sizeof p->memory_used);
    p->start_time = ownStartTime();
    __atomic_store_n(&p->pid, self, __ATOMIC_RELEASE);
  }
  vgpu_region_unlock(r);
  if (freeSlot < 0) {
    setError(err, err_len, "all %d process slots of the shared region are in use", VGPU_REGION_MAX_PROCS);
    return VGPU_REGION_ERROR;
  }
  *slot = freeSlot;
  return VGPU_REGION_OK;
}

void vgpu_region_detach(vgpu_region* r, int slot) {
  if (!validSlot(slot) || vgpu_region_lock(r) != VGPU_REGION_OK) return;
  if (r->procs[slot].pid == getpid()) clearSlotLocked(r, slot);
  vgpu_region_unlock(r);
}

int vgpu_region_try_add(vgpu_region* r, int slot, int dev, uint64_t bytes, uint64_t limit) {
  if (!validSlot(slot) || !validDevice(dev)) return VGPU_REGION_ERROR;
  if (vgpu_region_lock(r) != VGPU_REGION_OK) return VGPU_REGION_ERROR;
  int rc = VGPU_REGION_OVER_LIMIT;
  for (int attempt = 0; attempt < 2; ++attempt) {
    uint64_t used = loadU64(&r->devices[dev].memory_used);
    if (limit == 0 || (bytes <= limit && used <= limit - bytes)) {
      storeU64(&r->devices[dev].memory_used, used + bytes);
      uint64_t* mine = &r->procs[slot].memory_used[dev];
      storeU64(mine, loadU64(mine) + bytes);
      rc = VGPU_REGION_OK;
      break;
    }
    // Before refusing, make sure the usage is not held by processes that are gone.
    if (attempt == 0 && reclaimDeadLocked(r) == 0) break;
  }
  vgpu_region_unlock(r);
  return rc;
}

void vgpu_region_sub(vgpu_region* r, int slot, int dev, uint64_t bytes) {
  if (!validSlot(slot) || !validDevice(dev)) return;
  if (vgpu_region_lock(r) != VGPU_REGION_OK) return;
  uint64_t* mine = &r->procs[slot].memory_used[dev];
  uint64_t held = loadU64(mine);
  if (bytes > held) bytes = held;
  storeU64(mine, held - bytes);
  uint64_t used = loadU64(&r->devices[dev].memory_used);
  storeU64(&r->devices[dev].memory_used, used > bytes ? used - bytes : 0);
  vgpu_region_unlock(r);
}

uint64_t vgpu_region_used(const vgpu_region* r, int dev) {
  return validDevice(dev) ? loadU64(&r->devices[dev].memory_used) : 0;
}

int vgpu_region_reclaim_dead(vgpu_region* r) {
  if (vgpu_region_lock(r) != VGPU_REGION_OK) return 0;
  int n = reclaimDeadLocked(r);
  vgpu_region_unlock(r);
  return n;
}

void vgpu_region_publish_device(vgpu_region* r, int dev, const char* uuid, uint64_t memory_limit, uint32_t sm_limit) {
  if (!validDevice(dev) || vgpu_region_lock(r) != VGPU_REGION_OK) return;
  vgpu_region_device* d = &r->devices[dev];
  if (uuid != nullptr) snprintf(d->uuid, sizeof d->uuid, "%s", uuid);
  storeU64(&d->memory_limit, memory_limit);
  __atomic_store_n(&d->sm_limit, sm_limit, __ATOMIC_RELAXED);
  vgpu_region_unlock(r);
}

void vgpu_region_publish_unenforced(vgpu_region* r, int dev, uint32_t bits) {
  if (validDevice(dev)) __atomic_store_n(&r->devices[dev].unenforced, bits, __ATOMIC_RELAXED);
}

void vgpu_region_publish_priority(vgpu_region* r, int32_t priority) {
  __atomic_store_n(&r->priority, priority, __ATOMIC_RELAXED);
}

}  // extern "C"
