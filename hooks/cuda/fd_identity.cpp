// The identity of an exported VMM file descriptor (fd_identity.h).
//
// A regular file (the fake driver's memfd) is its allocation's own inode: (st_dev, st_ino) is
// the key. The real driver exports a descriptor of /dev/nvidiactl with the object attached
// to that open file, so every export has the same inode; what tells them apart is the open
// file itself, which exporter and importer share. The exporter tags it with an
// open-file-description lock on a byte no other export uses; the importer finds the entry
// whose byte is locked by its own open file and by no other: F_OFD_GETLK asked through a
// fresh open of the same node sees the lock (someone holds it), asked through the importer's
// descriptor it does not (the holder is that very open file). A descriptor exported outside
// the container carries no tag and matches nothing, so it is charged.

#include "fd_identity.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

namespace vgpu::fdid {
namespace {

struct Prefix {
  char tag[8];
  uint64_t dev;
  uint64_t ino;
  uint64_t rdev;
};

struct Tagged {
  Prefix prefix;
  uint64_t base;
};
static_assert(sizeof(Tagged) <= VGPU_REGION_SHARE_KEY_LEN);

// syscall: glibc's fstat is a GLIBC_2.33 symbol and libvgpu.so loads with 2.17.
bool statFd(int fd, struct stat* st) {
  memset(st, 0, sizeof *st);
  return fd >= 0 && syscall(SYS_fstat, fd, st) == 0;
}

Prefix prefixOf(const struct stat& st, bool device) {
  Prefix p;
  memset(&p, 0, sizeof p);
  memcpy(p.tag, device ? "vgpu-fdt" : "vgpu-fdi", 8);
  p.dev = static_cast<uint64_t>(st.st_dev);
  p.ino = static_cast<uint64_t>(st.st_ino);
  p.rdev = device ? static_cast<uint64_t>(st.st_rdev) : 0;
  return p;
}

// Whether an open file other than the asker's holds a lock on `byte` of the node.
bool lockedByAnother(int fd, uint64_t byte) {
  struct flock q;
  memset(&q, 0, sizeof q);
  q.l_type = F_WRLCK;
  q.l_whence = SEEK_SET;
  q.l_start = static_cast<off_t>(byte);
  q.l_len = 1;
  return fcntl(fd, F_OFD_GETLK, &q) == 0 && q.l_type != F_UNLCK;
}

}  // namespace

Export classify(int fd, uint8_t key[VGPU_REGION_SHARE_KEY_LEN]) {
  struct stat st;
  if (!statFd(fd, &st)) return Export::kNone;
  if (S_ISCHR(st.st_mode)) return Export::kTagged;
  if (!S_ISREG(st.st_mode)) return Export::kNone;  // an anonymous inode names no allocation
  Prefix p = prefixOf(st, false);
  memset(key, 0, VGPU_REGION_SHARE_KEY_LEN);
  memcpy(key, &p, sizeof p);
  return Export::kInode;
}

uint64_t newBase() {
  uint64_t v = 0;
  if (syscall(SYS_getrandom, &v, sizeof v, 0) != static_cast<long>(sizeof v)) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = static_cast<uint64_t>(ts.tv_nsec) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(getpid()) << 32 ^
        static_cast<uint64_t>(ts.tv_sec);
  }
  // Below 2^62, a multiple of 2^16: room for kMaxTags bytes after it, positive as an off_t.
  return (v & ((uint64_t{1} << 46) - 1)) << 16 | (uint64_t{1} << 16);
}

bool tag(int fd, uint64_t base, unsigned index) {
  if (index >= kMaxTags) return false;
  struct flock l;
  memset(&l, 0, sizeof l);
  l.l_type = F_RDLCK;
  l.l_whence = SEEK_SET;
  l.l_start = static_cast<off_t>(base + index);
  l.l_len = 1;
  return fcntl(fd, F_OFD_SETLK, &l) == 0;
}

void taggedKey(int fd, uint64_t base, uint8_t key[VGPU_REGION_SHARE_KEY_LEN]) {
  struct stat st;
  statFd(fd, &st);
  Tagged t;
  t.prefix = prefixOf(st, true);
  t.base = base;
  memset(key, 0, VGPU_REGION_SHARE_KEY_LEN);
  memcpy(key, &t, sizeof t);
}

bool importKey(int fd, const vgpu_region* region, uint8_t key[VGPU_REGION_SHARE_KEY_LEN]) {
  if (classify(fd, key) == Export::kInode) return true;
  struct stat st;
  if (region == nullptr || !statFd(fd, &st) || !S_ISCHR(st.st_mode)) return false;
  Prefix p = prefixOf(st, true);
  int fresh = -1;
  bool found = false;
  for (const vgpu_region_share& e : region->shares.entries) {
    if (found) break;
    // Read without the lock: a torn key names no entry, and hold() then finds nothing.
    if (__atomic_load_n(&e.kind, __ATOMIC_ACQUIRE) != VGPU_SHARE_FD || memcmp(e.key, &p, sizeof p) != 0) continue;
    if (fresh < 0) {
      // A fresh open file of the same node, which holds no lock: it sees every tag. Opened
      // only when the container exported from this node at all.
      char path[40];
      snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
      fresh = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
      if (fresh < 0) return false;
    }
    Tagged t;
    memcpy(&t, e.key, sizeof t);
    for (unsigned i = 0; i < kMaxTags; ++i) {
      if (!lockedByAnother(fresh, t.base + i)) break;  // no export i: the tags are consecutive
      if (!lockedByAnother(fd, t.base + i)) {          // the holder is fd's own open file
        memcpy(key, e.key, VGPU_REGION_SHARE_KEY_LEN);
        found = true;
        break;
      }
    }
  }
  if (fresh >= 0) close(fresh);
  return found;
}

}  // namespace vgpu::fdid
