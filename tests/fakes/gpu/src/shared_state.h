#pragma once
// Access to the simulated physical device state (../fake_gpu_state.h), shared across processes.

#include <cstdint>
#include <string>

#include "../fake_gpu_state.h"
#include "config.h"

namespace vgpu::fakegpu {

/// The sysfs path of the memory cgroup of `pid` (from /proc/<pid>/cgroup: the v1 memory
/// controller's where there is one, else cgroup v2's), under VGPU_FAKE_GPU_SYSFS (default
/// /sys); VGPU_FAKE_GPU_PROC_CGROUP names a file read instead for this process. Empty if
/// none is found.
std::string cgroupSysfsPath(int32_t pid);

/// Holds a robust, process-shared mutex of the state; a holder that died hands its lock on.
class RobustLock {
 public:
  explicit RobustLock(pthread_mutex_t* m);
  ~RobustLock();
  RobustLock(const RobustLock&) = delete;
  RobustLock& operator=(const RobustLock&) = delete;

 private:
  pthread_mutex_t* m_;
};

/// CLOCK_MONOTONIC in nanoseconds (the clock every process shares).
uint64_t monotonicNs();

/// The mapped state. One per loaded fake library; both fakes in a process see the same memory.
class SharedState {
 public:
  /// Maps VGPU_FAKE_GPU_STATE (or a per-process region, found through `peerSoname` if the other
  /// fake already made one). On failure returns nullptr and sets `error`.
  static SharedState* attach(const MachineConfig& cfg, const char* peerSoname, std::string& error);

  vgpu_fake_gpu_state* raw() const { return state_; }
  unsigned deviceCount() const { return state_->device_count; }

  /// Takes `bytes` of device memory for this process if the device has them free.
  bool charge(int dev, uint64_t bytes);
  /// Gives back memory taken with charge().
  void uncharge(int dev, uint64_t bytes);
  uint64_t usedBytes(int dev) const;
  uint64_t totalBytes(int dev) const { return state_->devices[dev].total_bytes; }
  /// Marks whether this process holds a context on `dev` (for NVML's process list).
  void setContext(int dev, bool held);
  /// Releases this process's slot and everything it still holds (process exit).
  void releaseSelf();

  /// Schedules a kernel of `durNs` on `dev` after everything already scheduled there by any
  /// process; returns its end time.
  uint64_t scheduleKernel(int dev, uint64_t durNs);
  /// Busy time of `dev` up to `nowNs` (only kernels that have run so far count).
  uint64_t busyNs(int dev, uint64_t nowNs);
  /// Busy nanoseconds of `dev` within [from, to), optionally only those of `pid` (0: all).
  uint64_t busyWithin(int dev, uint64_t fromNs, uint64_t toNs, uint32_t pid);

  /// Test control: sets what another process `pid` (a live process the test started) holds
  /// on `dev`, as the driver would account it, with a context while `bytes` is nonzero.
  /// False when no slot is free or `pid` is not running.
  bool setProcessUsage(int32_t pid, int dev, uint64_t bytes);

  /// Per-cgroup memory limits (memory_limits.cpp). setMemoryLimit returns one of kLimit*;
  /// soft 0 with hard all ones clears. `ns` is a cgroup's sysfs path.
  enum { kLimitOk, kLimitBadArgument, kLimitNoCgroup, kLimitTableFull };
  int setMemoryLimit(int dev, const char* ns, uint64_t soft, uint64_t hard);
  /// The limit of `ns` on `dev` (none: soft 0, hard all ones) and what its processes hold.
  bool memoryLimit(int dev, const char* ns, uint64_t& soft, uint64_t& hard, uint64_t& used);
  /// Narrows `total`/`free` of `dev` to what this process's cgroup may still take; false if
  /// no limit applies to it.
  bool cgroupView(int dev, uint64_t& total, uint64_t& free);

  /// Frees the slots (and memory) of processes that no longer exist.
  void reclaimDead();

  /// Memory shared between processes (shared_objects.cpp), keyed by its memfd's inode. The
  /// exporter moves the `bytes` it was charged on `dev` from its slot into the object and holds
  /// it; an importer holds it too; the last holder's drop (or death) frees the bytes. Export of
  /// an object already shared only holds it. False when the table is full (the exporter keeps
  /// paying then, and its free uncharges as usual).
  bool exportObject(uint64_t key, int dev, uint64_t bytes);
  /// Holds an exported object; false when there is none with that key.
  bool holdObject(uint64_t key);
  /// Lets go of an object this process holds.
  void dropObject(uint64_t key);
  /// A device-node export (VGPU_FAKE_EXPORT_DEVICE_FD): this process's descriptor `fd` of the
  /// exported open file, and `memfd` of the memory on `dev`. False when the table is full.
  bool addDeviceExport(int fd, int memfd, int dev);
  /// The export whose open file `fd` (this process's) is: its process, memfd and device.
  bool findDeviceExport(int fd, int32_t* pid, int32_t* memfd, int32_t* dev);
  /// This process's export of descriptor `fd` is gone.
  void removeDeviceExport(int fd);

 private:
  vgpu_fake_process_slot* mySlot();
  /// Takes `bytes` of `dev` for this process if the device has them (no limit checked).
  bool chargeDevice(int dev, uint64_t bytes);
  /// Charges under the limits of this process's cgroup; `handled` false: none applies.
  bool chargeWithinLimits(int dev, uint64_t bytes, bool& handled);
  /// With memory_limits.lock held: the least room any limit applying to the cgroup `cgroup` leaves on
  /// `dev`, and that limit's hard bytes; false when none applies.
  bool headroomLocked(const char* cgroup, int dev, uint64_t& room, uint64_t& hardest);
  uint64_t cgroupUsedLocked(int dev, const char* ns);
  /// Writes the memory cgroup of `pid` into its slot.
  void recordCgroup(vgpu_fake_process_slot& slot, int32_t pid);
  /// Clears the holder bit of dead slot `index` in every shared object (reclaimDead).
  void dropDeadHolder(size_t index);

  vgpu_fake_gpu_state* state_ = nullptr;
  vgpu_fake_process_slot* slot_ = nullptr;
};

}  // namespace vgpu::fakegpu
