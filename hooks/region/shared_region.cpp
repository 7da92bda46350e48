// The shared region: mapping, initialisation, slots owned through file locks, and the
// lock-free accounting. Written without exceptions or the C++ library's allocating types
// because it is linked into libvgpu.so, which runs inside every process of a container.

#include "vgpu/shared_region.h"

#include "error_text.h"
#include "region_reclaim.h"
#include "vgpu/region_shares.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

// Open-file-description locks (Linux 3.15); glibc defines the commands from 2.20 on.
#ifndef F_OFD_GETLK
#define F_OFD_GETLK 36
#endif
#ifndef F_OFD_SETLK
#define F_OFD_SETLK 37
#endif

namespace {

using vgpu::region_detail::addToSet;
using vgpu::region_detail::clearSlotLocked;
using vgpu::region_detail::inUse;
using vgpu::region_detail::kSetWords;
using vgpu::region_detail::reclaimDeadLocked;
using vgpu::region_detail::releaseSharesLocked;
using vgpu::region_detail::setError;

uint64_t loadU64(const uint64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
void storeU64(uint64_t* p, uint64_t v) { __atomic_store_n(p, v, __ATOMIC_RELAXED); }

bool validDevice(int dev) { return dev >= 0 && dev < VGPU_REGION_MAX_DEVICES; }
bool validSlot(int slot) { return slot >= 0 && slot < VGPU_REGION_MAX_PROCS; }

// ---- the open files: a descriptor per mapped region, for the slot locks ----

struct OpenFile {
  const vgpu_region* region;
  int fd;
  char path[PATH_MAX];
  uint64_t held[VGPU_REGION_MAX_PROCS / 64];  // slots this descriptor's locks own
};
constexpr int kMaxOpen = 16;
OpenFile gOpen[kMaxOpen];
pthread_mutex_t gOpenMu = PTHREAD_MUTEX_INITIALIZER;

OpenFile* findOpen(const vgpu_region* r) {
  for (OpenFile& o : gOpen) {
    if (o.region == r) return &o;
  }
  return nullptr;
}

bool holds(const OpenFile* o, int slot) { return o != nullptr && (o->held[slot / 64] >> (slot % 64) & 1) != 0; }
void setHeld(OpenFile* o, int slot, bool on) {
  if (o == nullptr) return;
  uint64_t bit = uint64_t{1} << (slot % 64);
  o->held[slot / 64] = on ? (o->held[slot / 64] | bit) : (o->held[slot / 64] & ~bit);
}

// The lock on byte `slot`: F_WRLCK to take it (fails if another open file holds it),
// F_UNLCK to give it back. True on success.
bool slotLock(int fd, int slot, short type) {
  struct flock fl;
  memset(&fl, 0, sizeof fl);
  fl.l_type = type;
  fl.l_whence = SEEK_SET;
  fl.l_start = slot;
  fl.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &fl) == 0;
}

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

// Liveness by pid and start time: what versions 1 and 2 used, and version 3 without OFD locks.
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

// Whether the slot's owner is gone: nobody holds its byte (the probe's lock is given back at
// once), or, for a slot claimed without OFD locks, its pid and start time say so.
bool slotDead(vgpu_region* r, OpenFile* o, int s) {
  const vgpu_region_proc& p = r->procs[s];
  if (holds(o, s)) return false;  // one of ours
  if ((__atomic_load_n(&p.flags, __ATOMIC_RELAXED) & VGPU_REGION_PROC_LOCKED) != 0) {
    if (o == nullptr || !slotLock(o->fd, s, F_WRLCK)) return false;  // its owner holds the byte
    slotLock(o->fd, s, F_UNLCK);
    return true;
  }
  return !processAlive(p.pid, p.start_time);
}

// The reclaim's liveness question (region_reclaim.h), asked through the caller's open file.
bool slotDeadFor(vgpu_region* r, void* openFile, int s) { return slotDead(r, static_cast<OpenFile*>(openFile), s); }

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

uint32_t randomTenant() {
  uint32_t v = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    if (read(fd, &v, sizeof v) != static_cast<ssize_t>(sizeof v)) v = 0;
    close(fd);
  }
  if (v == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = static_cast<uint32_t>(ts.tv_nsec) ^ static_cast<uint32_t>(getpid()) << 12 ^ static_cast<uint32_t>(ts.tv_sec);
  }
  return v != 0 ? v : 1;
}

