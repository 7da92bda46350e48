// The limiter's configuration parser (vgpu/limiter_settings.h). Linked into libvgpu.so,
// which carries no C++ runtime: only libc, no exceptions, no allocating library types.

#include "vgpu/limiter_settings.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vgpu/limiter_contract.h"

namespace {

struct Text {
  const char* p;
  size_t n;
};

int fail(char* err, size_t len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
int fail(char* err, size_t len, const char* fmt, ...) {
  if (err != nullptr && len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
  }
  return -1;
}

Text trim(Text s) {
  while (s.n > 0 && (s.p[0] == ' ' || s.p[0] == '\t')) ++s.p, --s.n;
  while (s.n > 0 && (s.p[s.n - 1] == ' ' || s.p[s.n - 1] == '\t' || s.p[s.n - 1] == '\r')) --s.n;
  return s;
}

bool equals(Text s, const char* word) { return strlen(word) == s.n && memcmp(s.p, word, s.n) == 0; }

bool equalsIgnoringCase(Text s, const char* word) {
  if (strlen(word) != s.n) return false;
  for (size_t i = 0; i < s.n; ++i) {
    char c = s.p[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != word[i]) return false;
  }
  return true;
}

// Digits only, no sign, no overflow. `whole` is what the message quotes.
int parseUnsigned(Text digits, Text whole, uint64_t* out, char* err, size_t len) {
  if (digits.n == 0) return fail(err, len, "'%.*s' has no number", static_cast<int>(whole.n), whole.p);
  uint64_t v = 0;
  for (size_t i = 0; i < digits.n; ++i) {
    char c = digits.p[i];
    if (c < '0' || c > '9') return fail(err, len, "'%.*s' is not a whole number", static_cast<int>(whole.n), whole.p);
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return fail(err, len, "'%.*s' is too large", static_cast<int>(whole.n), whole.p);
    v = v * 10 + d;
  }
  *out = v;
  return 0;
}

// HAMi-core reads limits with strtoul(..., 0): a leading 0 makes the number octal there.
// Refused rather than read as either, so no value means one thing here and another there.
int leadingZero(Text whole, char* err, size_t len) {
  return fail(err, len, "'%.*s' starts with 0 (HAMi-core would read it as an octal number): write it without",
              static_cast<int>(whole.n), whole.p);
}

bool knownKey(Text key) {
  static const char* const kPlain[] = {VGPU_ENV_MEMORY_LIMIT,  VGPU_ENV_SM_LIMIT,      VGPU_ENV_SHARED_REGION,
                                       VGPU_ENV_OVERSUBSCRIBE, VGPU_ENV_TASK_PRIORITY, VGPU_ENV_CORE_POLICY,
                                       VGPU_ENV_ACTIVITY_BOARD, VGPU_ENV_CONTEXT_OVERHEAD, VGPU_REGION_INODE};
  for (const char* k : kPlain) {
    if (equals(key, k)) return true;
  }
  static const char* const kIndexed[] = {VGPU_ENV_MEMORY_LIMIT_PREFIX, VGPU_ENV_SM_LIMIT_PREFIX};
  for (const char* prefix : kIndexed) {
    size_t n = strlen(prefix);
    if (key.n < n || memcmp(key.p, prefix, n) != 0) continue;
    uint64_t index = 0;
    return parseUnsigned({key.p + n, key.n - n}, key, &index, nullptr, 0) == 0 && index < VGPU_LIMITER_MAX_DEVICES;
  }
  return false;
}

// The whole file, NUL-terminated, in a malloc'd buffer.
int readFile(const char* path, char** out, size_t* size, char* err, size_t len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(err, len, "cannot read limits file %s: %s", path, strerror(errno));
  constexpr size_t kMax = 1u << 20;
  char* buf = static_cast<char*>(malloc(kMax + 2));
  if (buf == nullptr) {
    close(fd);
    return fail(err, len, "cannot read limits file %s: out of memory", path);
  }
  size_t used = 0;
  for (;;) {
    ssize_t n = read(fd, buf + used, kMax + 1 - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += static_cast<size_t>(n);
    if (used > kMax) {
      close(fd);
      free(buf);
      return fail(err, len, "limits file %s is larger than 1 MiB", path);
    }
  }
  close(fd);
  buf[used] = '\0';
  *out = buf;
  *size = used;
  return 0;
}

// Where a value came from: the limits file (the node agent's, read-only in the container)
// or the environment (the container's own).
enum class Source { kFile, kEnv };

struct Loader {
  vgpu_env_lookup env;
  void* ctx;
  const vgpu_limits_file* file;
  const char* fileName;

  const char* fromFile(const char* key) const {
    for (int i = 0; file != nullptr && i < file->count; ++i) {
      const vgpu_limits_entry& e = file->entries[i];
      if (e.key_len == strlen(key) && memcmp(e.key, key, e.key_len) == 0) return e.value;
    }
    return nullptr;
  }
  // The value of `key` in one source; `origin` names it for messages.
  const char* get(Source from, const char* key, char* origin, size_t len) const {
    if (from == Source::kFile) {
      snprintf(origin, len, "%s in %s", key, fileName);
      return fromFile(key);
    }
    snprintf(origin, len, "%s", key);
    return env(ctx, key);
  }
  // Per device, in one source: the indexed key wins over the key for all devices (HAMi-core's order).
  const char* pick(Source from, const char* all, const char* indexed, char* origin, size_t len) const {
    if (const char* v = get(from, indexed, origin, len)) return v;
    return get(from, all, origin, len);
  }
};

Text whole(const char* s) { return {s, strlen(s)}; }

// Tighter of two limits where 0 (and, for compute, 100 or more) means none.
uint64_t tighterLimit(uint64_t a, uint64_t b, uint64_t none) {
  const bool aNone = a == 0 || a >= none, bNone = b == 0 || b >= none;
  if (aNone) return b;
  if (bNone) return a;
  return a < b ? a : b;
}

// How strict a GPU_CORE_UTILIZATION_POLICY is: disable < default < force.
int policyStrictness(int policy) {
  return policy == VGPU_CORE_POLICY_DISABLE ? 0 : policy == VGPU_CORE_POLICY_FORCE ? 2 : 1;
}

int parsePolicy(const char* v, const char* origin, int* out, char* err, size_t len) {
  Text p = trim(whole(v));
  if (p.n == 0 || equalsIgnoringCase(p, "default")) {
    *out = VGPU_CORE_POLICY_DEFAULT;
  } else if (equalsIgnoringCase(p, "force")) {
    *out = VGPU_CORE_POLICY_FORCE;
  } else if (equalsIgnoringCase(p, "disable")) {
    *out = VGPU_CORE_POLICY_DISABLE;
  } else {
    return fail(err, len, "%s='%s' is not one of default, force, disable", origin, v);
  }
  return 0;
}

// CUDA_TASK_PRIORITY: an integer; `set` stays 0 for an empty value.
int parsePriority(const char* v, const char* origin, int32_t* out, int* set, char* err, size_t len) {
  Text s = trim(whole(v));
  if (s.n == 0) return 0;
  bool negative = s.p[0] == '-';
  uint64_t r = 0;
  Text digits = negative ? Text{s.p + 1, s.n - 1} : s;
  if (parseUnsigned(digits, whole(v), &r, nullptr, 0) != 0 || r > 1000000) {
    return fail(err, len, "%s='%s' is not an integer priority", origin, v);
  }
  *out = static_cast<int32_t>(negative ? -static_cast<int64_t>(r) : static_cast<int64_t>(r));
  *set = 1;
  return 0;
}

// CUDA_DISABLE_CONTROL is read by HAMi's device plugin with Go's strconv.ParseBool.
int parseGoBool(const char* v, const char* origin, int* out, char* err, size_t len) {
  Text s = trim(whole(v));
  static const char* const kTrue[] = {"1", "t", "T", "TRUE", "true", "True"};
  static const char* const kFalse[] = {"", "0", "f", "F", "FALSE", "false", "False"};
  for (const char* t : kTrue) {
    if (equals(s, t)) return *out = 1, 0;
  }
  for (const char* f : kFalse) {
    if (equals(s, f)) return *out = 0, 0;
  }
  return fail(err, len, "%s='%s' is not true or false (1, t, true, 0, f, false)", origin, v);
}

// A path-valued key: the file's, else the environment's. The node agent always names the
// region (and pins it by inode) and the board; a board a tenant names itself is one only it
// can see.
int loadPath(const Loader& in, const char* key, char* out, size_t outLen, char* err, size_t len) {
  char origin[VGPU_LIMITER_PATH_MAX + 64];
  const char* v = in.get(Source::kFile, key, origin, sizeof origin);
  if (v == nullptr) v = in.get(Source::kEnv, key, origin, sizeof origin);
  if (v == nullptr) return 0;
  Text t = trim(whole(v));
  if (t.n >= outLen) return fail(err, len, "%s is longer than %d bytes", origin, static_cast<int>(outLen) - 1);
  snprintf(out, outLen, "%.*s", static_cast<int>(t.n), t.p);
  return 0;
}

// Which of the keys without a "none" value a source gave.
struct Given {
  int oversubscribe = 0;
  int policy = 0;
};

// Reads every key from one source into `out` (fields at their defaults when absent).
int loadSource(const Loader& in, Source from, vgpu_limiter_settings* out, Given* given, char* err, size_t len) {
  char origin[VGPU_LIMITER_PATH_MAX + 64];
  char msg[512];
  for (int i = 0; i < VGPU_LIMITER_MAX_DEVICES; ++i) {
    char memKey[64], smKey[64];
    snprintf(memKey, sizeof memKey, "%s%d", VGPU_ENV_MEMORY_LIMIT_PREFIX, i);
    snprintf(smKey, sizeof smKey, "%s%d", VGPU_ENV_SM_LIMIT_PREFIX, i);
    if (const char* v = in.pick(from, VGPU_ENV_MEMORY_LIMIT, memKey, origin, sizeof origin)) {
      if (vgpu_parse_memory_size(v, strlen(v), &out->memory_bytes[i], msg, sizeof msg) != 0) {
        return fail(err, len, "%s=%s", origin, msg);
      }
    }
    if (const char* v = in.pick(from, VGPU_ENV_SM_LIMIT, smKey, origin, sizeof origin)) {
      if (vgpu_parse_percent(v, strlen(v), &out->sm_percent[i], msg, sizeof msg) != 0) {
        return fail(err, len, "%s=%s", origin, msg);
      }
    }
  }
  if (const char* v = in.get(from, VGPU_ENV_OVERSUBSCRIBE, origin, sizeof origin)) {
    if (vgpu_parse_bool(v, strlen(v), &out->oversubscribe, msg, sizeof msg) != 0) {
      return fail(err, len, "%s=%s", origin, msg);
    }
    given->oversubscribe = 1;
  }
  if (const char* v = in.get(from, VGPU_ENV_TASK_PRIORITY, origin, sizeof origin)) {
    if (parsePriority(v, origin, &out->priority, &out->priority_set, err, len) != 0) return -1;
  }
  if (!out->priority_set) out->priority = 1;  // HAMi's default: low
  if (const char* v = in.get(from, VGPU_ENV_CORE_POLICY, origin, sizeof origin)) {
    if (parsePolicy(v, origin, &out->core_policy, err, len) != 0) return -1;
    given->policy = 1;
  }
  return 0;
}

// With a limits file: the environment may only tighten what the file says.
void tighten(vgpu_limiter_settings* out, const vgpu_limiter_settings& env, const Given& given) {
  for (int i = 0; i < VGPU_LIMITER_MAX_DEVICES; ++i) {
    out->memory_bytes[i] = tighterLimit(out->memory_bytes[i], env.memory_bytes[i], UINT64_MAX);
    out->sm_percent[i] = static_cast<uint32_t>(tighterLimit(out->sm_percent[i], env.sm_percent[i], 100));
  }
  if (given.oversubscribe && !env.oversubscribe) out->oversubscribe = 0;
  if (env.priority_set && env.priority != 0 && out->priority == 0) {
    out->priority = env.priority;  // 0 is high, anything else low
    out->priority_set = 1;
  }
  if (given.policy && policyStrictness(env.core_policy) > policyStrictness(out->core_policy))
    out->core_policy = env.core_policy;
}

int loadWith(const Loader& in, vgpu_limiter_settings* out, char* err, size_t len) {
  char origin[VGPU_LIMITER_PATH_MAX + 64];
  char msg[512];
  int disable = 0;
  if (const char* v = in.get(Source::kEnv, VGPU_ENV_DISABLE_CONTROL, origin, sizeof origin)) {
    if (parseGoBool(v, origin, &disable, err, len) != 0) return -1;
  }
  if (in.file == nullptr && disable) {
    out->control_disabled = 1;  // HAMi: the container runs without the limiter
    out->priority = 1;
    out->core_policy = VGPU_CORE_POLICY_DISABLE;
    snprintf(out->region_path, sizeof out->region_path, "%s", VGPU_DEFAULT_REGION_PATH);
    return 0;
  }
  out->disable_control_ignored = disable;
  Given given;
  if (loadSource(in, in.file != nullptr ? Source::kFile : Source::kEnv, out, &given, err, len) != 0) return -1;
  if (in.file != nullptr) {
    // On the heap: the caller may be on a small thread stack.
    auto* env = static_cast<vgpu_limiter_settings*>(calloc(1, sizeof(vgpu_limiter_settings)));
    if (env == nullptr) return fail(err, len, "reading the environment: out of memory");
    Given envGiven;
    int rc = loadSource(in, Source::kEnv, env, &envGiven, err, len);
    if (rc == 0) tighten(out, *env, envGiven);
    free(env);
    if (rc != 0) return -1;
  }
  if (loadPath(in, VGPU_ENV_SHARED_REGION, out->region_path, sizeof out->region_path, err, len) != 0) return -1;
  if (out->region_path[0] == '\0') snprintf(out->region_path, sizeof out->region_path, "%s", VGPU_DEFAULT_REGION_PATH);
  if (loadPath(in, VGPU_ENV_ACTIVITY_BOARD, out->activity_board, sizeof out->activity_board, err, len) != 0) return -1;
  // From the file only: a figure from the environment would let a process choose its own charge.
  if (const char* v = in.fromFile(VGPU_ENV_CONTEXT_OVERHEAD)) {
    if (vgpu_parse_memory_size(v, strlen(v), &out->context_overhead, msg, sizeof msg) != 0) {
      return fail(err, len, "%s in %s=%s", VGPU_ENV_CONTEXT_OVERHEAD, in.fileName, msg);
    }
  }
  if (const char* v = in.fromFile(VGPU_REGION_INODE)) {
    Text t = trim(whole(v));
    if (parseUnsigned(t, whole(v), &out->region_inode, msg, sizeof msg) != 0) {
      return fail(err, len, "%s in %s: %s", VGPU_REGION_INODE, in.fileName, msg);
    }
  }
  return 0;
}

}  // namespace

extern "C" {

int vgpu_parse_memory_size(const char* text, size_t len, uint64_t* out, char* err, size_t err_len) {
  Text all{text, len};
  Text s = trim(all);
  *out = 0;
  if (s.n == 0) return 0;
  uint64_t scale = 1;
  switch (s.p[s.n - 1]) {
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
  Text digits{s.p, scale == 1 ? s.n : s.n - 1};
  for (size_t i = 0; i < digits.n; ++i) {
    if (digits.p[i] < '0' || digits.p[i] > '9') {
      return fail(err, err_len,
                  "'%.*s' is not a memory size (write bytes, or a number with k, m or g, e.g. 4096m or 4g)",
                  static_cast<int>(len), text);
    }
  }
  if (digits.n > 1 && digits.p[0] == '0') return leadingZero(all, err, err_len);
  uint64_t v = 0;
  if (parseUnsigned(digits, all, &v, err, err_len) != 0) return -1;
  if (v > UINT64_MAX / scale) return fail(err, err_len, "'%.*s' is too large", static_cast<int>(len), text);
  *out = v * scale;
  return 0;
}

int vgpu_parse_percent(const char* text, size_t len, uint32_t* out, char* err, size_t err_len) {
  Text all{text, len};
  Text s = trim(all);
  *out = 0;
  if (s.n == 0) return 0;
  if (s.n > 1 && s.p[0] == '0') return leadingZero(all, err, err_len);
  uint64_t v = 0;
  char msg[256];
  if (parseUnsigned(s, all, &v, msg, sizeof msg) != 0) {
    return fail(err, err_len, "%s (expected a percentage 0..100)", msg);
  }
  if (v > 100) return fail(err, err_len, "'%.*s' is above 100 percent", static_cast<int>(len), text);
  *out = static_cast<uint32_t>(v);
  return 0;
}

int vgpu_parse_bool(const char* text, size_t len, int* out, char* err, size_t err_len) {
  Text s = trim({text, len});
  if (equalsIgnoringCase(s, "true") || equals(s, "1") || equalsIgnoringCase(s, "yes")) {
    *out = 1;
    return 0;
  }
  if (s.n == 0 || equalsIgnoringCase(s, "false") || equals(s, "0") || equalsIgnoringCase(s, "no")) {
    *out = 0;
    return 0;
  }
  return fail(err, err_len, "'%.*s' is not true or false", static_cast<int>(len), text);
}

int vgpu_parse_limits_file(const char* content, size_t len, const char* file_name, vgpu_limits_file* out,
                           char* err, size_t err_len) {
  out->count = 0;
  Text rest{content, len};
  int lineNo = 0;
  while (rest.n > 0) {
    const char* nl = static_cast<const char*>(memchr(rest.p, '\n', rest.n));
    Text line{rest.p, nl != nullptr ? static_cast<size_t>(nl - rest.p) : rest.n};
    rest = nl != nullptr ? Text{nl + 1, rest.n - line.n - 1} : Text{rest.p + rest.n, 0};
    ++lineNo;
    line = trim(line);
    if (line.n == 0 || line.p[0] == '#') continue;
    const char* eq = static_cast<const char*>(memchr(line.p, '=', line.n));
    if (eq == nullptr) {
      return fail(err, err_len, "%s:%d: expected KEY=VALUE, got '%.*s'", file_name, lineNo, static_cast<int>(line.n),
                  line.p);
    }
    Text key = trim({line.p, static_cast<size_t>(eq - line.p)});
    Text value = trim({eq + 1, static_cast<size_t>(line.p + line.n - (eq + 1))});
    if (!knownKey(key)) {
      return fail(err, err_len, "%s:%d: unknown key '%.*s'", file_name, lineNo, static_cast<int>(key.n), key.p);
    }
    for (int i = 0; i < out->count; ++i) {
      if (out->entries[i].key_len == key.n && memcmp(out->entries[i].key, key.p, key.n) == 0) {
        return fail(err, err_len, "%s:%d: '%.*s' given twice", file_name, lineNo, static_cast<int>(key.n), key.p);
      }
    }
    // Every known key is distinct, so a file without duplicates cannot hold more.
    vgpu_limits_entry& e = out->entries[out->count++];
    e.key = key.p;
    e.key_len = key.n;
    e.value = value.p;
    e.value_len = value.n;
  }
  return 0;
}

int vgpu_limiter_settings_load(vgpu_env_lookup env, void* ctx, const char* fixed_file_path,
                               vgpu_limiter_settings* out, char* err, size_t err_len) {
  memset(out, 0, sizeof *out);
  const char* fixed = fixed_file_path != nullptr ? fixed_file_path : VGPU_LIMITS_FILE_PATH;
  const char* named = env(ctx, VGPU_ENV_LIMITS_FILE);
  if (access(fixed, F_OK) == 0) {
    snprintf(out->limits_file, sizeof out->limits_file, "%s", fixed);
  } else if (named != nullptr && named[0] != '\0') {
    snprintf(out->limits_file, sizeof out->limits_file, "%s", named);
  }
  Loader loader{env, ctx, nullptr, out->limits_file};
  char* content = nullptr;
  vgpu_limits_file* file = nullptr;  // on the heap: the caller may be on a small thread stack
  if (out->limits_file[0] != '\0') {
    size_t size = 0;
    if (readFile(out->limits_file, &content, &size, err, err_len) != 0) return -1;
    file = static_cast<vgpu_limits_file*>(malloc(sizeof(vgpu_limits_file)));
    if (file == nullptr) {
      free(content);
      return fail(err, err_len, "reading limits file %s: out of memory", out->limits_file);
    }
    if (vgpu_parse_limits_file(content, size, out->limits_file, file, err, err_len) != 0) {
      free(file);
      free(content);
      return -1;
    }
    // The values become strings in place: what follows each (a newline, a blank, the end of
    // the buffer) is no longer needed.
    for (int i = 0; i < file->count; ++i) const_cast<char*>(file->entries[i].value)[file->entries[i].value_len] = '\0';
    loader.file = file;
  }
  int rc = loadWith(loader, out, err, err_len);
  free(file);
  free(content);
  return rc;
}

}  // extern "C"
