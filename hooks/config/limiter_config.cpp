#include "vgpu/limiter_config.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>

#include "vgpu/limiter_contract.h"

namespace vgpu {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

Result<uint64_t> parseUnsigned(std::string_view digits, std::string_view whole) {
  if (digits.empty()) return makeError("'" + std::string(whole) + "' has no number");
  uint64_t v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      return makeError("'" + std::string(whole) + "' is not a whole number");
    }
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (std::numeric_limits<uint64_t>::max() - d) / 10) {
      return makeError("'" + std::string(whole) + "' is too large");
    }
    v = v * 10 + d;
  }
  return v;
}

Result<std::string> readFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return makeError("cannot read limits file " + path + ": " + strerror(errno));
  std::string content;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    content.append(buf, static_cast<size_t>(n));
    if (content.size() > (1u << 20)) {
      close(fd);
      return makeError("limits file " + path + " is larger than 1 MiB");
    }
  }
  close(fd);
  return content;
}

bool knownKey(std::string_view key) {
  static constexpr std::string_view kPlain[] = {VGPU_ENV_MEMORY_LIMIT,  VGPU_ENV_SM_LIMIT,      VGPU_ENV_SHARED_REGION,
                                                VGPU_ENV_OVERSUBSCRIBE, VGPU_ENV_TASK_PRIORITY, VGPU_ENV_CORE_POLICY};
  for (auto k : kPlain) {
    if (key == k) return true;
  }
  for (std::string_view prefix :
       {std::string_view(VGPU_ENV_MEMORY_LIMIT_PREFIX), std::string_view(VGPU_ENV_SM_LIMIT_PREFIX)}) {
    if (key.substr(0, prefix.size()) != prefix) continue;
    auto index = parseUnsigned(key.substr(prefix.size()), key);
    return index.ok() && *index < static_cast<uint64_t>(kLimiterMaxDevices);
  }
  return false;
}

}  // namespace

Result<uint64_t> parseMemorySize(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) return uint64_t{0};
  uint64_t scale = 1;
  switch (s.back()) {
    case 'k':
    case 'K':
      scale = 1ull << 10;
      break;
    case 'm':
    case 'M':
      scale = 1ull << 20;
      break;
    case 'g':
    case 'G':
      scale = 1ull << 30;
      break;
    default:
      break;
  }
  std::string_view digits = scale == 1 ? s : s.substr(0, s.size() - 1);
  for (char c : digits) {
    if (c < '0' || c > '9') {
      return makeError("'" + std::string(text) +
                       "' is not a memory size (write bytes, or a number with k, m or g, "
                       "e.g. 4096m or 4g)");
    }
  }
  auto v = parseUnsigned(digits, text);
  if (!v) return v;
  if (*v > std::numeric_limits<uint64_t>::max() / scale) {
    return makeError("'" + std::string(text) + "' is too large");
  }
  return *v * scale;
}

Result<uint32_t> parsePercent(std::string_view text) {
  std::string_view s = trim(text);
  if (s.empty()) return uint32_t{0};
  auto v = parseUnsigned(s, text);
  if (!v) return makeError(v.error().message + " (expected a percentage 0..100)");
  if (*v > 100) return makeError("'" + std::string(text) + "' is above 100 percent");
  return static_cast<uint32_t>(*v);
}

Result<bool> parseBool(std::string_view text) {
  std::string v = lower(trim(text));
  if (v == "true" || v == "1" || v == "yes") return true;
  if (v == "false" || v == "0" || v == "no" || v.empty()) return false;
  return makeError("'" + std::string(text) + "' is not true or false");
}

Result<std::map<std::string, std::string>> parseLimitsFile(std::string_view content, std::string_view fileName) {
  std::map<std::string, std::string> out;
  int lineNo = 0;
  while (!content.empty()) {
    size_t nl = content.find('\n');
    std::string_view line = content.substr(0, nl);
    content.remove_prefix(nl == std::string_view::npos ? content.size() : nl + 1);
    ++lineNo;
    line = trim(line);
    if (line.empty() || line.front() == '#') continue;
    std::string where = std::string(fileName) + ":" + std::to_string(lineNo);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return makeError(where + ": expected KEY=VALUE, got '" + std::string(line) + "'");
    }
    std::string key(trim(line.substr(0, eq)));
    if (!knownKey(key)) return makeError(where + ": unknown key '" + key + "'");
    if (out.count(key) != 0) return makeError(where + ": '" + key + "' given twice");
    out[key] = std::string(trim(line.substr(eq + 1)));
  }
  return out;
}

