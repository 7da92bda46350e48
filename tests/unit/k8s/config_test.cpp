// Kubeconfig and in-cluster configuration, including the errors a person sees for bad files.

#include <map>

#include "test_support.h"
#include "vgpu/codec/base64.h"
#include "vgpu/k8s/config.h"

namespace vgpu::k8s {
namespace {

using testing::TempDir;

constexpr const char* kCaPem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

std::string base64(const std::string& in) { return base64Encode(in); }

EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars](const std::string& k) -> std::optional<std::string> {
    auto it = vars.find(k);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string twoContexts() {
  return "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
         "clusters:\n"
         "- name: prod-cluster\n  cluster:\n    server: https://10.0.0.1:6443\n"
         "    certificate-authority-data: " + base64(kCaPem) + "\n"
         "- name: dev-cluster\n  cluster:\n    server: https://dev.example:443\n"
         "    insecure-skip-tls-verify: true\n    tls-server-name: kubernetes.default.svc\n"
         "users:\n"
         "- name: admin\n  user:\n    token: abc.def\n"
         "- name: dev\n  user:\n    token: dev-token\n"
         "contexts:\n"
         "- name: prod\n  context:\n    cluster: prod-cluster\n    user: admin\n"
         "- name: dev\n  context:\n    cluster: dev-cluster\n    user: dev\n    namespace: sandbox\n";
}

TEST(K8sConfig, ReadsTheCurrentContextOfAKubeconfig) {
  TempDir dir;
  auto path = dir.write("config", twoContexts());
  auto cfg = loadKubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->caPem, kCaPem);
  EXPECT_EQ(cfg->bearerToken, "abc.def");
  EXPECT_EQ(cfg->defaultNamespace, "default");
  EXPECT_FALSE(cfg->insecureSkipTlsVerify);
  EXPECT_NE(cfg->source.find(path), std::string::npos);
}

TEST(K8sConfig, AnExplicitContextWins) {
  TempDir dir;
  auto cfg = loadKubeconfig(dir.write("config", twoContexts()), "dev");
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://dev.example:443");
  EXPECT_TRUE(cfg->insecureSkipTlsVerify);
  EXPECT_EQ(cfg->tlsServerName, "kubernetes.default.svc");
  EXPECT_EQ(cfg->bearerToken, "dev-token");
  EXPECT_EQ(cfg->defaultNamespace, "sandbox");
}

TEST(K8sConfig, ResolvesFilesRelativeToTheKubeconfig) {
  TempDir dir;
  dir.write("pki/ca.crt", kCaPem);
  dir.write("pki/client.crt", "-----BEGIN CERTIFICATE-----\nC\n-----END CERTIFICATE-----\n");
  dir.write("pki/client.key", "-----BEGIN PRIVATE KEY-----\nK\n-----END PRIVATE KEY-----\n");
  dir.write("token", "file-token\n");
  auto path = dir.write("config",
                        "current-context: c\n"
                        "clusters: [{name: k, cluster: {server: 'https://[::1]:6443', certificate-authority: pki/ca.crt}}]\n"
                        "users: [{name: u, user: {tokenFile: token, client-certificate: pki/client.crt, client-key: pki/client.key}}]\n"
                        "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
  auto cfg = loadKubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://[::1]:6443");
  EXPECT_EQ(cfg->caPem, kCaPem);
  EXPECT_EQ(cfg->tokenFile, dir.path() + "/token");
  EXPECT_EQ(cfg->bearerToken, "file-token");
  EXPECT_NE(cfg->clientCertPem.find("BEGIN CERTIFICATE"), std::string::npos);
  EXPECT_NE(cfg->clientKeyPem.find("BEGIN PRIVATE KEY"), std::string::npos);
}

TEST(K8sConfig, DecodesClientCertificateData) {
  TempDir dir;
  std::string cert = "-----BEGIN CERTIFICATE-----\nXYZ\n-----END CERTIFICATE-----\n";
  std::string key = "-----BEGIN EC PRIVATE KEY-----\nAB\n-----END EC PRIVATE KEY-----\n";
  auto cfg = loadKubeconfig(dir.write(
      "config", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://h:1'}}]\n"
                "users: [{name: u, user: {client-certificate-data: " + base64(cert) +
                    ", client-key-data: " + base64(key) + "}}]\n"
                "contexts: [{name: c, context: {cluster: k, user: u}}]\n"));
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->clientCertPem, cert);
  EXPECT_EQ(cfg->clientKeyPem, key);
}

struct BadKubeconfig {
  const char* description;
  std::string content;
  std::string context;
  std::vector<std::string> mustMention;
};

TEST(K8sConfig, BadKubeconfigsNameTheFileAndTheKey) {
  const std::string good_cluster = "clusters: [{name: k, cluster: {server: 'https://h:1'}}]\n";
  const std::string good_context = "contexts: [{name: c, context: {cluster: k, user: u}}]\n";
  const std::vector<BadKubeconfig> cases = {
      {"not YAML", "clusters: [unclosed\n", "", {"not valid YAML", "line"}},
      {"no current context", good_cluster, "", {"current-context"}},
      {"unknown context", "current-context: nope\n" + good_cluster + good_context, "",
       {"\"nope\"", "contexts"}},
      {"context without cluster", "current-context: c\ncontexts: [{name: c, context: {user: u}}]\n", "",
       {"contexts[name=c].context.cluster is missing"}},
      {"unknown cluster", "current-context: c\ncontexts: [{name: c, context: {cluster: zz}}]\n", "",
       {"\"zz\"", "clusters"}},
      {"missing server", "current-context: c\nclusters: [{name: k, cluster: {}}]\n" + good_context +
                             "users: [{name: u, user: {}}]\n", "",
       {"clusters[name=k].cluster.server is missing"}},
      {"server not a URL", "current-context: c\nclusters: [{name: k, cluster: {server: h:1}}]\n" +
                               good_context + "users: [{name: u, user: {}}]\n", "",
       {"clusters[name=k].cluster.server", "https://"}},
      {"bad CA base64", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://h:1', "
                        "certificate-authority-data: '!!notbase64'}}]\n" + good_context +
                            "users: [{name: u, user: {}}]\n", "",
       {"certificate-authority-data: not base64: unexpected character '!' at position 0"}},
      {"missing CA file", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://h:1', "
                          "certificate-authority: nowhere/ca.crt}}]\n" + good_context +
                              "users: [{name: u, user: {}}]\n", "",
       {"cluster.certificate-authority", "nowhere/ca.crt", "does not exist"}},
      {"exec without command", "current-context: c\n" + good_cluster + good_context +
                                   "users: [{name: u, user: {exec: {apiVersion: "
                                   "client.authentication.k8s.io/v1, interactiveMode: Never}}}]\n", "",
       {"users[name=u].user.exec.command is missing"}},
      {"exec without apiVersion", "current-context: c\n" + good_cluster + good_context +
                                      "users: [{name: u, user: {exec: {command: aws}}}]\n", "",
       {"users[name=u].user.exec.apiVersion is missing"}},
      {"exec v1alpha1", "current-context: c\n" + good_cluster + good_context +
                            "users: [{name: u, user: {exec: {command: aws, apiVersion: "
                            "client.authentication.k8s.io/v1alpha1}}}]\n", "",
       {"exec.apiVersion \"client.authentication.k8s.io/v1alpha1\" is not supported"}},
      {"exec v1 without interactiveMode", "current-context: c\n" + good_cluster + good_context +
                                              "users: [{name: u, user: {exec: {command: aws, apiVersion: "
                                              "client.authentication.k8s.io/v1}}}]\n", "",
       {"exec.interactiveMode is missing"}},
      {"exec interactive Always", "current-context: c\n" + good_cluster + good_context +
                                      "users: [{name: u, user: {exec: {command: aws, apiVersion: "
                                      "client.authentication.k8s.io/v1, interactiveMode: Always}}}]\n", "",
       {"exec.interactiveMode is Always", "no terminal"}},
      {"exec env without name", "current-context: c\n" + good_cluster + good_context +
                                    "users: [{name: u, user: {exec: {command: aws, apiVersion: "
                                    "client.authentication.k8s.io/v1beta1, env: [{value: x}]}}}]\n", "",
       {"exec.env[0].name is missing"}},
      {"exec args not a list", "current-context: c\n" + good_cluster + good_context +
                                   "users: [{name: u, user: {exec: {command: aws, apiVersion: "
                                   "client.authentication.k8s.io/v1beta1, args: x}}}]\n", "",
       {"exec.args must be a list"}},
      {"auth-provider", "current-context: c\n" + good_cluster + good_context +
                            "users: [{name: u, user: {auth-provider: {name: gcp}}}]\n", "",
       {"users[name=u].user.auth-provider is not supported"}},
      {"cert without key", "current-context: c\n" + good_cluster + good_context +
                               "users: [{name: u, user: {client-certificate-data: " +
                               base64("-----BEGIN CERTIFICATE-----\n") + "}}]\n", "",
       {"client-certificate and client-key must be given together"}},
      {"clusters not a list", "current-context: c\nclusters: {a: b}\n", "", {"clusters must be a list"}},
      {"entry without name", "current-context: c\nclusters: [{cluster: {}}]\n" + good_context, "",
       {"clusters[0].name is missing"}},
      {"insecure not a bool", "current-context: c\nclusters: [{name: k, cluster: {server: 'https://h:1', "
                              "insecure-skip-tls-verify: maybe}}]\n" + good_context +
                                  "users: [{name: u, user: {}}]\n", "",
       {"insecure-skip-tls-verify must be true or false"}},
  };
  for (const auto& c : cases) {
    TempDir dir;
    auto path = dir.write("kubeconfig.yaml", c.content);
    auto cfg = loadKubeconfig(path, c.context);
    ASSERT_FALSE(cfg) << c.description;
    EXPECT_NE(cfg.error().message.find(path), std::string::npos)
        << c.description << ": " << cfg.error().message;
    for (const auto& m : c.mustMention) {
      EXPECT_NE(cfg.error().message.find(m), std::string::npos)
          << c.description << ": \"" << cfg.error().message << "\" lacks \"" << m << "\"";
    }
  }
}

TEST(K8sConfig, ReadsAnExecPlugin) {
  TempDir dir;
  auto path = dir.write("kube/config",
                        "current-context: eks\n"
                        "clusters: [{name: k, cluster: {server: 'https://h:1'}}]\n"
                        "contexts: [{name: eks, context: {cluster: k, user: u}}]\n"
                        "users:\n"
                        "- name: u\n"
                        "  user:\n"
                        "    exec:\n"
                        "      apiVersion: client.authentication.k8s.io/v1\n"
                        "      command: ./bin/get-token\n"
                        "      args: [eks, get-token, --cluster-name, prod]\n"
                        "      env: [{name: AWS_PROFILE, value: ops}, {name: EMPTY, value: null}]\n"
                        "      installHint: install the AWS CLI\n"
                        "      provideClusterInfo: true\n"
                        "      interactiveMode: Never\n");
  auto cfg = loadKubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  ASSERT_TRUE(cfg->exec);
  EXPECT_EQ(cfg->exec->command, dir.path() + "/kube/./bin/get-token") << "relative to the file";
  EXPECT_EQ(cfg->exec->args, (std::vector<std::string>{"eks", "get-token", "--cluster-name", "prod"}));
  ASSERT_EQ(cfg->exec->env.size(), 2u);
  EXPECT_EQ(cfg->exec->env[0], (std::pair<std::string, std::string>{"AWS_PROFILE", "ops"}));
  EXPECT_EQ(cfg->exec->env[1], (std::pair<std::string, std::string>{"EMPTY", ""}));
  EXPECT_EQ(cfg->exec->apiVersion, "client.authentication.k8s.io/v1");
  EXPECT_EQ(cfg->exec->installHint, "install the AWS CLI");
  EXPECT_TRUE(cfg->exec->provideClusterInfo);
  EXPECT_EQ(cfg->exec->interactiveMode, "Never");
  EXPECT_TRUE(cfg->bearerToken.empty());
}

TEST(K8sConfig, ExecPluginV1beta1DefaultsToIfAvailableAndABareCommandStaysForPath) {
  TempDir dir;
  auto path = dir.write("config",
                        "current-context: c\n"
                        "clusters: [{name: k, cluster: {server: 'https://h:1'}}]\n"
                        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                        "users: [{name: u, user: {exec: {command: gke-gcloud-auth-plugin, "
                        "apiVersion: client.authentication.k8s.io/v1beta1}}}]\n");
  auto cfg = loadKubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  ASSERT_TRUE(cfg->exec);
  EXPECT_EQ(cfg->exec->command, "gke-gcloud-auth-plugin");
  EXPECT_EQ(cfg->exec->interactiveMode, "IfAvailable");
  EXPECT_FALSE(cfg->exec->provideClusterInfo);
}

TEST(K8sConfig, AStaticTokenBesideAnExecPluginWinsAsInClientGo) {
  TempDir dir;
  auto path = dir.write("config",
                        "current-context: c\n"
                        "clusters: [{name: k, cluster: {server: 'https://h:1'}}]\n"
                        "contexts: [{name: c, context: {cluster: k, user: u}}]\n"
                        "users: [{name: u, user: {token: static, exec: {command: aws, "
                        "apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never}}}]\n");
  auto cfg = loadKubeconfig(path);
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_FALSE(cfg->exec);
  EXPECT_EQ(cfg->bearerToken, "static");
}

TEST(K8sConfig, AMissingKubeconfigNamesThePath) {
  auto cfg = loadKubeconfig("/nonexistent/vgpu/kubeconfig");
  ASSERT_FALSE(cfg);
  EXPECT_NE(cfg.error().message.find("/nonexistent/vgpu/kubeconfig"), std::string::npos);
}

TEST(K8sConfig, KubeconfigEnvListMergesWithTheFirstFileWinning) {
  TempDir dir;
  auto first = dir.write("a", "current-context: c\n"
                              "clusters: [{name: k, cluster: {server: 'https://first:1'}}]\n");
  auto second = dir.write("b", "current-context: other\n"
                               "clusters: [{name: k, cluster: {server: 'https://second:1'}}]\n"
                               "users: [{name: u, user: {token: t2}}]\n"
                               "contexts: [{name: c, context: {cluster: k, user: u}}]\n");
  auto cfg = loadKubeconfigFromEnv("", envOf({{"KUBECONFIG", first + ":/missing:" + second}}));
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://first:1");
  EXPECT_EQ(cfg->bearerToken, "t2");
  auto home = loadKubeconfigFromEnv("", envOf({{"HOME", dir.path()}}));
  ASSERT_FALSE(home);
  EXPECT_NE(home.error().message.find(dir.path() + "/.kube/config"), std::string::npos);
}

TEST(K8sConfig, InClusterReadsTheServiceAccount) {
  TempDir sa;
  sa.write("token", "jwt-token\n");
  sa.write("ca.crt", kCaPem);
  sa.write("namespace", "kube-system");
  auto cfg = loadInClusterConfig(envOf({{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                                        {"KUBERNETES_SERVICE_PORT", "443"}}),
                                 sa.path());
  ASSERT_TRUE(cfg) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->bearerToken, "jwt-token");
  EXPECT_EQ(cfg->tokenFile, sa.path() + "/token") << "kept so rotation is picked up";
  EXPECT_EQ(cfg->caPem, kCaPem);
  EXPECT_EQ(cfg->defaultNamespace, "kube-system");
  auto v6 = loadInClusterConfig(envOf({{"KUBERNETES_SERVICE_HOST", "fd00::1"},
                                       {"KUBERNETES_SERVICE_PORT", "6443"}}),
                                sa.path());
  ASSERT_TRUE(v6);
  EXPECT_EQ(v6->server, "https://[fd00::1]:6443");
}

TEST(K8sConfig, InClusterProblemsAreNamed) {
  TempDir sa;
  auto noEnv = loadInClusterConfig(envOf({}), sa.path());
  ASSERT_FALSE(noEnv);
  EXPECT_NE(noEnv.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  auto env = envOf({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "https"}});
  auto badPort = loadInClusterConfig(env, sa.path());
  ASSERT_FALSE(badPort);
  EXPECT_NE(badPort.error().message.find("KUBERNETES_SERVICE_PORT \"https\""), std::string::npos);
  env = envOf({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"}});
  auto noToken = loadInClusterConfig(env, sa.path());
  ASSERT_FALSE(noToken);
  EXPECT_NE(noToken.error().message.find(sa.path() + "/token"), std::string::npos);
  sa.write("token", "t");
  auto noCa = loadInClusterConfig(env, sa.path());
  ASSERT_FALSE(noCa);
  EXPECT_NE(noCa.error().message.find(sa.path() + "/ca.crt"), std::string::npos);
}

TEST(K8sConfig, DefaultConfigPrefersAnExplicitPathThenInCluster) {
  TempDir dir;
  auto path = dir.write("config", twoContexts());
  auto env = envOf({{"KUBERNETES_SERVICE_HOST", "10.0.0.1"}, {"KUBERNETES_SERVICE_PORT", "443"},
                    {"KUBECONFIG", path}});
  auto explicitPath = loadDefaultConfig(path, "dev", env);
  ASSERT_TRUE(explicitPath);
  EXPECT_EQ(explicitPath->server, "https://dev.example:443");
  auto inCluster = loadDefaultConfig("", "", env);
  ASSERT_FALSE(inCluster) << "no service account here, so in-cluster must be what failed";
  EXPECT_NE(inCluster.error().message.find("in-cluster"), std::string::npos);
  auto fromEnv = loadDefaultConfig("", "", envOf({{"KUBECONFIG", path}}));
  ASSERT_TRUE(fromEnv);
  EXPECT_EQ(fromEnv->server, "https://10.0.0.1:6443");
}

}  // namespace
}  // namespace vgpu::k8s
