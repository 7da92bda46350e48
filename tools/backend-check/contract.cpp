#include "contract.h"

#include "scaling_check.h"
#include "split_count_check.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "vgpu/allocator.h"
#include "vgpu/c_views.h"
#include "vgpu/container_spec.h"

namespace vgpu::check {
namespace {

namespace fs = std::filesystem;

// The table as each minor version knew it: 1.1 appended container_usage, 1.2 only the spec
// sink's notice, 1.3 protected_env and device_processes.
constexpr size_t kTableSize10 = offsetof(vgpu_backend_table, container_usage);
constexpr size_t kTableSize12 = offsetof(vgpu_backend_table, protected_env);
constexpr size_t kRequiredSize = offsetof(vgpu_backend_table, fit) + sizeof(vgpu_backend_table::fit);
constexpr unsigned char kGuard = 0xA5;

uint32_t abiVersion(uint32_t major, uint32_t minor) { return (major << 16) | minor; }
std::string versionText(uint32_t v) {
  return std::to_string(VGPU_ABI_MAJOR_OF(v)) + "." + std::to_string(VGPU_ABI_MINOR_OF(v));
}

/// A vgpu_error_buf for one call, and whether the backend wrote words into it.
class ErrorText {
 public:
  vgpu_error_buf* buf() {
    text_.fill('\0');
    buf_ = {text_.data(), text_.size()};
    return &buf_;
  }
  std::string str() const { return std::string(text_.data(), strnlen(text_.data(), text_.size())); }
  /// A message of the check's own, where the backend's call gave none to judge.
  void set(const std::string& message) { std::snprintf(buf()->text, text_.size(), "%s", message.c_str()); }

 private:
  std::array<char, 1024> text_{};
  vgpu_error_buf buf_{};
};

const char* statusName(vgpu_status s) {
  switch (s) {
    case VGPU_OK: return "VGPU_OK";
    case VGPU_ERROR_INVALID: return "VGPU_ERROR_INVALID";
    case VGPU_ERROR_UNAVAILABLE: return "VGPU_ERROR_UNAVAILABLE";
    case VGPU_ERROR_INTERNAL: return "VGPU_ERROR_INTERNAL";
    case VGPU_ERROR_UNSUPPORTED: return "VGPU_ERROR_UNSUPPORTED";
  }
  return "an unknown vgpu_status";
}

bool knownStatus(vgpu_status s) { return s >= VGPU_OK && s <= VGPU_ERROR_UNSUPPORTED; }

/// "VGPU_ERROR_X: text", or what is wrong with the error itself (no words, unknown code).
std::optional<std::string> errorProblem(vgpu_status s, const ErrorText& err) {
  if (!knownStatus(s)) return "returned " + std::to_string(static_cast<int>(s)) + ", not a vgpu_status";
  if (s != VGPU_OK && err.str().empty()) return std::string("returned ") + statusName(s) + " with no text in the error buffer";
  return std::nullopt;
}

std::string describe(vgpu_status s, const ErrorText& err) {
  return std::string(statusName(s)) + (err.str().empty() ? "" : ": " + err.str());
}

struct DlCloser {
  void operator()(void* h) const {
    if (h) dlclose(h);
  }
};

/// The spec a container_spec call delivered, through the 1.3 sink.
ContainerSpec collectSpec(const vgpu_backend_table& t, vgpu_backend* b, const vgpu_container_grant& g, vgpu_status& status,
                          ErrorText& err) {
  ContainerSpec spec;
  vgpu_spec_sink sink{};
  sink.ctx = &spec;
  sink.env = [](void* p, const char* k, const char* v) {
    static_cast<ContainerSpec*>(p)->env[k ? k : ""] = v ? v : "\x01(null)";
  };
  sink.mount = [](void* p, const char* h, const char* c, uint32_t ro) {
    static_cast<ContainerSpec*>(p)->mounts.push_back({h ? h : "", c ? c : "", ro != 0});
  };
  sink.device = [](void* p, const char* h, const char* c, const char* perms) {
    static_cast<ContainerSpec*>(p)->devices.push_back({h ? h : "", c ? c : "", perms ? perms : ""});
  };
  sink.annotation = [](void* p, const char* k, const char* v) {
    static_cast<ContainerSpec*>(p)->annotations[k ? k : ""] = v ? v : "";
  };
  sink.pod_annotation = [](void* p, const char* k, const char* v) {
    static_cast<ContainerSpec*>(p)->podAnnotations[k ? k : ""] = v ? v : "";
  };
  sink.notice = [](void* p, const char* r, const char* m) {
    static_cast<ContainerSpec*>(p)->notices.push_back({r ? r : "", m ? m : ""});
  };
  sink.region = [](void* p, const char* path, uint64_t inode) {
    static_cast<ContainerSpec*>(p)->region = RegionFile{path ? path : "", inode};
  };
  status = t.container_spec(b, &g, &sink, err.buf());
  return spec;
}

bool sameSpec(const ContainerSpec& a, const ContainerSpec& b) {
  auto mounts = [](const ContainerSpec& s) {
    std::vector<std::tuple<std::string, std::string, bool>> out;
    for (const auto& m : s.mounts) out.emplace_back(m.hostPath, m.containerPath, m.readOnly);
    return out;
  };
  auto devices = [](const ContainerSpec& s) {
    std::vector<std::tuple<std::string, std::string, std::string>> out;
    for (const auto& d : s.devices) out.emplace_back(d.hostPath, d.containerPath, d.permissions);
    return out;
  };
  return a.env == b.env && mounts(a) == mounts(b) && devices(a) == devices(b) && a.annotations == b.annotations &&
         a.podAnnotations == b.podAnnotations;
}

bool validEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

bool inside(const fs::path& path, const fs::path& root) {
  const fs::path p = path.lexically_normal();
  const fs::path r = root.lexically_normal();
  auto pi = p.begin();
  for (auto ri = r.begin(); ri != r.end(); ++ri, ++pi) {
    if (ri->empty()) continue;  // a trailing separator
    if (pi == p.end() || *pi != *ri) return false;
  }
  return true;
}

/// A grant of one device to one container, owning the strings the C struct points at.
struct Grant {
  Grant(std::string holderName, const fs::path& hostDir, const Device& device, uint64_t memoryMiB, uint32_t compute,
        int32_t slot)
      : holder(std::move(holderName)), podName("check-" + holder), dir(hostDir / holder), deviceId(device.id) {
    fs::create_directories(dir);
    dirText = dir.string();
    one = {deviceId.c_str(), device.index, memoryMiB, compute, slot, -1, nullptr};
    c.struct_size = sizeof(c);
    c.holder = holder.c_str();
    c.pod_namespace = "vgpu-check";
    c.pod_name = podName.c_str();
    c.container_name = "main";
    c.container_index = 0;
    c.devices = &one;
    c.device_count = 1;
    c.host_dir = dirText.c_str();
    c.pod_annotations = {nullptr, 0};
    c.grant_size = sizeof(vgpu_grant);
    c.pod_uid = holder.c_str();
  }
  Grant(const Grant&) = delete;
  Grant& operator=(const Grant&) = delete;
  vgpu_container_ref ref() const { return {holder.c_str(), "main"}; }

