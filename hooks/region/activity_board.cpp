// The activity board (vgpu/activity_board.h). Linked into libvgpu.so: libc only.

#include "vgpu/activity_board.h"

#include "error_text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using vgpu::region_detail::setError;

bool validUuid(const char* uuid) {
  if (uuid == nullptr || uuid[0] == '\0' || strlen(uuid) > 64) return false;
  for (const char* p = uuid; *p != '\0'; ++p) {
    bool ok = (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '-';
    if (!ok) return false;  // a file name, never a path
  }
  return true;
}

}  // namespace

extern "C" {

int vgpu_board_open(const char* dir, const char* uuid, int writable, vgpu_board** out, char* err, size_t err_len) {
  *out = nullptr;
  if (dir == nullptr || dir[0] == '\0' || !validUuid(uuid)) {
    setError(err, err_len, "no activity board folder or GPU uuid");
    return -1;
  }
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, uuid);
  int fd = writable ? open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666) : open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    setError(err, err_len, "opening activity board %s: %s", path, strerror(errno));
    return -1;
  }
  int rc = -1;
  void* mem = MAP_FAILED;
  if (writable && flock(fd, LOCK_EX) != 0) {
    setError(err, err_len, "locking activity board %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  do {
    off_t size = lseek(fd, 0, SEEK_END);  // lseek, not fstat (GLIBC_2.33)
    if (writable && size == 0) {
      fchmod(fd, 0666);
      if (ftruncate(fd, sizeof(vgpu_board)) != 0) {
        setError(err, err_len, "sizing activity board %s: %s", path, strerror(errno));
        break;
      }
      size = sizeof(vgpu_board);
    }
    if (size != static_cast<off_t>(sizeof(vgpu_board))) {
      setError(err, err_len, "%s is not an activity board (%lld bytes)", path, static_cast<long long>(size));
      break;
    }
    mem = mmap(nullptr, sizeof(vgpu_board), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    if (mem == MAP_FAILED) {
      setError(err, err_len, "mapping activity board %s: %s", path, strerror(errno));
      break;
    }
    auto* b = static_cast<vgpu_board*>(mem);
    if (writable && __atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) == 0) {
      b->version = VGPU_BOARD_VERSION;
      b->size = sizeof(vgpu_board);
      __atomic_store_n(&b->magic, VGPU_BOARD_MAGIC, __ATOMIC_RELEASE);
    }
    if (__atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) != VGPU_BOARD_MAGIC || b->version != VGPU_BOARD_VERSION ||
        b->size != sizeof(vgpu_board)) {
      setError(err, err_len, "%s is not a version %u activity board", path, VGPU_BOARD_VERSION);
      break;
    }
    *out = b;
    rc = 0;
  } while (false);
  if (rc != 0 && mem != MAP_FAILED) munmap(mem, sizeof(vgpu_board));
  if (writable) flock(fd, LOCK_UN);
  close(fd);
  return rc;
}

void vgpu_board_close(vgpu_board* board) {
  if (board != nullptr) munmap(board, sizeof(vgpu_board));
}

void vgpu_board_announce(vgpu_board* b, uint32_t tenant, int64_t until_ns) {
  if (b == nullptr || tenant == 0) return;
  vgpu_board_entry* mine = nullptr;
  for (vgpu_board_entry& e : b->high) {
    if (__atomic_load_n(&e.tenant, __ATOMIC_ACQUIRE) == tenant) {
      mine = &e;
      break;
    }
  }
  if (mine == nullptr) {
    // A free entry, or one whose tenant has not been active for a while: take it over.
    int64_t stale = until_ns - 60'000'000'000;  // a minute
    for (vgpu_board_entry& e : b->high) {
      uint32_t owner = __atomic_load_n(&e.tenant, __ATOMIC_ACQUIRE);
      if (owner != 0 && __atomic_load_n(&e.active_until_ns, __ATOMIC_RELAXED) > stale) continue;
      if (__atomic_compare_exchange_n(&e.tenant, &owner, tenant, false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
        mine = &e;
        break;
      }
    }
  }
  if (mine == nullptr) return;  // 64 high-priority tenants active on one GPU: the rest are not heard
  int64_t cur = __atomic_load_n(&mine->active_until_ns, __ATOMIC_RELAXED);
  while (cur < until_ns &&
         !__atomic_compare_exchange_n(&mine->active_until_ns, &cur, until_ns, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
}

int vgpu_board_active(const vgpu_board* b, uint32_t self, int64_t now_ns) {
  if (b == nullptr) return 0;
  int n = 0;
  for (const vgpu_board_entry& e : b->high) {
    uint32_t owner = __atomic_load_n(&e.tenant, __ATOMIC_ACQUIRE);
    if (owner == 0 || owner == self) continue;
    if (__atomic_load_n(&e.active_until_ns, __ATOMIC_RELAXED) > now_ns) ++n;
  }
  return n;
}

}  // extern "C"
