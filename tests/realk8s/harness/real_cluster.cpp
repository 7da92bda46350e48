#include "vgpu/k8s/object.h"
#include "real_cluster.h"

#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <boost/json.hpp>

#include "fake_nodes.h"
#include "pki.h"
#include "test_http_client.h"
#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"
#include "vgpu/codec/base64.h"
#include "vgpu/codec/inventory.h"
#include "vgpu/pod_info.h"
#include "vgpu/yaml_json.h"

namespace vgpu::realk8s {
namespace fs = std::filesystem;
using e2e::readText;
namespace json = boost::json;
using e2e::ChildProcess;
using e2e::ProcessOptions;
using e2e::writeText;

// Where the build put the binaries and the chart (CMakeLists.txt).
namespace paths {
constexpr const char* kBinDir = VGPU_REALK8S_BIN_DIR;  // <release>/k8s
constexpr const char* kChartRender = VGPU_REALK8S_CHART_RENDER;
constexpr const char* kChartDir = VGPU_REALK8S_CHART_DIR;
constexpr const char* kVgpuScheduler = VGPU_REALK8S_VGPU_SCHEDULER;
constexpr const char* kVgpuAgent = VGPU_REALK8S_VGPU_AGENT;
constexpr const char* kVgpuDraPlugin = VGPU_REALK8S_VGPU_DRA_PLUGIN;
constexpr const char* kBackendDir = VGPU_REALK8S_BACKEND_DIR;
}  // namespace paths

struct RealCluster::Component {
  std::string name;
  std::unique_ptr<ChildProcess> process;
  int starts = 0;
  std::string logFile;
};

struct RealCluster::VgpuNode {
  std::string name;
  fs::path dir;
  std::unique_ptr<fakes::FakeKubelet> kubelet;
  fs::path pluginDir() const { return dir / "dp"; }
  fs::path podResourcesSocket() const { return dir / "pr" / "kubelet.sock"; }
};

namespace {

std::string randomToken() {
  static const char kHex[] = "0123456789abcdef";
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  std::string token;
  for (int i = 0; i < 32; ++i) token += kHex[static_cast<unsigned char>(urandom.get()) % 16];
  return token;
}

std::string str(const json::value* v) { return v && v->is_string() ? std::string(v->as_string()) : std::string(); }

const json::value* at(const json::object& obj, std::initializer_list<std::string_view> path) {
  return k8s::findPath(obj, path);
}

std::string nowRfc3339() {
  char buf[32];
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string tail(const std::string& text, size_t lines) {
  size_t pos = text.size();
  for (size_t n = 0; n <= lines && pos > 0; ++n) {
    const auto nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos + 1);
}

std::string kubeconfig(std::uint16_t port, const std::string& ca, const std::string& user, const std::string& token) {
  std::ostringstream y;
  y << "apiVersion: v1\nkind: Config\nclusters:\n- name: realk8s\n  cluster:\n    server: https://127.0.0.1:" << port
    << "\n    certificate-authority: " << ca << "\nusers:\n- name: " << user << "\n  user:\n    token: " << token
    << "\ncontexts:\n- name: realk8s\n  context:\n    cluster: realk8s\n    user: " << user
    << "\ncurrent-context: realk8s\n";
  return y.str();
}

/// The REST collection of a rendered chart object (the kinds the chart's RBAC and
/// webhook use).
Result<std::string> collectionOf(const json::object& obj) {
  static const std::map<std::string, std::pair<std::string, bool>> kinds = {
      // kind -> (collection prefix, namespaced)
      {"ServiceAccount", {"/api/v1", true}},
      {"ClusterRole", {"/apis/rbac.authorization.k8s.io/v1", false}},
      {"ClusterRoleBinding", {"/apis/rbac.authorization.k8s.io/v1", false}},
      {"Role", {"/apis/rbac.authorization.k8s.io/v1", true}},
      {"RoleBinding", {"/apis/rbac.authorization.k8s.io/v1", true}},
      {"MutatingWebhookConfiguration", {"/apis/admissionregistration.k8s.io/v1", false}},
      {"DeviceClass", {"/apis/resource.k8s.io/v1", false}},
  };
  const std::string kind = str(obj.if_contains("kind"));
  const auto it = kinds.find(kind);
  if (it == kinds.end()) return makeError("the harness does not apply objects of kind " + kind);
  std::string plural = kind;
  for (auto& ch : plural) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  plural += plural.back() == 's' ? "es" : "s";  // deviceclasses
  std::string path = it->second.first;
  if (it->second.second) {
    const std::string ns = str(at(obj, {"metadata", "namespace"}));
    if (ns.empty()) return makeError(kind + " " + str(at(obj, {"metadata", "name"})) + " has no namespace");
    path += "/namespaces/" + ns;
  }
  return path + "/" + plural;
}

/// Runs `k8s <args>` to the end (bounded) and returns its stdout; an error carries its log.
Result<std::string> runTool(const std::string& binary, const std::vector<std::string>& args, const std::string& log,
                            const std::map<std::string, std::string>& env) {
  ProcessOptions o;
  o.program = binary;
  o.args = args;
  o.env = env;
  o.logFile = log;
  o.pipeStdout = true;
  auto p = ChildProcess::start(std::move(o));
  if (!p.ok()) return makeError(binary + ": " + p.error().message);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    auto line = (*p)->readLine(std::chrono::milliseconds(500));
    if (line) {
      out += *line + "\n";
    } else if (!(*p)->running()) {
      break;
    }
  }
  const int status = (*p)->stop(std::chrono::seconds(1));
  if (e2e::exitCodeOf(status) != 0)
    return makeError("`k8s " + args.front() + "` exited with " + std::to_string(e2e::exitCodeOf(status)) +
                     "; its output: " + out + (*p)->log());
  return out;
}

}  // namespace

// ---- set-up and tear-down ----

RealCluster::RealCluster(RealClusterOptions options) : options_(std::move(options)) {
  std::string pattern = "/tmp/realk8s-" + options_.release + "-XXXXXX";
  if (::mkdtemp(pattern.data()) != nullptr) dir_ = pattern;
  binary_ = std::string(paths::kBinDir) + "/" + options_.release + "/k8s";
  for (const char* name : {"etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "default-scheduler",
                           "vgpu-scheduler"}) {
    auto c = std::make_unique<Component>();
    c->name = name;
    components_[name] = std::move(c);
  }
  etcdPort_ = freePort();
  etcdPeerPort_ = freePort();
  apiPort_ = freePort();
  kubeSchedulerPort_ = freePort();
  webhookPort_ = freePort();
  extenderPort_ = freePort();
  controllerManagerPort_ = freePort();
  defaultSchedulerPort_ = freePort();
  for (const char* user : {"admin", "kube-scheduler", "vgpu-scheduler", "vgpu-device-plugin", "vgpu-dra-plugin"})
    tokens_[user] = randomToken();
}

RealCluster::~RealCluster() {
  // Clients first, the store last: nothing logs a storm of connection errors meanwhile.
  for (auto& [name, c] : components_)
    if (name.rfind("vgpu-device-plugin@", 0) == 0 && c->process) c->process->kill();
  for (auto& [name, n] : vgpuNodes_)
    if (n->kubelet) n->kubelet->stop();
  for (const char* name : {"kube-controller-manager", "default-scheduler", "kube-scheduler", "vgpu-scheduler", "kube-apiserver",
                           "etcd"}) {
    auto& c = *components_[name];
    if (c.process) c.process->kill();
  }
  if (dir_.empty()) return;
  if (std::getenv("VGPU_REALK8S_KEEP") != nullptr) {
    std::fprintf(stderr, "realk8s: kept %s (VGPU_REALK8S_KEEP)\n", dir_.c_str());
    return;
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
}

RealCluster::Component& RealCluster::component(const std::string& name) const { return *components_.at(name); }

RealCluster::Component& RealCluster::componentSlot(const std::string& name) {
  auto& slot = components_[name];
  if (!slot) {
    slot = std::make_unique<Component>();
    slot->name = name;
  }
  return *slot;
}

std::string RealCluster::etcdUrl() const { return "http://127.0.0.1:" + std::to_string(etcdPort_); }
std::string RealCluster::caFile() const { return dir_ + "/pki/ca.crt"; }
std::string RealCluster::adminKubeconfig() const { return dir_ + "/admin.kubeconfig"; }
std::string RealCluster::tokenFor(const std::string& user) const { return tokens_.at(user); }
ApiClient RealCluster::clientAs(const std::string& token) const { return ApiClient(apiPort_, caFile(), token); }

std::string RealCluster::logTail(const std::string& name, size_t lines) const {
  const auto& c = component(name);
  return c.logFile.empty() ? "(not started)" : tail(readText(c.logFile), lines);
}

int RealCluster::pidOf(const std::string& name) const {
  const auto it = components_.find(name);
  if (it == components_.end() || !it->second->process || !it->second->process->running()) return -1;
  return it->second->process->pid();
}

Status RealCluster::writeFiles() {
  const fs::path dir(dir_);
  auto created = CertificateAuthority::create("realk8s-ca");
  if (!created.ok()) return std::move(created).error();
  ca_ = std::make_unique<CertificateAuthority>(std::move(created).value());
  const auto& ca = ca_;
  // The names a client inside or outside the cluster uses for the apiserver; 10.96.0.1 is
  // the `kubernetes` Service's address in --service-cluster-ip-range.
  auto apiserver = ca->issue({.commonName = "kube-apiserver",
                              .dnsNames = {"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                                           "kubernetes.default.svc.cluster.local"},
                              .ipAddresses = {"127.0.0.1", "10.96.0.1"}});
  if (!apiserver.ok()) return std::move(apiserver).error();
  // vgpu-scheduler's serving certificate: the names the chart's certificate carries, and
  // 127.0.0.1, where the apiserver (webhook) and kube-scheduler (extender) reach it here.
  const std::string svc = std::string(kChartRelease) + "-scheduler." + kChartNamespace + ".svc";
  auto vgpu = ca->issue({.commonName = svc, .dnsNames = {svc, "localhost"}, .ipAddresses = {"127.0.0.1"}});
  if (!vgpu.ok()) return std::move(vgpu).error();
  auto saKey = makeKeyPair();
  if (!saKey.ok()) return std::move(saKey).error();
  for (const auto& [file, text] : std::map<std::string, std::string>{{"ca.crt", ca->pem().certPem},
                                                                      {"apiserver.crt", apiserver->certPem},
                                                                      {"apiserver.key", apiserver->keyPem},
                                                                      {"vgpu-scheduler.crt", vgpu->certPem},
                                                                      {"vgpu-scheduler.key", vgpu->keyPem},
                                                                      {"sa.key", saKey->keyPem},
                                                                      {"sa.pub", saKey->certPem}})
    if (auto s = writeText(dir / "pki" / file, text); !s.ok()) return s;

  // Static tokens (token,user,uid,"groups"). The daemons authenticate as the chart's
  // ServiceAccounts would (user system:serviceaccount:<ns>:<name>), so the chart's RBAC
  // is what authorizes them.
  const std::string saUser = std::string("system:serviceaccount:") + kChartNamespace + ":" + kChartRelease;
  const std::string saGroups = std::string("\"system:serviceaccounts,system:serviceaccounts:") + kChartNamespace + "\"";
  std::ostringstream tokens;
  const auto line = [&](const std::string& token, const std::string& user, const std::string& groups) {
    tokens << token << "," << user << "," << user << "-uid," << groups << "\n";
  };
  line(tokens_["admin"], "admin", "\"system:masters\"");
  line(tokens_["kube-scheduler"], saUser + "-scheduler", saGroups);
  line(tokens_["vgpu-scheduler"], saUser + "-scheduler", saGroups);
  line(tokens_["vgpu-device-plugin"], saUser + "-device-plugin", saGroups);
  line(tokens_["vgpu-dra-plugin"], saUser + "-dra-plugin", saGroups);
  if (auto s = writeText(dir / "tokens.csv", tokens.str()); !s.ok()) return s;
  const std::string caPath = caFile();
  if (auto s = writeText(adminKubeconfig(), kubeconfig(apiPort_, caPath, "admin", tokens_["admin"])); !s.ok()) return s;
  for (const char* user : {"kube-scheduler", "vgpu-scheduler", "vgpu-device-plugin", "vgpu-dra-plugin"}) {
    const auto path = dir / (std::string(user) + ".kubeconfig");
    if (auto s = writeText(path, kubeconfig(apiPort_, caPath, user, tokens_[user])); !s.ok()) return s;
  }
  return {};
}

Status RealCluster::start() {
  if (dir_.empty()) return makeError("cannot create a temp folder under /tmp");
  if (!fs::exists(binary_))
    return makeError(binary_ + " is missing: build the target realk8s_" + options_.release +
                     " (part of `all`; tests/realk8s/build.sh)");
  const std::map<std::string, std::string> env{{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", dir_}};
  auto version = runTool(binary_, {"version"}, dir_ + "/version.log", env);
  if (!version.ok()) return std::move(version).error();
  // "kubernetes v1.34.4 etcd 3.6.4"
  std::istringstream words(*version);
  std::string word;
  words >> word >> kubernetesVersion_;
  if (kubernetesVersion_.rfind("v1.", 0) != 0) return makeError("`k8s version` said: " + *version);

  if (auto s = writeFiles(); !s.ok()) return s;
  if (auto s = renderChart(); !s.ok()) return s;
  if (auto s = startEtcd(); !s.ok()) return s;
  admin_ = std::make_unique<ApiClient>(apiPort_, caFile(), tokens_["admin"]);
  if (auto s = startApiServer(); !s.ok()) return s;

  // What helm install and the controller-manager would have made.
  const json::object defaultSa{{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "default"}}}};
  if (auto r = admin_->post("/api/v1/namespaces/default/serviceaccounts", json::serialize(defaultSa));
      r.status != 201 && r.status != 409)
    return makeError("creating default/default ServiceAccount: " + r.describe());
  if (options_.applyChartRbac) {
    if (auto s = createNamespace(kChartNamespace); !s.ok()) return s;
    if (auto s = applyChartObjects("scheduler-rbac.yaml"); !s.ok()) return s;
    if (auto s = applyChartObjects("device-plugin-rbac.yaml"); !s.ok()) return s;
  }
  if (options_.startVgpu)
    if (auto s = startVgpu(); !s.ok()) return s;
  if (options_.startKubeScheduler)
    if (auto s = startKubeScheduler(); !s.ok()) return s;
  if (options_.startControllerManager)
    if (auto s = startControllerManager(); !s.ok()) return s;
  if (options_.startDefaultScheduler)
    if (auto s = startDefaultScheduler(); !s.ok()) return s;
  return {};
}

Result<PemPair> RealCluster::issueCertificate(const LeafSpec& spec) const {
  if (!ca_) return makeError("the cluster's CA is made by start()");
  return ca_->issue(spec);
}

// ---- the chart ----

Status RealCluster::renderChart() {
  // The chart as `helm install vgpu charts/vgpu -n vgpu-system -f <test's values>`
  // renders it for this Kubernetes version, with two more values: vgpu-scheduler's ports
  // (scheduler.extender.port: the webhook's HTTPS listener; scheduler.extender.verbsPort:
  // the verbs, so the extender URL in the scheduler config, http://127.0.0.1:<verbsPort>,
  // and the Deployment's --extender-listen name the test's free port, and two releases run
  // side by side).
  const fs::path out = fs::path(dir_) / "chart";
  std::error_code ec;
  fs::create_directories(out, ec);
  const std::string testValues = (fs::path(dir_) / "chart-test-values.yaml").string();
  if (auto s = writeText(testValues, options_.chartValues.empty() ? "{}\n" : options_.chartValues); !s.ok()) return s;
  const std::string values = (fs::path(dir_) / "chart-port-values.yaml").string();
  if (auto s = writeText(values, "scheduler:\n  extender:\n    port: " + std::to_string(webhookPort_) +
                                      "\n    verbsPort: " + std::to_string(extenderPort_) + "\n");
      !s.ok())
    return s;
  ProcessOptions o;
  o.program = paths::kChartRender;
  o.args = {"-chart", paths::kChartDir, "-out", out.string(), "-namespace", kChartNamespace, "-release", kChartRelease,
            "-kube-version", kubernetesVersion_, "-values", testValues, "-values", values};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  o.logFile = (fs::path(dir_) / "chart-render.log").string();
  auto p = ChildProcess::start(std::move(o));
  if (!p.ok()) return makeError("chart-render: " + p.error().message);
  const auto status = (*p)->waitExit(std::chrono::seconds(60));
  if (!status || e2e::exitCodeOf(*status) != 0) return makeError("chart-render failed: " + (*p)->log());

  auto docs = yamlDocumentsToJson(readText((out / "scheduler-config.yaml").string()), "scheduler-config.yaml");
  if (!docs.ok()) return makeError("the rendered scheduler-config.yaml: " + docs.error().message);
  std::string config;
  for (const auto& d : *docs)
    if (d.is_object()) config = str(at(d.as_object(), {"data", "config.yaml"}));
  if (config.empty()) return makeError("the rendered scheduler-config.yaml has no data.config.yaml");

  // One change, and nothing else: clientConnection.kubeconfig added (in the pod
  // kube-scheduler uses its in-cluster ServiceAccount; here a kubeconfig with that
  // account's token). The extender is plain HTTP on loopback (no tlsConfig to point at the
  // harness's CA).
  if (config.find("tlsConfig:") != std::string::npos)
    return makeError("the chart's scheduler config has a tlsConfig again: point its files at the harness's PKI "
                     "in real_cluster.cpp. The config:\n" + config);
  const std::string urlPrefix = "urlPrefix: \"http://127.0.0.1:" + std::to_string(extenderPort_) + "\"";
  if (config.find(urlPrefix) == std::string::npos)
    return makeError("the chart's scheduler config does not have `" + urlPrefix + "` (the extender port value " +
                     "did not reach it). The config:\n" + config);
  if (config.find("clientConnection:") != std::string::npos)
    return makeError("the chart's scheduler config sets clientConnection: update real_cluster.cpp. The config:\n" +
                     config);
  if (!config.empty() && config.back() != '\n') config += '\n';
  config += "clientConnection:\n  kubeconfig: " + dir_ + "/kube-scheduler.kubeconfig\n";
  schedulerConfig_ = config;
  if (auto s = writeText(fs::path(dir_) / "kube-scheduler-config.yaml", config); !s.ok()) return s;

  auto parsed = yamlDocumentsToJson(config, "kube-scheduler-config.yaml");
  if (!parsed.ok() || parsed->empty() || !(*parsed)[0].is_object())
    return makeError("the scheduler config does not parse");
  const auto* profiles = (*parsed)[0].as_object().if_contains("profiles");
  if (profiles && profiles->is_array() && !profiles->as_array().empty() && profiles->as_array()[0].is_object())
    schedulerName_ = str(profiles->as_array()[0].as_object().if_contains("schedulerName"));
  if (schedulerName_.empty()) return makeError("the chart's scheduler config names no profile");

  // The device config, as the ConfigMap vgpu-device-config is mounted at /etc/vgpu in
  // both daemons' pods: every key a file of <dir>/etc-vgpu, and the one substitution
  // /etc/vgpu/ -> <dir>/etc-vgpu/ in device-config.yaml (the sim backend's devicesFile).
  auto dcDocs = yamlDocumentsToJson(readText((out / "device-config.yaml").string()), "device-config.yaml");
  if (!dcDocs.ok()) return makeError("the rendered device-config.yaml: " + dcDocs.error().message);
  const fs::path mount = fs::path(dir_) / "etc-vgpu";
  for (const auto& d : *dcDocs) {
    const auto* data = d.is_object() ? d.as_object().if_contains("data") : nullptr;
    if (!data || !data->is_object()) continue;
    for (const auto& [key, value] : data->as_object()) {
      std::string text = str(&value);
      if (key == "device-config.yaml")
        for (auto at = text.find("/etc/vgpu/"); at != std::string::npos; at = text.find("/etc/vgpu/", at))
          text.replace(at, std::strlen("/etc/vgpu/"), mount.string() + "/");
      if (auto s = writeText(mount / std::string(key), text); !s.ok()) return s;
    }
  }
  auto deviceConfig = yamlDocumentsToJson(readText(deviceConfigPath()), deviceConfigPath());
  if (!deviceConfig.ok() || deviceConfig->empty() || !(*deviceConfig)[0].is_object())
    return makeError("the chart's device-config.yaml does not parse");
  if (const auto* backends = (*deviceConfig)[0].as_object().if_contains("backends"); backends && backends->is_object())
    for (const auto& [name, b] : backends->as_object()) {
      if (!b.is_object()) continue;
      const auto* enabled = b.as_object().if_contains("enabled");
      if (!enabled || !enabled->is_bool() || !enabled->as_bool()) continue;
      enabledBackends_.push_back(std::string(name));
      countResources_.push_back(str(at(b.as_object(), {"resources", "count"})));
    }
  return {};
}

std::string RealCluster::deviceConfigPath() const { return dir_ + "/etc-vgpu/device-config.yaml"; }

Result<std::vector<std::string>> RealCluster::chartArgs(const std::string& templateFile, const std::string& container,
                                                        const std::map<std::string, std::string>& substitutions) {
  auto docs = yamlDocumentsToJson(readText(dir_ + "/chart/" + templateFile), templateFile);
  if (!docs.ok()) return makeError("the rendered " + templateFile + ": " + docs.error().message);
  const json::array* args = nullptr;
  for (const auto& d : *docs) {
    const auto* containers = d.is_object() ? at(d.as_object(), {"spec", "template", "spec", "containers"}) : nullptr;
    if (!containers || !containers->is_array()) continue;
    for (const auto& c : containers->as_array())
      if (c.is_object() && str(c.as_object().if_contains("name")) == container)
        if (const auto* a = c.as_object().if_contains("args"); a && a->is_array()) args = &a->as_array();
  }
  if (!args) return makeError(templateFile + " has no container " + container + " with args");
  std::vector<std::string> out;
  std::set<std::string> substituted;
  for (const auto& a : *args) {
    std::string arg = str(&a);
    const auto eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    if (auto it = substitutions.find(flag); it != substitutions.end() && eq != std::string::npos) {
      arg = flag + "=" + it->second;
      substituted.insert(flag);
    }
    out.push_back(arg);
  }
  for (const auto& [flag, value] : substitutions)
    if (!substituted.count(flag))
      return makeError("the chart no longer passes " + flag + "=... to " + container + " (" + templateFile +
                       "): update real_cluster.cpp");
  return out;
}

Status RealCluster::applyChartObjects(const std::string& templateFile) {
  const std::string path = dir_ + "/chart/" + templateFile;
  auto docs = yamlDocumentsToJson(readText(path), templateFile);
  if (!docs.ok()) return makeError("the rendered " + templateFile + ": " + docs.error().message);
  for (const auto& d : *docs) {
    if (!d.is_object() || d.as_object().empty()) continue;
    auto collection = collectionOf(d.as_object());
    if (!collection.ok()) return makeError(templateFile + ": " + collection.error().message);
    auto r = admin_->post(*collection, json::serialize(d));
    if (r.status != 201)
      return makeError("applying " + str(d.as_object().if_contains("kind")) + " " +
                       str(at(d.as_object(), {"metadata", "name"})) + " of " + templateFile + ": " + r.describe());
  }
  return {};
}

// ---- the components ----

Status RealCluster::startComponent(Component& c, const std::vector<std::string>& args,
                                   const std::function<bool()>& ready, const std::string& program,
                                   const std::map<std::string, std::string>& extraEnv) {
  if (c.process && c.process->running()) return makeError(c.name + " is already running");
  ProcessOptions o;
  o.program = program.empty() ? binary_ : program;
  if (program.empty()) o.args = {c.name};
  o.args.insert(o.args.end(), args.begin(), args.end());
  o.env = {{"PATH", "/usr/local/bin:/usr/bin:/bin"}, {"HOME", dir_}};
  o.env.insert(extraEnv.begin(), extraEnv.end());
  c.logFile = dir_ + "/" + c.name + "-" + std::to_string(++c.starts) + ".log";
  o.logFile = c.logFile;
  auto started = ChildProcess::start(std::move(o));
  if (!started.ok()) return makeError(c.name + ": " + started.error().message);
  c.process = std::move(started).value();
  const bool ok = waitFor([&] { return !c.process->running() || ready(); }, kStartTimeout);
  if (!c.process->running())
    return makeError(c.name + " (with Kubernetes " + kubernetesVersion_ + ") exited while starting; its log ends:\n" +
                     logTail(c.name, 60));
  if (!ok)
    return makeError(c.name + " (with Kubernetes " + kubernetesVersion_ + ") was not ready after " +
                     std::to_string(kStartTimeout.count()) + " s; its log ends:\n" + logTail(c.name, 60));
  return {};
}

void RealCluster::stopComponent(Component& c, bool graceful) {
  if (!c.process) return;
  if (graceful)
    c.process->stop(std::chrono::seconds(20));
  else
    c.process->kill();
}

Status RealCluster::startEtcd() {
  const std::string client = etcdUrl();
  const std::string peer = "http://127.0.0.1:" + std::to_string(etcdPeerPort_);
  // --unsafe-no-fsync: a test's etcd needs no durability across a machine crash (a killed
  // etcd keeps what reached the page cache), and fsync on a shared disk is what makes
  // apiserver requests slow there.
  const std::vector<std::string> args = {
      "--name=realk8s",
      "--data-dir=" + dir_ + "/etcd",
      "--listen-client-urls=" + client,
      "--advertise-client-urls=" + client,
      "--listen-peer-urls=" + peer,
      "--initial-advertise-peer-urls=" + peer,
      "--initial-cluster=realk8s=" + peer,
      "--unsafe-no-fsync",
  };
  return startComponent(component("etcd"), args, [&] {
    auto r = testing::TestHttpClient(etcdPort_).setTimeout(std::chrono::seconds(2)).get("/health");
    return r.status == 200 && r.body.find("\"health\":\"true\"") != std::string::npos;
  });
}

void RealCluster::stopEtcd(bool graceful) { stopComponent(component("etcd"), graceful); }

Status RealCluster::startApiServer() {
  const std::string pki = dir_ + "/pki/";
  std::vector<std::string> args = {
      "--etcd-servers=" + etcdUrl(),
      // The secure port only, on loopback (or every address for a real node's pods).
      "--bind-address=" + std::string(options_.listenOnHost ? "0.0.0.0" : "127.0.0.1"),
      "--secure-port=" + std::to_string(apiPort_),
      "--tls-cert-file=" + pki + "apiserver.crt",
      "--tls-private-key-file=" + pki + "apiserver.key",
      "--client-ca-file=" + pki + "ca.crt",
      // Every client is a static token: the admin (system:masters) and the daemons as the
      // chart's ServiceAccounts.
      "--token-auth-file=" + dir_ + "/tokens.csv",
      // As kubeadm sets it: the chart's RBAC is what lets the daemons in.
      "--authorization-mode=Node,RBAC",
      // Service-account tokens (the ServiceAccount admission plugin and TokenRequest).
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      "--service-account-key-file=" + pki + "sa.pub",
      "--service-account-signing-key-file=" + pki + "sa.key",
      "--service-cluster-ip-range=10.96.0.0/16",
      // A real node's kubelet is reached at its InternalIP (logs); its name does not resolve.
      "--kubelet-preferred-address-types=InternalIP",
      // The device plugin DaemonSet's pods are privileged.
      "--allow-privileged=true",
      // Compaction only when a test asks (compactEtcd), not every 5 minutes. Not 0: that
      // also stops the apiserver watching etcd's compact_rev_key, and its watch cache then
      // never learns of a compaction (it serves compacted versions from its snapshots).
      "--etcd-compaction-interval=24h",
      "--cert-dir=" + dir_ + "/apiserver-certs",
      "--v=2",
  };
  if (!options_.featureGates.empty()) args.push_back("--feature-gates=" + options_.featureGates);
  if (options_.listenOnHost) args.push_back("--advertise-address=" + hostAddress());
  return startComponent(component("kube-apiserver"), args, [&] {
    ApiClient probe(apiPort_, caFile(), tokens_["admin"], std::chrono::seconds(5));
    auto r = probe.get("/readyz");
    return r.status == 200;
  });
}

void RealCluster::stopApiServer(bool graceful) { stopComponent(component("kube-apiserver"), graceful); }

Status RealCluster::startKubeScheduler() {
  const std::string kc = dir_ + "/kube-scheduler.kubeconfig";
  // The chart runs `kube-scheduler --config=... --v=2`; in its pod the secure port is
  // 10259 and the delegated authentication and authorization use the in-cluster account.
  // Here the port is free on loopback and the same account comes from a kubeconfig.
  std::vector<std::string> args = {
      "--config=" + dir_ + "/kube-scheduler-config.yaml",
      "--v=2",
      "--bind-address=127.0.0.1",
      "--secure-port=" + std::to_string(kubeSchedulerPort_),
      "--authentication-kubeconfig=" + kc,
      "--authorization-kubeconfig=" + kc,
  };
  if (!options_.featureGates.empty()) args.push_back("--feature-gates=" + options_.featureGates);
  return startComponent(component("kube-scheduler"), args, [&] {
    auto r = testing::TestHttpClient(kubeSchedulerPort_, true).setTimeout(std::chrono::seconds(2)).get("/healthz");
    return r.status == 200;
  });
}

void RealCluster::stopKubeScheduler(bool graceful) { stopComponent(component("kube-scheduler"), graceful); }

Status RealCluster::restartEtcd(bool graceful) {
  stopEtcd(graceful);
  return startEtcd();
}
Status RealCluster::restartApiServer(bool graceful) {
  const auto t0 = std::chrono::steady_clock::now();
  stopApiServer(graceful);
  const auto t1 = std::chrono::steady_clock::now();
  if (auto s = startApiServer(); !s.ok()) return s;
  const auto t2 = std::chrono::steady_clock::now();
  std::fprintf(stderr, "realk8s: kube-apiserver stopped in %.1f s, ready again %.1f s later\n",
               std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count());
  return keepKubeSchedulerRunning();
}

Status RealCluster::keepKubeSchedulerRunning() {
  // kube-scheduler exits ("Leaderelection lost") when it cannot renew its Lease within the
  // renew deadline (10 s): an apiserver restart on a busy machine takes that long. In its
  // pod the kubelet starts it again; so does the harness. Either it renews the Lease with
  // the apiserver back, or it exits.
  auto& ks = component("kube-scheduler");
  if (!ks.process) return {};
  const std::string lease = std::string("/apis/coordination.k8s.io/v1/namespaces/") + kChartNamespace + "/leases/" +
                            schedulerName_;
  const auto renewTime = [&] {
    auto l = admin_->get(lease);
    return l.status == 200 ? str(at(l.json(), {"spec", "renewTime"})) : std::string();
  };
  const std::string before = renewTime();
  if (!waitFor([&] { return !ks.process->running() || renewTime() != before; }, std::chrono::seconds(20)))
    return makeError("kube-scheduler neither renewed its Lease nor exited after the apiserver came back; its log "
                     "ends:\n" + logTail("kube-scheduler"));
  if (ks.process->running()) return {};
  std::fprintf(stderr, "realk8s: kube-scheduler exited while the apiserver was away (%s); starting it again\n",
               tail(logTail("kube-scheduler", 1), 1).c_str());
  return startKubeScheduler();
}
Status RealCluster::restartKubeScheduler(bool graceful) {
  stopKubeScheduler(graceful);
  return startKubeScheduler();
}

Result<std::int64_t> RealCluster::compactEtcd(bool raw) {
  std::vector<std::string> args{"etcd-compact"};
  if (raw) args.push_back("-raw");
  args.push_back(etcdUrl());
  auto out = runTool(binary_, args, dir_ + "/etcd-compact.log",
                     {{"PATH", "/usr/bin:/bin"}, {"HOME", dir_}});
  if (!out.ok()) return std::move(out).error();
  // "compacted <revision>"
  const auto space = out->find(' ');
  if (out->rfind("compacted ", 0) != 0 || space == std::string::npos)
    return makeError("etcd-compact said: " + *out);
  return std::stoll(out->substr(space + 1));
}

// ---- vgpu ----

Status RealCluster::startVgpu() {
  if (auto s = startVgpuScheduler(); !s.ok()) return s;
  return registerWebhook();
}

Status RealCluster::startVgpuScheduler() {
  // The chart's arguments; only paths and the HTTPS listen address differ from the pod's
  // (--extender-listen is the chart's own, 127.0.0.1:<verbsPort>, set again here so that the
  // harness fails if the chart stops passing it).
  auto args = chartArgs("scheduler-deployment.yaml", "vgpu-scheduler",
                        {{"--config", deviceConfigPath()},
                         {"--listen", "127.0.0.1:" + std::to_string(webhookPort_)},
                         {"--extender-listen", "127.0.0.1:" + std::to_string(extenderPort_)},
                         {"--tls-cert", dir_ + "/pki/vgpu-scheduler.crt"},
                         {"--tls-key", dir_ + "/pki/vgpu-scheduler.key"}});
  if (!args.ok()) return std::move(args).error();
  // In the pod: in-cluster credentials, and the backends next to the binary.
  args->push_back("--kubeconfig=" + dir_ + "/vgpu-scheduler.kubeconfig");
  args->push_back("--backend-dir=" + std::string(paths::kBackendDir));
  const std::uint16_t port = webhookPort_;
  const auto t0 = std::chrono::steady_clock::now();
  auto s = startComponent(
      component("vgpu-scheduler"), *args,
      [port] {
        return testing::TestHttpClient(port, true).setTimeout(std::chrono::seconds(2)).get("/readyz").status == 200;
      },
      vgpuSchedulerBinary(), {{"POD_NAME", "vgpu-scheduler-realk8s"}});
  if (!s.ok()) return s;
  std::fprintf(stderr, "realk8s: vgpu-scheduler ready (/readyz) %.2f s after its start\n",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (const auto& [name, n] : vgpuNodes_)
    if (auto w = waitForVgpuSchedulerCache(name); !w.ok()) return w;
  return {};
}

void RealCluster::stopVgpuScheduler(bool graceful) { stopComponent(component("vgpu-scheduler"), graceful); }

std::string RealCluster::vgpuSchedulerBinary() {
  const char* other = std::getenv("VGPU_REALK8S_VGPU_SCHEDULER");
  return other && *other ? std::string(other) : std::string(paths::kVgpuScheduler);
}

ApiReply RealCluster::callVgpuScheduler(const std::string& path, const std::string& body) {
  // The verbs on their loopback listener (plain HTTP), everything else on the HTTPS one.
  const bool verb = path == "/filter" || path == "/prioritize" || path == "/bind";
  auto r = testing::TestHttpClient(verb ? extenderPort_ : webhookPort_, !verb)
               .setTimeout(std::chrono::seconds(30))
               .post(path, body);
  ApiReply out;
  out.status = r.status;
  out.body = r.body;
  out.error = r.error;
  return out;
}

bool RealCluster::vgpuSchedulerServing() {
  // The verbs' listener: it opens before the HTTPS one, and it is what kube-scheduler calls.
  return testing::TestHttpClient(extenderPort_).setTimeout(std::chrono::seconds(2)).get("/healthz").status == 200;
}

std::string RealCluster::vgpuSchedulerMetrics() {
  auto r = testing::TestHttpClient(webhookPort_, true).setTimeout(std::chrono::seconds(5)).get("/metrics");
  return r.status == 200 ? r.body : std::string();
}

std::optional<double> RealCluster::metricValue(const std::string& text, const std::string& seriesPrefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(seriesPrefix, 0) != 0) continue;
    // "name{labels} value": the prefix must end the series name or sit inside its labels.
    const auto space = line.rfind(' ');
    if (space == std::string::npos || space < seriesPrefix.size()) continue;
    try {
      return std::stod(line.substr(space + 1));
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

Status RealCluster::setNodeCacheCapable(bool on) {
  // The chart writes `nodeCacheCapable: true` into the one extender; only that changes.
  const std::string want = std::string("nodeCacheCapable: ") + (on ? "true" : "false");
  const std::string other = std::string("nodeCacheCapable: ") + (on ? "false" : "true");
  const auto at = schedulerConfig_.find(other);
  if (at == std::string::npos && schedulerConfig_.find(want) == std::string::npos)
    return makeError("the scheduler config has no `nodeCacheCapable:`: update real_cluster.cpp. The config:\n" +
                     schedulerConfig_);
  if (at != std::string::npos) schedulerConfig_.replace(at, other.size(), want);
  if (auto s = writeText(fs::path(dir_) / "kube-scheduler-config.yaml", schedulerConfig_); !s.ok()) return s;
  return restartKubeScheduler();
}

Status RealCluster::registerWebhook() {
  // The chart's MutatingWebhookConfiguration with one substitution per webhook: its
  // clientConfig names the Service vgpu-scheduler and the chart's CA; here it is the URL
  // https://127.0.0.1:<port><the service's path> and the harness's CA. Rules, selectors,
  // match conditions, failure policy and timeout are the chart's.
  auto docs = yamlDocumentsToJson(readText(dir_ + "/chart/scheduler-tls.yaml"), "scheduler-tls.yaml");
  if (!docs.ok()) return makeError("the rendered scheduler-tls.yaml: " + docs.error().message);
  const std::string caBundle = base64Encode(readText(caFile()));
  bool found = false;
  for (auto& d : *docs) {
    if (!d.is_object() || str(d.as_object().if_contains("kind")) != "MutatingWebhookConfiguration") continue;
    found = true;
    auto& webhooks = d.as_object()["webhooks"];
    if (!webhooks.is_array()) return makeError("the chart's MutatingWebhookConfiguration has no webhooks");
    for (auto& w : webhooks.as_array()) {
      if (!w.is_object()) continue;
      const std::string path = str(at(w.as_object(), {"clientConfig", "service", "path"}));
      w.as_object()["clientConfig"] = json::object{
          {"url", "https://127.0.0.1:" + std::to_string(webhookPort_) + path}, {"caBundle", caBundle}};
    }
    auto collection = collectionOf(d.as_object());
    if (!collection.ok()) return std::move(collection).error();
    auto r = admin_->post(*collection, json::serialize(d));
    if (r.status != 201 && r.status != 409) return makeError("registering the chart's webhook: " + r.describe());
  }
  if (!found) return makeError("the chart rendered no MutatingWebhookConfiguration (scheduler-tls.yaml)");
  // The apiserver picks the configuration up asynchronously: wait until a dry-run pod
  // that asks for a managed resource comes back mutated.
  if (countResources_.empty()) return {};
  const json::object probe{
      {"apiVersion", "v1"},
      {"kind", "Pod"},
      {"metadata", {{"name", "webhook-probe"}}},
      {"spec",
       {{"containers",
         json::array{json::object{{"name", "main"},
                                  {"image", "registry.k8s.io/pause:3.10"},
                                  {"resources", {{"limits", {{countResources_.front(), "1"}}}}}}}}}}};
  std::string last;
  if (!waitFor([&] {
        auto r = admin_->post("/api/v1/namespaces/default/pods?dryRun=All", json::serialize(probe));
        last = r.describe();
        return r.status == 201 && str(at(r.json(), {"spec", "schedulerName"})) == schedulerName_;
      }))
    return makeError("the chart's webhook never mutated a pod; the last dry run: " + last +
                     "\nvgpu-scheduler's log ends:\n" + logTail("vgpu-scheduler"));
  return {};
}

fakes::FakeKubelet& RealCluster::kubelet(const std::string& node) { return *vgpuNodes_.at(node)->kubelet; }

Status RealCluster::startVgpuAgent(const std::string& name, const AgentPaths& paths,
                                   const std::map<std::string, std::string>& env) {
  auto args = chartArgs("device-plugin-daemonset.yaml", "vgpu-device-plugin",
                        {{"--config", deviceConfigPath()},
                         {"--device-plugin-dir", paths.devicePluginDir},
                         {"--pod-resources-socket", paths.podResourcesSocket},
                         {"--metrics-address", "127.0.0.1:0"},
                         {"--state-dir", paths.stateDir},
                         // As root on this machine, a tmpfs per container would be mounted on the
                         // host and outlive an agent a scenario kills (the mounts are tested in
                         // private namespaces: folder_tmpfs_test).
                         {"--region-tmpfs", "off"}});
  if (!args.ok()) return std::move(args).error();
  std::string kc = dir_ + "/vgpu-device-plugin.kubeconfig";
  if (const auto via = agentApiPorts_.find(name); via != agentApiPorts_.end()) {
    kc = dir_ + "/vgpu-device-plugin@" + name + ".kubeconfig";
    if (auto s = writeText(kc, kubeconfig(via->second, caFile(), "vgpu-device-plugin", tokens_["vgpu-device-plugin"]));
        !s.ok())
      return s;
  }
  args->push_back("--kubeconfig=" + kc);
  args->push_back("--backend-dir=" + std::string(paths::kBackendDir));
  Component& agent = componentSlot("vgpu-device-plugin@" + name);
  return startComponent(
      agent, *args,
      [&] {
        const std::string log = readText(agent.logFile);
        const auto at = log.rfind("vgpu-device-plugin: serving");
        return at != std::string::npos && log.find('\n', at) != std::string::npos;
      },
      paths::kVgpuAgent, [&] {
        auto all = env;
        all["NODE_NAME"] = name;
        return all;
      }());
}

void RealCluster::stopVgpuAgent(const std::string& name, bool graceful) {
  if (auto c = components_.find("vgpu-device-plugin@" + name); c != components_.end()) stopComponent(*c->second, graceful);
}

Status RealCluster::startVgpuDraPlugin(const std::string& name, const std::string& stateDir) {
  if (!draObjectsApplied_) {
    if (auto s = applyChartObjects("dra-rbac.yaml"); !s.ok()) return s;
    if (auto s = applyChartObjects("dra-deviceclasses.yaml"); !s.ok()) return s;
    draObjectsApplied_ = true;
  }
  auto args = chartArgs("dra-plugin-daemonset.yaml", "vgpu-dra-plugin",
                        {{"--config", deviceConfigPath()},
                         {"--state-dir", stateDir},
                         {"--metrics-address", "127.0.0.1:" + std::to_string(freePort())},
                         // As for vgpu-device-plugin: no host tmpfs that outlives a killed plugin.
                         {"--region-tmpfs", "off"}});
  if (!args.ok()) return std::move(args).error();
  args->push_back("--kubeconfig=" + dir_ + "/vgpu-dra-plugin.kubeconfig");
  args->push_back("--backend-dir=" + std::string(paths::kBackendDir));
  Component& plugin = componentSlot("vgpu-dra-plugin@" + name);
  return startComponent(
      plugin, *args,
      [&] {
        // The driver's registration accepted by the kubelet (GetInfo, then NotifyRegistrationStatus).
        const std::string log = readText(plugin.logFile);
        return log.find("registered with the kubelet") != std::string::npos;
      },
      paths::kVgpuDraPlugin, {{"NODE_NAME", name}});
}

void RealCluster::stopVgpuDraPlugin(const std::string& name, bool graceful) {
  if (auto c = components_.find("vgpu-dra-plugin@" + name); c != components_.end()) stopComponent(*c->second, graceful);
}

Status RealCluster::restartVgpuAgent(const std::string& name, bool graceful) {
  const auto it = vgpuNodes_.find(name);
  if (it == vgpuNodes_.end()) return makeError("no vgpu node " + name);
  stopVgpuAgent(name, graceful);
  const VgpuNode& node = *it->second;
  return startVgpuAgent(name, {.devicePluginDir = node.pluginDir().string(),
                               .podResourcesSocket = node.podResourcesSocket().string(),
                               .stateDir = (node.dir / "state").string()});
}

void RealCluster::routeAgentApi(const std::string& node, std::uint16_t port) { agentApiPorts_[node] = port; }

int RealCluster::componentPid(const std::string& name) const { return std::max(pidOf(name), 0); }

Status RealCluster::addVgpuNode(const std::string& name, const std::map<std::string, std::string>& labels) {
  if (vgpuNodes_.count(name)) return makeError("node " + name + " exists");
  if (auto s = createNode(name, {}, labels); !s.ok()) return s;
  auto n = std::make_unique<VgpuNode>();
  n->name = name;
  n->dir = fs::path(dir_) / "nodes" / name;
  std::error_code ec;
  fs::create_directories(n->pluginDir(), ec);
  fs::create_directories(n->podResourcesSocket().parent_path(), ec);
  fakes::FakeKubeletOptions ko;
  ko.devicePluginDir = n->pluginDir().string();
  ko.podResourcesSocket = n->podResourcesSocket().string();
  auto k = fakes::FakeKubelet::start(ko);
  if (!k.ok()) return makeError("the kubelet double of " + name + ": " + k.error().message);
  n->kubelet = std::move(k).value();
  VgpuNode& node = *n;
  vgpuNodes_[name] = std::move(n);

  if (auto s = startVgpuAgent(name, {.devicePluginDir = node.pluginDir().string(),
                                     .podResourcesSocket = node.podResourcesSocket().string(),
                                     .stateDir = (node.dir / "state").string()});
      !s.ok())
    return s;
  if (auto s = publishDeviceCapacity(node); !s.ok()) return s;
  return waitForVgpuInventory(name);
}

Status RealCluster::waitForVgpuInventory(const std::string& name) {
  const std::string componentName = "vgpu-device-plugin@" + name;
  for (const auto& backend : enabledBackends_) {
    const std::string key = keys::nodeDevices(backend);
    if (!waitFor([&] {
          auto node = getObject("/api/v1/nodes/" + name);
          return node.ok() && !str(at(*node, {"metadata", "annotations", key.c_str()})).empty();
        }))
      return makeError("Node " + name + " never got " + key + "; vgpu-device-plugin's log ends:\n" +
                       logTail(componentName));
  }
  const auto& scheduler = component("vgpu-scheduler");
  if (scheduler.process && scheduler.process->running()) return waitForVgpuSchedulerCache(name);
  return {};
}

Status RealCluster::publishDeviceCapacity(VgpuNode& node) {
  // The kubelet's part: the plugins register and send their devices, and the Node's
  // capacity and allocatable show the healthy ones.
  json::object quantities;
  for (const auto& resource : countResources_) {
    const auto anyHealthy = [](const std::vector<fakes::KubeletDevice>& list) {
      return std::any_of(list.begin(), list.end(), [](const auto& d) { return d.healthy; });
    };
    if (!node.kubelet->waitForDevices(resource, kWait, anyHealthy))
      return makeError("no " + resource + " devices reached the kubelet double of " + node.name +
                       "; vgpu-device-plugin's log ends:\n" + logTail("vgpu-device-plugin@" + node.name));
    const auto devices = node.kubelet->devices(resource);
    quantities[resource] =
        std::to_string(std::count_if(devices.begin(), devices.end(), [](const auto& d) { return d.healthy; }));
  }
  const json::object status{{"status", {{"capacity", quantities}, {"allocatable", quantities}}}};
  if (auto r = admin_->patch("/api/v1/nodes/" + node.name + "/status", json::serialize(status)); r.status != 200)
    return makeError("the device counts of Node " + node.name + ": " + r.describe());
  return {};
}

Status RealCluster::removeVgpuNode(const std::string& name) {
  const auto it = vgpuNodes_.find(name);
  if (it == vgpuNodes_.end()) return makeError("no vgpu node " + name);
  if (auto c = components_.find("vgpu-device-plugin@" + name); c != components_.end()) {
    if (c->second->process) c->second->process->kill();
    components_.erase(c);
  }
  it->second->kubelet->stop();
  vgpuNodes_.erase(it);
  auto r = admin_->del("/api/v1/nodes/" + name);
  if (r.status != 200 && r.status != 404) return makeError("DELETE Node " + name + ": " + r.describe());
  return {};
}

Result<std::size_t> RealCluster::restartKubelet(const std::string& name) {
  const auto it = vgpuNodes_.find(name);
  if (it == vgpuNodes_.end()) return makeError("no vgpu node " + name);
  VgpuNode& node = *it->second;
  const std::size_t before = node.kubelet->registrations().size();
  std::map<std::string, std::size_t> lists;
  for (const auto& resource : countResources_) lists[resource] = node.kubelet->listsReceived(resource);
  if (auto s = node.kubelet->restart(); !s.ok())
    return makeError("restarting the kubelet double: " + s.error().message);
  // Registered again (each resource), and a device list sent since.
  const auto registeredAgain = [&] {
    std::set<std::string> again;
    const auto all = node.kubelet->registrations();
    for (std::size_t i = before; i < all.size(); ++i) again.insert(all[i].resource);
    for (const auto& resource : countResources_)
      if (!again.count(resource) || node.kubelet->listsReceived(resource) <= lists[resource]) return false;
    return true;
  };
  if (!waitFor(registeredAgain))
    return makeError("vgpu-device-plugin on " + name + " did not register again after the kubelet restarted; its " +
                     "log ends:\n" + logTail("vgpu-device-plugin@" + name));
  if (auto s = publishDeviceCapacity(node); !s.ok()) return s.error();
  return node.kubelet->registrations().size();
}

Status RealCluster::waitForVgpuSchedulerCache(const std::string& node) {
  // The per-device capacity gauge lists a node's devices once the cache holds the node's
  // inventory (published whole, in one annotation): from then on the filter can place there.
  std::string last;
  const std::string label = "node=\"" + node + "\"";
  if (!waitFor([&] {
        auto r = testing::TestHttpClient(webhookPort_, true).setTimeout(std::chrono::seconds(5)).get("/metrics");
        last = r.body;
        std::istringstream lines(r.body);
        for (std::string line; std::getline(lines, line);)
          if (line.rfind("vgpu_device_memory_capacity_bytes{", 0) == 0 && line.find(label) != std::string::npos)
            return true;
        return false;
      }))
    return makeError("vgpu-scheduler's cache never showed the devices of " + node + "; its metrics:\n" + last);
  return {};
}

Result<fakes::AdmitResult> RealCluster::admitPod(const std::string& ns, const std::string& name) {
  auto pod = getObject("/api/v1/namespaces/" + ns + "/pods/" + name);
  if (!pod.ok()) return std::move(pod).error();
  return admitPod(*pod);
}

Result<fakes::AdmitResult> RealCluster::admitPod(const boost::json::object& pod) {
  const std::string ns = str(at(pod, {"metadata", "namespace"}));
  const std::string name = str(at(pod, {"metadata", "name"}));
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
  const std::string nodeName = str(at(pod, {"spec", "nodeName"}));
  const auto it = vgpuNodes_.find(nodeName);
  if (it == vgpuNodes_.end()) return makeError("pod " + ns + "/" + name + " is on '" + nodeName + "', no vgpu node");
  auto info = parsePod(json::value(pod));
  if (!info.ok()) return std::move(info).error();
  {
    // A pod the kubelet stopped for its deletion is never started again (a caller holding an
    // older copy of it would otherwise make the double hold its devices for good).
    std::lock_guard lock(stoppedMu_);
    if (stoppedUids_.count(info->uid)) return makeError("pod " + ns + "/" + name + " was deleted (deletePod)");
  }
  const fakes::KubeletPod kp = fakes::kubeletPodOf(*info);
  fakes::AdmitResult result = it->second->kubelet->admit(kp);
  if (result.admitted) {
    if (auto r = admin_->patch(path + "/status", R"({"status":{"phase":"Running"}})"); r.status != 200)
      return makeError("reporting " + ns + "/" + name + " Running: " + r.describe());
  } else {
    // As the kubelet rejects a pod whose Allocate failed: Failed, UnexpectedAdmissionError;
    // it holds no device from then on (the agent stops waiting for it, vgpu-scheduler frees it).
    const json::object status{{"status", {{"phase", "Failed"}, {"reason", "UnexpectedAdmissionError"},
                                          {"message", result.error}}}};
    admin_->patch(path + "/status", json::serialize(status));
  }
  return result;
}

Result<std::vector<e2e::AuditNode>> RealCluster::auditNodes(const std::vector<std::string>& nodeNames) {
  std::vector<e2e::AuditNode> nodes;
  for (const auto& name : nodeNames) {
    auto node = getObject("/api/v1/nodes/" + name);
    if (!node.ok()) return std::move(node).error();
    e2e::AuditNode n{name, {}};
    for (const auto& backend : enabledBackends_) {
      const std::string key = keys::nodeDevices(backend);
      auto devices = decodeInventory(str(at(*node, {"metadata", "annotations", key.c_str()})), backend);
      if (!devices.ok()) return makeError("Node " + name + " " + key + ": " + devices.error().message);
      n.devices.insert(n.devices.end(), devices->begin(), devices->end());
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

Result<std::vector<std::string>> RealCluster::audit(const std::vector<std::string>& nodeNames) {
  auto nodes = auditNodes(nodeNames);
  if (!nodes.ok()) return std::move(nodes).error();
  std::map<std::string, e2e::KubeletHoldings> holdings;
  for (const auto& name : nodeNames)
    if (const auto it = vgpuNodes_.find(name); it != vgpuNodes_.end())
      holdings[name] = it->second->kubelet->allocations();
  std::vector<e2e::AuditPod> pods;
  const std::set<std::string> counts(countResources_.begin(), countResources_.end());
  for (const auto& name : nodeNames) {
    auto list = getObject("/api/v1/pods?fieldSelector=spec.nodeName%3D" + name);
    if (!list.ok()) return std::move(list).error();
    const auto* items = list->if_contains("items");
    if (!items || !items->is_array()) continue;
    for (const auto& item : items->as_array()) {
      auto info = parsePod(item);
      if (!info.ok() || info->nodeName != name || info->terminated()) continue;
      const std::string annotation = info->annotations.count(std::string(keys::kPodAssignment))
                                         ? info->annotations.at(std::string(keys::kPodAssignment))
                                         : std::string();
      // A pod that asks for no device and holds none is none of the audits' business.
      bool asks = false;
      for (const auto& c : info->containers)
        for (const auto& [resource, n] : c.limits) asks = asks || (counts.count(resource) && n > 0);
      if (!asks && annotation.empty()) continue;
      std::optional<Assignment> assignment;
      if (auto a = decodeAssignment(annotation); a.ok()) assignment = std::move(a).value();
      pods.push_back({info->key(), info->uid, info->nodeName, std::move(assignment)});
    }
  }
  std::vector<std::string> out = e2e::auditShares(*nodes, pods);
  const auto agreement = e2e::auditKubeletAgreement(holdings, pods);
  out.insert(out.end(), agreement.begin(), agreement.end());
  return out;
}

// ---- the API ----

Result<boost::json::object> RealCluster::getObject(const std::string& path) {
  auto r = admin_->get(path);
  if (r.status != 200) return makeError("GET " + path + ": " + r.describe());
  return r.json();
}

Status RealCluster::createNamespace(const std::string& name) {
  const json::object ns{{"apiVersion", "v1"}, {"kind", "Namespace"}, {"metadata", {{"name", name}}}};
  if (auto r = admin_->post("/api/v1/namespaces", json::serialize(ns)); r.status != 201 && r.status != 409)
    return makeError("creating namespace " + name + ": " + r.describe());
  const json::object sa{{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "default"}}}};
  if (auto r = admin_->post("/api/v1/namespaces/" + name + "/serviceaccounts", json::serialize(sa));
      r.status != 201 && r.status != 409)
    return makeError("creating " + name + "/default ServiceAccount: " + r.describe());
  return {};
}

Status RealCluster::createNode(const std::string& name, std::map<std::string, std::string> capacity,
                               const std::map<std::string, std::string>& labels,
                               const std::map<std::string, std::string>& annotations) {
  if (capacity.empty()) capacity = {{"cpu", "8"}, {"memory", "32Gi"}, {"pods", "110"}};
  json::object nodeLabels{{"kubernetes.io/hostname", name}};
  for (const auto& [k, v] : labels) nodeLabels[k] = v;
  json::object metadata{{"name", name}, {"labels", std::move(nodeLabels)}};
  if (!annotations.empty()) {
    json::object a;
    for (const auto& [k, v] : annotations) a[k] = v;
    metadata["annotations"] = std::move(a);
  }
  const json::object node{{"apiVersion", "v1"}, {"kind", "Node"}, {"metadata", std::move(metadata)}};
  if (auto r = admin_->post("/api/v1/nodes", json::serialize(node)); r.status != 201)
    return makeError("creating Node " + name + ": " + r.describe());
  // Admission (TaintNodesByCondition) gave it node.kubernetes.io/not-ready:NoSchedule.
  if (auto r = admin_->patch("/api/v1/nodes/" + name, R"({"spec":{"taints":null}})"); r.status != 200)
    return makeError("untainting Node " + name + ": " + r.describe());
  json::object quantities;
  for (const auto& [k, v] : capacity) quantities[k] = v;
  const std::string now = nowRfc3339();
  const json::object status{
      {"status",
       {{"capacity", quantities},
        {"allocatable", quantities},
        {"conditions", json::array{json::object{{"type", "Ready"},
                                                {"status", "True"},
                                                {"reason", "KubeletReady"},
                                                {"message", "the realk8s harness stands in for the kubelet"},
                                                {"lastHeartbeatTime", now},
                                                {"lastTransitionTime", now}}}},
        {"nodeInfo", {{"kubeletVersion", kubernetesVersion_}, {"architecture", "amd64"}, {"operatingSystem", "linux"}}},
        {"addresses", json::array{json::object{{"type", "InternalIP"}, {"address", "127.0.0.1"}},
                                  json::object{{"type", "Hostname"}, {"address", name}}}}}}};
  if (auto r = admin_->patch("/api/v1/nodes/" + name + "/status", json::serialize(status)); r.status != 200)
    return makeError("the status of Node " + name + ": " + r.describe());
  return {};
}

Status RealCluster::deletePod(const std::string& ns, const std::string& name) {
  const std::string path = "/api/v1/namespaces/" + ns + "/pods/" + name;
  std::string uid, nodeName;
  if (auto pod = admin_->get(path); pod.status == 200) {
    uid = str(at(pod.json(), {"metadata", "uid"}));
    nodeName = str(at(pod.json(), {"spec", "nodeName"}));
  }
  // As in a graceful deletion, the kubelet has stopped the pod (its devices are free) before
  // the object goes; a pod placed in the freed capacity is admitted after that.
  if (!uid.empty()) {
    std::lock_guard lock(stoppedMu_);
    stoppedUids_.insert(uid);
  }
  if (const auto it = vgpuNodes_.find(nodeName); it != vgpuNodes_.end() && !uid.empty())
    it->second->kubelet->removePod(uid);
  auto r = admin_->del(path, R"({"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0})");
  if (r.status != 200 && r.status != 404) return makeError("DELETE " + path + ": " + r.describe());
  if (!waitFor([&] { return admin_->get(path).status == 404; }))
    return makeError("pod " + ns + "/" + name + " was still there " + std::to_string(kWait.count()) +
                     " s after its deletion");
  return {};
}

bool RealCluster::waitFor(const std::function<bool()>& cond, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    if (cond()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

}  // namespace vgpu::realk8s