  std::string holder, podName;
  fs::path dir;
  std::string dirText, deviceId;
  vgpu_grant one{};
  vgpu_container_grant c{};
};

/// Forks `command` with its stdout sent to stderr (the capture of fd 1 is for the backend).
int runShell(const std::string& command) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(2, 1);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

class Contract {
 public:
  Contract(const ContractOptions& options, Report& report) : o_(options), r_(report) {}
  ~Contract() {
    if (instance_ != nullptr) table_.destroy(instance_);
    std::error_code ec;
    if (!workDir_.empty()) fs::remove_all(workDir_, ec);
  }

  void run() {
    if (!openLibrary() || !negotiate() || !createInstance()) return;
    checkCreateRefusesUnknownOption();
    reportSlots();
    checkResources();
    checkParseRequest();
    checkDiscovery();
    checkSplitCount(table_, has(offsetof(vgpu_backend_table, split_count)), instance_, devices_, r_);
    checkScaling(table_, o_.params, skeleton(), r_);
    checkFit();
    checkFitReads();
    checkFitPlaced();
    checkLimiter();
    checkVendorMissing();
    checkVanishingDevice();
  }

 private:
  bool skeleton() const { return o_.profile == Profile::kSkeleton; }

  bool openLibrary() {
    const std::string expected = "libvgpu-backend-" + o_.params.name + ".so";
    if (o_.library.filename() != expected)
      r_.fail("entry.file_name", o_.library.filename().string() + " is not " + expected +
                                     ": the loader finds backend \"" + o_.params.name + "\" only by that name");
    else
      r_.pass("entry.file_name", expected);
    library_.reset(dlopen(o_.library.c_str(), RTLD_NOW | RTLD_LOCAL));
    if (!library_) {
      const char* why = dlerror();
      r_.fail("entry.symbol", "cannot load " + o_.library.string() + ": " + (why ? why : "unknown dlopen error"));
      return false;
    }
    entry_ = reinterpret_cast<vgpu_backend_entry_fn>(dlsym(library_.get(), VGPU_BACKEND_ENTRY_NAME));
    r_.expect(entry_ != nullptr, "entry.symbol", "exports " VGPU_BACKEND_ENTRY_NAME,
              o_.library.string() + " does not export " VGPU_BACKEND_ENTRY_NAME);
    return entry_ != nullptr;
  }

  /// Calls the entry as a loader of `version` whose table is `loaderSize` bytes: the table is
  /// zeroed with its struct_size set, and guard bytes follow it.
  struct Answer {
    int rc = 0;
    vgpu_backend_table table{};
    uint32_t filledSize = 0;
    bool guardIntact = true;
    bool tailZero = true;  ///< the bytes between the backend's size and the loader's stayed zero
  };
  Answer callEntry(uint32_t version, size_t loaderSize) {
    std::vector<unsigned char> buffer(loaderSize + 64, kGuard);
    std::memset(buffer.data(), 0, loaderSize);
    const auto size = static_cast<uint32_t>(loaderSize);
    std::memcpy(buffer.data(), &size, sizeof(size));
    Answer a;
    a.rc = entry_(version, reinterpret_cast<vgpu_backend_table*>(buffer.data()));
    std::memcpy(&a.filledSize, buffer.data(), sizeof(a.filledSize));
    std::memcpy(&a.table, buffer.data(), std::min(loaderSize, sizeof(a.table)));
    a.guardIntact = std::all_of(buffer.begin() + static_cast<long>(loaderSize), buffer.end(),
                                [](unsigned char c) { return c == kGuard; });
    if (a.filledSize <= loaderSize)
      a.tailZero = std::all_of(buffer.begin() + a.filledSize, buffer.begin() + static_cast<long>(loaderSize),
                               [](unsigned char c) { return c == 0; });
    return a;
  }

  /// What is wrong with a table the backend filled for a loader with a `loaderSize` table.
  std::optional<std::string> tableProblem(const Answer& a, size_t loaderSize) const {
    if (!a.guardIntact) return "wrote past the " + std::to_string(loaderSize) + "-byte table the loader gave it";
    if (a.filledSize > loaderSize)
      return "says its table is " + std::to_string(a.filledSize) + " bytes, more than the loader's " +
             std::to_string(loaderSize);
    if (a.filledSize < kRequiredSize)
      return "says its table is " + std::to_string(a.filledSize) + " bytes, too short for the required slots";
    if (!a.tailZero) return "wrote beyond the struct_size it reported (" + std::to_string(a.filledSize) + ")";
    if (VGPU_ABI_MAJOR_OF(a.table.abi_version) != VGPU_BACKEND_ABI_MAJOR)
      return "reports ABI " + versionText(a.table.abi_version) + ", another major version";
    const std::pair<const char*, const void*> required[] = {
        {"create", reinterpret_cast<const void*>(a.table.create)},
        {"destroy", reinterpret_cast<const void*>(a.table.destroy)},
        {"resources", reinterpret_cast<const void*>(a.table.resources)},
        {"parse_request", reinterpret_cast<const void*>(a.table.parse_request)},
        {"fit", reinterpret_cast<const void*>(a.table.fit)}};
    for (const auto& [slot, pointer] : required)
      if (pointer == nullptr) return std::string("leaves the required slot ") + slot + " null";
    const std::string name = a.table.name ? a.table.name : "";
    if (name != o_.params.name) return "calls itself \"" + name + "\", not \"" + o_.params.name + "\"";
    return std::nullopt;
  }

