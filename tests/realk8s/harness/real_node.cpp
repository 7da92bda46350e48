// The real node (real_node.h): containerd and the kubelet as child processes in the
// cluster's folder, and the tear-down that leaves the machine as it was.
#include "real_node.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "fake_nodes.h"
#include "pki.h"
#include "test_http_client.h"
#include "vgpu/k8s/object.h"

namespace vgpu::realk8s {
namespace fs = std::filesystem;
namespace json = boost::json;
using e2e::ChildProcess;
using e2e::ProcessOptions;
using e2e::readText;
using e2e::writeText;

namespace {

constexpr const char* kBinDir = VGPU_REALK8S_BIN_DIR;      // <release>/k8s, tools/<tool>/
constexpr const char* kNodeDir = VGPU_REALK8S_NODE_DIR;    // oci_image.py
constexpr const char* kLockFile = "/run/lock/vgpu-realnode.lock";
constexpr const char* kKubeletMarker = "/var/lib/kubelet/.vgpu-realnode";  // the folder is a real node's
constexpr const char* kBridge = "cni0";
constexpr const char* kPodSubnet = "10.244.0.0/24";
constexpr const char* kCniNetwork = "realnode";
constexpr const char* kPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

std::string str(const json::value* v) { return v && v->is_string() ? std::string(v->as_string()) : std::string(); }

std::string tail(const std::string& text, std::size_t lines) {
  std::size_t pos = text.size();
  for (std::size_t n = 0; n <= lines && pos > 0; ++n) {
    const auto nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos + 1);
}

/// Runs a program to its end (60 s at most); its output, or an error that quotes it.
Result<std::string> runToEnd(const std::string& program, const std::vector<std::string>& args, const std::string& log,
                             std::map<std::string, std::string> env = {}) {
  std::error_code ec;
  fs::remove(log, ec);
  ProcessOptions o;
  o.program = program;
  o.args = args;
  env.emplace("PATH", kPath);
  o.env = std::move(env);
  o.logFile = log;
  auto p = ChildProcess::start(std::move(o));
  if (!p.ok()) return makeError(program + ": " + p.error().message);
  const auto status = (*p)->waitExit(std::chrono::seconds(60));
  const std::string out = readText(log);
  std::string line = program;
  for (const auto& a : args) line += " " + a;
  if (!status) return makeError("`" + line + "` did not finish within 60 s; its output: " + out);
  if (e2e::exitCodeOf(*status) != 0)
    return makeError("`" + line + "` exited with " + std::to_string(e2e::exitCodeOf(*status)) + ": " + out);
  return out;
}

/// Does something accept connections on the unix socket `path`?
bool socketServes(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

/// The processes whose command line has `arg` as one of its arguments.
std::vector<pid_t> processesWithArg(const std::string& arg) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream f(e.path() / "cmdline", std::ios::binary);
    std::string a;
    while (std::getline(f, a, '\0'))
      if (a == arg) {
        out.push_back(static_cast<pid_t>(std::stol(name)));
        break;
      }
  }
  return out;
}

/// Every process in the kubelet's pod cgroups (cgroupfs driver: <hierarchy>/kubepods/...).
std::set<pid_t> podProcesses() {
  std::set<pid_t> out;
  std::error_code ec;
  for (const char* root : {"/sys/fs/cgroup/pids/kubepods", "/sys/fs/cgroup/memory/kubepods"}) {
    if (!fs::exists(root, ec)) continue;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->path().filename() != "cgroup.procs") continue;
      std::ifstream f(it->path());
      for (pid_t pid; f >> pid;) out.insert(pid);
    }
  }
  return out;
}

/// Removes `dir` and the folders below it that are empty, deepest first (never a file).
void removeEmptyDirs(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory(ec) && !e.is_symlink(ec)) removeEmptyDirs(e.path());
  ::rmdir(dir.c_str());
}

