// FaultInjector: each kind of fault done to the harness's components as a crash, a stall,
// a broken link or a failing device does it to a real cluster's.
#include "soak_faults.h"

#include <signal.h>

#include <filesystem>
#include <sstream>
#include <thread>

#include "fake_nodes.h"  // readText, writeText

namespace vgpu::realk8s::soak {

namespace {
const char* const kNames[kFaultKinds] = {"kill-etcd",          "kill-kube-apiserver",   "kill-kube-scheduler",
                                         "kill-vgpu-scheduler", "kill-agent",            "restart-kubelet",
                                         "pause-kube-apiserver", "compact-etcd",          "drop-agent-connections",
                                         "hold-agent-connections", "device-unhealthy"};

Status contextual(const std::string& what, Status s) {
  if (s.ok()) return s;
  return makeError(what + ": " + s.error().message);
}
}  // namespace

const char* faultName(FaultKind kind) { return kNames[static_cast<int>(kind)]; }

std::string Fault::describe() const {
  std::ostringstream out;
  out.setf(std::ios::fixed);
  out.precision(1);
  out << "t=" << at << "s " << faultName(kind);
  if (!target.empty()) out << " " << target;
  if (seconds > 0) out << " for " << seconds << " s";
  if (!outcome.empty() && outcome != "ok") out << " (" << outcome << ")";
  return out.str();
}

FaultInjector::FaultInjector(RealCluster& c, std::vector<std::string> nodes, std::map<std::string, TcpProxy*> proxies,
                             std::mutex& componentsMu)
    : c_(c), nodes_(std::move(nodes)), proxies_(std::move(proxies)), componentsMu_(componentsMu) {
  healthyDevicesText_ = e2e::readText(c_.simDevicesFile());
}

Fault FaultInjector::pick(std::mt19937_64& rng) const {
  Fault f;
  f.kind = static_cast<FaultKind>(std::uniform_int_distribution<int>(0, kFaultKinds - 1)(rng));
  const auto node = [&] { return nodes_[std::uniform_int_distribution<std::size_t>(0, nodes_.size() - 1)(rng)]; };
  switch (f.kind) {
    case FaultKind::kKillAgent:
    case FaultKind::kRestartKubelet:
    case FaultKind::kDropAgentConnections:
      f.target = node();
      break;
    case FaultKind::kHoldAgentConnections:
      f.target = node();
      f.seconds = std::uniform_int_distribution<int>(5, 20)(rng);
      break;
    case FaultKind::kPauseApiServer:
      f.seconds = std::uniform_int_distribution<int>(5, 20)(rng);
      break;
    case FaultKind::kDeviceUnhealthy:
      f.target = "SIM-GPU-" + std::to_string(std::uniform_int_distribution<int>(0, 7)(rng));
      f.seconds = std::uniform_int_distribution<int>(5, 20)(rng);
      break;
    default:
      break;
  }
  return f;
}

Status FaultInjector::setDeviceHealth(const std::string& device, bool healthy) {
  std::string text = healthyDevicesText_;
  if (!healthy) {
    // The device's entry gets `health: unhealthy` at the indentation of its `id:` key.
    const std::string idKey = "id: " + device + "\n";
    const auto pos = text.find(idKey);
    if (pos == std::string::npos) return makeError("no " + device + " in " + c_.simDevicesFile());
    const auto lineStart = text.rfind('\n', pos) + 1;
    std::string indent(pos - lineStart, ' ');
    text.insert(pos + idKey.size(), indent + "health: unhealthy\n");
  }
  // Written aside and renamed: the agents poll the file and must never read half of it.
  const std::string tmp = c_.simDevicesFile() + ".soak";
  if (auto s = e2e::writeText(tmp, text); !s.ok()) return s;
  std::error_code ec;
  std::filesystem::rename(tmp, c_.simDevicesFile(), ec);
  if (ec) return makeError("renaming " + tmp + ": " + ec.message());
  return {};
}

Status FaultInjector::inject(const Fault& f) {
  const auto spell = std::chrono::seconds(f.seconds);
  switch (f.kind) {
    case FaultKind::kKillEtcd: {
      std::lock_guard lock(componentsMu_);
      return contextual("etcd", c_.restartEtcd(false));
    }
    case FaultKind::kKillApiServer: {
      std::lock_guard lock(componentsMu_);
      return contextual("kube-apiserver", c_.restartApiServer(false));
    }
    case FaultKind::kKillKubeScheduler: {
      std::lock_guard lock(componentsMu_);
      return contextual("kube-scheduler", c_.restartKubeScheduler(false));
    }
    case FaultKind::kKillVgpuScheduler: {
      std::lock_guard lock(componentsMu_);
      c_.stopVgpuScheduler(false);
      return contextual("vgpu-scheduler", c_.startVgpuScheduler());
    }
    case FaultKind::kKillAgent: {
      std::lock_guard lock(componentsMu_);
      return contextual("vgpu-device-plugin@" + f.target, c_.restartVgpuAgent(f.target, false));
    }
    case FaultKind::kRestartKubelet: {
      std::lock_guard lock(componentsMu_);
      auto r = c_.restartKubelet(f.target);
      if (!r.ok()) return makeError("the kubelet double of " + f.target + ": " + r.error().message);
      return {};
    }
    case FaultKind::kPauseApiServer: {
      std::lock_guard lock(componentsMu_);
      const int pid = c_.componentPid("kube-apiserver");
      if (pid == 0) return makeError("kube-apiserver is not running");
      ::kill(pid, SIGSTOP);
      std::this_thread::sleep_for(spell);
      ::kill(pid, SIGCONT);
      return {};
    }
    case FaultKind::kCompactEtcd: {
      auto r = c_.compactEtcd();
      if (!r.ok()) return makeError("etcd compaction: " + r.error().message);
      return {};
    }
    case FaultKind::kDropAgentConnections:
      proxies_.at(f.target)->dropAll();
      return {};
    case FaultKind::kHoldAgentConnections: {
      auto* proxy = proxies_.at(f.target);
      proxy->hold(true);
      std::this_thread::sleep_for(spell);
      proxy->hold(false);
      return {};
    }
    case FaultKind::kDeviceUnhealthy: {
      if (auto s = setDeviceHealth(f.target, false); !s.ok()) return s;
      std::this_thread::sleep_for(spell);
      return setDeviceHealth(f.target, true);
    }
  }
  return makeError("unknown fault kind");
}

}  // namespace vgpu::realk8s::soak