  bool negotiate() {
    // Older loaders of the same major: a 1.0 one (table up to reconcile), a 1.2 one (up to
    // container_usage). Refusing them is allowed; a table they cannot hold is not.
    for (const auto& [minor, size] : {std::pair<uint32_t, size_t>{0, kTableSize10}, {2, kTableSize12}}) {
      const std::string name = "entry.older_loader_1." + std::to_string(minor);
      const Answer a = callEntry(abiVersion(1, minor), size);
      if (a.rc != 0) {
        r_.pass(name, "refuses a 1." + std::to_string(minor) + " loader (allowed; the loader says so)");
        continue;
      }
      const auto problem = tableProblem(a, size);
      r_.expect(!problem, name, "fills " + std::to_string(a.filledSize) + " of the loader's " + std::to_string(size) + " bytes",
                "for a 1." + std::to_string(minor) + " loader the backend " + problem.value_or(""));
    }
    {
      const uint32_t newer = abiVersion(VGPU_BACKEND_ABI_MAJOR, VGPU_BACKEND_ABI_MINOR + 1);
      const size_t size = sizeof(vgpu_backend_table) + 32;
      const Answer a = callEntry(newer, size);
      const auto problem = a.rc != 0 ? std::optional<std::string>("refuses it (entry returned " + std::to_string(a.rc) +
                                                                  "); tables only grow, so a newer minor must be served")
                                     : tableProblem(a, size);
      r_.expect(!problem, "entry.newer_loader",
                "serves a " + versionText(newer) + " loader with its " + std::to_string(a.filledSize) + "-byte table",
                "for a " + versionText(newer) + " loader with a " + std::to_string(size) + "-byte table the backend " +
                    problem.value_or(""));
    }
    {
      const Answer a = callEntry(abiVersion(VGPU_BACKEND_ABI_MAJOR + 1, 0), sizeof(vgpu_backend_table));
      r_.expect(a.rc != 0 && a.guardIntact, "entry.other_major", "refuses a loader of ABI 2.0",
                "fills the table of a 2.0 loader, whose layout it cannot know; return non-zero for another major");
    }
    const Answer a = callEntry(VGPU_BACKEND_ABI_VERSION, sizeof(vgpu_backend_table));
    auto problem = a.rc != 0 ? std::optional<std::string>("refuses it") : tableProblem(a, sizeof(vgpu_backend_table));
    r_.expect(!problem, "entry.current_loader",
              "ABI " + versionText(a.table.abi_version) + ", " + std::to_string(a.filledSize) + "-byte table",
              "for this " + versionText(VGPU_BACKEND_ABI_VERSION) + " loader the backend " + problem.value_or(""));
    if (problem) return false;
    table_ = a.table;
    tableSize_ = a.filledSize;
    return true;
  }

  bool createInstance() {
    const BackendConfigView config(o_.params);
    ErrorText err;
    const vgpu_status s = table_.create(&config.c(), &instance_, err.buf());
    if (s != VGPU_OK || instance_ == nullptr) {
      r_.fail("create.config", "create with the given config: " + describe(s, err) +
                                   (s == VGPU_OK ? " but no instance" : ""));
      instance_ = nullptr;
      return false;
    }
    r_.pass("create.config", std::to_string(o_.params.settings.options.size()) + " options");
    workDir_ = fs::temp_directory_path() / ("vgpu-backend-check-" + std::to_string(getpid()));
    fs::create_directories(workDir_);
    return true;
  }

  void checkCreateRefusesUnknownOption() {
    BackendParams params = o_.params;
    const std::string key = "vgpuCheckNoSuchOption";
    params.settings.options[key] = "1";
    const BackendConfigView config(params);
    ErrorText err;
    vgpu_backend* other = nullptr;
    const vgpu_status s = table_.create(&config.c(), &other, err.buf());
    if (s == VGPU_OK && other) table_.destroy(other);
    const auto problem = errorProblem(s, err);
    r_.expect(s != VGPU_OK && !problem && err.str().find(key) != std::string::npos, "create.unknown_option",
              describe(s, err),
              s == VGPU_OK ? "accepts options." + key + "; unknown options must be refused, naming the key"
              : problem    ? "refuses options." + key + " but " + *problem
                           : "refuses options." + key + " without naming it: " + err.str());
  }

  /// One line on which optional slots the table has, naming those it ends before.
  void reportSlots() {
    struct Slot { const char* name; const char* since; size_t offset; bool set; };
    const Slot slots[] = {
        {"explain", "1.0", offsetof(vgpu_backend_table, explain), table_.explain != nullptr},
        {"admission_defaults", "1.0", offsetof(vgpu_backend_table, admission_defaults), table_.admission_defaults != nullptr},
        {"discover", "1.0", offsetof(vgpu_backend_table, discover), table_.discover != nullptr},
        {"wait_health", "1.0", offsetof(vgpu_backend_table, wait_health), table_.wait_health != nullptr},
        {"container_spec", "1.0", offsetof(vgpu_backend_table, container_spec), table_.container_spec != nullptr},
        {"release", "1.0", offsetof(vgpu_backend_table, release), table_.release != nullptr},
        {"reconcile", "1.0", offsetof(vgpu_backend_table, reconcile), table_.reconcile != nullptr},
        {"container_usage", "1.1", offsetof(vgpu_backend_table, container_usage), table_.container_usage != nullptr},
        {"protected_env", "1.3", offsetof(vgpu_backend_table, protected_env), table_.protected_env != nullptr},
        {"device_processes", "1.3", offsetof(vgpu_backend_table, device_processes), table_.device_processes != nullptr},
        {"fit_reads", "1.5", offsetof(vgpu_backend_table, fit_reads), table_.fit_reads != nullptr},
        {"places", "1.6", offsetof(vgpu_backend_table, places), has(offsetof(vgpu_backend_table, places)) && table_.places},
        {"fit_placed", "1.6", offsetof(vgpu_backend_table, fit_placed),
         has(offsetof(vgpu_backend_table, fit_placed)) && table_.fit_placed},
        {"cgroup_memory_used", "1.9", offsetof(vgpu_backend_table, cgroup_memory_used),
         has(offsetof(vgpu_backend_table, cgroup_memory_used)) && table_.cgroup_memory_used},
        {"split_count", "1.10", offsetof(vgpu_backend_table, split_count),
         has(offsetof(vgpu_backend_table, split_count)) && table_.split_count}};
    std::string have, missing;
    for (const auto& s : slots) {
      if (s.set) have += std::string(have.empty() ? "" : " ") + s.name;
      else if (s.offset >= tableSize_)
        missing += std::string(missing.empty() ? "" : "; ") + s.name + " (" + s.since + "): the table ends before it";
      else missing += std::string(missing.empty() ? "" : "; ") + s.name + " (" + s.since + "): null";
    }
    r_.pass("abi.slots", "provides: " + (have.empty() ? "required slots only" : have) +
                             (missing.empty() ? "" : "; not supported: " + missing));
    // The limiter is one capability: a backend with half of it is not used for it at all.
    const int limiterSlots = (table_.container_spec != nullptr) + (table_.release != nullptr) + (table_.reconcile != nullptr);
    const int discoverySlots = (table_.discover != nullptr) + (table_.wait_health != nullptr);
    const int placementSlots = (has(offsetof(vgpu_backend_table, places)) && table_.places != nullptr) +
                               (has(offsetof(vgpu_backend_table, fit_placed)) && table_.fit_placed != nullptr);
    r_.expect((limiterSlots == 0 || limiterSlots == 3) && discoverySlots != 1 && placementSlots != 1, "abi.slot_groups",
              "discovery, limiter and placement slots come in whole groups",
              "fills part of a group (discover+wait_health, container_spec+release+reconcile, places+fit_placed): "
              "the loader ignores the group");
  }