/// Removes the empty pod cgroups the kubelet made, deepest first (rmdir fails on a busy one).
void removePodCgroups() {
  std::error_code ec;
  for (const auto& h : fs::directory_iterator("/sys/fs/cgroup", ec)) {
    const fs::path root = h.path() / "kubepods";
    if (!fs::is_directory(root, ec)) continue;
    std::vector<fs::path> dirs;
    for (auto it = fs::recursive_directory_iterator(root, ec); it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (ec) break;
      if (it->is_directory(ec)) dirs.push_back(it->path());
    }
    std::sort(dirs.begin(), dirs.end(), [](const auto& a, const auto& b) { return a.string().size() > b.string().size(); });
    for (const auto& d : dirs) ::rmdir(d.c_str());
    ::rmdir(root.c_str());
  }
}

}  // namespace

/// The machine's first non-loopback IPv4 address: the 1.37 kubelet refuses a loopback
/// --node-ip ("nodeIP can't be loopback address"), and the apiserver reaches the kubelet
/// (logs) at the Node's InternalIP.
std::string hostAddress() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "127.0.0.1";
  std::string out = "127.0.0.1";
  for (auto* a = list; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP))
      continue;
    char buf[INET_ADDRSTRLEN];
    if (::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, buf, sizeof buf)) {
      out = buf;
      break;
    }
  }
  ::freeifaddrs(list);
  return out;
}

RealNode::RealNode(RealCluster& cluster, RealNodeOptions options) : cluster_(cluster), options_(std::move(options)) {
  const std::string& release = cluster_.release();
  const auto dot = release.find('.');
  const int minor = dot == std::string::npos ? 0 : std::atoi(release.c_str() + dot + 1);
  // Kubernetes 1.35 is the last release that supports containerd 1.x.
  containerd2_ = minor >= 36;
  shimDir_ = containerd2_ ? std::string(kBinDir) + "/tools/containerd-2" : std::string();
  containerdBin_ = containerd2_ ? shimDir_ + "/containerd" : std::string("/usr/bin/containerd");
  kubeletPort_ = freePort();
  kubeletHealthzPort_ = freePort();
  kubeProxyHealthzPort_ = freePort();
  kubeProxyMetricsPort_ = freePort();
}

RealNode::~RealNode() { stop(); }

AgentPaths RealNode::agentPaths() const {
  return {.devicePluginDir = kKubeletDevicePluginDir, .podResourcesSocket = podResourcesSocket(),
          .stateDir = dir_ + "/vgpu-state"};
}

std::string RealNode::logTail(const std::string& component, std::size_t lines) const {
  const Daemon& d = component == "kubelet" ? kubelet_ : component == "kube-proxy" ? kubeProxy_ : containerd_;
  return d.logFile.empty() ? "(not started)" : tail(readText(d.logFile), lines);
}

Result<std::string> RealNode::ctr(const std::vector<std::string>& args) const {
  std::vector<std::string> all{"-a", containerdSocket(), "-n", "k8s.io"};
  all.insert(all.end(), args.begin(), args.end());
  const std::string program = containerd2_ ? shimDir_ + "/ctr" : std::string("/usr/bin/ctr");
  return runToEnd(program, all, dir_ + "/ctr.log");
}

