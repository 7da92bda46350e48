// InvariantChecker: cluster_audit.h's two audits over the soak's live pods, the bind-time
// audit over each new bind, the kubelet doubles' refusals, and the settled cluster's checks.
#include "soak_invariants.h"

#include <ctime>
#include <map>

#include <boost/json.hpp>

#include "cluster_audit.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/pod_info.h"

namespace vgpu::realk8s::soak {
namespace json = boost::json;

namespace {
/// "2026-12-07T21:40:00Z" as seconds since the epoch; 0 when unreadable.
double epochOf(const std::string& rfc3339) {
  std::tm tm{};
  if (::strptime(rfc3339.c_str(), "%Y-%m-%dT%H:%M:%SZ", &tm) == nullptr) return 0;
  return static_cast<double>(::timegm(&tm));
}

std::optional<Assignment> assignmentOf(const PodInfo& info) {
  const auto it = info.annotations.find(std::string(keys::kPodAssignment));
  if (it == info.annotations.end()) return std::nullopt;
  auto a = decodeAssignment(it->second);
  if (!a.ok()) return std::nullopt;
  return std::move(a).value();
}

std::size_t sharesOf(const Assignment& a) {
  std::size_t n = 0;
  for (const auto& c : a.containers) n += c.devices.size();
  return n;
}
}  // namespace

InvariantChecker::InvariantChecker(RealCluster& c, std::string ns, std::vector<std::string> nodes,
                                   Admitter& admitter)
    : c_(c), ns_(std::move(ns)), nodes_(std::move(nodes)), admitter_(admitter) {}

Result<std::vector<std::string>> InvariantChecker::audits(const std::set<std::string>& deleting) {
  // The kubelets first, then the apiserver: a pod deleted in between is in `deleting`, one
  // admitted in between is Running without holdings for this pass only.
  std::map<std::string, e2e::KubeletHoldings> holdings;
  for (const auto& n : nodes_) holdings[n] = c_.kubelet(n).allocations();
  auto published = c_.auditNodes(nodes_);
  if (!published.ok()) return std::move(published).error();
  auto list = listPods(c_, ns_);
  if (!list.ok()) return std::move(list).error();
  std::vector<e2e::AuditPod> bound, running;
  for (const auto& obj : *list) {
    auto info = parsePod(json::value(obj));
    if (!info.ok() || info->nodeName.empty() || info->terminated() || info->deleting || deleting.count(info->key()))
      continue;
    e2e::AuditPod p{info->key(), info->uid, info->nodeName, assignmentOf(*info)};
    if (info->phase == "Running") running.push_back(p);
    bound.push_back(std::move(p));
    // Creation to binding, as kube-scheduler recorded it (PodScheduled turned True).
    if (const auto* conds = at(obj, {"status", "conditions"}); conds && conds->is_array())
      for (const auto& cond : conds->as_array())
        if (cond.is_object() && str(cond.as_object().if_contains("type")) == "PodScheduled" &&
            str(cond.as_object().if_contains("status")) == "True") {
          const double waited = epochOf(str(cond.as_object().if_contains("lastTransitionTime"))) -
                                epochOf(str(at(obj, {"metadata", "creationTimestamp"})));
          if (waited > longestPending_ && waited < 1e6) {
            longestPending_ = waited;
            longestPendingPod_ = info->key();
          }
        }
  }
  // The kubelet's pod cleanup: what it holds for pods the apiserver no longer has (the
  // Admitter admitted them from its queue after their deletion) it frees, as the kubelet
  // frees the devices of pods it no longer sees.
  std::set<std::string> listedUids;
  for (const auto& obj : *list) listedUids.insert(str(at(obj, {"metadata", "uid"})));
  for (const auto& [node, held] : holdings)
    for (const auto& [uid, containers] : held)
      if (!listedUids.count(uid)) {
        c_.kubelet(node).removePod(uid);
        ++kubeletCleanups_;
      }
  std::vector<std::string> out = e2e::auditShares(*published, bound);
  for (auto& m : e2e::auditKubeletAgreement(holdings, running)) out.push_back(std::move(m));
  return out;
}

Result<std::vector<std::string>> InvariantChecker::check(const std::set<std::string>& deleting,
                                                         const std::set<std::string>& deleted,
                                                         const std::set<std::string>& partitioned) {
  auto now = audits(deleting);
  if (!now.ok()) return now;
  std::vector<std::string> out;
  std::set<std::string> pass(now->begin(), now->end());
  for (const auto& m : pass)
    if (lastPass_.count(m)) out.push_back("audit (two passes in a row): " + m);
  lastPass_ = std::move(pass);

  // Each bind as vgpu-scheduler made it (the pod's first bound version with what the node's
  // other pods held in the versions seen before it).
  const auto views = admitter_.bindViews();
  if (auto published = c_.auditNodes(nodes_); published.ok()) {
    for (; viewsSeen_ < views.size(); ++viewsSeen_)
      for (auto& m : e2e::auditShares(*published, views[viewsSeen_])) out.push_back("as bound: " + m);
  }
  // "<ns/name> on <node>: <why>": the kubelet double's refusals of pods still wanted. A
  // failure to report Running (the apiserver away) is the harness's, not the kubelet's; so
  // is a refusal of a pod deletePod stopped: its deletion may have begun after `deleted`
  // was copied for this pass.
  const auto refusals = admitter_.refusals();
  for (; refusalsSeen_ < refusals.size(); ++refusalsSeen_) {
    const std::string& r = refusals[refusalsSeen_];
    const std::string key = r.substr(0, r.find(" on "));
    if (deleted.count(key) || r.find(": reporting ") != std::string::npos ||
        r.find(" was deleted (deletePod)") != std::string::npos)
      continue;
    // An agent that cannot see kube-apiserver cannot learn a new pod's assignment; after
    // --pod-wait-ms (3 s) it refuses the Allocate rather than guess (docs/reliability.md).
    const auto on = r.find(" on ") + 4;
    if (partitioned.count(r.substr(on, r.find(": ", on) - on))) {
      partitionRefusals_.push_back(r);
      continue;
    }
    ++kubeletRefusals_;
    // The agent pairing an Allocate with the wrong pod or none (docs/reliability.md, defects
    // 2 and 3, fixed in agent/deviceplugin apart): still a violation, counted apart.
    if (r.find("is waiting for") != std::string::npos ||
        r.find("handed over devices other than its assignment") != std::string::npos) {
      ++agentPairingRefusals_;
      out.push_back("admission refused for a pod the extender bound (the agent's known pairing defect): " + r);
      continue;
    }
    out.push_back("admission refused for a pod the extender bound: " + r);
  }
  return out;
}

std::vector<std::string> InvariantChecker::settleProblems() {
  std::vector<std::string> out;
  if (!admitter_.caughtUp()) out.push_back("a bound pod has not been through its kubelet yet");
  auto list = listPods(c_, ns_);
  if (!list.ok()) return {"the apiserver cannot be read: " + list.error().message};
  std::set<std::string> liveUids;
  std::size_t heldShares = 0;
  int filtered = 0;
  for (const auto& obj : *list) {
    auto info = parsePod(json::value(obj));
    if (!info.ok() || info->terminated()) continue;
    liveUids.insert(info->uid);
    if (!info->nodeName.empty()) {
      if (auto a = assignmentOf(*info)) heldShares += sharesOf(*a);
      continue;
    }
    if (++filtered > 40) continue;  // the first 40 pending pods are asked about: enough to see one
    auto verdict = filterDirect(c_, obj, nodes_);
    if (verdict.ok() && !verdict->fitting.empty())
      out.push_back("pending pod " + info->key() + " fits " + verdict->fitting.front() + " (/filter)");
  }
  // vgpu-scheduler's count against what the live pods' assignments hold.
  const std::string metrics = c_.vgpuSchedulerMetrics();
  double allocated = 0;
  std::istringstream lines(metrics);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("vgpu_device_shares_allocated{", 0) == 0)
      allocated += std::stod(line.substr(line.rfind(' ') + 1));
  if (metrics.empty())
    out.push_back("vgpu-scheduler's /metrics does not answer");
  else if (static_cast<std::size_t>(allocated) != heldShares)
    out.push_back("share leak: vgpu-scheduler counts " + std::to_string(static_cast<long>(allocated)) +
                  " shares allocated, the live pods' assignments hold " + std::to_string(heldShares));
  for (const auto& n : nodes_)
    for (const auto& [uid, containers] : c_.kubelet(n).allocations())
      if (!liveUids.count(uid)) out.push_back("the kubelet double of " + n + " still holds devices of gone pod " + uid);
  auto audit = audits({});
  if (!audit.ok())
    out.push_back("audit: " + audit.error().message);
  else
    for (auto& m : *audit) out.push_back("audit: " + m);
  return out;
}

}  // namespace vgpu::realk8s::soak