  void checkResources() {
    table_.resources(instance_, [](void* ctx, const vgpu_resource* r) {
      auto* out = static_cast<std::vector<ResourceName>*>(ctx);
      out->push_back({r && r->name ? r->name : "", r ? static_cast<vgpu_resource_role>(r->role) : VGPU_RESOURCE_OTHER,
                      r && r->advertised != 0});
    }, &resources_);
    std::set<std::string> names;
    std::string problem;
    bool count = false;
    for (const auto& r : resources_) {
      if (r.name.empty() || r.name.find('/') == std::string::npos) problem = "resource \"" + r.name + "\" is not <domain>/<name>";
      if (!names.insert(r.name).second) problem = "resource " + r.name + " is listed twice";
      if (r.role > VGPU_RESOURCE_OTHER) problem = "resource " + r.name + " has role " + std::to_string(r.role);
      if (r.role == VGPU_RESOURCE_COUNT && r.advertised) count = true;
    }
    if (problem.empty() && !count) problem = "no advertised resource with the count role: the kubelet would see nothing";
    r_.expect(problem.empty(), "allocator.resources", std::to_string(resources_.size()) + " resources", problem);
  }

  const ResourceName* resource(vgpu_resource_role role) const {
    for (const auto& r : resources_)
      if (r.role == role) return &r;
    return nullptr;
  }

  /// Calls parse_request for a container with `limits`; the requests it emitted.
  std::vector<DeviceRequest> parse(const std::vector<std::pair<std::string, int64_t>>& limits, vgpu_status& s,
                                   ErrorText& err) {
    std::vector<vgpu_resource_amount> amounts;
    for (const auto& [k, v] : limits) amounts.push_back({k.c_str(), v});
    vgpu_container_input c{};
    c.struct_size = sizeof(c);
    c.name = "main";
    c.limits = amounts.data();
    c.limit_count = amounts.size();
    const vgpu_kv_list annotations{nullptr, 0};
    struct Ctx { std::vector<DeviceRequest> out; std::string backend; } ctx{{}, o_.params.name};
    s = table_.parse_request(instance_, &c, &annotations, [](void* p, const vgpu_device_request* r) {
      auto* x = static_cast<Ctx*>(p);
      if (r) x->out.push_back(requestFromC(*r, x->backend));
    }, &ctx, err.buf());
    return ctx.out;
  }

  void checkParseRequest() {
    ErrorText err;
    vgpu_status s{};
    auto none = parse({{"example.com/not-this-backend", 1}}, s, err);
    r_.expect(s == VGPU_OK && none.empty(), "allocator.parse_other_resources", "asks nothing of this backend: no request",
              s != VGPU_OK ? "a container without this backend's resources is refused: " + describe(s, err)
                           : "emits " + std::to_string(none.size()) + " requests for a container that asks nothing of it");
    const ResourceName* count = resource(VGPU_RESOURCE_COUNT);
    if (count == nullptr) return;
    std::vector<std::pair<std::string, int64_t>> limits{{count->name, 1}};
    if (const auto* cores = resource(VGPU_RESOURCE_CORES)) limits.emplace_back(cores->name, 10);
    if (const auto* memory = resource(VGPU_RESOURCE_MEMORY)) limits.emplace_back(memory->name, 1);
    auto one = parse(limits, s, err);
    if (s == VGPU_OK && one.size() == 1 && one[0].count == 1) {
      r_.pass("allocator.parse_request", "1 device" + std::string(resource(VGPU_RESOURCE_CORES) ? ", 10 % compute" : ""));
      request_ = one[0];
    } else {
      r_.fail("allocator.parse_request", s != VGPU_OK ? "refuses " + count->name + ": 1: " + describe(s, err)
                                                      : "emits " + std::to_string(one.size()) +
                                                            " requests (want one, for 1 device) for " + count->name + ": 1");
    }
    auto bad = parse({{count->name, -1}}, s, err);
    const auto problem = errorProblem(s, err);
    r_.expect(s == VGPU_ERROR_INVALID && !problem, "allocator.parse_invalid", describe(s, err),
              s == VGPU_OK ? count->name + ": -1 is accepted; it must be refused with VGPU_ERROR_INVALID and words"
              : problem    ? count->name + ": -1 " + *problem
                           : count->name + ": -1 is refused with " + statusName(s) + ", not VGPU_ERROR_INVALID");
  }

  /// discover(); nullopt when the call failed (recorded in `status` and `err`).
  std::optional<std::vector<Device>> discover(vgpu_status& status, ErrorText& err) {
    struct Ctx { std::vector<Device> out; std::string backend; bool bad = false; } ctx{{}, o_.params.name};
    status = table_.discover(instance_, [](void* p, const vgpu_device* d) {
      auto* x = static_cast<Ctx*>(p);
      if (d == nullptr || d->struct_size < offsetof(vgpu_device, attributes)) x->bad = true;
      else x->out.push_back(deviceFromC(*d, x->backend));
    }, &ctx, err.buf());
    if (ctx.bad) {
      status = VGPU_ERROR_INTERNAL;
      err.set("discover emitted a null device or one without struct_size");
    }
    if (status != VGPU_OK) return std::nullopt;
    return ctx.out;
  }

  /// The slot is null, or answers UNSUPPORTED with words: fine for a skeleton, a failure otherwise.
  bool missingCapability(const std::string& check, bool slotSet, vgpu_status s, const ErrorText& err) {
    if (slotSet && s != VGPU_ERROR_UNSUPPORTED) return false;
    const std::string what = slotSet ? "answers " + describe(s, err) : "slot is null";
    if (slotSet && err.str().empty()) r_.fail(check, "VGPU_ERROR_UNSUPPORTED with no text in the error buffer");
    else if (skeleton()) r_.skip(check, what + " (acceptable in the skeleton profile)");
    else r_.fail(check, what + "; the full profile needs it");
    return true;
  }