Status RealNode::takeLock() {
  // One kubelet per machine: the device-plugin folder and the kubepods cgroups are shared.
  lockFd_ = ::open(kLockFile, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lockFd_ < 0) return makeError(std::string("cannot open ") + kLockFile + ": " + std::strerror(errno));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (::flock(lockFd_, LOCK_EX | LOCK_NB) != 0) {
    if (std::chrono::steady_clock::now() > deadline)
      return makeError(std::string("another real node held ") + kLockFile + " for 10 minutes (one per machine)");
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return {};
}

Status RealNode::start() {
  if (started_) return makeError("the real node runs already");
  if (!fs::exists(containerdBin_))
    return makeError(containerdBin_ + " is missing: " +
                     (containerd2_ ? "build the target realk8s_containerd-2 (tests/realk8s/build-tool.sh)"
                                   : "scripts/install-deps.sh installs Debian's containerd"));
  if (auto s = takeLock(); !s.ok()) return s;
  started_ = true;
  dir_ = cluster_.dir() + "/node-" + options_.name;
  nodeIp_ = hostAddress();
  // The fixed folder: a live kubelet.sock is another kubelet's (a machine with a real one).
  const std::string kubeletSock = std::string(kKubeletDevicePluginDir) + "/kubelet.sock";
  if (socketServes(kubeletSock))
    return makeError(kubeletSock + " answers: another kubelet runs on this machine, and a real node needs the "
                     "kubelet's fixed device-plugin folder");
  createdRunContainerd_ = !fs::exists("/run/containerd");
  if (auto s = takeKubeletDir(); !s.ok()) return s;
  if (auto s = shareHostDirs(); !s.ok()) return s;
  std::error_code ec;
  netnsExisted_ = fs::exists("/var/run/netns", ec);
  for (const auto& e : fs::directory_iterator("/var/run/netns", ec)) netnsBefore_.insert(e.path().filename().string());
  if (auto s = makeImages(); !s.ok()) return s;
  if (auto s = writeContainerdConfig(); !s.ok()) return s;
  if (auto s = startContainerd(); !s.ok()) return s;
  std::vector<std::string> images{dir_ + "/images/pause.oci.tar", dir_ + "/images/busybox.oci.tar"};
  images.insert(images.end(), options_.images.begin(), options_.images.end());
  for (const auto& image : images)
    if (auto r = ctr({"images", "import", image}); !r.ok()) return makeError("importing " + image + ": " + r.error().message);
  if (auto s = writeKubeletFiles(); !s.ok()) return s;
  if (auto s = startKubelet(); !s.ok()) return s;
  if (options_.podNetwork)
    if (auto s = startKubeProxy(); !s.ok()) return s;

  // Registered, Ready, and the node lifecycle controller lifted node.kubernetes.io/not-ready.
  std::string last;
  if (!RealCluster::waitFor(
          [&] {
            auto node = cluster_.getObject("/api/v1/nodes/" + options_.name);
            if (!node.ok()) return false;
            last = json::serialize(*node);
            bool ready = false;
            if (const auto* conds = k8s::findPath(*node, {"status", "conditions"}); conds && conds->is_array())
              for (const auto& c : conds->as_array())
                if (c.is_object() && str(c.as_object().if_contains("type")) == "Ready")
                  ready = str(c.as_object().if_contains("status")) == "True";
            const auto* taints = k8s::findPath(*node, {"spec", "taints"});
            return ready && (!taints || !taints->is_array() || taints->as_array().empty());
          },
          kStartTimeout))
    return makeError("Node " + options_.name + " was not Ready and untainted after " +
                     std::to_string(kStartTimeout.count()) + " s: " + last + "\nthe kubelet's log ends:\n" +
                     logTail("kubelet") + "\nkube-controller-manager's log ends:\n" +
                     cluster_.logTail("kube-controller-manager"));
  return {};
}

Status RealNode::makeImages() {
  // Two images from the machine's static busybox (Debian's busybox-static): the sandbox
  // (pause) image sleeps, the test image runs a shell. Each its own config (the CRI image
  // store confuses two names whose configs are byte-identical).
  const std::string script = std::string(kNodeDir) + "/oci_image.py";
  if (!fs::exists("/bin/busybox")) return makeError("/bin/busybox is missing: scripts/install-deps.sh installs busybox-static");
  std::vector<std::string> bb{"--file", "/bin/busybox:/bin/busybox"};
  for (const char* applet : {"sh", "env", "cat", "sleep", "test", "echo", "ls", "grep", "true", "false", "mkdir"})
    bb.insert(bb.end(), {"--link", std::string("busybox:/bin/") + applet});
  std::vector<std::string> pause = {script, "--ref", kSandboxImage, "--out", dir_ + "/images/pause.oci.tar",
                                    "--file", "/bin/busybox:/bin/busybox", "--entrypoint", "/bin/busybox",
                                    "--entrypoint", "sleep", "--entrypoint", "2147483647"};
  std::vector<std::string> box = {script, "--ref", kBusyboxImage, "--out", dir_ + "/images/busybox.oci.tar",
                                  "--entrypoint", "/bin/sh"};
  box.insert(box.end(), bb.begin(), bb.end());
  std::error_code ec;
  fs::create_directories(dir_ + "/images", ec);
  for (const auto* args : {&pause, &box})
    if (auto r = runToEnd("/usr/bin/python3", *args, dir_ + "/images/make.log"); !r.ok()) return r.error();
  return {};
}

Status RealNode::writeContainerdConfig() {
  const std::string root = dir_ + "/containerd";
  const std::string cni = dir_ + "/cni";
  // Only the loopback network: pods run with hostNetwork (README.md: CNI). The runtime's
  // network counts as ready once a conflist exists.
  const std::string conflist =
      options_.podNetwork
          ? std::string(R"({"cniVersion": "1.0.0", "name": ")") + kCniNetwork +
                R"(", "plugins": [{"type": "bridge", "bridge": ")" + kBridge +
                R"(", "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": ")" +
                kPodSubnet + R"("}]], "routes": [{"dst": "0.0.0.0/0"}]}}, {"type": "portmap", "capabilities": {"portMappings": true}}]})"
          : std::string(R"({"cniVersion": "1.0.0", "name": "realnode-lo", "plugins": [{"type": "loopback"}]})");
  if (auto s = writeText(cni + "/10-realnode.conflist", conflist + "\n"); !s.ok()) return s;
  std::ostringstream t;
  // restrict_oom_score_adj: these machines refuse a negative oom_score_adj (runc: "can't get
  // final child's PID from pipe: EOF").
  if (containerd2_) {
    t << "version = 3\nroot = \"" << root << "/root\"\nstate = \"" << root << "/state\"\n"
      << "[grpc]\n  address = \"" << containerdSocket() << "\"\n"
      << "[plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = \"" << kSandboxImage << "\"\n"
      << "[plugins.'io.containerd.cri.v1.runtime']\n  restrict_oom_score_adj = true\n"
      << "[plugins.'io.containerd.cri.v1.runtime'.cni]\n  bin_dirs = [\"/usr/lib/cni\"]\n  conf_dir = \"" << cni
      << "\"\n";
  } else {
    t << "version = 2\nroot = \"" << root << "/root\"\nstate = \"" << root << "/state\"\n"
      << "[grpc]\n  address = \"" << containerdSocket() << "\"\n"
      << "[plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"" << kSandboxImage << "\"\n"
      << "  restrict_oom_score_adj = true\n"
      << "[plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"/usr/lib/cni\"\n  conf_dir = \"" << cni << "\"\n";
  }
  return writeText(dir_ + "/containerd.toml", t.str());
}

