// The compute limit: "kernel bursts". Launches on a context are grouped into bursts of
// about kQuantumNs of GPU time; an event pair around each burst measures the GPU time it
// really took. That time is taken from a token bucket shared by the container (in the
// region) that refills at limit% of wall time; when the bucket is in debt the launching
// thread sleeps until it is back to zero, so the GPU idles for the container's share.
// The bucket holds at most limit% of kWindowNs, the burst the container may run after
// being idle. docs/limiter.md explains the choice and the tuning.
//
// Never waiting on the GPU with a lock held, and never waiting on it without a bound: a
// kernel may wait for work that is launched later (cuStreamWaitValue32 on another stream,
// NCCL's kernels on several GPUs driven by one thread), and a launch path that waited for
// that kernel would wait forever. So a closed burst is charged at once by an estimate
// (launches x the measured time per launch), and its real time replaces the estimate when
// a later launch finds its end event complete (cuEventQuery, which does not wait). Holding
// back is a sleep on the clock. The GPU is waited for only before the first measurement of
// a context (there is no estimate yet) and when every event pair is in flight, by polling,
// for at most kWaitForGpuNs.
//
// State is per context, in a table that grows as contexts appear, and is dropped when the
// context goes (cuCtxDestroy, a primary context's last release or its reset), since the
// driver frees the context's events with it.

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime.h"
#include "spin_lock.h"

namespace vgpu::throttle {
namespace {

constexpr int64_t kQuantumNs = 4'000'000;
constexpr int64_t kWindowNs = 100'000'000;
// Debt tolerated before the caller is held back: fewer, longer holds lose less to sleep
// and wake-up latency (which the GPU would otherwise spend idle beyond the share).
constexpr int64_t kDebtNs = 10'000'000;
constexpr uint32_t kMaxLaunchesPerBurst = 4096;
constexpr int kPairs = 8;  // event pairs per context: the open burst and those in flight
constexpr int64_t kWaitForGpuNs = kWindowNs;

struct InFlight {
  bool used;
  uint32_t launches;
  int64_t estimateNs;  // already taken from the bucket
  int64_t capNs;       // 0: none (see closeBurst)
};

// What a context's state holds; reset as a whole when the state is reused.
struct Body {
  CUcontext ctx;
  int dev;
  bool limited;
  CUevent start[kPairs];
  CUevent end[kPairs];
  int pairsCreated;
  InFlight flight[kPairs];  // indexed like the pairs
  bool pairBusy[kPairs];    // the open burst's pair or one in flight
  // The open burst.
  bool open;
  int openPair;
  uint64_t burstId;
  CUstream stream;
  bool ptsz;
  uint32_t launches;
  uint32_t target;
  int64_t openedNs;
  int64_t lastLaunchNs;
  int64_t nsPerLaunch;  // 0 until the first measurement
};

struct State : Body {
  SpinLock mu;  // bookkeeping and calls that do not wait (event record and query) only
  bool live;
  uint64_t generation;  // changes when the state is dropped: older tickets are void
  State* nextFree;
};

// ---- the table: context -> state ----

pthread_mutex_t gTableMu = PTHREAD_MUTEX_INITIALIZER;
struct Slot {
  CUcontext ctx;
  State* state;  // nullptr: empty; kTombstone: removed
};
State* const kTombstone = reinterpret_cast<State*>(uintptr_t{1});
Slot* gSlots = nullptr;
size_t gCapacity = 0;  // a power of two
size_t gUsed = 0;      // live entries and tombstones
State* gFree = nullptr;
// Bumped whenever a state is dropped: every thread's cached lookup is then checked again.
std::atomic<uint64_t> gEpoch{1};

size_t slotOf(CUcontext ctx, size_t capacity) {
  uint64_t h = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ctx)) * 0x9E3779B97F4A7C15ull;
  return static_cast<size_t>(h >> 24) & (capacity - 1);
}