  void checkDiscovery() {
    ErrorText err;
    vgpu_status s = VGPU_ERROR_UNSUPPORTED;
    std::optional<std::vector<Device>> first;
    if (table_.discover) first = discover(s, err);
    if (missingCapability("discovery.discover", table_.discover && table_.wait_health, s, err)) return;
    if (!first) {
      const auto problem = errorProblem(s, err);
      r_.fail("discovery.discover", problem ? "discover " + *problem : "discover fails: " + describe(s, err));
      return;
    }
    r_.expect(!first->empty() || skeleton(), "discovery.discover", std::to_string(first->size()) + " devices",
              "discover finds no device on the fake node (the full profile needs at least one)");
    std::string problem;
    std::set<std::string> ids;
    std::set<int> indexes;
    for (const auto& d : *first) {
      if (d.id.empty()) problem = "a device (index " + std::to_string(d.index) + ") has no id";
      else if (!ids.insert(d.id).second) problem = "device id " + d.id + " is reported twice";
      else if (!indexes.insert(d.index).second) problem = "device index " + std::to_string(d.index) + " is reported twice";
      else if (d.memoryMiB == 0) problem = "device " + d.id + " has no memory";
      else if (d.splitCount == 0) problem = "device " + d.id + " has split count 0";
      else if (d.computeUnits == 0) problem = "device " + d.id + " has no compute units";
    }
    r_.expect(problem.empty(), "discovery.devices_valid", "ids, indexes unique; memory, compute, split count set", problem);
    ErrorText err2;
    vgpu_status s2{};
    auto second = discover(s2, err2);
    auto idsOf = [](const std::vector<Device>& v) {
      std::vector<std::string> out;
      for (const auto& d : v) out.push_back(d.id + "@" + std::to_string(d.index));
      return out;
    };
    r_.expect(second && idsOf(*second) == idsOf(*first), "discovery.stable_ids", "same ids and indexes on a second call",
              second ? "a second discover reports other ids or indexes" : "a second discover fails: " + describe(s2, err2));
    devices_ = *first;

    const auto start = std::chrono::steady_clock::now();
    struct Events { std::vector<std::tuple<std::string, uint32_t, std::string>> e; } events;
    s = table_.wait_health(instance_, 50, [](void* p, const char* id, uint32_t h, const char* reason) {
      static_cast<Events*>(p)->e.emplace_back(id ? id : "", h, reason ? reason : "");
    }, &events, err.buf());
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    problem.clear();
    if (auto p = errorProblem(s, err)) problem = "wait_health " + *p;
    else if (s != VGPU_OK) problem = "wait_health fails: " + describe(s, err);
    else if (took.count() > 2000) problem = "wait_health(50 ms) blocked for " + std::to_string(took.count()) + " ms";
    for (const auto& [id, h, reason] : events.e) {
      if (!ids.count(id)) problem = "wait_health reports device \"" + id + "\", which discover did not";
      if (h > VGPU_HEALTH_UNKNOWN) problem = "wait_health reports health " + std::to_string(h) + " for " + id;
    }
    for (const auto& d : *first)
      if (d.health != Health::kHealthy && d.health != Health::kUnhealthy && d.health != Health::kUnknown)
        problem = "device " + d.id + " has an invalid health";
    r_.expect(problem.empty(), "discovery.health",
              std::to_string(events.e.size()) + " health events within " + std::to_string(took.count()) + " ms", problem);
  }

  /// The first healthy device, or a made-up one when discovery found none (the skeleton).
  Device targetDevice() const {
    for (const auto& d : devices_)
      if (d.health == Health::kHealthy) return d;
    if (!devices_.empty()) return devices_.front();
    Device d;
    d.id = "vgpu-check-device-0";
    d.backend = o_.params.name;
    d.model = "vgpu-check";
    d.memoryMiB = 16384;
    d.splitCount = 4;
    d.health = Health::kHealthy;
    return d;
  }

  void checkFit() {
    if (!request_) {
      r_.skip("allocator.fit", "no request parsed");
      return;
    }
    const Device device = targetDevice();
    const DeviceRecord record(device);
    const RequestRecord request(*request_);
    vgpu_device_usage usage{};
    vgpu_fit_result result{};
    table_.fit(instance_, &request.c(), &record.c(), &usage, &result);
    if (!result.fits || result.take.shares == 0) {
      r_.fail("allocator.fit", "1 device with 10 % compute does not fit an empty " + device.id + " (reason " +
                                   std::to_string(result.reason) + ")" + (result.fits ? ", or takes no share" : ""));
      return;
    }
    r_.pass("allocator.fit", "takes " + std::to_string(result.take.memory_mib) + " MiB, " +
                                 std::to_string(result.take.compute) + " % of " + device.id);
    take_ = result.take;
    // Repeat the grant until the device is full: it must say no within its split count.
    const uint32_t limit = std::min<uint32_t>(device.splitCount, 1000);
    uint32_t granted = 0;
    vgpu_fit_result last{};
    while (granted <= limit) {
      table_.fit(instance_, &request.c(), &record.c(), &usage, &last);
      if (!last.fits) break;
      usage.shares += last.take.shares;
      usage.compute += last.take.compute;
      usage.memory_mib += last.take.memory_mib;
      ++granted;
    }
    std::string words;
    if (last.reason >= VGPU_REASON_BACKEND && table_.explain) {
      std::array<char, 512> buf{};
      table_.explain(instance_, &last, buf.data(), buf.size());
      words = buf.data();
    }
    const bool knownReason = (last.reason > VGPU_REASON_NONE && last.reason <= VGPU_REASON_NUMA_MISMATCH) ||
                             (last.reason >= VGPU_REASON_BACKEND && !words.empty());
    r_.expect(!last.fits && knownReason, "allocator.fit_until_full",
              std::to_string(granted) + " grants fit, then refused with reason " + std::to_string(last.reason),
              last.fits ? device.id + " took " + std::to_string(granted) + " containers, more than its split count " +
                              std::to_string(device.splitCount)
                        : "refused with reason " + std::to_string(last.reason) + " that has no words (explain)");
  }

