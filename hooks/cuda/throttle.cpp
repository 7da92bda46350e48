// The compute limit: "kernel bursts". Launches on a context are grouped into bursts of
// about kQuantumNs of GPU time; an event pair around each burst measures the GPU time it
// really took. That time is taken from a token bucket shared by the container (in the
// region) that refills at limit% of wall time; when the bucket is empty the launching
// thread sleeps until it is back to zero, so the GPU idles for the container's share.
// The bucket holds at most limit% of kWindowNs, the burst the container may run after
// being idle. docs/limiter.md explains the choice and the tuning.

#include <string.h>
#include <time.h>

#include "runtime.h"

namespace vgpu::throttle {
namespace {

constexpr int64_t kQuantumNs = 4'000'000;
constexpr int64_t kWindowNs = 100'000'000;
constexpr uint32_t kMaxLaunchesPerBurst = 4096;
constexpr int kMaxContexts = 32;

struct Burst {
  pthread_mutex_t mu;
  CUcontext ctx;
  int dev;
  bool limited;
  CUevent start;
  CUevent end;
  bool open;
  CUstream stream;
  bool ptsz;
  uint32_t launches;
  uint32_t target;
  int64_t openedNs;
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
    pthread_mutex_init(&found->mu, nullptr);
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
    __atomic_compare_exchange_n(&d->compute_stamp_ns, &stamp, now, false, __ATOMIC_RELAXED,
                                __ATOMIC_RELAXED);
    return;
  }
  if (!__atomic_compare_exchange_n(&d->compute_stamp_ns, &stamp, now, false, __ATOMIC_RELAXED,
                                   __ATOMIC_RELAXED)) {
    return;  // another thread or process refilled for this interval
  }
  int64_t add = (now - stamp) * pct / 100;
  int64_t cap = kWindowNs * pct / 100;
  int64_t credit = __atomic_add_fetch(&d->compute_credit_ns, add, __ATOMIC_RELAXED);
  if (credit > cap) __atomic_sub_fetch(&d->compute_credit_ns, credit - cap, __ATOMIC_RELAXED);
}

// Holds the caller back until the container's bucket for `dev` is not in debt.
void waitForCredit(int dev) {
  Runtime& rt = runtime();
  vgpu_region_device* d = &rt.region->devices[dev];
  uint32_t pct = rt.cfg.devices[dev].smPercent;
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

void closeBurst(Burst* b) {
  b->open = false;
  if (record(b->end, b->stream, b->ptsz) != CUDA_SUCCESS ||
      real::cuEventSynchronize(b->end) != CUDA_SUCCESS) {
    return;
  }
  float ms = 0;
  if (real::cuEventElapsedTime_v2(&ms, b->start, b->end) != CUDA_SUCCESS || ms < 0) return;
  int64_t busy = static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  if (b->launches > 0) {
    int64_t per = busy / b->launches;
    b->nsPerLaunch = b->nsPerLaunch == 0 ? per : (b->nsPerLaunch + per) / 2;
    int64_t target = kQuantumNs / (b->nsPerLaunch > 0 ? b->nsPerLaunch : 1);
    b->target = static_cast<uint32_t>(target < 1 ? 1 : target > kMaxLaunchesPerBurst ? kMaxLaunchesPerBurst : target);
  }
  vgpu_region_device* d = &runtime().region->devices[b->dev];
  __atomic_sub_fetch(&d->compute_credit_ns, busy, __ATOMIC_RELAXED);
  __atomic_add_fetch(&d->compute_busy_ns, static_cast<uint64_t>(busy), __ATOMIC_RELAXED);
  waitForCredit(b->dev);
}

bool ensureEvents(Burst* b) {
  if (b->start != nullptr) return true;
  if (real::cuEventCreate == nullptr || real::cuEventSynchronize == nullptr ||
      real::cuEventElapsedTime_v2 == nullptr || real::cuEventRecord == nullptr) {
    return false;
  }
  if (real::cuEventCreate(&b->start, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
  if (real::cuEventCreate(&b->end, CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS) {
    real::cuEventDestroy_v2(b->start);
    b->start = nullptr;
    return false;
  }
  return true;
}

}  // namespace

CUresult begin(CUstream stream, bool ptsz, void** state) {
  *state = nullptr;
  CUcontext ctx = nullptr;
  if (real::cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || ctx == nullptr) return CUDA_SUCCESS;
  Burst* b = burstFor(ctx);
  if (b == nullptr || !b->limited) return CUDA_SUCCESS;
  pthread_mutex_lock(&b->mu);
  if (b->open && (b->stream != stream || b->ptsz != ptsz)) closeBurst(b);
  if (!b->open) {
    // Work captured into a graph does not run now; it is throttled when the graph launches.
    if (!ensureEvents(b) || capturing(stream, ptsz)) {
      pthread_mutex_unlock(&b->mu);
      return CUDA_SUCCESS;
    }
    waitForCredit(b->dev);
    if (record(b->start, stream, ptsz) != CUDA_SUCCESS) {
      pthread_mutex_unlock(&b->mu);
      return CUDA_SUCCESS;
    }
    b->open = true;
    b->stream = stream;
    b->ptsz = ptsz;
    b->launches = 0;
    b->openedNs = nowNs();
  }
  *state = b;  // the burst's mutex is held until end()
  return CUDA_SUCCESS;
}

void end(void* state, CUresult launchResult) {
  auto* b = static_cast<Burst*>(state);
  if (b == nullptr) return;
  if (launchResult == CUDA_SUCCESS) ++b->launches;
  if (b->launches >= b->target || nowNs() - b->openedNs >= kQuantumNs) closeBurst(b);
  pthread_mutex_unlock(&b->mu);
}

void reset() {
  // A forked child has none of its parent's contexts or events.
  gBurstCount.store(0);
  pthread_mutex_init(&gTableMu, nullptr);
}

}  // namespace vgpu::throttle