void initHeader(vgpu_region* r) {
  r->tenant = randomTenant();
  r->version = VGPU_REGION_VERSION;
  r->header_size = sizeof(vgpu_region);
  r->max_devices = VGPU_REGION_MAX_DEVICES;
  r->max_procs = VGPU_REGION_MAX_PROCS;
}

// `oldest`: the oldest version accepted (a writer rewrites older ones, see upgradeOld).
int checkHeader(const vgpu_region* r, const char* path, uint32_t oldest, char* err, size_t len) {
  if (r->magic != VGPU_REGION_MAGIC) {
    setError(err, len, "%s is not a vgpu shared region (magic %#llx, expected %#llx)", path,
             static_cast<unsigned long long>(r->magic), static_cast<unsigned long long>(VGPU_REGION_MAGIC));
    return VGPU_REGION_ERROR;
  }
  if (r->version < oldest || r->version > VGPU_REGION_VERSION ||
      r->header_size != sizeof(vgpu_region) || r->max_devices != VGPU_REGION_MAX_DEVICES ||
      r->max_procs != VGPU_REGION_MAX_PROCS) {
    setError(err, len, "%s has region version %u (size %u), this build reads version %u (size %zu)", path, r->version,
             r->header_size, VGPU_REGION_VERSION, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  return VGPU_REGION_OK;
}

// Starts the file over as an empty region of this version.
int initRegion(vgpu_region* r, char* err, size_t len) {
  memset(r, 0, sizeof(vgpu_region));
  initHeader(r);
  if (initMutex(r, true, err, len) != VGPU_REGION_OK) return VGPU_REGION_ERROR;
  __atomic_store_n(&r->magic, VGPU_REGION_MAGIC, __ATOMIC_RELEASE);
  return VGPU_REGION_OK;
}

// A region of an older version is rewritten if none of its processes is alive; their
// accounting protocol is not this one, so sharing the file with them is refused.
int upgradeOld(vgpu_region* r, const char* path, char* err, size_t len) {
  for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
    int32_t pid = r->procs[s].pid;
    if (pid != 0 && processAlive(pid, r->procs[s].start_time)) {
      setError(err, len,
               "%s is in use by process %d of an older libvgpu.so (region version %u); this one needs "
               "version %u: restart the container",
               path, static_cast<int>(pid), r->version, VGPU_REGION_VERSION);
      return VGPU_REGION_ERROR;
    }
  }
  return initRegion(r, err, len);
}

// The file's inode number by the system call itself: glibc's fstat is newer (2.33) than the
// glibc libvgpu.so must load with. 0 if unknown.
uint64_t inodeOf(int fd) {
  struct stat st;
  memset(&st, 0, sizeof st);
  return syscall(SYS_fstat, fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

int openRegion(const char* path, uint64_t inode, vgpu_region** out, char* err, size_t err_len);

// flock(LOCK_EX) that gives up after VGPU_REGION_LOCK_TIMEOUT_MS (errno EWOULDBLOCK then).
int flockBounded(int fd) {
  const int64_t start = vgpu::region_detail::monotonicNs();
  for (;;) {
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EWOULDBLOCK && errno != EINTR) return -1;
    if (vgpu::region_detail::monotonicNs() - start >= VGPU_REGION_LOCK_TIMEOUT_MS * 1000000LL) {
      errno = EWOULDBLOCK;
      return -1;
    }
    timespec pause{0, 5 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
}

// The first fields of every version's header, read from the file.
struct FileHeader {
  uint64_t magic;
  uint32_t version;
  uint32_t header_size;
};

// True when the file starts with a region header (our magic).
bool readHeader(int fd, FileHeader* h) {
  return pread(fd, h, sizeof *h, 0) == static_cast<ssize_t>(sizeof *h) && h->magic == VGPU_REGION_MAGIC;
}

// Where the process slots of versions 1 to 3 (and of version 4 before its device entries
// shrank to 128 bytes) begin: header and lock, then 16 device entries of 136 bytes.
constexpr size_t kOlderProcsOffset = 96 + VGPU_REGION_MAX_DEVICES * 136;
static_assert(offsetof(vgpu_region, devices) == 96, "the header is the same in every version");
static_assert(sizeof(pthread_mutex_t) <= sizeof(vgpu_region{}.lock.pad), "the lock fits its padding");
static_assert(sizeof(vgpu_region_device) == 128, "a device entry's address is one shift");

// A region file of another version and size (`size` bytes): its process slots are where
// older versions kept them, so its processes can be looked for. None alive, the file is
// emptied (the caller starts it afresh); one alive, it is refused, naming the version.
int rewriteOtherSize(int fd, off_t size, const char* path, char* err, size_t len) {
  FileHeader h;
  const off_t slotsEnd = static_cast<off_t>(kOlderProcsOffset + sizeof(vgpu_region_proc) * VGPU_REGION_MAX_PROCS);
  if (!readHeader(fd, &h) || size < slotsEnd) {
    setError(err, len, "%s has %lld bytes, a version %u region has %zu", path, static_cast<long long>(size),
             VGPU_REGION_VERSION, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  for (int s = 0; s < VGPU_REGION_MAX_PROCS; ++s) {
    vgpu_region_proc p;
    const off_t at = static_cast<off_t>(kOlderProcsOffset + s * sizeof p);
    if (pread(fd, &p, sizeof p, at) != static_cast<ssize_t>(sizeof p) || p.pid == 0) continue;
    const bool byLock = (p.flags & VGPU_REGION_PROC_LOCKED) != 0;
    const bool alive = byLock ? !slotLock(fd, s, F_WRLCK) : processAlive(p.pid, p.start_time);
    if (byLock && !alive) slotLock(fd, s, F_UNLCK);
    if (alive) {
      setError(err, len,
               "%s is a region of version %u (%lld bytes) in use by process %d of another libvgpu.so; this one needs "
               "version %u (%zu bytes): restart the container",
               path, h.version, static_cast<long long>(size), static_cast<int>(p.pid), VGPU_REGION_VERSION,
               sizeof(vgpu_region));
      return VGPU_REGION_ERROR;
    }
  }
  if (ftruncate(fd, 0) != 0) {
    setError(err, len, "emptying shared region %s of version %u: %s", path, h.version, strerror(errno));
    return VGPU_REGION_ERROR;
  }
  return VGPU_REGION_OK;
}

// Copies the file behind `fd` into private memory (anonymous, so vgpu_region_close unmaps it
// like any region) and checks the copy: size before and after, header. What the file does
// meanwhile can make the copy wrong or refused, never crash the reader.
int readSnapshot(int fd, const char* path, const vgpu_region** out, char* err, size_t len) {
  // lseek, not fstat (see vgpu_region_open); it also fails on a FIFO or socket.
  off_t size = lseek(fd, 0, SEEK_END);
  if (size < 0 || static_cast<size_t>(size) != sizeof(vgpu_region)) {
    FileHeader h;
    char which[64] = "";
    if (size >= static_cast<off_t>(sizeof h) && readHeader(fd, &h))
      snprintf(which, sizeof which, " (a version %u region)", h.version);
    setError(err, len, "%s is not a version %u shared region (size %lld%s, expected %zu)", path, VGPU_REGION_VERSION,
             static_cast<long long>(size), which, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  void* mem = mmap(nullptr, sizeof(vgpu_region), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    setError(err, len, "copying shared region %s: %s", path, strerror(errno));
    return VGPU_REGION_ERROR;
  }
  auto* bytes = static_cast<char*>(mem);
  size_t got = 0;
  while (got < sizeof(vgpu_region)) {
    ssize_t n = pread(fd, bytes + got, sizeof(vgpu_region) - got, static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  char extra = 0;
  bool grew = got == sizeof(vgpu_region) && pread(fd, &extra, 1, static_cast<off_t>(got)) > 0;
  if (got != sizeof(vgpu_region) || grew) {
    setError(err, len, "%s changed size while it was read (%zu of %zu bytes%s)", path, got, sizeof(vgpu_region),
             grew ? ", then more" : "");
    munmap(mem, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  auto* r = static_cast<vgpu_region*>(mem);
  if (checkHeader(r, path, VGPU_REGION_OLDEST_VERSION, err, len) != VGPU_REGION_OK) {
    munmap(mem, sizeof(vgpu_region));
    return VGPU_REGION_ERROR;
  }
  // Text fields end within their arrays, whatever the file said.
  for (vgpu_region_device& d : r->devices) d.uuid[VGPU_REGION_UUID_LEN - 1] = '\0';
  mprotect(mem, sizeof(vgpu_region), PROT_READ);
  *out = r;
  return VGPU_REGION_OK;
}

}  // namespace

extern "C" {

int vgpu_region_open(const char* path, vgpu_region** out, char* err, size_t err_len) {
  return openRegion(path, 0, out, err, err_len);
}

int vgpu_region_open_existing(const char* path, uint64_t inode, vgpu_region** out, char* err, size_t err_len) {
  if (inode == 0) {
    *out = nullptr;
    setError(err, err_len, "shared region %s: no inode number given", path != nullptr ? path : "");
    return VGPU_REGION_ERROR;
  }
  return openRegion(path, inode, out, err, err_len);
}

}  // extern "C"

namespace {

// inode 0: create and initialise the file if absent or empty; else only that existing file.
int openRegion(const char* path, uint64_t inode, vgpu_region** out, char* err, size_t err_len) {
  *out = nullptr;
  if (path == nullptr || path[0] == '\0') {
    setError(err, err_len, "no shared region path given");
    return VGPU_REGION_ERROR;
  }
  if (strlen(path) >= PATH_MAX) {
    setError(err, err_len, "shared region path is longer than %d bytes", PATH_MAX - 1);
    return VGPU_REGION_ERROR;
  }
  const bool create = inode == 0;
  int fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : O_NOFOLLOW), 0666);
  if (fd < 0) {
    setError(err, err_len, "opening shared region %s: %s%s", path, strerror(errno),
             !create && errno == ENOENT ? " (the node agent created it: it was deleted)" : "");
    return VGPU_REGION_ERROR;
  }
  if (!create) {
    uint64_t actual = inodeOf(fd);
    if (actual != inode) {
      setError(err, err_len,
               "shared region %s was replaced: it is inode %llu, the node agent created inode %llu", path,
               static_cast<unsigned long long>(actual), static_cast<unsigned long long>(inode));
      close(fd);
      return VGPU_REGION_ERROR;
    }
  }
  // flock is dropped by the kernel if this process dies, so a crash here blocks no one; a
  // process that holds it on purpose blocks everyone for at most the bounded wait.
  if (flockBounded(fd) != 0) {
    if (errno == EWOULDBLOCK) {
      setError(err, err_len,
               "shared region %s is locked (flock) by another process for more than %d ms: the region is "
               "unusable; find the process holding it (e.g. with lsof or /proc/locks)",
               path, VGPU_REGION_LOCK_TIMEOUT_MS);
    } else {
      setError(err, err_len, "locking shared region %s: %s", path, strerror(errno));
    }
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
    if (fresh && !create) {
      setError(err, err_len, "shared region %s was truncated to 0 bytes", path);
      break;
    }
    if (!fresh && static_cast<size_t>(size) != sizeof(vgpu_region)) {
      if (!create) {  // the node agent's: it re-creates a region of another version
        FileHeader h;
        char which[64] = "";
        if (readHeader(fd, &h)) snprintf(which, sizeof which, " (a version %u region)", h.version);
        setError(err, err_len, "%s has %lld bytes%s, a version %u region has %zu", path, static_cast<long long>(size),
                 which, VGPU_REGION_VERSION, sizeof(vgpu_region));
        break;
      }
      if (rewriteOtherSize(fd, size, path, err, err_len) != VGPU_REGION_OK) break;
      fresh = true;
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
    if (r->magic == 0 && !create) {
      setError(err, err_len, "shared region %s was wiped (no magic number)", path);
      break;
    }
    if (r->magic == 0) {  // fresh, or a creator died before finishing: start over
      if (initRegion(r, err, err_len) != VGPU_REGION_OK) break;
    }
    if (checkHeader(r, path, 1, err, err_len) != VGPU_REGION_OK) break;
    if (r->version < VGPU_REGION_VERSION && upgradeOld(r, path, err, err_len) != VGPU_REGION_OK) break;
    pthread_mutex_lock(&gOpenMu);
    OpenFile* o = findOpen(nullptr);
    if (o != nullptr) {
      memset(o, 0, sizeof *o);
      o->region = r;
      o->fd = fd;
      snprintf(o->path, sizeof o->path, "%s", path);
    }
    pthread_mutex_unlock(&gOpenMu);
    if (o == nullptr) {
      setError(err, err_len, "mapping shared region %s: this process has %d regions open already", path, kMaxOpen);
      break;
    }
    *out = r;
    rc = VGPU_REGION_OK;
  } while (false);
  if (rc != VGPU_REGION_OK && mem != MAP_FAILED) munmap(mem, sizeof(vgpu_region));
  flock(fd, LOCK_UN);
  if (rc != VGPU_REGION_OK) close(fd);
  return rc;
}

}  // namespace

extern "C" {

int vgpu_region_open_readonly(const char* path, const vgpu_region** out, char* err, size_t err_len) {
  *out = nullptr;
  // The file is the tenant's: it may be truncated, grown, rewritten or replaced by a FIFO or
  // a link at any moment. It is never mapped (a mapping of a file that shrinks raises SIGBUS
  // in the reader); it is copied with pread into private memory and checked there.
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    setError(err, err_len, "opening shared region %s: %s", path, strerror(errno));
    return VGPU_REGION_ERROR;
  }
  int rc = readSnapshot(fd, path, out, err, err_len);
  close(fd);
  return rc;
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
  if (region == nullptr) return;
  pthread_mutex_lock(&gOpenMu);
  if (OpenFile* o = findOpen(region)) {
    close(o->fd);  // gives back the slot locks this descriptor held
    memset(o, 0, sizeof *o);
  }
  pthread_mutex_unlock(&gOpenMu);
  munmap(const_cast<vgpu_region*>(region), sizeof(vgpu_region));
}

void vgpu_region_after_fork(vgpu_region* region) {
  // Only this thread exists in the child; whoever held gOpenMu in the parent is gone.
  pthread_mutex_init(&gOpenMu, nullptr);
  OpenFile* o = findOpen(region);
  if (o == nullptr) return;
  // Closing the inherited descriptor leaves the parent's locks alone (the parent still has
  // the open file description); the child's own slot needs a description of its own.
  close(o->fd);
  o->fd = open(o->path, O_RDWR | O_CLOEXEC);
  memset(o->held, 0, sizeof o->held);
}

int vgpu_region_lock(vgpu_region* r) {
  // Bounded: any process of the container can hold the lock, or write bytes into it that make
  // it look held, for ever.
  timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += VGPU_REGION_LOCK_TIMEOUT_MS / 1000;
  deadline.tv_nsec += static_cast<long>(VGPU_REGION_LOCK_TIMEOUT_MS % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  int rc = pthread_mutex_timedlock(&r->lock.mutex, &deadline);
  if (rc == EOWNERDEAD) {
    // The holder died while changing the set of slots, the share table or the sums (a
    // reclaimer killed mid-way leaves `reclaiming` raised): its own slot is dead now too, and
    // the sums are recomputed whatever it was doing.
    pthread_mutex_lock(&gOpenMu);
    OpenFile* o = findOpen(r);
    pthread_mutex_unlock(&gOpenMu);
    reclaimDeadLocked(r, slotDeadFor, o, true);
    pthread_mutex_consistent(&r->lock.mutex);
    return VGPU_REGION_OK;
  }
  return rc == 0 ? VGPU_REGION_OK : VGPU_REGION_ERROR;
}

void vgpu_region_unlock(vgpu_region* r) { pthread_mutex_unlock(&r->lock.mutex); }

int vgpu_region_attach(vgpu_region* r, int* slot, char* err, size_t err_len) {
  *slot = -1;
  pthread_mutex_lock(&gOpenMu);
  OpenFile* o = findOpen(r);
  pthread_mutex_unlock(&gOpenMu);
  if (vgpu_region_lock(r) != VGPU_REGION_OK) {
    setError(err, err_len,
             "the shared region's lock was not free within %d ms (held by another process, or damaged): the "
             "region is unusable",
             VGPU_REGION_LOCK_TIMEOUT_MS);
    return VGPU_REGION_ERROR;
  }
  VGPU_REGION_KILL_POINT(VGPU_KP_ATTACH_LOCKED);
  char why[256] = "";
  if (vgpu_region_verify(r, -1, why, sizeof why) != VGPU_REGION_OK) {
    vgpu_region_unlock(r);
    setError(err, err_len, "%s", why);
    return VGPU_REGION_TAMPERED;
  }
  reclaimDeadLocked(r, slotDeadFor, o, false);  // slots of processes that are gone become free, exactly
  int mine = -1;
  bool locked = false;
  for (int s = 0; s < VGPU_REGION_MAX_PROCS && mine < 0; ++s) {
    if (inUse(r, s)) continue;
    if (o == nullptr) {
      locked = false;
    } else if (slotLock(o->fd, s, F_WRLCK)) {
      locked = true;
    } else if (errno != EINVAL) {
      continue;  // held: a process of an older kernel's fallback, or one claiming it right now
    } else {
      locked = false;  // a kernel without OFD locks: liveness by pid and start time
    }
    mine = s;
  }
  if (mine >= 0) {
    VGPU_REGION_KILL_POINT(VGPU_KP_ATTACH_CLAIMED);
    vgpu_region_proc* p = &r->procs[mine];
    memset(p->memory_used, 0, sizeof p->memory_used);
    __atomic_store_n(&r->in_flight[mine], 0u, __ATOMIC_RELAXED);
    VGPU_REGION_KILL_POINT(VGPU_KP_ATTACH_RESET);
    p->start_time = ownStartTime();
    __atomic_store_n(&p->flags, locked ? VGPU_REGION_PROC_LOCKED : 0u, __ATOMIC_RELAXED);
    __atomic_store_n(&p->pid, static_cast<int32_t>(getpid()), __ATOMIC_RELEASE);
    VGPU_REGION_KILL_POINT(VGPU_KP_ATTACH_DONE);
    if (locked) {
      pthread_mutex_lock(&gOpenMu);
      setHeld(o, mine, true);
      pthread_mutex_unlock(&gOpenMu);
    }
  }
  vgpu_region_unlock(r);
  if (mine < 0) {
    setError(err, err_len, "all %d process slots of the shared region are held by live processes",
             VGPU_REGION_MAX_PROCS);
    return VGPU_REGION_FULL;
  }
  *slot = mine;
  return VGPU_REGION_OK;
}

void vgpu_region_detach(vgpu_region* r, int slot) {
  if (!validSlot(slot) || vgpu_region_lock(r) != VGPU_REGION_OK) return;
  pthread_mutex_lock(&gOpenMu);
  OpenFile* o = findOpen(r);
  pthread_mutex_unlock(&gOpenMu);
  const vgpu_region_proc& p = r->procs[slot];
  // A process that leaves lets go of what it shares, before the slot can go to another.
  uint64_t leaving[kSetWords] = {};
  addToSet(leaving, slot);
  const bool mine = holds(o, slot) || ((p.flags & VGPU_REGION_PROC_LOCKED) == 0 && p.pid == getpid());
  if (mine) releaseSharesLocked(r, leaving);
  if (holds(o, slot)) {
    clearSlotLocked(r, slot);
    slotLock(o->fd, slot, F_UNLCK);
    setHeld(o, slot, false);
  } else if ((p.flags & VGPU_REGION_PROC_LOCKED) == 0 && p.pid == getpid()) {
    clearSlotLocked(r, slot);
  }
  VGPU_REGION_KILL_POINT(VGPU_KP_CLEAR_DONE);
  vgpu_region_unlock(r);
}

}  // extern "C"

namespace {

// The check-and-add, waiting for the region lock if a reclaim is under way: no reclaim runs
// while the lock is held. -1 when the lock was not free in time.
int addWaiting(vgpu_region* r, int slot, int dev, uint64_t bytes, uint64_t limit) {
  int added = vgpu_region_add_fast(r, slot, dev, bytes, limit);
  if (added != VGPU_REGION_ADD_BUSY) return added;
  if (vgpu_region_lock(r) != VGPU_REGION_OK) return -1;
  added = vgpu_region_add_steps(r, slot, dev, bytes, limit);
  vgpu_region_unlock(r);
  return added;
}

}  // namespace

extern "C" {

int vgpu_region_try_add(vgpu_region* r, int slot, int dev, uint64_t bytes, uint64_t limit) {
  if (!validSlot(slot) || !validDevice(dev)) return VGPU_REGION_ERROR;
  int added = addWaiting(r, slot, dev, bytes, limit);
  if (added == 0) {
    vgpu::region_detail::reclaimBeforeRefusal(r, __atomic_load_n(&r->reclaim_seq, __ATOMIC_ACQUIRE));
    added = addWaiting(r, slot, dev, bytes, limit);
  }
  if (added < 0) return VGPU_REGION_ERROR;
  if (added == 2 && vgpu_region_verify(r, slot, nullptr, 0) != VGPU_REGION_OK) {
    vgpu_region_sub_fast(r, slot, dev, bytes);
    return VGPU_REGION_TAMPERED;
  }
  return added != 0 ? VGPU_REGION_OK : VGPU_REGION_OVER_LIMIT;
}

int vgpu_region_verify(const vgpu_region* r, int slot, char* err, size_t err_len) {
  int dev = -1, who = -1;
  uint64_t sum = 0, held = 0;
  for (int round = 0; round < 3; ++round) {
    if (round > 0) {
      timespec pause{0, 300 * 1000};
      nanosleep(&pause, nullptr);
    }
    dev = who = -1;
    // Slot by slot, each against the sum read right after it: a sum of many slots read over
    // time would race with every update meanwhile; one slot and the sum race only with an
    // update of that slot between two loads, which the next round does not repeat.
    for (int s = validSlot(slot) ? slot : 0; s < (validSlot(slot) ? slot + 1 : VGPU_REGION_MAX_PROCS) && dev < 0; ++s) {
      const vgpu_region_proc& p = r->procs[s];
      if (!validSlot(slot) && __atomic_load_n(&p.pid, __ATOMIC_ACQUIRE) == 0) continue;
      for (int d = 0; d < VGPU_REGION_MAX_DEVICES; ++d) {
        held = loadU64(&p.memory_used[d]);
        if (held == 0) continue;
        sum = loadU64(&r->devices[d].memory_used);
        if (held > sum) {
          dev = d;
          who = s;
          break;
        }
      }
    }
    if (dev < 0) return VGPU_REGION_OK;
  }
  setError(err, err_len,
           "device %d: the shared region says the container uses %llu bytes, but its process in slot %d alone holds "
           "%llu: the region was rewritten by a process of the container",
           dev, static_cast<unsigned long long>(sum), who, static_cast<unsigned long long>(held));
  return VGPU_REGION_TAMPERED;
}

void vgpu_region_force_add(vgpu_region* r, int slot, int dev, uint64_t bytes) {
  if (!validSlot(slot) || !validDevice(dev) || bytes == 0) return;
  uint32_t* busy = &r->in_flight[slot];
  __atomic_add_fetch(busy, 1u, __ATOMIC_SEQ_CST);
  const bool marked = __atomic_load_n(&r->reclaiming, __ATOMIC_SEQ_CST) == 0;
  bool locked = false;
  if (!marked) {
    // A reclaim is under way: add under the lock. The driver has the memory already, so
    // without the lock it is counted all the same, and the sums recomputed at the next reclaim.
    __atomic_sub_fetch(busy, 1u, __ATOMIC_RELEASE);
    locked = vgpu_region_lock(r) == VGPU_REGION_OK;
    if (!locked) __atomic_store_n(&r->sums_stale, 1u, __ATOMIC_RELAXED);
  }
  __atomic_add_fetch(&r->devices[dev].memory_used, bytes, __ATOMIC_RELAXED);
  VGPU_REGION_KILL_POINT(VGPU_KP_FORCE_DEVICE);
  __atomic_add_fetch(&r->procs[slot].memory_used[dev], bytes, __ATOMIC_RELAXED);
  VGPU_REGION_KILL_POINT(VGPU_KP_FORCE_SLOT);
  if (marked) __atomic_sub_fetch(busy, 1u, __ATOMIC_RELEASE);
  if (locked) vgpu_region_unlock(r);
}

void vgpu_region_sub(vgpu_region* r, int slot, int dev, uint64_t bytes) {
  if (validSlot(slot) && validDevice(dev)) vgpu_region_sub_fast(r, slot, dev, bytes);
}

void vgpu_region_sub_slow(vgpu_region* r, int slot, int dev, uint64_t bytes) {
  if (!validSlot(slot) || !validDevice(dev)) return;
  if (vgpu_region_lock(r) == VGPU_REGION_OK) {  // no reclaim runs while it is held
    vgpu_region_sub_steps(r, slot, dev, bytes);
    vgpu_region_unlock(r);
    return;
  }
  // The lock is unusable: only the slot gives the bytes back. The sum stays high (never low)
  // until a reclaim recomputes it.
  uint64_t* mine = &r->procs[slot].memory_used[dev];
  uint64_t held = loadU64(mine);
  while (!__atomic_compare_exchange_n(mine, &held, held - (bytes < held ? bytes : held), true, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED)) {
  }
  __atomic_store_n(&r->sums_stale, 1u, __ATOMIC_RELAXED);
}

uint64_t vgpu_region_used(const vgpu_region* r, int dev) {
  return validDevice(dev) ? loadU64(&r->devices[dev].memory_used) : 0;
}

int vgpu_region_reclaim_dead(vgpu_region* r) {
  if (vgpu_region_lock(r) != VGPU_REGION_OK) return 0;
  int n = vgpu_region_reclaim_dead_locked(r);
  vgpu_region_unlock(r);
  return n;
}

int vgpu_region_reclaim_dead_locked(vgpu_region* r) {
  pthread_mutex_lock(&gOpenMu);
  OpenFile* o = findOpen(r);
  pthread_mutex_unlock(&gOpenMu);
  // Counted for vgpu_region_try_add's waiters; one left odd by a reclaimer that died is evened.
  uint32_t seq = __atomic_load_n(&r->reclaim_seq, __ATOMIC_RELAXED);
  seq += (seq & 1u) ? 2u : 1u;
  __atomic_store_n(&r->reclaim_seq, seq, __ATOMIC_RELEASE);
  int n = reclaimDeadLocked(r, slotDeadFor, o, false);
  __atomic_store_n(&r->reclaim_end_ns, vgpu::region_detail::monotonicNs(), __ATOMIC_RELAXED);
  __atomic_store_n(&r->reclaim_seq, seq + 1, __ATOMIC_RELEASE);
  return n;
}

void vgpu_region_set_driver_pid(vgpu_region* r, int slot, uint32_t driver_pid) {
  if (!validSlot(slot)) return;
  uint32_t flags = __atomic_load_n(&r->procs[slot].flags, __ATOMIC_RELAXED);
  flags = (flags & ~VGPU_REGION_PROC_DRIVER_PID_MASK) | (driver_pid & VGPU_REGION_PROC_DRIVER_PID_MASK);
  __atomic_store_n(&r->procs[slot].flags, flags, __ATOMIC_RELAXED);
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