  /// The fit_reads promise (1.5): `fit` answers alike for devices that differ only in a
  /// field it says it does not read, idle, half taken and full; core gives such devices one
  /// answer (docs/writing-a-backend.md).
  void checkFitReads() {
    if (tableSize_ <= offsetof(vgpu_backend_table, fit_reads) || table_.fit_reads == nullptr) {
      r_.skip("allocator.fit_reads", "no fit_reads slot: core asks fit for every device");
      return;
    }
    const uint32_t reads = table_.fit_reads(instance_);
    if ((reads & ~VGPU_FIT_READS_ALL) != 0) {
      r_.fail("allocator.fit_reads", "declares bits core does not know (" + std::to_string(reads) +
                                         "): core then asks fit for every device");
      return;
    }
    if (!request_) {
      r_.skip("allocator.fit_reads", "no request parsed");
      return;
    }
    const RequestRecord request(*request_);
    const Device base = targetDevice();
    struct Twin { uint32_t bit; const char* field; std::function<void(Device&)> change; };
    const Twin twins[] = {
        {VGPU_FIT_READS_ID, "id", [](Device& d) { d.id += "-twin"; }},
        {VGPU_FIT_READS_INDEX, "index", [](Device& d) { d.index += 7; }},
        {VGPU_FIT_READS_MODEL, "model", [](Device& d) { d.model += " twin"; }},
        {VGPU_FIT_READS_MEMORY, "memory_mib", [](Device& d) { d.memoryMiB = d.memoryMiB / 2 + 1; }},
        {VGPU_FIT_READS_COMPUTE, "compute_units", [](Device& d) { d.computeUnits = d.computeUnits / 2 + 1; }},
        {VGPU_FIT_READS_SPLIT_COUNT, "split_count", [](Device& d) { d.splitCount = d.splitCount > 1 ? 1 : 2; }},
        {VGPU_FIT_READS_NUMA_NODE, "numa_node", [](Device& d) { d.numaNode = d.numaNode == 1 ? 0 : 1; }},
        {VGPU_FIT_READS_HEALTH, "health", [](Device& d) { d.health = Health::kUnhealthy; }},
        {VGPU_FIT_READS_ATTRIBUTES, "attributes", [](Device& d) { d.attributes["vgpu-check-twin"] = "1"; }}};
    const vgpu_device_usage usages[] = {
        {}, {1, take_.compute, take_.memory_mib}, {base.splitCount, base.computeUnits, base.memoryMiB}};
    auto answer = [&](const Device& d, const vgpu_device_usage& u) {
      const DeviceRecord record(d);
      vgpu_fit_result r{};
      table_.fit(instance_, &request.c(), &record.c(), &u, &r);
      return r;
    };
    std::string ignored, problem;
    for (const Twin& t : twins) {
      if (reads & t.bit) continue;
      ignored += std::string(ignored.empty() ? "" : ", ") + t.field;
      Device twin = base;
      t.change(twin);
      for (const vgpu_device_usage& u : usages) {
        const vgpu_fit_result a = answer(base, u), b = answer(twin, u);
        if (problem.empty() && std::memcmp(&a, &b, sizeof a) != 0)
          problem = "declares that fit does not read " + std::string(t.field) + ", but two devices that differ only in it get " +
                    "different answers (reason " + std::to_string(a.reason) + " and " + std::to_string(b.reason) +
                    " with " + std::to_string(u.shares) + " shares taken): declare the bit, or core gives one device's answer to both";
      }
    }
    r_.expect(problem.empty(), "allocator.fit_reads",
              ignored.empty() ? "fit reads every field" : "fit answers alike whatever the " + ignored, problem);
  }

  /// Whether the backend's table reaches the slot at `offset`.
  bool has(size_t offset) const { return tableSize_ > offset; }

  /// The placement slots (1.6): on a device `places` names, `fit_placed` with no grants on
  /// it answers as `fit` does and gives a NUL-terminated token; fed back the tokens it gave,
  /// it refuses within the device's split count, with words (its `why` or explain).
  void checkFitPlaced() {
    if (!has(offsetof(vgpu_backend_table, fit_placed)) || !table_.places || !table_.fit_placed) {
      r_.skip("allocator.fit_placed", "no places/fit_placed slots: core judges devices by the totals on them");
      return;
    }
    if (!request_) {
      r_.skip("allocator.fit_placed", "no request parsed");
      return;
    }
    const Device device = targetDevice();
    const DeviceRecord record(device);
    const RequestRecord request(*request_);
    if (table_.places(instance_, &record.c()) == 0) {
      r_.pass("allocator.fit_placed", "places no grants on " + device.id + " (none of its attributes asks it to)");
      return;
    }
    std::vector<std::string> tokens;
    vgpu_device_usage usage{};
    std::string problem, why;
    const uint32_t limit = std::min<uint32_t>(device.splitCount, 1000);
    bool refused = false;
    for (uint32_t granted = 0; granted <= limit && problem.empty(); ++granted) {
      std::vector<const char*> placed;
      for (const auto& t : tokens) placed.push_back(t.c_str());
      std::array<char, VGPU_PLACEMENT_TOKEN_MAX + 1> token{};
      token.back() = 'x';  // must stay: the backend writes at most its capacity
      std::array<char, 512> words{};
      vgpu_placement p{sizeof(vgpu_placement), {placed.data(), placed.size()}, token.data(), VGPU_PLACEMENT_TOKEN_MAX,
                       words.data(), words.size()};
      vgpu_fit_result placedResult{}, plain{};
      table_.fit_placed(instance_, &request.c(), &record.c(), &usage, &p, &placedResult);
      if (token.back() != 'x' || std::memchr(token.data(), '\0', VGPU_PLACEMENT_TOKEN_MAX) == nullptr)
        problem = "fit_placed wrote a token past its capacity or without a NUL";
      if (granted == 0) {
        table_.fit(instance_, &request.c(), &record.c(), &usage, &plain);
        if (plain.fits != placedResult.fits || std::memcmp(&plain.take, &placedResult.take, sizeof plain.take) != 0)
          problem = "on an empty " + device.id + ", fit_placed and fit disagree (fits " +
                    std::to_string(placedResult.fits) + " and " + std::to_string(plain.fits) + ")";
      }
      if (!placedResult.fits) {
        refused = true;
        why = words.data();
        if (why.empty() && placedResult.reason >= VGPU_REASON_BACKEND && table_.explain) {
          std::array<char, 512> buf{};
          table_.explain(instance_, &placedResult, buf.data(), buf.size());
          why = buf.data();
        }
        if (why.empty() && placedResult.reason >= VGPU_REASON_BACKEND)
          problem = "refused with reason " + std::to_string(placedResult.reason) + " and no words (why or explain)";
        break;
      }
      tokens.emplace_back(token.data());
      usage.shares += placedResult.take.shares;
      usage.compute += placedResult.take.compute;
      usage.memory_mib += placedResult.take.memory_mib;
    }
    if (problem.empty() && !refused)
      problem = device.id + " took " + std::to_string(tokens.size()) + " placed grants, more than its split count " +
                std::to_string(device.splitCount);
    r_.expect(problem.empty(), "allocator.fit_placed",
              std::to_string(tokens.size()) + " placed grants on " + device.id + ", then: " + why, problem);
  }