Status RealNode::writeKubeletFiles() {
  auto cert = cluster_.issueCertificate(
      {.commonName = "system:node:" + options_.name, .organizations = {"system:nodes"}, .server = false});
  if (!cert.ok()) return cert.error();
  const std::string pki = dir_ + "/kubelet-pki";
  if (auto s = writeText(pki + "/client.crt", cert->certPem); !s.ok()) return s;
  if (auto s = writeText(pki + "/client.key", cert->keyPem); !s.ok()) return s;
  std::ostringstream kc;
  kc << "apiVersion: v1\nkind: Config\nclusters:\n- name: realk8s\n  cluster:\n    server: https://127.0.0.1:"
     << cluster_.apiServerPort() << "\n    certificate-authority: " << cluster_.caFile()
     << "\nusers:\n- name: kubelet\n  user:\n    client-certificate: " << pki << "/client.crt\n    client-key: " << pki
     << "/client.key\ncontexts:\n- name: realk8s\n  context:\n    cluster: realk8s\n    user: kubelet\n"
     << "current-context: realk8s\n";
  if (auto s = writeText(dir_ + "/kubelet.kubeconfig", kc.str()); !s.ok()) return s;
  std::ostringstream c;
  // failCgroupV1: these machines are cgroup v1 (1.35 and newer refuse it otherwise).
  // Eviction and image GC thresholds out of the way: the machine's disk is shared and the
  // imported images cannot be pulled again. The API (logs) only on the node's address.
  c << "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    << "address: " << nodeIp_ << "\nport: " << kubeletPort_ << "\nreadOnlyPort: 0\n"
    << "healthzBindAddress: 127.0.0.1\nhealthzPort: " << kubeletHealthzPort_ << "\n"
    << "authentication:\n  anonymous:\n    enabled: true\n  webhook:\n    enabled: false\n"
    << "authorization:\n  mode: AlwaysAllow\n"
    << "cgroupDriver: cgroupfs\nfailSwapOn: false\nfailCgroupV1: false\n"
    << "containerRuntimeEndpoint: unix://" << containerdSocket() << "\n"
    << "evictionHard:\n  memory.available: \"1Mi\"\n  nodefs.available: \"1%\"\n  imagefs.available: \"1%\"\n"
    << "  nodefs.inodesFree: \"1%\"\n"
    << "imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 99\n"
    << "serializeImagePulls: false\nresolvConf: /etc/resolv.conf\n"
    << "podLogsDir: " << dir_ << "/pod-logs\n";
  return writeText(dir_ + "/kubelet-config.yaml", c.str());
}

