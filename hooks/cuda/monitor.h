#pragma once
// When the compute limit applies, and priorities (monitor.cpp): a thread of the library
// looks, every 100 ms, whether another tenant runs kernels on each device this process uses
// (GPU_CORE_UTILIZATION_POLICY=default throttles only then) and whether a high-priority
// tenant is active there (CUDA_TASK_PRIORITY: low-priority launches then wait). Launches
// read its conclusions from a few atomics; while none concerns them they pass straight
// through (launch_hooks.cpp).

#include <stdint.h>

#include <atomic>

namespace vgpu::monitor {

namespace detail {
extern std::atomic<uint32_t> gEngaged;  // bit d: launches on device d are throttled now
}

/// After the driver is loaded: what the configuration asks for (starts nothing yet).
void configure();
/// A context exists: the monitor starts if the configuration needs it.
void contextCreated();

/// Whether launches on `dev` go through the throttle now.
inline bool engaged(int dev) {
  return (detail::gEngaged.load(std::memory_order_relaxed) >> dev & 1) != 0;
}
inline bool anyEngaged() { return detail::gEngaged.load(std::memory_order_relaxed) != 0; }

/// First thing of a launch that is not passed straight through: announces this tenant's
/// activity (high priority) or waits while a high-priority tenant is active (low priority).
void beforeLaunch(int dev);

/// Forgets everything (forked child: the thread does not exist there).
void reset();
/// The library is unloading: the thread stops touching anything.
void stop();

}  // namespace vgpu::monitor
