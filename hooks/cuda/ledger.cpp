// The ledger (ledger.h): open addressing with linear probing in one calloc'd array, no
// allocation per record and a spin lock, because every allocation and free of the
// application passes through here.

#include "ledger.h"

#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "spin_lock.h"

namespace vgpu::ledger {
namespace {

// 64 bytes: a slot's address is a shift away from its index.
struct Entry {
  uintptr_t id;
  Kind kind;
  uint8_t state;  // kEmpty, kFull, kGone (a tombstone keeps probe chains intact)
  Record rec;
  uint64_t unused;
};
static_assert(sizeof(Entry) == 64);
constexpr uint8_t kEmpty = 0, kFull = 1, kGone = 2;

struct Table {
  Entry* entries = nullptr;
  size_t capacity = 0;  // a power of two
  size_t full = 0;
  size_t gone = 0;
};

SpinLock gLock;
Table gTable;

struct Lock : SpinGuard {
  Lock() : SpinGuard(gLock) {}
};

inline size_t slotOf(uintptr_t id, Kind kind, size_t capacity) {
  uint64_t h = (static_cast<uint64_t>(id) ^ (static_cast<uint64_t>(kind) << 56)) * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h >> 20) & (capacity - 1);
}

// Inline: every free and every lookup runs it under the lock.
inline __attribute__((always_inline)) Entry* find(uintptr_t id, Kind kind) {
  size_t capacity = gTable.capacity;
  if (capacity == 0) return nullptr;
  Entry* entries = gTable.entries;
  for (size_t i = slotOf(id, kind, capacity);; i = (i + 1) & (capacity - 1)) {
    Entry& e = entries[i];
    if (e.id == id && e.kind == kind && e.state == kFull) return &e;
    if (e.state == kEmpty) return nullptr;
  }
}

// Doubles the table (or makes the first one) and drops the tombstones. Rare: out of line.
__attribute__((noinline)) bool grow() {
  size_t capacity = gTable.capacity == 0 ? 1024 : gTable.capacity;
  while ((gTable.full + 1) * 2 > capacity / 2) capacity *= 2;
  auto* entries = static_cast<Entry*>(calloc(capacity, sizeof(Entry)));
  if (entries == nullptr) return false;
  for (size_t i = 0; i < gTable.capacity; ++i) {
    const Entry& e = gTable.entries[i];
    if (e.state != kFull) continue;
    size_t j = slotOf(e.id, e.kind, capacity);
    while (entries[j].state == kFull) j = (j + 1) & (capacity - 1);
    entries[j] = e;
  }
  free(gTable.entries);
  gTable.entries = entries;
  gTable.capacity = capacity;
  gTable.gone = 0;
  return true;
}

// Keeps at least half of the table empty so that probes stay short and always end.
inline bool reserveOne() {
  if (__builtin_expect((gTable.full + gTable.gone + 1) * 2 <= gTable.capacity, 1)) return true;
  return grow();
}

// A record goes. Its slot becomes empty when the next one is (no probe chain runs through
// it then), and so do the tombstones just before it; otherwise it becomes a tombstone.
inline __attribute__((always_inline)) void erase(Entry* e) {
  size_t mask = gTable.capacity - 1;
  Entry* entries = gTable.entries;
  size_t i = static_cast<size_t>(e - entries);
  --gTable.full;
  if (entries[(i + 1) & mask].state != kEmpty) {
    e->state = kGone;
    ++gTable.gone;
    return;
  }
  e->state = kEmpty;
  // Ends: at least half of the table is empty.
  for (size_t j = (i - 1) & mask; entries[j].state == kGone; j = (j - 1) & mask) {
    entries[j].state = kEmpty;
    --gTable.gone;
  }
}

void addTo(uint64_t bytesPerDevice[kLedgerDevices], const Record& r) {
  if (r.dev >= 0 && r.dev < kLedgerDevices) bytesPerDevice[r.dev] += r.bytes;
}

}  // namespace

void put(Kind kind, uintptr_t id, const Record& rec) {
  {
    Lock l;
    if (__builtin_expect(reserveOne(), 1)) {
      // One pass along the probe chain: the record itself if it is there, else the first
      // tombstone or the empty slot that ends the chain takes it.
      size_t mask = gTable.capacity - 1;
      Entry* entries = gTable.entries;
      Entry* hole = nullptr;
      size_t i = slotOf(id, kind, gTable.capacity);
      for (;; i = (i + 1) & mask) {
        Entry& e = entries[i];
        if (e.state == kEmpty) break;
        if (e.state == kGone) {
          if (hole == nullptr) hole = &e;
        } else if (e.id == id && e.kind == kind) {
          e.rec = rec;
          return;
        }
      }
      if (hole != nullptr)
        --gTable.gone;
      else
        hole = &entries[i];
      hole->id = id;
      hole->kind = kind;
      hole->state = kFull;
      hole->rec = rec;
      ++gTable.full;
      return;
    }
    // No room for another: a record already there can still be updated.
    if (Entry* e = find(id, kind)) {
      e->rec = rec;
      return;
    }
  }
  logf(kLogError, "out of host memory: a device allocation goes untracked");
}

bool take(Kind kind, uintptr_t id, Record* out) {
  Lock l;
  Entry* e = find(id, kind);
  if (e == nullptr) return false;
  *out = e->rec;
  erase(e);
  return true;
}

bool peek(Kind kind, uintptr_t id, Record* out) {
  Lock l;
  Entry* e = find(id, kind);
  if (e == nullptr) return false;
  *out = e->rec;
  return true;
}

bool update(Kind kind, uintptr_t id, Keep (*fn)(Record&, void*), void* ctx, Record* after) {
  Lock l;
  Entry* e = find(id, kind);
  if (e == nullptr) return false;
  Keep k = fn(e->rec, ctx);
  if (after != nullptr) *after = e->rec;
  if (k == Keep::kErase) erase(e);
  return true;
}

void takeContext(uintptr_t ctx, uint64_t bytesPerDevice[kLedgerDevices]) {
  Lock l;
  for (size_t i = 0; i < gTable.capacity; ++i) {
    Entry& e = gTable.entries[i];
    if (e.state != kFull || e.rec.ctx != ctx || !charges(e.kind)) continue;
    addTo(bytesPerDevice, e.rec);
    erase(&e);
  }
}

void takeOwned(Kind kind, uintptr_t owner, uint64_t bytesPerDevice[kLedgerDevices]) {
  Lock l;
  for (size_t i = 0; i < gTable.capacity; ++i) {
    Entry& e = gTable.entries[i];
    if (e.state != kFull || e.kind != kind || e.rec.owner != owner) continue;
    addTo(bytesPerDevice, e.rec);
    erase(&e);
  }
}

void sumOwned(Kind kind, uintptr_t owner, uint64_t bytesPerDevice[kLedgerDevices]) {
  Lock l;
  for (size_t i = 0; i < gTable.capacity; ++i) {
    const Entry& e = gTable.entries[i];
    if (e.state == kFull && e.kind == kind && e.rec.owner == owner) addTo(bytesPerDevice, e.rec);
  }
}

void clear() {
  // After fork only this thread exists; the lock may have been held by a vanished thread.
  gLock.reset();
  for (size_t i = 0; i < gTable.capacity; ++i) gTable.entries[i].state = kEmpty;
  gTable.full = gTable.gone = 0;
}

}  // namespace vgpu::ledger