Status RealNode::startDaemon(Daemon& d, const std::string& name, const std::string& program,
                             const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                             const std::function<bool()>& ready) {
  if (d.process && d.process->running()) return makeError(name + " runs already");
  ProcessOptions o;
  o.program = program;
  o.args = args;
  o.env = env;
  d.logFile = dir_ + "/" + name + "-" + std::to_string(++d.starts) + ".log";
  o.logFile = d.logFile;
  auto p = ChildProcess::start(std::move(o));
  if (!p.ok()) return makeError(name + ": " + p.error().message);
  d.process = std::move(p).value();
  const bool ok = RealCluster::waitFor([&] { return !d.process->running() || ready(); }, kStartTimeout);
  if (!d.process->running()) return makeError(name + " exited while starting; its log ends:\n" + logTail(name, 60));
  if (!ok)
    return makeError(name + " was not ready after " + std::to_string(kStartTimeout.count()) + " s; its log ends:\n" +
                     logTail(name, 60));
  return {};
}

Status RealNode::startContainerd() {
  if (containerdVersion_.empty()) {
    auto v = runToEnd(containerdBin_, {"--version"}, dir_ + "/containerd-version.log");
    if (!v.ok()) return v.error();
    std::istringstream words(*v);
    std::string program, repo, version;
    words >> program >> repo >> version;  // "containerd github.com/containerd/containerd/v2 v2.4.2 <commit>"
    containerdVersion_ = "containerd " + version;
  }
  // Its shim is found on PATH: the one built with containerd 2 first (Debian's 1.6 shim does
  // not work with the 2.x daemon); runc is Debian's.
  const std::string path = shimDir_.empty() ? std::string(kPath) : shimDir_ + ":" + kPath;
  const std::string log = dir_ + "/containerd-" + std::to_string(containerd_.starts + 1) + ".log";
  return startDaemon(containerd_, "containerd", containerdBin_, {"--config", dir_ + "/containerd.toml"},
                     {{"PATH", path}, {"HOME", dir_}},
                     [log] { return readText(log).find("containerd successfully booted") != std::string::npos; });
}

void RealNode::stopDaemon(Daemon& d, bool graceful) {
  if (!d.process) return;
  if (graceful)
    d.process->stop(std::chrono::seconds(10));
  else
    d.process->kill();
}

void RealNode::stopContainerd(bool graceful) { stopDaemon(containerd_, graceful); }

Status RealNode::startKubelet() {
  const std::vector<std::string> args = {
      "kubelet",
      "--config=" + dir_ + "/kubelet-config.yaml",
      "--kubeconfig=" + dir_ + "/kubelet.kubeconfig",
      "--root-dir=" + kubeletRootDir(),
      "--cert-dir=" + dir_ + "/kubelet-pki",
      "--hostname-override=" + options_.name,
      "--node-ip=" + nodeIp_,
      "--v=2",
  };
  const std::uint16_t port = kubeletHealthzPort_;
  return startDaemon(kubelet_, "kubelet", cluster_.binary(), args, {{"PATH", kPath}, {"HOME", dir_}}, [port] {
    return testing::TestHttpClient(port).setTimeout(std::chrono::seconds(2)).get("/healthz").status == 200;
  });
}

void RealNode::stopKubelet(bool graceful) { stopDaemon(kubelet_, graceful); }

