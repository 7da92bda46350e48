// Reads the compute rule libvgpu.so holds a container to from its limits file
// (compute_rule.h), cached per handout, so the watchdog never flags what the limiter allows.

#include "compute_rule.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "vgpu/limiter_contract.h"

namespace vgpu::deviceplugin {
namespace {

// A limits file is a few hundred bytes; anything far larger at the top of the folder is not one.
constexpr std::uintmax_t kMaxLimitsFileBytes = 64 * 1024;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool equalsIgnoringCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

/// Calls `f(key, value)` for each KEY=VALUE line of `text`.
template <typename F>
void forEachEntry(std::string_view text, F f) {
  while (!text.empty()) {
    const auto end = text.find('\n');
    std::string_view line = trim(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty() || line.front() == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    f(trim(line.substr(0, eq)), trim(line.substr(eq + 1)));
  }
}

}  // namespace

const char* toString(ComputePolicy policy) {
  switch (policy) {
    case ComputePolicy::kForce: return "force";
    case ComputePolicy::kDisable: return "disable";
    case ComputePolicy::kDefault: break;
  }
  return "default";
}

ComputeRule parseComputeRule(std::string_view text) {
  ComputeRule rule;
  forEachEntry(text, [&](std::string_view key, std::string_view value) {
    if (key == VGPU_ENV_CORE_POLICY) {
      rule.policy = equalsIgnoringCase(value, "force")     ? ComputePolicy::kForce
                    : equalsIgnoringCase(value, "disable") ? ComputePolicy::kDisable
                                                           : ComputePolicy::kDefault;
    } else if (key == VGPU_ENV_TASK_PRIORITY) {
      // An integer as the limiter reads it; 0 is high.
      if (!value.empty() && (value.front() == '-' || value.front() == '+')) value.remove_prefix(1);
      long long n = -1;
      const auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), n);
      rule.highPriority = err == std::errc() && end == value.data() + value.size() && n == 0;
    } else if (key == VGPU_ENV_ACTIVITY_BOARD) {
      rule.board = !value.empty();
    }
  });
  return rule;
}

bool isLimitsFile(std::string_view text) {
  bool found = false;
  forEachEntry(text, [&](std::string_view key, std::string_view) { found = found || key == VGPU_ENV_CORE_POLICY; });
  return found;
}

namespace {

struct Found {
  std::filesystem::path file;
  ComputeRule rule;
};

std::optional<Found> findLimitsFile(const std::filesystem::path& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code sec;
    if (it->symlink_status(sec).type() != fs::file_type::regular) continue;
    if (const auto size = it->file_size(sec); sec || size > kMaxLimitsFileBytes) continue;
    files.push_back(it->path());
  }
  std::sort(files.begin(), files.end());  // the same file every time, should there be two
  for (const auto& file : files) {
    std::ifstream in(file);
    std::ostringstream text;
    text << in.rdbuf();
    if (isLimitsFile(text.str())) return Found{file, parseComputeRule(text.str())};
  }
  return std::nullopt;
}

}  // namespace

std::optional<ComputeRule> findComputeRule(const std::filesystem::path& folder) {
  auto found = findLimitsFile(folder);
  if (!found) return std::nullopt;
  return found->rule;
}

ComputeRule readComputeRule(const std::filesystem::path& folder) { return findComputeRule(folder).value_or(ComputeRule{}); }

ComputeRule ComputeRuleCache::of(const std::string& handoutId, const std::filesystem::path& folder) {
  std::error_code ec;
  if (auto it = rules_.find(handoutId); it != rules_.end()) {
    const auto written = std::filesystem::last_write_time(it->second.file, ec);
    if (!ec && written == it->second.written && it->second.file.parent_path() == folder) return it->second.rule;
    rules_.erase(it);
  }
  const auto found = findLimitsFile(folder);
  if (!found) return {};
  const auto written = std::filesystem::last_write_time(found->file, ec);
  if (!ec) rules_[handoutId] = {found->file, written, found->rule};
  return found->rule;
}

void ComputeRuleCache::keepOnly(const std::set<std::string>& live) {
  std::erase_if(rules_, [&](const auto& entry) { return !live.contains(entry.first); });
}

}  // namespace vgpu::deviceplugin