  /// The problems of a container spec: names, paths and roots.
  std::string specProblem(const ContainerSpec& spec, const Grant& g) const {
    std::vector<fs::path> roots = o_.allowedRoots;
    roots.push_back(g.dir);
    roots.push_back("/dev");
    auto allowed = [&](const std::string& p) {
      return std::any_of(roots.begin(), roots.end(), [&](const fs::path& r) { return inside(p, r); });
    };
    auto clean = [](const std::string& p) {
      const fs::path path(p);
      return path.is_absolute() && path.lexically_normal() == path && p.find("/../") == std::string::npos;
    };
    for (const auto& [k, v] : spec.env) {
      if (!validEnvName(k)) return "env name \"" + k + "\" is not a variable name";
      if (v == "\x01(null)") return "env " + k + " has a null value";
    }
    for (const auto& m : spec.mounts) {
      if (!clean(m.hostPath) || !clean(m.containerPath))
        return "mount " + m.hostPath + " -> " + m.containerPath + ": paths must be absolute and normal";
      if (!allowed(m.hostPath))
        return "mount " + m.hostPath + " is outside the allowed roots (the container's host folder, /dev, --allowed-root)";
      std::error_code ec;
      if (inside(m.hostPath, g.dir) && !fs::exists(m.hostPath, ec))
        return "mount " + m.hostPath + " is in the container's host folder but was not created";
    }
    for (const auto& d : spec.devices) {
      if (!clean(d.hostPath) || !clean(d.containerPath))
        return "device " + d.hostPath + " -> " + d.containerPath + ": paths must be absolute and normal";
      if (!allowed(d.hostPath)) return "device " + d.hostPath + " is outside the allowed roots (/dev, --allowed-root)";
      if (d.permissions.empty() || d.permissions.find_first_not_of("rwm") != std::string::npos)
        return "device " + d.hostPath + " has permissions \"" + d.permissions + "\" (some of r, w, m)";
    }
    for (const auto& [k, v] : spec.annotations)
      if (k.empty()) return "an annotation has no key";
    for (const auto& [k, v] : spec.podAnnotations)
      if (k.empty()) return "a pod annotation has no key";
    for (const auto& n : spec.notices)
      if (n.reason.empty() || n.message.empty()) return "a notice has no reason or no message";
    return {};
  }

  std::unique_ptr<Grant> makeGrant(const std::string& holder, int32_t slot) {
    const Device device = targetDevice();
    return std::make_unique<Grant>(holder, workDir_, device, take_.memory_mib ? take_.memory_mib : device.memoryMiB / 16,
                                   take_.compute ? take_.compute : 10, slot);
  }

  /// Calls a status-returning slot and judges it: OK, or (where `errorAllowed`) an error with words.
  void judge(const std::string& check, vgpu_status s, const ErrorText& err, const std::string& okText,
             const std::string& what, bool errorAllowed = false) {
    const auto problem = errorProblem(s, err);
    if (problem) r_.fail(check, what + " " + *problem);
    else if (s != VGPU_OK && !errorAllowed) r_.fail(check, what + " fails: " + describe(s, err));
    else r_.pass(check, s == VGPU_OK ? okText : describe(s, err));
  }

  void checkLimiter() {
    const bool slots = table_.container_spec && table_.release && table_.reconcile;
    ErrorText err;
    vgpu_status s = VGPU_ERROR_UNSUPPORTED;
    auto grant = makeGrant("vgpu-check-0", 0);
    ContainerSpec spec;
    if (slots) spec = collectSpec(table_, instance_, grant->c, s, err);
    if (missingCapability("limiter.grant", slots, s, err)) return;
    judge("limiter.grant", s, err, std::to_string(spec.env.size()) + " env, " + std::to_string(spec.mounts.size()) +
                                       " mounts, " + std::to_string(spec.devices.size()) + " device nodes",
          "container_spec on " + grant->deviceId);
    if (s != VGPU_OK) return;
    const std::string problem = specProblem(spec, *grant);
    r_.expect(problem.empty(), "limiter.spec_valid", "env names, mounts and device nodes inside the allowed roots", problem);
    if (table_.protected_env) {
      std::vector<ProtectedEnv> patterns;
      table_.protected_env(instance_, [](void* p, const char* pattern, uint32_t scope) {
        if (pattern)
          static_cast<std::vector<ProtectedEnv>*>(p)->push_back(
              {pattern, scope == VGPU_ENV_SCOPE_EVERY_CONTAINER ? ProtectedEnv::Scope::kEveryContainer
                                                                : ProtectedEnv::Scope::kBackendContainers});
      }, &patterns);
      std::string unprotected;
      for (const auto& [k, v] : spec.env)
        if (std::none_of(patterns.begin(), patterns.end(), [&](const ProtectedEnv& p) { return p.matches(k); }))
          unprotected += (unprotected.empty() ? "" : ", ") + k;
      r_.expect(unprotected.empty(), "limiter.env_protected", "every variable the limiter sets is in protected_env",
                "the limiter sets " + unprotected + ", which protected_env does not name: a pod could set it itself");
    }

    ErrorText err2;
    vgpu_status s2{};
    const ContainerSpec again = collectSpec(table_, instance_, grant->c, s2, err2);
    if (s2 != VGPU_OK) judge("limiter.repeat_grant", s2, err2, "", "a second container_spec for the same holder");
    else
      r_.expect(sameSpec(spec, again), "limiter.repeat_grant", "the same spec for the same holder",
                "a second container_spec for the same holder gives another spec (the agent repeats it after a restart)");

    auto ref = grant->ref();
    s = table_.release(instance_, &ref, err.buf());
    judge("limiter.release", s, err, "released", "release of a held container");
    s = table_.release(instance_, &ref, err.buf());
    judge("limiter.release_again", s, err, "a second release is a no-op", "a second release of the same container");
    const vgpu_container_ref unknown{"vgpu-check-never-granted", "main"};
    s = table_.release(instance_, &unknown, err.buf());
    judge("limiter.release_unknown", s, err, "release of a container never granted is a no-op",
          "release of a container it never saw");

    checkConcurrentGrants();
    s = table_.reconcile(instance_, nullptr, 0, err.buf());
    judge("limiter.reconcile", s, err, "reconcile with no live containers", "reconcile with no live containers");
  }