Result<LimiterConfig> loadLimiterConfig(const EnvLookup& env, const char* fixedFilePath) {
  LimiterConfig cfg;
  std::map<std::string, std::string> file;
  const char* fixed = fixedFilePath != nullptr ? fixedFilePath : VGPU_LIMITS_FILE_PATH;
  const char* named = env(VGPU_ENV_LIMITS_FILE);
  if (access(fixed, F_OK) == 0) {
    cfg.limitsFile = fixed;
  } else if (named != nullptr && named[0] != '\0') {
    cfg.limitsFile = named;
  }
  if (!cfg.limitsFile.empty()) {
    auto content = readFile(cfg.limitsFile);
    if (!content) return std::move(content).error();
    auto parsed = parseLimitsFile(*content, cfg.limitsFile);
    if (!parsed) return std::move(parsed).error();
    file = std::move(*parsed);
  }
  // Says where a bad value came from, so the person knows which one to fix.
  auto lookup = [&](const std::string& key, std::string* origin) -> const char* {
    auto it = file.find(key);
    if (it != file.end()) {
      *origin = key + " in " + cfg.limitsFile;
      return it->second.c_str();
    }
    *origin = key;
    return env(key.c_str());
  };
  std::string origin;

  // Per device: the file's indexed key, the file's key for all devices, then the same two
  // from the environment. A limit in the file is never overridden by the environment.
  auto pick = [&](const std::string& all, const std::string& indexed, std::string* from) -> const char* {
    for (const std::string* key : {&indexed, &all}) {
      auto it = file.find(*key);
      if (it != file.end()) {
        *from = *key + " in " + cfg.limitsFile;
        return it->second.c_str();
      }
    }
    for (const std::string* key : {&indexed, &all}) {
      if (const char* v = env(key->c_str())) {
        *from = *key;
        return v;
      }
    }
    return nullptr;
  };
  for (int i = 0; i < kLimiterMaxDevices; ++i) {
    std::string index = std::to_string(i);
    if (const char* v = pick(VGPU_ENV_MEMORY_LIMIT, VGPU_ENV_MEMORY_LIMIT_PREFIX + index, &origin)) {
      auto r = parseMemorySize(v);
      if (!r) return makeError(origin + "=" + r.error().message);
      cfg.devices[i].memoryBytes = *r;
    }
    if (const char* v = pick(VGPU_ENV_SM_LIMIT, VGPU_ENV_SM_LIMIT_PREFIX + index, &origin)) {
      auto r = parsePercent(v);
      if (!r) return makeError(origin + "=" + r.error().message);
      cfg.devices[i].smPercent = *r;
    }
  }
  const char* region = lookup(VGPU_ENV_SHARED_REGION, &origin);
  cfg.regionPath = region != nullptr && region[0] != '\0' ? region : VGPU_DEFAULT_REGION_PATH;
  if (const char* v = lookup(VGPU_ENV_OVERSUBSCRIBE, &origin)) {
    auto r = parseBool(v);
    if (!r) return makeError(origin + "=" + r.error().message);
    cfg.oversubscribe = *r;
  }
  if (const char* v = lookup(VGPU_ENV_TASK_PRIORITY, &origin)) {
    std::string_view s = trim(v);
    bool negative = !s.empty() && s.front() == '-';
    auto r = parseUnsigned(negative ? s.substr(1) : s, v);
    if (!s.empty() && (!r || *r > 1000000)) {
      return makeError(origin + "='" + v + "' is not an integer priority");
    }
    if (!s.empty()) cfg.priority = static_cast<int32_t>(negative ? -int64_t(*r) : int64_t(*r));
  }
  if (const char* v = lookup(VGPU_ENV_CORE_POLICY, &origin)) {
    std::string p = lower(trim(v));
    if (p.empty() || p == "default") {
      cfg.corePolicy = CorePolicy::kDefault;
    } else if (p == "force") {
      cfg.corePolicy = CorePolicy::kForce;
    } else if (p == "disable") {
      cfg.corePolicy = CorePolicy::kDisable;
    } else {
      return makeError(origin + "='" + v + "' is not one of default, force, disable");
    }
  }
  return cfg;
}

}  // namespace vgpu
