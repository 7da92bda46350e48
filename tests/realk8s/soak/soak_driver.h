#pragma once
// The chaos soak (issue 43): a stream of pods of mixed shapes created and deleted against
// the vgpu nodes while FaultInjector breaks one part after another, the invariants checked
// every few seconds from the apiserver's and the kubelet doubles' views, and, after the last
// fault, the settling checks and the figures for docs/reliability.md.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "real_cluster.h"
#include "tcp_proxy.h"

namespace vgpu::realk8s::soak {

struct SoakOptions {
  std::uint64_t seed = 1;
  std::chrono::seconds duration{300};
  std::string ns = "soak";
  std::vector<std::string> nodes;  ///< vgpu nodes, each agent behind its proxy
  std::map<std::string, TcpProxy*> proxies;
  std::string figuresFile;  ///< written at the end (and the violations as they happen)
};

struct SoakResult {
  /// Invariant violations during the run, each with the seed, the faults so far and the
  /// objects concerned.
  std::vector<std::string> violations;
  /// What did not hold after the last fault (settling, leaks, restarts, RSS).
  std::vector<std::string> settleFailures;
  std::string figures;  ///< the text written to figuresFile
};

/// Runs the soak on `c` (vgpu-scheduler and the nodes already up); the namespace must exist.
SoakResult runSoak(RealCluster& c, const SoakOptions& options);

}  // namespace vgpu::realk8s::soak