  void checkConcurrentGrants() {
    const Device device = targetDevice();
    const unsigned n = std::max(1u, std::min<unsigned>(o_.threads, device.splitCount));
    std::vector<std::unique_ptr<Grant>> grants;
    for (unsigned i = 0; i < n; ++i) grants.push_back(makeGrant("vgpu-check-thread-" + std::to_string(i), static_cast<int32_t>(i)));
    std::vector<std::string> problems(n);
    std::atomic<bool> go{false};
    std::vector<std::thread> threads;
    for (unsigned i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        while (!go.load()) std::this_thread::yield();
        ErrorText err;
        vgpu_status s{};
        const ContainerSpec spec = collectSpec(table_, instance_, grants[i]->c, s, err);
        if (s != VGPU_OK) problems[i] = grants[i]->holder + ": " + describe(s, err);
        else if (auto p = specProblem(spec, *grants[i]); !p.empty()) problems[i] = grants[i]->holder + ": " + p;
      });
    go = true;
    for (auto& t : threads) t.join();
    std::string problem;
    for (const auto& p : problems)
      if (!p.empty()) problem += (problem.empty() ? "" : "; ") + p;
    r_.expect(problem.empty(), "limiter.concurrent_grants",
              std::to_string(n) + " threads each granted a share of " + device.id, problem);
    problem.clear();
    for (const auto& g : grants) {
      ErrorText err;
      auto ref = g->ref();
      if (table_.release(instance_, &ref, err.buf()) != VGPU_OK) problem += g->holder + ": " + err.str() + "; ";
    }
    r_.expect(problem.empty(), "limiter.concurrent_release", "released all " + std::to_string(n), problem);
  }

  void checkVendorMissing() {
    if (o_.missingVendorOptions.empty()) {
      r_.skip("errors.vendor_missing", "no --missing-vendor option given (the option that points at the vendor library)");
      return;
    }
    BackendParams params = o_.params;
    std::string what;
    for (const auto& [k, v] : o_.missingVendorOptions) {
      params.settings.options[k] = v;
      what += (what.empty() ? "" : ", ") + k + "=" + v;
    }
    const BackendConfigView config(params);
    ErrorText err;
    vgpu_backend* other = nullptr;
    vgpu_status s = table_.create(&config.c(), &other, err.buf());
    if (s != VGPU_OK || other == nullptr) {
      // The daemons retry discovery, not create: a missing library must not stop the backend loading.
      const auto problem = errorProblem(s, err);
      r_.fail("errors.vendor_missing", "create with " + what + (problem ? " " + *problem : " fails: " + describe(s, err)) +
                                           "; open the vendor library in discover, so the agent can retry");
      return;
    }
    std::unique_ptr<vgpu_backend, void (*)(vgpu_backend*)> guard(other, table_.destroy);
    if (!table_.discover) {
      r_.skip("errors.vendor_missing", "no discover slot");
      return;
    }
    size_t found = 0;
    s = table_.discover(other, [](void* p, const vgpu_device*) { ++*static_cast<size_t*>(p); }, &found, err.buf());
    if (missingCapability("errors.vendor_missing", true, s, err)) return;
    const auto problem = errorProblem(s, err);
    r_.expect(s == VGPU_ERROR_UNAVAILABLE && !problem, "errors.vendor_missing", "discover with " + what + ": " + describe(s, err),
              problem ? "discover with " + what + " " + *problem
              : s == VGPU_OK
                  ? "discover with " + what + " succeeds (" + std::to_string(found) +
                        " devices); a missing vendor library must be VGPU_ERROR_UNAVAILABLE with words"
                  : "discover with " + what + " answers " + describe(s, err) + ", not VGPU_ERROR_UNAVAILABLE");
  }

  void checkVanishingDevice() {
    if (o_.vanishCommand.empty()) {
      r_.skip("errors.device_vanishes", "no --vanish-command given (the fake's way to make a device disappear)");
      return;
    }
    if (devices_.empty() || !table_.container_spec || !table_.release || !table_.discover) {
      r_.skip("errors.device_vanishes", "needs discovered devices and a limiter");
      return;
    }
    auto held = makeGrant("vgpu-check-vanish", 0);
    ErrorText err;
    vgpu_status s{};
    (void)collectSpec(table_, instance_, held->c, s, err);
    if (s != VGPU_OK) {
      r_.fail("errors.device_vanishes", "container_spec before the device vanished: " + describe(s, err));
      return;
    }
    if (const int rc = runShell(o_.vanishCommand); rc != 0) {
      r_.fail("errors.device_vanishes", "the vanish command exited " + std::to_string(rc) + ": " + o_.vanishCommand);
      return;
    }
    const std::string id = held->deviceId;
    std::string problem, seen;
    auto after = discover(s, err);
    if (!after) {
      if (auto p = errorProblem(s, err)) problem = "discover " + *p;
      else seen = "discover: " + describe(s, err);
    } else {
      auto it = std::find_if(after->begin(), after->end(), [&](const Device& d) { return d.id == id; });
      if (it == after->end()) seen = "discover no longer lists it";
      else if (it->health != Health::kHealthy) seen = "discover reports it " + std::string(toString(it->health));
    }
    if (problem.empty() && seen.empty() && table_.wait_health) {
      struct Events { std::string id; bool unhealthy = false; } events{id};
      s = table_.wait_health(instance_, 50, [](void* p, const char* dev, uint32_t h, const char*) {
        auto* e = static_cast<Events*>(p);
        if (dev && e->id == dev && h != VGPU_HEALTHY) e->unhealthy = true;
      }, &events, err.buf());
      if (auto p = errorProblem(s, err)) problem = "wait_health " + *p;
      else if (events.unhealthy) seen = "wait_health reports it unhealthy";
      else if (s != VGPU_OK) seen = "wait_health: " + describe(s, err);
    }
    if (problem.empty() && seen.empty()) problem = "after the device vanished, " + id + " is still reported healthy";
    // Calls on the vanished device answer in words, whatever they decide.
    auto fresh = makeGrant("vgpu-check-after-vanish", 1);
    (void)collectSpec(table_, instance_, fresh->c, s, err);
    if (auto p = errorProblem(s, err); p && problem.empty()) problem = "container_spec on the vanished device " + *p;
    for (const Grant* g : {held.get(), fresh.get()}) {
      auto ref = g->ref();
      s = table_.release(instance_, &ref, err.buf());
      if (auto p = errorProblem(s, err); p && problem.empty()) problem = "release on the vanished device " + *p;
    }
    r_.expect(problem.empty(), "errors.device_vanishes", seen, problem);
  }

  const ContractOptions& o_;
  Report& r_;
  std::unique_ptr<void, DlCloser> library_;
  vgpu_backend_entry_fn entry_ = nullptr;
  vgpu_backend_table table_{};
  uint32_t tableSize_ = 0;
  vgpu_backend* instance_ = nullptr;
  fs::path workDir_;
  std::vector<ResourceName> resources_;
  std::optional<DeviceRequest> request_;
  std::vector<Device> devices_;
  vgpu_device_usage take_{};
};

}  // namespace

void runContract(const ContractOptions& options, Report& report) { Contract(options, report).run(); }

}  // namespace vgpu::check
