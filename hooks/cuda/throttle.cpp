// The compute limit: "kernel bursts". Launches on a context are grouped into bursts of
// about kQuantumNs of GPU time; an event pair around each burst measures the GPU time it
// really took. That time is taken from a token bucket shared by the container (in the
// region) that refills at limit% of wall time; when the bucket is empty the launching
// thread sleeps until it is back to zero, so the GPU idles for the container's share.
// The bucket holds at most limit% of kWindowNs, the burst the container may run after
// being idle. While the bucket is not in debt a closed burst is measured only when the
// next one closes (two event pairs in flight), so the GPU never waits for the CPU to
// read a measurement. docs/limiter.md explains the choice and the tuning.

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
constexpr int kMaxContexts = 32;

struct Burst {
  SpinLock mu;  // held for bookkeeping and event calls, never across a sleep
  CUcontext ctx;
  int dev;
  bool limited;
  CUevent start[2];  // event pairs used in turn: the open burst's, the pending one's
  CUevent end[2];
  int cur;  // index of the open (or next) burst's pair
  bool open;
  bool pending;  // the other pair holds a closed burst not yet measured
  uint32_t pendingLaunches;
  CUstream stream;
  bool ptsz;
  uint32_t launches;
  uint32_t target;
  int64_t openedNs;
  int64_t lastLaunchNs;
  int64_t nsPerLaunch;
};

Burst gBursts[kMaxContexts];
std::atomic<int> gBurstCount{0};
pthread_mutex_t gTableMu = PTHREAD_MUTEX_INITIALIZER;

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

Burst* burstFor(CUcontext ctx) {
  int n = gBurstCount.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    if (gBursts[i].ctx == ctx) return &gBursts[i];
  }
  pthread_mutex_lock(&gTableMu);
  Burst* found = nullptr;
  n = gBurstCount.load(std::memory_order_relaxed);
  for (int i = 0; i < n && found == nullptr; ++i) {
    if (gBursts[i].ctx == ctx) found = &gBursts[i];
  }
  if (found == nullptr && n < kMaxContexts) {
    found = &gBursts[n];
    memset(static_cast<void*>(found), 0, sizeof *found);
    found->ctx = ctx;
    found->dev = currentDevice();  // ctx is current: this is its device
    found->limited = runtime().cfg.computeLimited(found->dev);
    found->target = 1;
    gBurstCount.store(n + 1, std::memory_order_release);
  }
  pthread_mutex_unlock(&gTableMu);
  return found;
}

int64_t loadI64(int64_t* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }

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

bool deepInDebt(vgpu_region_device* d, uint32_t pct) {
  refill(d, pct);
  return loadI64(&d->compute_credit_ns) < -kDebtNs;
}

