// Kubeconfig and in-cluster configuration. Every error names the file and the key.

#include "vgpu/k8s/config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "vgpu/codec/base64.h"

namespace vgpu::k8s {
namespace {

namespace fs = std::filesystem;

Result<std::string> readWholeFile(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return makeError(what + ": " + path + " does not exist or is not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return makeError(what + ": cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string trimmed(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// One parsed kubeconfig file.
struct KubeFile {
  std::string path;
  fs::path dir;
  YAML::Node root;
};

Result<KubeFile> parseKubeFile(const std::string& path) {
  auto text = readWholeFile(path, "kubeconfig");
  if (!text) return std::move(text).error();
  KubeFile f{path, fs::path(path).parent_path(), {}};
  try {
    f.root = YAML::Load(*text);
  } catch (const YAML::Exception& e) {
    return makeError("kubeconfig " + path + ": not valid YAML at line " +
                     std::to_string(e.mark.line + 1) + ": " + e.msg);
  }
  if (f.root.IsNull()) f.root = YAML::Node(YAML::NodeType::Map);
  if (!f.root.IsMap()) return makeError("kubeconfig " + path + ": the top level must be a mapping");
  for (const char* list : {"clusters", "users", "contexts"}) {
    auto n = f.root[list];
    if (n && !n.IsNull() && !n.IsSequence()) {
      return makeError("kubeconfig " + path + ": " + list + " must be a list");
    }
  }
  return f;
}

// A string-valued key; absent or null → nullopt; a map or list → error.
Result<std::optional<std::string>> scalarAt(const YAML::Node& body, const std::string& key,
                                            const std::string& where) {
  auto n = body[key];
  if (!n || n.IsNull()) return std::optional<std::string>();
  if (!n.IsScalar()) return makeError(where + "." + key + " must be a string");
  return std::optional<std::string>(n.as<std::string>());
}

// The first entry called `name` in list `list` over the files in order, with its file.
struct Found {
  const KubeFile* file = nullptr;
  YAML::Node body;
  std::string where;  // "kubeconfig FILE: clusters[name=x].cluster"
};

Result<Found> findEntry(const std::vector<KubeFile>& files, const std::string& list,
                        const std::string& bodyKey, const std::string& name) {
  for (const auto& f : files) {
    auto seq = f.root[list];
    if (!seq || !seq.IsSequence()) continue;
    std::size_t index = 0;
    for (const auto& entry : seq) {
      std::string at = "kubeconfig " + f.path + ": " + list + "[" + std::to_string(index++) + "]";
      if (!entry.IsMap()) return makeError(at + " must be a mapping");
      auto n = entry["name"];
      if (!n || !n.IsScalar()) return makeError(at + ".name is missing");
      if (n.as<std::string>() != name) continue;
      auto body = entry[bodyKey];
      if (body && !body.IsNull() && !body.IsMap()) {
        return makeError(at + "." + bodyKey + " must be a mapping");
      }
      return Found{&f, body ? body : YAML::Node(YAML::NodeType::Map),
                   "kubeconfig " + f.path + ": " + list + "[name=" + name + "]." + bodyKey};
    }
  }
  std::string paths;
  for (const auto& f : files) paths += (paths.empty() ? "" : ", ") + f.path;
  return makeError("kubeconfig " + paths + ": no entry named \"" + name + "\" in " + list);
}

std::string resolvePath(const KubeFile& f, const std::string& p) {
  fs::path path(p);
  if (path.is_relative()) path = f.dir / path;
  return path.string();
}

// PEM material from KEY-data (base64) or KEY (a file path).
Result<std::string> pemFrom(const Found& e, const std::string& key) {
  auto data = scalarAt(e.body, key + "-data", e.where);
  if (!data) return std::move(data).error();
  if (*data) {
    auto decoded = base64Decode(**data);
    if (!decoded.ok()) return makeError(e.where + "." + key + "-data: " + decoded.error().message);
    if (decoded->find("-----BEGIN") == std::string::npos) {
      return makeError(e.where + "." + key + "-data does not hold PEM data");
    }
    return *decoded;
  }
  auto file = scalarAt(e.body, key, e.where);
  if (!file) return std::move(file).error();
  if (!*file) return std::string();
  auto text = readWholeFile(resolvePath(*e.file, **file), e.where + "." + key);
  if (!text) return std::move(text).error();
  return *text;
}

Result<bool> boolAt(const YAML::Node& body, const std::string& key, const std::string& where) {
  auto v = scalarAt(body, key, where);
  if (!v) return std::move(v).error();
  if (!*v || **v == "false") return false;
  if (**v == "true") return true;
  return makeError(where + "." + key + " must be true or false");
}

inline constexpr const char* kExecV1 = "client.authentication.k8s.io/v1";
inline constexpr const char* kExecV1beta1 = "client.authentication.k8s.io/v1beta1";

// users[].user.exec, checked as client-go's clientcmd does (apiVersion and, for v1,
// interactiveMode are required).
Result<ExecConfig> execFrom(const Found& user) {
  std::string where = user.where + ".exec";
  auto node = user.body["exec"];
  if (!node.IsMap()) return makeError(where + " must be a mapping");
  ExecConfig e;
  auto command = scalarAt(node, "command", where);
  if (!command) return std::move(command).error();
  if (!*command || (*command)->empty()) return makeError(where + ".command is missing");
  e.command = **command;
  // A relative path (not a bare name, which is looked up in $PATH) is relative to the file.
  if (e.command.find('/') != std::string::npos) e.command = resolvePath(*user.file, e.command);
  if (auto args = node["args"]; args && !args.IsNull()) {
    if (!args.IsSequence()) return makeError(where + ".args must be a list of strings");
    for (std::size_t i = 0; i < args.size(); ++i) {
      if (!args[i].IsScalar()) return makeError(where + ".args[" + std::to_string(i) + "] must be a string");
      e.args.push_back(args[i].as<std::string>());
    }
  }
  if (auto env = node["env"]; env && !env.IsNull()) {
    if (!env.IsSequence()) return makeError(where + ".env must be a list of {name, value}");
    for (std::size_t i = 0; i < env.size(); ++i) {
      std::string at = where + ".env[" + std::to_string(i) + "]";
      if (!env[i].IsMap()) return makeError(at + " must be a mapping with name and value");
      auto name = scalarAt(env[i], "name", at);
      if (!name) return std::move(name).error();
      if (!*name || (*name)->empty() || (*name)->find('=') != std::string::npos) {
        return makeError(at + ".name is missing or not a variable name");
      }
      auto value = scalarAt(env[i], "value", at);
      if (!value) return std::move(value).error();
      e.env.emplace_back(**name, value->value_or(""));
    }
  }
  auto apiVersion = scalarAt(node, "apiVersion", where);
  if (!apiVersion) return std::move(apiVersion).error();
  if (!*apiVersion || (*apiVersion)->empty()) {
    return makeError(where + ".apiVersion is missing (use " + kExecV1 + ")");
  }
  e.apiVersion = **apiVersion;
  if (e.apiVersion != kExecV1 && e.apiVersion != kExecV1beta1) {
    return makeError(where + ".apiVersion \"" + e.apiVersion + "\" is not supported (use " + kExecV1 +
                     " or " + kExecV1beta1 + ")");
  }
  auto hint = scalarAt(node, "installHint", where);
  if (!hint) return std::move(hint).error();
  e.installHint = hint->value_or("");
  auto provide = boolAt(node, "provideClusterInfo", where);
  if (!provide) return std::move(provide).error();
  e.provideClusterInfo = *provide;
  auto mode = scalarAt(node, "interactiveMode", where);
  if (!mode) return std::move(mode).error();
  e.interactiveMode = mode->value_or("");
  if (e.interactiveMode.empty()) {
    if (e.apiVersion == kExecV1) return makeError(where + ".interactiveMode is missing (required by " + kExecV1 + ")");
    e.interactiveMode = "IfAvailable";
  }
  if (e.interactiveMode == "Always") {
    return makeError(where + ".interactiveMode is Always, but a daemon has no terminal to give the "
                     "plugin (use Never or IfAvailable, with a plugin that needs no prompt)");
  }
  if (e.interactiveMode != "Never" && e.interactiveMode != "IfAvailable") {
    return makeError(where + ".interactiveMode \"" + e.interactiveMode +
                     "\" must be Never, IfAvailable or Always");
  }
  return e;
}

Result<ClientConfig> configFromFiles(const std::vector<KubeFile>& files, const std::string& context) {
  std::string ctxName = context;
  std::string paths;
  for (const auto& f : files) {
    paths += (paths.empty() ? "" : ", ") + f.path;
    if (ctxName.empty()) {
      auto cur = scalarAt(f.root, "current-context", "kubeconfig " + f.path + ": ");
      if (!cur) return std::move(cur).error();
      if (*cur && !(*cur)->empty()) ctxName = **cur;
    }
  }
  if (ctxName.empty()) {
    return makeError("kubeconfig " + paths + ": current-context is not set and no context was given");
  }
  auto ctx = findEntry(files, "contexts", "context", ctxName);
  if (!ctx) return std::move(ctx).error();
  auto clusterName = scalarAt(ctx->body, "cluster", ctx->where);
  if (!clusterName) return std::move(clusterName).error();
  if (!*clusterName || (*clusterName)->empty()) return makeError(ctx->where + ".cluster is missing");
  auto userName = scalarAt(ctx->body, "user", ctx->where);
  if (!userName) return std::move(userName).error();
  auto ns = scalarAt(ctx->body, "namespace", ctx->where);
  if (!ns) return std::move(ns).error();

  ClientConfig cfg;
  cfg.source = "kubeconfig " + ctx->file->path + " context " + ctxName;
  if (*ns && !(*ns)->empty()) cfg.defaultNamespace = **ns;

  auto cluster = findEntry(files, "clusters", "cluster", **clusterName);
  if (!cluster) return std::move(cluster).error();
  auto server = scalarAt(cluster->body, "server", cluster->where);
  if (!server) return std::move(server).error();
  if (!*server || (*server)->empty()) return makeError(cluster->where + ".server is missing");
  cfg.server = **server;
  if (cfg.server.rfind("https://", 0) != 0 && cfg.server.rfind("http://", 0) != 0) {
    return makeError(cluster->where + ".server \"" + cfg.server + "\" must be an https:// URL");
  }
  auto proxy = scalarAt(cluster->body, "proxy-url", cluster->where);
  if (!proxy) return std::move(proxy).error();
  if (*proxy) return makeError(cluster->where + ".proxy-url is not supported");
  auto ca = pemFrom(*cluster, "certificate-authority");
  if (!ca) return std::move(ca).error();
  cfg.caPem = std::move(*ca);
  auto insecure = scalarAt(cluster->body, "insecure-skip-tls-verify", cluster->where);
  if (!insecure) return std::move(insecure).error();
  if (*insecure) {
    if (**insecure == "true") {
      cfg.insecureSkipTlsVerify = true;
    } else if (**insecure != "false") {
      return makeError(cluster->where + ".insecure-skip-tls-verify must be true or false");
    }
  }
  auto serverName = scalarAt(cluster->body, "tls-server-name", cluster->where);
  if (!serverName) return std::move(serverName).error();
  if (*serverName) cfg.tlsServerName = **serverName;

  if (*userName && !(*userName)->empty()) {
    auto user = findEntry(files, "users", "user", **userName);
    if (!user) return std::move(user).error();
    for (const char* unsupported : {"auth-provider", "username", "password"}) {
      if (user->body[unsupported]) {
        return makeError(user->where + "." + unsupported +
                         " is not supported (use a token, tokenFile, a client certificate or exec)");
      }
    }
    auto token = scalarAt(user->body, "token", user->where);
    if (!token) return std::move(token).error();
    if (*token) cfg.bearerToken = trimmed(**token);
    auto tokenFile = scalarAt(user->body, "tokenFile", user->where);
    if (!tokenFile) return std::move(tokenFile).error();
    if (*tokenFile) {
      cfg.tokenFile = resolvePath(*user->file, **tokenFile);
      auto text = readWholeFile(cfg.tokenFile, user->where + ".tokenFile");
      if (!text) return std::move(text).error();
      if (cfg.bearerToken.empty()) cfg.bearerToken = trimmed(*text);
    }
    auto cert = pemFrom(*user, "client-certificate");
    if (!cert) return std::move(cert).error();
    auto key = pemFrom(*user, "client-key");
    if (!key) return std::move(key).error();
    if (cert->empty() != key->empty()) {
      return makeError(user->where + ": client-certificate and client-key must be given together");
    }
    cfg.clientCertPem = std::move(*cert);
    cfg.clientKeyPem = std::move(*key);
    if (auto exec = user->body["exec"]; exec && !exec.IsNull()) {
      auto e = execFrom(*user);
      if (!e) return std::move(e).error();
      // As in client-go, a static token or certificate beside the plugin wins.
      if (cfg.bearerToken.empty() && cfg.tokenFile.empty() && cfg.clientCertPem.empty()) {
        cfg.exec = std::move(*e);
      }
    }
  }
  return cfg;
}

}  // namespace

EnvLookup processEnv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<ClientConfig> loadInClusterConfig(const EnvLookup& env, const std::string& saDir) {
  auto host = env("KUBERNETES_SERVICE_HOST");
  auto port = env("KUBERNETES_SERVICE_PORT");
  if (!host || host->empty() || !port || port->empty()) {
    return makeError("in-cluster config: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must "
                     "be set (is this running in a pod?)");
  }
  char* end = nullptr;
  long p = std::strtol(port->c_str(), &end, 10);
  if (*end != '\0' || p <= 0 || p > 65535) {
    return makeError("in-cluster config: KUBERNETES_SERVICE_PORT \"" + *port +
                     "\" is not a port number");
  }
  ClientConfig cfg;
  cfg.source = "in-cluster service account " + saDir;
  std::string h = host->find(':') != std::string::npos ? "[" + *host + "]" : *host;
  cfg.server = "https://" + h + ":" + *port;
  cfg.tokenFile = (fs::path(saDir) / "token").string();
  auto token = readWholeFile(cfg.tokenFile, "in-cluster config: service account token");
  if (!token) return std::move(token).error();
  cfg.bearerToken = trimmed(*token);
  if (cfg.bearerToken.empty()) {
    return makeError("in-cluster config: service account token " + cfg.tokenFile + " is empty");
  }
  auto ca = readWholeFile((fs::path(saDir) / "ca.crt").string(), "in-cluster config: CA certificate");
  if (!ca) return std::move(ca).error();
  cfg.caPem = std::move(*ca);
  std::error_code ec;
  auto nsPath = (fs::path(saDir) / "namespace").string();
  if (fs::exists(nsPath, ec)) {
    auto ns = readWholeFile(nsPath, "in-cluster config: namespace");
    if (ns && !trimmed(*ns).empty()) cfg.defaultNamespace = trimmed(*ns);
  }
  return cfg;
}

Result<ClientConfig> loadKubeconfig(const std::string& path, const std::string& context) {
  auto f = parseKubeFile(path);
  if (!f) return std::move(f).error();
  std::vector<KubeFile> files;
  files.push_back(std::move(*f));
  return configFromFiles(files, context);
}

Result<ClientConfig> loadKubeconfigFromEnv(const std::string& context, const EnvLookup& env) {
  std::vector<std::string> paths;
  if (auto list = env("KUBECONFIG"); list && !list->empty()) {
    std::stringstream ss(*list);
    for (std::string p; std::getline(ss, p, ':');) {
      std::error_code ec;
      if (!p.empty() && fs::exists(p, ec)) paths.push_back(p);
    }
    if (paths.empty()) return makeError("KUBECONFIG=\"" + *list + "\": none of these files exists");
  } else {
    auto home = env("HOME");
    if (!home || home->empty()) return makeError("no KUBECONFIG and no HOME to find ~/.kube/config");
    paths.push_back((fs::path(*home) / ".kube" / "config").string());
  }
  std::vector<KubeFile> files;
  for (const auto& p : paths) {
    auto f = parseKubeFile(p);
    if (!f) return std::move(f).error();
    files.push_back(std::move(*f));
  }
  return configFromFiles(files, context);
}

Result<ClientConfig> loadDefaultConfig(const std::string& kubeconfigPath, const std::string& context,
                                       const EnvLookup& env) {
  if (!kubeconfigPath.empty()) return loadKubeconfig(kubeconfigPath, context);
  if (auto host = env("KUBERNETES_SERVICE_HOST"); host && !host->empty() && context.empty()) {
    return loadInClusterConfig(env);
  }
  return loadKubeconfigFromEnv(context, env);
}

}  // namespace vgpu::k8s
