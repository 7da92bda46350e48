// When the compute limit applies, and priorities.
//
// GPU_CORE_UTILIZATION_POLICY (HAMi's meaning): `force` throttles always, `disable` never,
// `default` while another tenant runs kernels on the device. Another tenant: NVML's process
// utilization samples (the driver's own per-process accounting, which a tenant cannot forge)
// name a process that ran kernels on the device within the last second and is not one of
// this container's processes (their driver pids are in the region's slots). For a
// high-priority tenant, only another high-priority tenant counts (the activity board), since
// low-priority ones are held back while it runs.
//
// CUDA_TASK_PRIORITY: 0 is high, anything else (and unset) low. A high-priority tenant says
// on the device's activity board (vgpu/activity_board.h) that it launched, at most every
// 100 ms, valid for kHoldWindowNs. A low-priority tenant's launches on that device wait while
// such an announcement from another tenant is valid. Only high-priority containers can write
// the board (the agent mounts it read-only into the others).
//
// The thread wakes every kTickNs; launches read its conclusions from atomics.

#include "monitor.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nvml_view.h"
#include "runtime.h"
#include "vgpu/activity_board.h"

namespace vgpu::monitor {

std::atomic<uint32_t> detail::gEngaged{0};

namespace {

constexpr int64_t kTickNs = 100'000'000;
constexpr int64_t kHoldWindowNs = 500'000'000;  // an announcement's validity
constexpr uint64_t kActivityWindowUs = 1'000'000;

bool gNeeded = false;    // the configuration needs the thread
bool gForce = false;
bool gHigh = false;      // this tenant is high priority
bool gBoard = false;     // an activity board is configured
uint32_t gLimited = 0;   // devices with a compute limit the policy may apply
std::atomic<bool> gStarted{false};
std::atomic<bool> gStopping{false};
std::atomic<uint32_t> gHeld{0};      // bit d: a high-priority tenant is active on d
std::atomic<uint32_t> gAnnounce{0};  // bit d: the next launch on d announces
std::atomic<vgpu_board*> gBoards[kLimiterMaxDevices];
pthread_mutex_t gBoardMu = PTHREAD_MUTEX_INITIALIZER;

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

uint32_t tenant() { return runtime().region->tenant; }

// Launches go straight through exactly when nothing above concerns them.
void refreshFast() {
  bool slow = detail::gEngaged.load() != 0 || gHeld.load() != 0 || gAnnounce.load() != 0 ||
              (gNeeded && !gStarted.load());
  ::vgpu::detail::gLaunchFast.store(!slow && ::vgpu::detail::gCudaReady.load(), std::memory_order_release);
}

// The board of `dev`, mapped on first need (a low-priority tenant's may not exist yet).
vgpu_board* board(int dev) {
  vgpu_board* b = gBoards[dev].load(std::memory_order_acquire);
  if (b != nullptr || !gBoard) return b;
  const char* uuid = runtime().uuids[dev];
  if (uuid[0] == '\0') return nullptr;
  pthread_mutex_lock(&gBoardMu);
  b = gBoards[dev].load();
  if (b == nullptr) {
    char err[256];
    if (vgpu_board_open(runtime().cfg.activity_board, uuid, gHigh ? 1 : 0, &b, err, sizeof err) == 0) {
      gBoards[dev].store(b, std::memory_order_release);
    } else if (gHigh) {
      static std::atomic<bool> said{false};
      if (!said.exchange(true)) logf(kLogError, "%s: this high-priority tenant cannot be seen by others", err);
    }
  }
  pthread_mutex_unlock(&gBoardMu);
  return b;
}

// Whether a process that is not one of this container's ran kernels on `dev` lately.
bool othersActive(int dev) {
  uint32_t pids[256];
  int n = nvmlview::activePids(dev, pids, 256, kActivityWindowUs);
  if (n <= 0) return false;  // nobody, or NVML cannot say: alone as far as anyone knows
  const vgpu_region* r = runtime().region;
  uint32_t self = static_cast<uint32_t>(getpid());
  for (int i = 0; i < n; ++i) {
    bool ours = pids[i] == self;
    for (int s = 0; s < VGPU_REGION_MAX_PROCS && !ours; ++s) {
      if (__atomic_load_n(&r->procs[s].pid, __ATOMIC_RELAXED) == 0) continue;
      uint32_t flags = __atomic_load_n(&r->procs[s].flags, __ATOMIC_RELAXED);
      ours = (flags & VGPU_REGION_PROC_DRIVER_PID_MASK) == pids[i];
    }
    if (!ours) return true;
  }
  return false;
}

void tick() {
  Runtime& rt = runtime();
  uint32_t touched = rt.publishedDevices.load();
  uint32_t engaged = 0, held = 0;
  int64_t now = nowNs();
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    uint32_t bit = 1u << d;
    if ((touched & bit) == 0) continue;
    vgpu_board* b = gBoard ? board(d) : nullptr;
    int highOthers = b != nullptr ? vgpu_board_active(b, tenant(), now) : 0;
    if (!gHigh && highOthers > 0) held |= bit;
    if ((gLimited & bit) != 0) {
      bool shared = gForce || (gHigh && gBoard ? highOthers > 0 : othersActive(d));
      if (shared) engaged |= bit;
    }
  }
  detail::gEngaged.store(engaged);
  gHeld.store(held);
  if (gHigh && gBoard) gAnnounce.store(touched);
  refreshFast();
}

void* run(void*) {
  while (!gStopping.load()) {
    timespec ts{0, kTickNs};
    nanosleep(&ts, nullptr);
    if (gStopping.load()) break;
    tick();
  }
  return nullptr;
}

void start() {
  if (gStarted.exchange(true)) return;
  // The thread takes none of the application's signals.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  pthread_t thread;
  int rc = pthread_create(&thread, &attr, run, nullptr);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    logf(kLogError, "cannot start the limiter's monitor thread (%s): compute limits apply always, priorities not",
         strerror(rc));
    detail::gEngaged.store(gLimited);
    gNeeded = false;
  }
  refreshFast();
}

}  // namespace

