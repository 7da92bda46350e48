#pragma once
// One real node of a RealCluster: containerd with its CRI (Debian's 1.6 for Kubernetes 1.34,
// 2.4 built from its module for 1.37) running containers with runc, and the release's real
// kubelet, registered as system:node:<name>; only GPUs are faked. One per machine.
//
//   RealCluster c({.release = "1.34", .startVgpu = true, .startControllerManager = true});
//   RealNode n(c, {});
//   ASSERT_TRUE(c.start().ok()); ASSERT_TRUE(n.start().ok());   // Node Ready, untainted
//
// The kubelet's device-plugin folder is fixed (/var/lib/kubelet/device-plugins, whatever
// --root-dir says), and containers live in the machine's kubepods cgroups: a machine-wide
// lock (/run/lock/vgpu-realnode.lock) makes a second node wait. Pods run with
// `hostNetwork: true` (CNI: a loopback-only conflist; README.md says why). The destructor
// leaves the machine as it found it: containers and shims killed, the kubelet's and
// containerd's mounts unmounted, the kubelet's files in the fixed folder removed.

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "child_process.h"
#include "real_cluster.h"
#include "vgpu/result.h"

namespace vgpu::realk8s {

/// The kubelet's fixed device-plugin folder (pkg/kubelet/apis/deviceplugin: DevicePluginPath).
inline constexpr const char* kKubeletDevicePluginDir = "/var/lib/kubelet/device-plugins";

/// The images every real node has (imported into containerd's k8s.io namespace): the
/// sandbox image, and a busybox for test pods (`imagePullPolicy: Never`).
inline constexpr const char* kSandboxImage = "docker.io/vgpu/realnode-pause:1";
inline constexpr const char* kBusyboxImage = "docker.io/vgpu/realnode-busybox:1";

struct RealNodeOptions {
  std::string name = "realnode";
  /// A pod network as a user's node has it: the CNI bridge plugin (Debian's
  /// containernetworking-plugins; pods get 10.244.0.0/24 on cni0) and kube-proxy (iptables),
  /// so pods reach Services and the apiserver at its ClusterIP. The cluster's apiserver must
  /// then listen on the host (RealClusterOptions::listenOnHost). Off: host-network pods only.
  bool podNetwork = false;
  /// Host folders made shared mounts (bind-mounted onto themselves, MS_SHARED), as they are
  /// on a systemd host: the chart mounts its state folder with Bidirectional propagation,
  /// which runc refuses under a private `/` ("is mounted on / but it is not a shared
  /// mount"), as this machine's is. Made if missing; unmounted and, if made, removed at the end.
  std::vector<std::string> sharedHostDirs{};
  /// More OCI image archives to import (`ctr -n k8s.io images import`).
  std::vector<std::string> images{};
};

class RealNode {
 public:
  RealNode(RealCluster& cluster, RealNodeOptions options);
  ~RealNode();  ///< stop(): the machine as it was
  RealNode(const RealNode&) = delete;
  RealNode& operator=(const RealNode&) = delete;

  /// The lock, containerd (images imported), the kubelet; waits until the Node is Ready
  /// and the controller-manager lifted its not-ready taint. Errors name what did not come
  /// up, with the end of its log.
  Status start();
  /// Everything killed and unmounted (also by the destructor; safe twice).
  void stop();

  // ---- the node's daemons, stopped and started again on the same folders ----
  Status startContainerd();
  void stopContainerd(bool graceful = true);
  Status startKubelet();
  void stopKubelet(bool graceful = true);
  Status startKubeProxy();
  void stopKubeProxy(bool graceful = true);
  /// Every container of the node SIGKILLed and its shim with it (a power cut's effect on
  /// the containers; the daemons are stopped first by the caller).
  void killContainers();

  const std::string& name() const { return options_.name; }
  const std::string& dir() const { return dir_; }
  /// The kubelet's --root-dir: its default, /var/lib/kubelet, where the chart's hostPaths
  /// (devicePlugin.kubeletDir) expect it. Made and removed by the node (marked as its own).
  std::string kubeletRootDir() const { return "/var/lib/kubelet"; }
  /// The kubelet's PodResources socket (under --root-dir).
  std::string podResourcesSocket() const { return kubeletRootDir() + "/pod-resources/kubelet.sock"; }
  std::string containerdSocket() const { return dir_ + "/containerd/containerd.sock"; }
  /// Where vgpu-device-plugin meets this kubelet.
  AgentPaths agentPaths() const;
  /// "containerd 1.6.20" / "containerd 2.4.2" as the daemon reports it (`containerd --version`).
  const std::string& containerdVersion() const { return containerdVersion_; }
  /// The node's address (InternalIP).
  const std::string& ip() const { return nodeIp_; }
  /// The end of "containerd", "kubelet" or "kube-proxy"'s current log.
  std::string logTail(const std::string& component, std::size_t lines = 40) const;
  /// Runs `ctr -a <socket> -n k8s.io <args>` to its end; its output, or an error with it.
  Result<std::string> ctr(const std::vector<std::string>& args) const;

 private:
  struct Daemon {
    std::unique_ptr<e2e::ChildProcess> process;
    std::string logFile;
    int starts = 0;
  };
  Status takeLock();
  Status writeContainerdConfig();
  Status writeKubeletFiles();
  Status makeImages();
  Status startDaemon(Daemon& d, const std::string& name, const std::string& program,
                     const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                     const std::function<bool()>& ready);
  void stopDaemon(Daemon& d, bool graceful);
  void unmountAll();
  void unmountUnder(const std::string& dir);
  Status takeKubeletDir();
  Status shareHostDirs();
  void removePodNetwork();
  void removePodLogs();

  RealCluster& cluster_;
  RealNodeOptions options_;
  std::string dir_;
  std::string nodeIp_;
  bool containerd2_ = false;  ///< Kubernetes 1.36 and newer need containerd 2
  std::string containerdBin_, shimDir_;
  std::string containerdVersion_;
  std::uint16_t kubeletPort_ = 0, kubeletHealthzPort_ = 0;
  int lockFd_ = -1;
  bool started_ = false;
  bool createdRunContainerd_ = false;  ///< the same for containerd's /run/containerd
  Daemon containerd_, kubelet_, kubeProxy_;
  std::vector<std::string> madeHostDirs_, sharedDirs_;
  bool netnsExisted_ = false;
  std::set<std::string> netnsBefore_;  ///< /var/run/netns at the start: the node's are the others
  std::uint16_t kubeProxyHealthzPort_ = 0, kubeProxyMetricsPort_ = 0;
};

}  // namespace vgpu::realk8s