Status RealNode::startKubeProxy() {
  // iptables mode, as kubeadm runs it; the admin's kubeconfig (the harness has no
  // system:kube-proxy credential). --conntrack-max-per-core=0: leave the machine's
  // conntrack table size alone.
  const std::vector<std::string> args = {
      "kube-proxy",
      "--kubeconfig=" + cluster_.adminKubeconfig(),
      "--hostname-override=" + options_.name,
      "--proxy-mode=iptables",
      "--cluster-cidr=10.244.0.0/16",
      "--conntrack-max-per-core=0",
      "--healthz-bind-address=127.0.0.1:" + std::to_string(kubeProxyHealthzPort_),
      "--metrics-bind-address=127.0.0.1:" + std::to_string(kubeProxyMetricsPort_),
      "--v=2",
  };
  const std::uint16_t port = kubeProxyHealthzPort_;
  return startDaemon(kubeProxy_, "kube-proxy", cluster_.binary(), args, {{"PATH", kPath}, {"HOME", dir_}}, [port] {
    return testing::TestHttpClient(port).setTimeout(std::chrono::seconds(2)).get("/healthz").status == 200;
  });
}

void RealNode::stopKubeProxy(bool graceful) { stopDaemon(kubeProxy_, graceful); }

Status RealNode::takeKubeletDir() {
  // The kubelet's default root: a folder this harness made before (its marker) is a crashed
  // run's and goes; anything else is a real kubelet's, and the node refuses to start.
  const fs::path root = kubeletRootDir();
  std::error_code ec;
  if (fs::exists(root, ec)) {
    if (!fs::exists(kKubeletMarker, ec))
      return makeError(root.string() + " exists and is not a real node's of this harness (no " + kKubeletMarker +
                       "): a kubelet's folder; the real node needs it");
    unmountUnder(root.string());
    fs::remove_all(root, ec);
  }
  fs::create_directories(root / "device-plugins", ec);
  return writeText(kKubeletMarker, "made by vgpu's tests/realk8s real node; removed when it stops\n");
}

void RealNode::removePodLogs() {
  // The kubelet's links to container logs are in the fixed /var/log/containers.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/var/log/containers", ec)) {
    const auto target = fs::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind(dir_ + "/pod-logs/", 0) == 0) fs::remove(e.path(), ec);
  }
  removeEmptyDirs("/var/log/containers");
}

Status RealNode::shareHostDirs() {
  std::error_code ec;
  for (const auto& dir : options_.sharedHostDirs) {
    if (!fs::exists(dir, ec)) {
      fs::create_directories(dir, ec);
      if (ec) return makeError("cannot make " + dir + ": " + ec.message());
      madeHostDirs_.push_back(dir);
    }
    if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
        ::mount(nullptr, dir.c_str(), nullptr, MS_SHARED, nullptr) != 0)
      return makeError("cannot make " + dir + " a shared mount: " + std::strerror(errno));
    sharedDirs_.push_back(dir);
  }
  return {};
}