Slot* findSlot(CUcontext ctx) {
  if (gCapacity == 0) return nullptr;
  for (size_t i = slotOf(ctx, gCapacity);; i = (i + 1) & (gCapacity - 1)) {
    Slot& s = gSlots[i];
    if (s.state == nullptr) return nullptr;
    if (s.state != kTombstone && s.ctx == ctx) return &s;
  }
}

bool grow() {
  size_t capacity = gCapacity == 0 ? 64 : gCapacity * 2;
  auto* slots = static_cast<Slot*>(calloc(capacity, sizeof(Slot)));
  if (slots == nullptr) return false;
  size_t used = 0;
  for (size_t i = 0; i < gCapacity; ++i) {
    if (gSlots[i].state == nullptr || gSlots[i].state == kTombstone) continue;
    size_t j = slotOf(gSlots[i].ctx, capacity);
    while (slots[j].state != nullptr) j = (j + 1) & (capacity - 1);
    slots[j] = gSlots[i];
    ++used;
  }
  free(gSlots);
  gSlots = slots;
  gCapacity = capacity;
  gUsed = used;
  return true;
}

// A fresh state for `ctx` on `dev`. Caller holds gTableMu.
State* newState(CUcontext ctx, int dev) {
  State* s = gFree;
  if (s != nullptr) {
    gFree = s->nextFree;
  } else {
    // Never freed: a thread that still holds a pointer to a dropped state finds it not live.
    s = static_cast<State*>(calloc(1, sizeof(State)));
    if (s == nullptr) return nullptr;
    s->generation = 1;
  }
  s->mu.lock();
  static_cast<Body&>(*s) = Body{};
  s->ctx = ctx;
  s->live = true;
  s->dev = dev;
  s->limited = runtime().computeLimited(dev);
  s->target = 1;
  s->mu.unlock();
  return s;
}

State* lookup(CUcontext ctx) {
  int dev = currentDevice();  // ctx is current: this is its device (asked before locking)
  pthread_mutex_lock(&gTableMu);
  State* s = nullptr;
  if (Slot* slot = findSlot(ctx)) {
    s = slot->state;
  } else if (((gUsed + 1) * 2 <= gCapacity || grow()) && (s = newState(ctx, dev)) != nullptr) {
    size_t i = slotOf(ctx, gCapacity);
    while (gSlots[i].state != nullptr && gSlots[i].state != kTombstone) i = (i + 1) & (gCapacity - 1);
    if (gSlots[i].state == nullptr) ++gUsed;
    gSlots[i] = Slot{ctx, s};
  }
  pthread_mutex_unlock(&gTableMu);
  return s;
}

