#pragma once
// The node's one journal of handouts, shared by both front ends (vgpu-device-plugin and
// vgpu-dra-plugin, two processes): which device is held by which holder, and each front end's record.
//
// One file, <state-dir>/handouts.journal, one JSON line per change, each carrying the format
// version ("v": 1):
//   {"v":1,"op":"put","frontEnd":"devicePlugin"|"dra","key":K,
//    "holder":{"podUid","container"} or {"claimUid"}, with "text" (who, as messages name it),
//    "devices":[{"backend","id","memoryMiB","cores","share"}],"record":{<the front end's own fields>}}
//   {"v":1,"op":"release","frontEnd":F,"key":K}
// The last put of (frontEnd, key) is live until its release. Appends are one write() each on
// an O_APPEND descriptor, taken under an exclusive flock of <journal>.lock; under that lock a
// process first reads what the other process appended since (or everything, when the other
// rewrote the file: the path's inode changed), so every decision sees the whole node. The
// kernel drops a flock with its holder's last descriptor, so a crashed holder never wedges the
// other; a live one that keeps it past kLockWait is reported as an error, never waited on.
// A line torn by a crash mid-write (no newline at the end of the file) is closed with a newline
// before the next append, so only that line is lost; replay skips it.
//
// The rule for devices (docs/node-agent.md, "One journal for both front ends"): a device
// (backend + device id) held by one front end, in any share, is never handed out by the other,
// whatever memory it has left: the two front ends count a device's capacity in different
// places (the extender's annotations, DRA's ResourceSlices), so only disjoint devices are safe.
// Config should make them disjoint (frontEnd: per backend and node); the journal holds it when
// the config is wrong, e.g. while the two daemons run different versions of it.
// Thread-safe: one mutex per instance; instances of one process lock each other out through
// the flock as two processes do.

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <boost/json/object.hpp>

#include "vgpu/config.h"
#include "vgpu/result.h"

namespace vgpu::deviceplugin {

/// One device (or share of one) as the journal knows it.
struct HeldDevice {
  std::string backend;
  std::string deviceId;  ///< Device::id
  std::uint64_t memoryMiB = 0;
  std::uint32_t cores = 0;
  std::string share;  ///< which share: the device plugin's slot, DRA's share id; empty: none
  bool operator==(const HeldDevice&) const = default;
};

/// Who holds a handout: a pod's container (device plugin) or a ResourceClaim (DRA).
struct JournalHolder {
  std::string podUid;     ///< device plugin; empty when only PodResources named the pod
  std::string container;  ///< device plugin
  std::string claimUid;   ///< DRA
  /// As a refusal names it: "pod ns/name container c (handout id)", "ResourceClaim ns/name (uid u, driver d)".
  std::string text;
  bool operator==(const JournalHolder&) const = default;
};

/// One live handout: what one holder of one front end holds.
struct JournalEntry {
  FrontEnd frontEnd = FrontEnd::kDevicePlugin;
  /// Unique within the front end: the handout id (device plugin), "<driver>/<claim uid>" (DRA).
  std::string key;
  JournalHolder holder;
  std::vector<HeldDevice> devices;
  /// The front end's own fields, kept as it wrote them.
  boost::json::object record;
};

class HandoutJournal {
 public:
  /// How long an operation waits for the other process to let go of the lock.
  static constexpr std::chrono::milliseconds kLockWait{5000};

  /// The journal at `file` (its lock beside it, `file` + ".lock"), written as `self`.
  HandoutJournal(std::filesystem::path file, FrontEnd self);
  ~HandoutJournal();
  HandoutJournal(const HandoutJournal&) = delete;
  HandoutJournal& operator=(const HandoutJournal&) = delete;

  /// What a front end's file from before the shared journal held: its live handouts as
  /// entries, and the parts that could not be used ("<file> line N: why").
  struct Migrated {
    std::vector<JournalEntry> entries;
    std::vector<std::string> problems;
  };
  /// Reads such a file (an error names it and what in it is wrong: nothing is migrated then).
  using Migration = std::function<Result<Migrated>(const std::filesystem::path&)>;

  /// Creates the folder and the file if missing, migrates `legacy` when it exists (its entries
  /// are put, then it is renamed to <legacy>.migrated; see docs/node-agent.md), replays the
  /// journal and rewrites it with only the live entries. Returns the lines that could not be
  /// used ("<file> line N: why"). Errors name the file.
  Result<std::vector<std::string>> open(const std::filesystem::path& legacy = {}, const Migration& migrate = {});

  /// Records `e` (of this front end) unless one of its devices is held by the other front end:
  /// then nothing is written and the error names the device and its holder. `beforeAppend`
  /// runs under the lock once the devices are known to be free; its error is returned and
  /// nothing is written (the device plugin makes the container's folder there, so a cleanup
  /// never sees a folder whose handout is half recorded).
  Status hold(const JournalEntry& e, const std::function<Status()>& beforeAppend = {});
  /// Records a change of `e` that holds no new device (its holder, the front end's record).
  Status update(const JournalEntry& e);
  /// Forgets this front end's `key`.
  Status release(const std::string& key);
  /// Rewrites the file with only the live entries when it has grown well past them.
  Status compactIfLarge();

  /// The live entries of this front end as of the last read (open() or any write).
  std::vector<JournalEntry> mine() const;
  /// Every live entry, read again under the lock.
  Result<std::vector<JournalEntry>> all();
  /// The holder of the other front end that holds `device` (any share), read again under the
  /// lock; nullopt when none does.
  Result<std::optional<std::string>> heldByOther(const std::string& backend, const std::string& deviceId);

  const std::filesystem::path& file() const { return file_; }

 private:
  class Lock;
  Status refreshLocked(std::vector<std::string>* problems);
  Status reopenLocked();
  Status appendLocked(const std::string& line);
  Status compactLocked();
  const JournalEntry* conflictLocked(const JournalEntry& e, const HeldDevice** device) const;

  std::filesystem::path file_;
  FrontEnd self_;
  mutable std::mutex mu_;
  int lockFd_ = -1;
  int fd_ = -1;                   // the journal, O_APPEND
  std::uint64_t inode_ = 0;       // of fd_
  std::uint64_t readTo_ = 0;      // bytes of fd_'s file replayed
  bool endsInLine_ = true;        // the file read so far ends with a newline
  std::size_t lines_ = 0;         // in the file, for compactIfLarge
  std::map<std::pair<FrontEnd, std::string>, JournalEntry> live_;
};

/// "devicePlugin" / "dra", as lines name the front ends.
const char* journalName(FrontEnd f);

}  // namespace vgpu::deviceplugin
