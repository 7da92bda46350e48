#pragma once
// When libvgpu.so holds a container to its compute share: the rule the watchdog judges
// compute by, so that it never flags what the limiter lets through (watchdog.h). Read from
// the limits file the backend wrote in the container's handout folder
// (vgpu/limiter_contract.h: GPU_CORE_UTILIZATION_POLICY, CUDA_TASK_PRIORITY,
// VGPU_ACTIVITY_BOARD), which is read-only in the container and wins over its environment:
// what the limiter obeys, and nothing the tenant can rewrite. The environment can only make
// the policy stricter, so the file's policy is the most the limiter ever lets through.

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>

namespace vgpu::deviceplugin {

/// GPU_CORE_UTILIZATION_POLICY (HAMi's meaning, docs/limiter.md section 5).
enum class ComputePolicy : std::uint8_t {
  kDefault,  ///< the share applies while another tenant runs kernels on the device
  kForce,    ///< always
  kDisable,  ///< never
};
const char* toString(ComputePolicy policy);  ///< "default", "force", "disable"

struct ComputeRule {
  ComputePolicy policy = ComputePolicy::kDefault;
  bool highPriority = false;  ///< CUDA_TASK_PRIORITY 0 (unset and anything else: low)
  bool board = false;         ///< VGPU_ACTIVITY_BOARD is set: priorities are acted on
  /// With a board, a high-priority tenant's limiter counts only other high-priority tenants
  /// as sharing the device (the low-priority ones are held back while it runs).
  bool othersMustBeHighPriority() const { return highPriority && board; }
  bool operator==(const ComputeRule&) const = default;
};

/// The rule in a limits file's text (KEY=VALUE lines, '#' comments). A policy value that is
/// not one of the three, like a missing one, reads as the limiter's default.
ComputeRule parseComputeRule(std::string_view text);

/// Whether the text is a limits file: it names GPU_CORE_UTILIZATION_POLICY, which the agent's
/// backends always write there (a key missing from the file would be taken from the
/// container's environment).
bool isLimitsFile(std::string_view text);

/// The rule of the limits file among the regular files at the top of `folder` (a handout's
/// folder, which the container cannot write; symbolic links are not followed); nullopt
/// where there is none (a backend that does not use libvgpu.so, or not written yet).
std::optional<ComputeRule> findComputeRule(const std::filesystem::path& folder);
/// findComputeRule, or the limiter's default rule where there is none.
ComputeRule readComputeRule(const std::filesystem::path& folder);

/// The rules of the live handouts, each limits file read again only when it was written
/// again (a later holder of the same handout id, Allocate asked again): one stat per
/// handout and pass instead of a folder listing and a read. A folder without one is looked
/// at again each time (its file may not be written yet). Not thread-safe: the watchdog's pass.
class ComputeRuleCache {
 public:
  ComputeRule of(const std::string& handoutId, const std::filesystem::path& folder);
  /// Forgets the handouts not in `live`.
  void keepOnly(const std::set<std::string>& live);

 private:
  struct Entry {
    std::filesystem::path file;
    std::filesystem::file_time_type written;
    ComputeRule rule;
  };
  std::map<std::string, Entry> rules_;  ///< handout id -> its limits file and rule
};

}  // namespace vgpu::deviceplugin