void configure() {
  Runtime& rt = runtime();
  const vgpu_limiter_settings& cfg = rt.cfg;
  for (int d = 0; d < kLimiterMaxDevices; ++d) {
    if (rt.computeAny && rt.computeLimited(d)) gLimited |= 1u << d;  // (computeAny: the driver can time kernels)
  }
  gForce = cfg.core_policy == VGPU_CORE_POLICY_FORCE;
  gBoard = cfg.activity_board[0] != '\0';
  gHigh = cfg.priority <= 0;
  if (cfg.priority_set && !gBoard) {
    logf(kLogWarn, "CUDA_TASK_PRIORITY is set but VGPU_ACTIVITY_BOARD is not: priorities are not acted on");
  }
  gNeeded = (gLimited != 0 && !gForce) || gBoard;
  if (gForce) detail::gEngaged.store(gLimited);
  refreshFast();
}

void contextCreated() {
  if (gNeeded && !gStarted.load(std::memory_order_relaxed)) start();
}

void beforeLaunch(int dev) {
  if (gNeeded && !gStarted.load(std::memory_order_relaxed)) start();
  uint32_t bit = 1u << dev;
  if ((gAnnounce.load(std::memory_order_relaxed) & bit) != 0 && (gAnnounce.fetch_and(~bit) & bit) != 0) {
    if (vgpu_board* b = board(dev)) vgpu_board_announce(b, tenant(), nowNs() + kHoldWindowNs);
    refreshFast();
  }
  if ((gHeld.load(std::memory_order_relaxed) & bit) == 0) return;
  // A high-priority tenant is active on the device: wait, no lock held, until its last
  // announcement has lapsed.
  vgpu_board* b = board(dev);
  int64_t start = nowNs();
  while (b != nullptr && !gStopping.load(std::memory_order_relaxed) && vgpu_board_active(b, tenant(), nowNs()) > 0) {
    timespec ts{0, 2'000'000};
    nanosleep(&ts, nullptr);
  }
  __atomic_add_fetch(&runtime().region->devices[dev].compute_held_ns, static_cast<uint64_t>(nowNs() - start),
                     __ATOMIC_RELAXED);
  gHeld.fetch_and(~bit);
  refreshFast();
}

void reset() {
  gStarted.store(false);
  gHeld.store(0);
  gAnnounce.store(0);
  pthread_mutex_init(&gBoardMu, nullptr);
  detail::gEngaged.store(gForce ? gLimited : 0);
  refreshFast();
}

void stop() { gStopping.store(true); }

}  // namespace vgpu::monitor