// The state of the calling thread's current context. The last lookup is cached per thread
// (initial-exec TLS: no call to __tls_get_addr on the launch path).
State* current(CUcontext* ctxOut) {
  static __thread CUcontext tCtx __attribute__((tls_model("initial-exec"))) = nullptr;
  static __thread State* tState __attribute__((tls_model("initial-exec"))) = nullptr;
  static __thread uint64_t tEpoch __attribute__((tls_model("initial-exec"))) = 0;
  CUcontext ctx = nullptr;
  if (real::cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return nullptr;
  *ctxOut = ctx;
  uint64_t epoch = gEpoch.load(std::memory_order_acquire);
  if (ctx != tCtx || tState == nullptr || epoch != tEpoch) {
    tState = lookup(ctx);
    tCtx = ctx;
    tEpoch = epoch;
  }
  return tState;
}

// ---- the container's bucket of GPU time (in the region) ----

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t loadI64(int64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

vgpu_region_device* bucket(int dev) { return &runtime().region->devices[dev]; }

// Adds limit% of the wall time since the last refill, up to the bucket's capacity.
void refill(vgpu_region_device* d, uint32_t pct) {
  int64_t now = nowNs();
  int64_t stamp = loadI64(&d->compute_stamp_ns);
  if (stamp == 0 || now < stamp) {  // first use, or a stamp from before a reboot
    __atomic_compare_exchange_n(&d->compute_stamp_ns, &stamp, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return;
  }
  if (!__atomic_compare_exchange_n(&d->compute_stamp_ns, &stamp, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    return;  // another thread or process refilled for this interval
  }
  int64_t add = (now - stamp) * pct / 100;
  int64_t cap = kWindowNs * pct / 100;
  int64_t credit = __atomic_add_fetch(&d->compute_credit_ns, add, __ATOMIC_RELAXED);
  if (credit > cap) __atomic_sub_fetch(&d->compute_credit_ns, credit - cap, __ATOMIC_RELAXED);
}

bool deepInDebt(int dev) {
  vgpu_region_device* d = bucket(dev);
  refill(d, runtime().smPercent(dev));
  return loadI64(&d->compute_credit_ns) < -kDebtNs;
}

// Once the container's bucket for `dev` is more than kDebtNs in debt, holds the caller
// back until the debt is paid off entirely. A sleep on the clock, with no lock held.
void waitForCredit(int dev) {
  if (!deepInDebt(dev)) return;
  vgpu_region_device* d = bucket(dev);
  uint32_t pct = runtime().smPercent(dev);
  for (int i = 0; i < 1000; ++i) {
    refill(d, pct);
    int64_t credit = loadI64(&d->compute_credit_ns);
    if (credit >= 0) return;
    int64_t sleepNs = -credit * 100 / pct;
    if (sleepNs < 20'000) sleepNs = 20'000;
    if (sleepNs > 200'000'000) sleepNs = 200'000'000;
    timespec ts{static_cast<time_t>(sleepNs / 1'000'000'000), static_cast<long>(sleepNs % 1'000'000'000)};
    int64_t before = nowNs();
    nanosleep(&ts, nullptr);
    __atomic_add_fetch(&d->compute_held_ns, static_cast<uint64_t>(nowNs() - before), __ATOMIC_RELAXED);
  }
}

void charge(int dev, int64_t ns, bool busy) {
  if (ns == 0) return;
  vgpu_region_device* d = bucket(dev);
  __atomic_sub_fetch(&d->compute_credit_ns, ns, __ATOMIC_RELAXED);
  if (busy && ns > 0) __atomic_add_fetch(&d->compute_busy_ns, static_cast<uint64_t>(ns), __ATOMIC_RELAXED);
}

// ---- bursts (callers hold s->mu) ----

CUresult record(CUevent ev, CUstream stream, bool ptsz) {
  if (ptsz && real::cuEventRecord_ptsz != nullptr) return real::cuEventRecord_ptsz(ev, stream);
  return real::cuEventRecord(ev, stream);
}

bool capturing(CUstream stream, bool ptsz) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  auto fn = ptsz ? real::cuStreamIsCapturing_ptsz : real::cuStreamIsCapturing;
  if (fn == nullptr || fn(stream, &status) != CUDA_SUCCESS) return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// A free event pair, created on first need; -1 when all are busy (or cannot be created).
int takePair(State* s) {
  for (int i = 0; i < s->pairsCreated; ++i) {
    if (!s->pairBusy[i]) return i;
  }
  if (s->pairsCreated == kPairs) return -1;
  int i = s->pairsCreated;
  if (real::cuEventCreate(&s->start[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) return -1;
  if (real::cuEventCreate(&s->end[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    if (real::cuEventDestroy_v2 != nullptr) real::cuEventDestroy_v2(s->start[i]);
    return -1;
  }
  ++s->pairsCreated;
  return i;
}

bool anyInFlight(const State* s) {
  for (int i = 0; i < s->pairsCreated; ++i) {
    if (s->flight[i].used) return true;
  }
  return false;
}

bool allPairsBusy(const State* s) {
  if (s->pairsCreated < kPairs) return false;
  for (int i = 0; i < kPairs; ++i) {
    if (!s->pairBusy[i]) return false;
  }
  return true;
}

// The real GPU time of the bursts whose end event is complete replaces their estimates.
void reap(State* s) {
  for (int i = 0; i < s->pairsCreated; ++i) {
    InFlight& f = s->flight[i];
    if (!f.used) continue;
    CUresult q = real::cuEventQuery(s->end[i]);
    if (q == CUDA_ERROR_NOT_READY) continue;
    int64_t busy = f.estimateNs;  // what it was charged, if it cannot be measured
    float ms = 0;
    if (q == CUDA_SUCCESS && real::cuEventElapsedTime_v2(&ms, s->start[i], s->end[i]) == CUDA_SUCCESS && ms >= 0) {
      busy = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
      if (f.capNs > 0 && busy > f.capNs) busy = f.capNs;
      if (f.launches > 0) {
        int64_t per = busy / f.launches;
        s->nsPerLaunch = s->nsPerLaunch == 0 ? (per > 0 ? per : 1) : (s->nsPerLaunch + per) / 2;
        int64_t target = kQuantumNs / (s->nsPerLaunch > 0 ? s->nsPerLaunch : 1);
        s->target =
            static_cast<uint32_t>(target < 1 ? 1 : target > kMaxLaunchesPerBurst ? kMaxLaunchesPerBurst : target);
      }
    }
    vgpu_region_device* d = bucket(s->dev);
    __atomic_sub_fetch(&d->compute_credit_ns, busy - f.estimateNs, __ATOMIC_RELAXED);
    if (busy > 0) __atomic_add_fetch(&d->compute_busy_ns, static_cast<uint64_t>(busy), __ATOMIC_RELAXED);
    f.used = false;
    s->pairBusy[i] = false;
  }
}

// `capNs`: the end event is recorded now, so a burst left open while the caller was idle
// would also count the idle time; the per-launch estimate caps it.
void closeBurst(State* s, int64_t capNs = 0) {
  s->open = false;
  int i = s->openPair;
  if (record(s->end[i], s->stream, s->ptsz) != CUDA_SUCCESS) {
    s->pairBusy[i] = false;  // not measured; its launches are charged by estimate
    charge(s->dev, static_cast<int64_t>(s->launches) * s->nsPerLaunch, true);
    return;
  }
  int64_t estimate = static_cast<int64_t>(s->launches) * s->nsPerLaunch;
  if (capNs > 0 && estimate > capNs) estimate = capNs;
  s->flight[i] = InFlight{true, s->launches, estimate, capNs};
  charge(s->dev, estimate, false);
}

bool openBurst(State* s, CUstream stream, bool ptsz) {
  int i = takePair(s);
  if (i < 0 || record(s->start[i], stream, ptsz) != CUDA_SUCCESS) return false;
  s->pairBusy[i] = true;
  s->open = true;
  s->openPair = i;
  s->burstId += 1;
  s->stream = stream;
  s->ptsz = ptsz;
  s->launches = 0;
  s->openedNs = nowNs();
  return true;
}

bool valid(const State* s, CUcontext ctx) { return s->live && s->ctx == ctx; }

// Waits, polling and holding no lock, until the GPU has reported on the context's bursts
// enough to go on (see the file comment), or kWaitForGpuNs has passed.
void waitForGpu(State* s, CUcontext ctx) {
  int64_t deadline = nowNs() + kWaitForGpuNs;
  int64_t pauseNs = 50'000;
  while (nowNs() < deadline) {
    timespec ts{0, static_cast<long>(pauseNs)};
    nanosleep(&ts, nullptr);
    if (pauseNs < 1'000'000) pauseNs *= 2;
    s->mu.lock();
    bool stillWaiting = false;
    if (valid(s, ctx)) {
      reap(s);
      stillWaiting = (s->nsPerLaunch == 0 && anyInFlight(s)) || allPairsBusy(s);
    }
    s->mu.unlock();
    if (!stillWaiting) return;
  }
  logf(kLogDebug, "the GPU did not report on a burst within %lld ms; going on",
       static_cast<long long>(kWaitForGpuNs / 1'000'000));
}

}  // namespace

void begin(CUstream stream, bool ptsz, Ticket* ticket) {
  *ticket = Ticket{};
  CUcontext ctx = nullptr;
  State* s = current(&ctx);
  if (s == nullptr || !s->limited) return;
  int64_t now = nowNs();
  s->mu.lock();
  if (!valid(s, ctx)) {
    s->mu.unlock();
    return;
  }
  reap(s);
  if (s->open) {
    int64_t idle = now - s->lastLaunchNs;
    if (idle >= kQuantumNs / 4 && s->nsPerLaunch > 0) {
      closeBurst(s, static_cast<int64_t>(s->launches) * s->nsPerLaunch);
    } else if (s->stream != stream || s->ptsz != ptsz) {
      closeBurst(s);
    }
  }
  bool opening = !s->open;
  bool waitGpu = false;
  if (opening) {
    // Work captured into a graph does not run now; it is throttled when the graph launches.
    if (capturing(stream, ptsz)) {
      s->mu.unlock();
      return;
    }
    waitGpu = (s->nsPerLaunch == 0 && anyInFlight(s)) || allPairsBusy(s);
  }
  int dev = s->dev;
  s->mu.unlock();

  // Only between bursts: inside one, a launch costs a lock and a few stores.
  if (waitGpu) waitForGpu(s, ctx);
  if (opening) waitForCredit(dev);

  s->mu.lock();
  if (!valid(s, ctx)) {
    s->mu.unlock();
    return;
  }
  reap(s);
  // (another thread may have opened one meanwhile; with no pair free the launch is charged
  // by estimate instead)
  if (!s->open) openBurst(s, stream, ptsz);
  ticket->ctx = s;
  ticket->burst = s->open ? s->burstId : 0;
  ticket->generation = s->generation;
  s->lastLaunchNs = nowNs();
  s->mu.unlock();
}

void end(const Ticket& ticket, CUresult launchResult) {
  auto* s = static_cast<State*>(ticket.ctx);
  if (s == nullptr) return;
  s->mu.lock();
  if (s->generation != ticket.generation || !s->live) {
    s->mu.unlock();
    return;
  }
  bool charged = false;
  if (launchResult == CUDA_SUCCESS) {
    if (s->open && ticket.burst == s->burstId) {
      ++s->launches;
      // lastLaunchNs was taken just before the launch: one clock read per launch is enough.
      if (s->launches >= s->target || s->lastLaunchNs - s->openedNs >= kQuantumNs) {
        closeBurst(s);
        charged = true;
      }
    } else {
      // It ran outside any measured burst (another thread closed the one it joined, or no
      // event pair was free): charged by estimate only.
      charge(s->dev, s->nsPerLaunch, true);
      charged = true;
    }
  }
  int dev = s->dev;
  s->mu.unlock();
  if (charged) waitForCredit(dev);
}

void beforeSync() {
  CUcontext ctx = nullptr;
  State* s = current(&ctx);
  if (s == nullptr || !s->limited) return;
  s->mu.lock();
  // The device goes idle once the caller has what it waits for, until its next launch: the
  // burst ends at the work submitted so far, not at the next launch.
  if (valid(s, ctx) && s->open) closeBurst(s);
  s->mu.unlock();
}

void forget(CUcontext ctx) {
  pthread_mutex_lock(&gTableMu);
  if (Slot* slot = findSlot(ctx)) {
    State* s = slot->state;
    slot->state = kTombstone;
    s->mu.lock();
    s->live = false;
    ++s->generation;
    s->mu.unlock();
    s->nextFree = gFree;
    gFree = s;
    gEpoch.fetch_add(1, std::memory_order_acq_rel);
  }
  pthread_mutex_unlock(&gTableMu);
}

void reset() {
  // A forked child has none of its parent's contexts or events. The parent's states are
  // left behind (a thread of the parent may have held a lock in them).
  pthread_mutex_init(&gTableMu, nullptr);
  gSlots = nullptr;
  gCapacity = 0;
  gUsed = 0;
  gFree = nullptr;
  gEpoch.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace vgpu::throttle
