// The node's shared handout journal (handout_journal.h): the lock, reading what the other
// process appended, the lines, the device rule, migration and compaction.

#include "handout_journal.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>

#include <boost/json.hpp>

namespace vgpu::deviceplugin {
namespace fs = std::filesystem;
namespace json = boost::json;

const char* journalName(FrontEnd f) { return f == FrontEnd::kDra ? "dra" : "devicePlugin"; }

namespace {

constexpr std::int64_t kVersion = 1;

const char* daemonOf(FrontEnd f) { return f == FrontEnd::kDra ? "vgpu-dra-plugin" : "vgpu-device-plugin"; }

std::optional<FrontEnd> frontEndNamed(std::string_view name) {
  if (name == "devicePlugin") return FrontEnd::kDevicePlugin;
  if (name == "dra") return FrontEnd::kDra;
  return std::nullopt;
}

json::object putLine(const JournalEntry& e) {
  json::array devices;
  for (const auto& d : e.devices)
    devices.push_back(json::object{{"backend", d.backend},
                                   {"id", d.deviceId},
                                   {"memoryMiB", d.memoryMiB},
                                   {"cores", d.cores},
                                   {"share", d.share}});
  json::object holder{{"text", e.holder.text}};
  if (e.frontEnd == FrontEnd::kDra) {
    holder["claimUid"] = e.holder.claimUid;
  } else {
    holder["podUid"] = e.holder.podUid;
    holder["container"] = e.holder.container;
  }
  return {{"v", kVersion},         {"op", "put"},          {"frontEnd", journalName(e.frontEnd)},
          {"key", e.key},          {"holder", std::move(holder)},   {"devices", std::move(devices)},
          {"record", e.record}};
}

std::string text(const json::object& o, const char* key) {
  const auto* f = o.if_contains(key);
  return f && f->is_string() ? std::string(f->as_string()) : std::string();
}

/// One line applied to `live`; an error says why it cannot be used.
Status applyLine(std::string_view line, std::map<std::pair<FrontEnd, std::string>, JournalEntry>& live) {
  boost::system::error_code ec;
  json::value v = json::parse(line, ec);
  const auto* o = ec ? nullptr : v.if_object();
  if (!o) return makeError("not a JSON object");
  const auto* version = o->if_contains("v");
  if (!version || !version->is_int64()) return makeError("no format version (\"v\")");
  if (version->as_int64() != kVersion)
    return makeError("format version " + std::to_string(version->as_int64()) + " is not known to this agent (it reads " +
                     std::to_string(kVersion) + ")");
  const auto frontEnd = frontEndNamed(text(*o, "frontEnd"));
  const std::string key = text(*o, "key");
  const std::string op = text(*o, "op");
  if (!frontEnd || key.empty()) return makeError("no frontEnd (devicePlugin or dra) or key");
  if (op == "release") {
    live.erase({*frontEnd, key});
    return {};
  }
  if (op != "put") return makeError("op is neither put nor release");
  JournalEntry e;
  e.frontEnd = *frontEnd;
  e.key = key;
  const auto* holder = o->if_contains("holder");
  if (!holder || !holder->is_object()) return makeError("holder missing");
  e.holder.podUid = text(holder->as_object(), "podUid");
  e.holder.container = text(holder->as_object(), "container");
  e.holder.claimUid = text(holder->as_object(), "claimUid");
  e.holder.text = text(holder->as_object(), "text");
  const auto* devices = o->if_contains("devices");
  const auto* record = o->if_contains("record");
  if (!devices || !devices->is_array() || !record || !record->is_object()) return makeError("devices or record missing");
  for (const auto& dv : devices->as_array()) {
    const auto* d = dv.if_object();
    if (!d) return makeError("a device is not an object");
    HeldDevice h;
    h.backend = text(*d, "backend");
    h.deviceId = text(*d, "id");
    h.share = text(*d, "share");
    boost::system::error_code nec;
    if (const auto* m = d->if_contains("memoryMiB")) h.memoryMiB = m->to_number<std::uint64_t>(nec);
    if (const auto* c = d->if_contains("cores"); c && !nec) h.cores = c->to_number<std::uint32_t>(nec);
    if (h.backend.empty() || h.deviceId.empty() || nec) return makeError("a device without backend or id, or a bad number");
    e.devices.push_back(std::move(h));
  }
  e.record = record->as_object();
  live[{e.frontEnd, e.key}] = std::move(e);
  return {};
}

}  // namespace

/// The exclusive flock of the journal's lock file for one operation; polled so that a holder
/// that hangs (never one that died: the kernel drops its lock) is reported, not waited on.
class HandoutJournal::Lock {
 public:
  explicit Lock(const HandoutJournal& j) : fd_(j.lockFd_) {
    const auto deadline = std::chrono::steady_clock::now() + kLockWait;
    while (fd_ >= 0) {
      if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) {
        held_ = true;
        return;
      }
      if (errno != EWOULDBLOCK && errno != EINTR) break;
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  ~Lock() {
    if (held_) ::flock(fd_, LOCK_UN);
  }
  Lock(const Lock&) = delete;
  Lock& operator=(const Lock&) = delete;
  Status status(const fs::path& file) const {
    if (held_) return {};
    if (fd_ < 0) return makeError("the handout journal " + file.string() + " is not open");
    return makeError("cannot lock the handout journal " + file.string() + ".lock within " +
                     std::to_string(kLockWait.count()) + " ms (the other front end holds it and does not let go)");
  }

 private:
  int fd_;
  bool held_ = false;
};

HandoutJournal::HandoutJournal(fs::path file, FrontEnd self) : file_(std::move(file)), self_(self) {}

HandoutJournal::~HandoutJournal() {
  if (fd_ >= 0) ::close(fd_);
  if (lockFd_ >= 0) ::close(lockFd_);
}

Status HandoutJournal::reopenLocked() {
  const int fd = ::open(file_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return makeError("cannot open the handout journal " + file_.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return makeError("the handout journal " + file_.string() + " is not a regular file");
  }
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  inode_ = st.st_ino;
  readTo_ = 0;
  lines_ = 0;
  endsInLine_ = true;
  live_.clear();
  return {};
}

Status HandoutJournal::refreshLocked(std::vector<std::string>* problems) {
  struct stat st {};
  // Rewritten (compacted) or removed by the other process: read it from the start.
  if (fd_ < 0 || ::stat(file_.c_str(), &st) != 0 || st.st_ino != inode_)
    if (auto s = reopenLocked(); !s.ok()) return s;
  std::string tail;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::pread(fd_, buf, sizeof buf, static_cast<off_t>(readTo_ + tail.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return makeError("cannot read the handout journal " + file_.string() + ": " + std::strerror(errno));
    if (n == 0) break;
    tail.append(buf, static_cast<std::size_t>(n));
  }
  if (tail.empty()) return {};
  std::size_t start = 0;
  for (std::size_t nl; (nl = tail.find('\n', start)) != std::string::npos; start = nl + 1) {
    ++lines_;
    const std::string_view line(tail.data() + start, nl - start);
    if (line.empty()) continue;
    if (auto s = applyLine(line, live_); !s.ok() && problems)
      problems->push_back(file_.string() + " line " + std::to_string(lines_) + ": " + s.error().message);
  }
  // Every writer appends whole lines under the lock we hold: a last line without its newline
  // was torn by a crash. It is skipped; the next append starts a line of its own.
  endsInLine_ = start == tail.size();
  if (!endsInLine_ && problems)
    problems->push_back(file_.string() + " line " + std::to_string(lines_ + 1) + ": cut short (a crash while writing it)");
  readTo_ += tail.size();
  return {};
}

Status HandoutJournal::appendLocked(const std::string& line) {
  const std::string out = (endsInLine_ ? "" : "\n") + line + "\n";
  // One write(): O_APPEND keeps it whole and after the other process's lines.
  const ssize_t n = ::write(fd_, out.data(), out.size());
  if (n != static_cast<ssize_t>(out.size())) {
    const std::string why = n < 0 ? std::strerror(errno) : "short write";
    (void)refreshLocked(nullptr);  // whatever part landed is read back as a torn line
    return makeError("cannot append to the handout journal " + file_.string() + ": " + why);
  }
  readTo_ += out.size();
  endsInLine_ = true;
  ++lines_;
  return {};
}

Status HandoutJournal::compactLocked() {
  const fs::path tmp = file_.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& [k, e] : live_) out << json::serialize(putLine(e)) << "\n";
    out.flush();
    if (!out) return makeError("cannot write " + tmp.string());
  }
  std::error_code ec;
  fs::rename(tmp, file_, ec);
  if (ec) return makeError("cannot replace the handout journal " + file_.string() + ": " + ec.message());
  auto keep = std::move(live_);
  if (auto s = reopenLocked(); !s.ok()) return s;
  live_ = std::move(keep);
  struct stat st {};
  if (::fstat(fd_, &st) == 0) readTo_ = static_cast<std::uint64_t>(st.st_size);
  lines_ = live_.size();
  return {};
}

Result<std::vector<std::string>> HandoutJournal::open(const fs::path& legacy, const Migration& migrate) {
  std::lock_guard guard(mu_);
  std::error_code ec;
  fs::create_directories(file_.parent_path(), ec);
  if (lockFd_ < 0) {
    const fs::path lockFile = file_.string() + ".lock";
    lockFd_ = ::open(lockFile.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lockFd_ < 0) return makeError("cannot open the handout journal's lock " + lockFile.string() + ": " + std::strerror(errno));
  }
  Lock lock(*this);
  if (auto s = lock.status(file_); !s.ok()) return s.error();
  std::vector<std::string> problems;
  if (auto s = reopenLocked(); !s.ok()) return s.error();
  if (auto s = refreshLocked(&problems); !s.ok()) return s.error();
  if (!legacy.empty() && migrate && fs::is_regular_file(legacy, ec)) {
    auto migrated = migrate(legacy);
    if (!migrated.ok()) return migrated.error();
    problems.insert(problems.end(), migrated->problems.begin(), migrated->problems.end());
    for (auto& e : migrated->entries) {
      e.frontEnd = self_;
      if (auto s = appendLocked(json::serialize(putLine(e))); !s.ok()) return s.error();
      live_[{e.frontEnd, e.key}] = std::move(e);
    }
    // Kept, renamed, for whoever looks into an upgrade (and to go back by hand); never read again.
    fs::rename(legacy, legacy.string() + ".migrated", ec);
    if (ec) return makeError("cannot rename " + legacy.string() + " after migrating it: " + ec.message());
  }
  if (auto s = compactLocked(); !s.ok()) return s.error();
  return problems;
}

const JournalEntry* HandoutJournal::conflictLocked(const JournalEntry& e, const HeldDevice** device) const {
  for (const auto& [k, other] : live_) {
    if (other.frontEnd == e.frontEnd) continue;
    for (const auto& mine : e.devices)
      for (const auto& theirs : other.devices)
        if (mine.backend == theirs.backend && mine.deviceId == theirs.deviceId) {
          *device = &mine;
          return &other;
        }
  }
  return nullptr;
}

Status HandoutJournal::hold(const JournalEntry& e, const std::function<Status()>& beforeAppend) {
  std::lock_guard guard(mu_);
  Lock lock(*this);
  if (auto s = lock.status(file_); !s.ok()) return s;
  if (auto s = refreshLocked(nullptr); !s.ok()) return s;
  const HeldDevice* device = nullptr;
  if (const JournalEntry* other = conflictLocked(e, &device))
    return makeError("device " + device->deviceId + " (backend " + device->backend + ") is handed out by the other front end, " +
                     daemonOf(other->frontEnd) + ", to " + other->holder.text +
                     ": a device serves one front end at a time (check frontEnd: in the device config)");
  if (beforeAppend)
    if (auto s = beforeAppend(); !s.ok()) return s;
  if (auto s = appendLocked(json::serialize(putLine(e))); !s.ok()) return s;
  live_[{e.frontEnd, e.key}] = e;
  return {};
}

Status HandoutJournal::update(const JournalEntry& e) {
  std::lock_guard guard(mu_);
  Lock lock(*this);
  if (auto s = lock.status(file_); !s.ok()) return s;
  if (auto s = refreshLocked(nullptr); !s.ok()) return s;
  if (auto s = appendLocked(json::serialize(putLine(e))); !s.ok()) return s;
  live_[{e.frontEnd, e.key}] = e;
  return {};
}

Status HandoutJournal::release(const std::string& key) {
  std::lock_guard guard(mu_);
  Lock lock(*this);
  if (auto s = lock.status(file_); !s.ok()) return s;
  if (auto s = refreshLocked(nullptr); !s.ok()) return s;
  live_.erase({self_, key});
  return appendLocked(json::serialize(
      json::object{{"v", kVersion}, {"op", "release"}, {"frontEnd", journalName(self_)}, {"key", key}}));
}

Status HandoutJournal::compactIfLarge() {
  std::lock_guard guard(mu_);
  Lock lock(*this);
  if (auto s = lock.status(file_); !s.ok()) return s;
  if (auto s = refreshLocked(nullptr); !s.ok()) return s;
  if (lines_ <= 2 * live_.size() + 64) return {};
  return compactLocked();
}

std::vector<JournalEntry> HandoutJournal::mine() const {
  std::lock_guard guard(mu_);
  std::vector<JournalEntry> out;
  for (const auto& [k, e] : live_)
    if (e.frontEnd == self_) out.push_back(e);
  return out;
}

Result<std::vector<JournalEntry>> HandoutJournal::all() {
  std::lock_guard guard(mu_);
  Lock lock(*this);
  if (auto s = lock.status(file_); !s.ok()) return s.error();
  if (auto s = refreshLocked(nullptr); !s.ok()) return s.error();
  std::vector<JournalEntry> out;
  for (const auto& [k, e] : live_) out.push_back(e);
  return out;
}

Result<std::optional<std::string>> HandoutJournal::heldByOther(const std::string& backend, const std::string& deviceId) {
  JournalEntry probe;
  probe.frontEnd = self_;
  probe.devices = {HeldDevice{backend, deviceId, 0, 0, {}}};
  std::lock_guard guard(mu_);
  Lock lock(*this);
  if (auto s = lock.status(file_); !s.ok()) return s.error();
  if (auto s = refreshLocked(nullptr); !s.ok()) return s.error();
  const HeldDevice* device = nullptr;
  if (const JournalEntry* other = conflictLocked(probe, &device)) return std::optional<std::string>(other->holder.text);
  return std::optional<std::string>();
}

}  // namespace vgpu::deviceplugin