void RealNode::removePodNetwork() {
  // What the kubelet leaves in iptables on any node: its canary chains, the firewall chain
  // (and its jumps) and the hint chain. Each command may find nothing to remove.
  const std::vector<std::vector<std::string>> rules = {
      {"-t", "mangle", "-X", "KUBE-KUBELET-CANARY"}, {"-t", "nat", "-X", "KUBE-KUBELET-CANARY"},
      {"-t", "filter", "-X", "KUBE-KUBELET-CANARY"}, {"-D", "INPUT", "-j", "KUBE-FIREWALL"},
      {"-D", "OUTPUT", "-j", "KUBE-FIREWALL"},       {"-F", "KUBE-FIREWALL"},
      {"-X", "KUBE-FIREWALL"},                       {"-t", "mangle", "-X", "KUBE-IPTABLES-HINT"}};
  for (const char* program : {"/usr/sbin/iptables", "/usr/sbin/ip6tables"})
    for (const auto& rule : rules)
      if (fs::exists(program)) static_cast<void>(runToEnd(program, rule, dir_ + "/iptables.log"));
  // What killed pod sandboxes leave (no CNI DEL ran): their network namespaces (nsfs
  // mounts) and containerd's CNI results.
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/var/run/netns", ec))
    if (!netnsBefore_.count(e.path().filename().string()) && e.path().filename().string().rfind("cni-", 0) == 0) {
      ::umount2(e.path().c_str(), MNT_DETACH);
      fs::remove(e.path(), ec);
    }
  if (!netnsExisted_) removeEmptyDirs("/var/run/netns");
  for (const auto& e : fs::directory_iterator("/var/lib/cni/results", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(std::string(kCniNetwork) + "-", 0) == 0 || name.rfind("cni-loopback-", 0) == 0 ||
        name.rfind("realnode-lo-", 0) == 0)
      fs::remove(e.path(), ec);
  }
  removeEmptyDirs("/var/lib/cni");
  // What the bridge plugin and kube-proxy leave on the host: the bridge, host-local's
  // leases, kube-proxy's chains (kube-proxy --cleanup removes them).
  if (!options_.podNetwork) return;
  for (auto r : {runToEnd(cluster_.binary(), {"kube-proxy", "--cleanup"}, dir_ + "/kube-proxy-cleanup.log"),
                 runToEnd("/usr/sbin/ip", {"link", "delete", kBridge}, dir_ + "/ip.log")})
    if (!r.ok()) std::fprintf(stderr, "realnode: cleaning up the pod network: %s\n", r.error().message.c_str());
  fs::remove_all(fs::path("/var/lib/cni/networks") / kCniNetwork, ec);
  removeEmptyDirs("/var/lib/cni");
}

void RealNode::killContainers() {
  // The containers first (every process in the pod cgroups, until none is left), then their
  // shims, which would otherwise wait for containerd forever.
  for (int round = 0; round < 50; ++round) {
    const auto pids = podProcesses();
    if (pids.empty()) break;
    for (pid_t pid : pids) ::kill(pid, SIGKILL);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!dir_.empty())
    for (pid_t pid : processesWithArg(containerdSocket())) ::kill(pid, SIGKILL);
}

void RealNode::unmountAll() {
  unmountUnder(dir_);
  unmountUnder(kubeletRootDir());
}

void RealNode::unmountUnder(const std::string& dir) {
  // The kubelet bind-mounts its root dir and the pods' volumes, containerd its rootfs
  // mounts and shm: every mount under the node's folder, deepest first.
  std::vector<std::string> points;
  std::ifstream info("/proc/self/mountinfo");
  for (std::string line; std::getline(info, line);) {
    std::istringstream fields(line);
    std::string id, parent, devs, root, point;
    fields >> id >> parent >> devs >> root >> point;
    // Octal escapes of the kernel (\040 for a space).
    std::string p;
    for (std::size_t i = 0; i < point.size(); ++i) {
      if (point[i] == '\\' && i + 3 < point.size()) {
        p += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        p += point[i];
      }
    }
    if (p.rfind(dir + "/", 0) == 0 || p == dir) points.push_back(p);
  }
  std::sort(points.begin(), points.end(), [](const auto& a, const auto& b) { return a.size() > b.size(); });
  for (const auto& p : points) ::umount2(p.c_str(), MNT_DETACH);
}

void RealNode::stop() {
  if (!started_) return;
  started_ = false;
  stopKubeProxy(true);
  stopKubelet(true);
  killContainers();
  stopContainerd(true);
  killContainers();
  unmountAll();
  removePodCgroups();
  removePodNetwork();
  removePodLogs();
  for (const auto& dir : sharedDirs_) {
    unmountUnder(dir);
    ::umount2(dir.c_str(), MNT_DETACH);
  }
  sharedDirs_.clear();
  std::error_code ec;
  for (const auto& dir : madeHostDirs_) fs::remove_all(dir, ec);
  madeHostDirs_.clear();
  fs::remove_all(kubeletRootDir(), ec);  // the plugins' sockets and the checkpoint too
  // containerd's fixed folders (shim sockets, runc's state): emptied by the shims' ends.
  if (createdRunContainerd_) removeEmptyDirs("/run/containerd");
  if (lockFd_ >= 0) {
    ::close(lockFd_);  // releases the lock
    lockFd_ = -1;
  }
}

}  // namespace vgpu::realk8s