// Once the container's bucket for `dev` is more than kDebtNs in debt, holds the caller
// back until the debt is paid off entirely.
void waitForCredit(int dev) {
  Runtime& rt = runtime();
  vgpu_region_device* d = &rt.region->devices[dev];
  uint32_t pct = rt.cfg.devices[dev].smPercent;
  if (!deepInDebt(d, pct)) return;
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

CUresult record(CUevent ev, CUstream stream, bool ptsz) {
  return ptsz ? real::cuEventRecord_ptsz(ev, stream) : real::cuEventRecord(ev, stream);
}

bool capturing(CUstream stream, bool ptsz) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  auto fn = ptsz ? real::cuStreamIsCapturing_ptsz : real::cuStreamIsCapturing;
  if (fn == nullptr || fn(stream, &status) != CUDA_SUCCESS) return false;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

// Waits for burst `i` to finish and charges its GPU time to the container's bucket, at
// most `capNs` when that is set (a burst closed late, after the caller had gone idle).
void measure(Burst* b, int i, uint32_t launches, int64_t capNs = 0) {
  float ms = 0;
  if (real::cuEventSynchronize(b->end[i]) != CUDA_SUCCESS ||
      real::cuEventElapsedTime_v2(&ms, b->start[i], b->end[i]) != CUDA_SUCCESS || ms < 0) {
    return;
  }
  int64_t busy = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  if (capNs > 0 && busy > capNs) busy = capNs;
  if (launches > 0) {
    int64_t per = busy / launches;
    b->nsPerLaunch = b->nsPerLaunch == 0 ? per : (b->nsPerLaunch + per) / 2;
    int64_t target = kQuantumNs / (b->nsPerLaunch > 0 ? b->nsPerLaunch : 1);
    b->target = static_cast<uint32_t>(target < 1 ? 1 : target > kMaxLaunchesPerBurst ? kMaxLaunchesPerBurst : target);
  }
  vgpu_region_device* d = &runtime().region->devices[b->dev];
  __atomic_sub_fetch(&d->compute_credit_ns, busy, __ATOMIC_RELAXED);
  __atomic_add_fetch(&d->compute_busy_ns, static_cast<uint64_t>(busy), __ATOMIC_RELAXED);
}

// Measures the pending burst, if any, so that none is left unaccounted.
void settle(Burst* b) {
  if (!b->pending) return;
  b->pending = false;
  measure(b, 1 - b->cur, b->pendingLaunches);
}

// `capNs`: see measure(). The end event is recorded now, so a burst left open while the
// caller was idle would also count the idle time; the per-launch estimate caps it.
// True when the container is in debt and the caller must wait (after unlocking).
bool closeBurst(Burst* b, int64_t capNs = 0) {
  b->open = false;
  if (record(b->end[b->cur], b->stream, b->ptsz) != CUDA_SUCCESS) return false;
  settle(b);  // the burst before this one: usually finished already
  vgpu_region_device* d = &runtime().region->devices[b->dev];
  bool wait = false;
  if (!deepInDebt(d, runtime().cfg.devices[b->dev].smPercent)) {
    // Not in debt: let this burst run on while the next one is queued behind it.
    if (capNs > 0) {
      measure(b, b->cur, b->launches, capNs);
    } else {
      b->pending = true;
      b->pendingLaunches = b->launches;
    }
  } else {
    // In debt: let the device drain and charge it; the caller is then held back.
    measure(b, b->cur, b->launches, capNs);
    wait = true;
  }
  b->cur = 1 - b->cur;
  return wait;
}

bool ensureEvents(Burst* b) {
  if (b->start[0] != nullptr) return true;
  if (real::cuEventCreate == nullptr || real::cuEventSynchronize == nullptr || real::cuEventElapsedTime_v2 == nullptr ||
      real::cuEventRecord == nullptr) {
    return false;
  }
  for (int i = 0; i < 2; ++i) {
    if (real::cuEventCreate(&b->start[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
        real::cuEventCreate(&b->end[i], CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS) {
      for (int j = 0; j <= i; ++j) {
        if (b->start[j] != nullptr) real::cuEventDestroy_v2(b->start[j]);
        if (b->end[j] != nullptr) real::cuEventDestroy_v2(b->end[j]);
        b->start[j] = b->end[j] = nullptr;
      }
      return false;
    }
  }
  return true;
}

// The burst of the calling thread's current context. The last lookup is cached per
// thread (initial-exec TLS: no call to __tls_get_addr on the launch path).
Burst* currentBurst() {
  static __thread CUcontext tCtx __attribute__((tls_model("initial-exec"))) = nullptr;
  static __thread Burst* tBurst __attribute__((tls_model("initial-exec"))) = nullptr;
  CUcontext ctx = nullptr;
  if (real::cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return nullptr;
  if (ctx != tCtx || tBurst == nullptr) {
    tBurst = burstFor(ctx);
    tCtx = ctx;
  }
  return tBurst;
}

}  // namespace

CUresult begin(CUstream stream, bool ptsz, void** state) {
  *state = nullptr;
  Burst* b = currentBurst();
  if (b == nullptr || !b->limited) return CUDA_SUCCESS;
  b->mu.lock();
  int64_t now = nowNs();
  if (b->open) {
    int64_t idle = now - b->lastLaunchNs;
    if (idle >= kQuantumNs / 4 && b->nsPerLaunch > 0) {
      closeBurst(b, static_cast<int64_t>(b->launches) * b->nsPerLaunch);
    } else if (b->stream != stream || b->ptsz != ptsz) {
      closeBurst(b);
    }
  }
  if (!b->open) {
    // Work captured into a graph does not run now; it is throttled when the graph launches.
    if (!ensureEvents(b) || capturing(stream, ptsz)) {
      b->mu.unlock();
      return CUDA_SUCCESS;
    }
    vgpu_region_device* d = &runtime().region->devices[b->dev];
    if (deepInDebt(d, runtime().cfg.devices[b->dev].smPercent)) {
      b->mu.unlock();
      waitForCredit(b->dev);
      b->mu.lock();
    }
  }
  if (!b->open) {  // (another thread may have opened it while this one waited)
    if (record(b->start[b->cur], stream, ptsz) != CUDA_SUCCESS) {
      b->mu.unlock();
      return CUDA_SUCCESS;
    }
    b->open = true;
    b->stream = stream;
    b->ptsz = ptsz;
    b->launches = 0;
    b->openedNs = now = nowNs();  // after a possible wait
  }
  b->lastLaunchNs = now;
  *state = b;  // the burst's lock is held until end()
  return CUDA_SUCCESS;
}

void end(void* state, CUresult launchResult) {
  auto* b = static_cast<Burst*>(state);
  if (b == nullptr) return;
  if (launchResult == CUDA_SUCCESS) ++b->launches;
  // lastLaunchNs was taken just before the launch: one clock read per launch is enough.
  bool wait = false;
  if (b->launches >= b->target || b->lastLaunchNs - b->openedNs >= kQuantumNs) wait = closeBurst(b);
  int dev = b->dev;
  b->mu.unlock();
  if (wait) waitForCredit(dev);
}

void reset() {
  // A forked child has none of its parent's contexts or events.
  gBurstCount.store(0);
  pthread_mutex_init(&gTableMu, nullptr);
}

}  // namespace vgpu::throttle
