#pragma once
// Where the apiserver is and how to authenticate to it: from the pod's service account
// (in-cluster) or from a kubeconfig file. Loading validates everything up front so a bad
// file fails at start-up with its name and the offending key.

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::k8s {

/// A kubeconfig `users[].user.exec` credential plugin (client.authentication.k8s.io),
/// as EKS, GKE, AKS and OIDC kubeconfigs use. The client runs it (vgpu/k8s/exec_credential.h).
struct ExecConfig {
  std::string command;                ///< a name looked up in $PATH, or a path (relative
                                      ///< ones with a '/' resolved against the kubeconfig's directory)
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  ///< added to the daemon's environment
  std::string apiVersion;             ///< client.authentication.k8s.io/v1 or /v1beta1
  std::string installHint;            ///< shown when the command is not found
  bool provideClusterInfo = false;    ///< pass spec.cluster in KUBERNETES_EXEC_INFO
  std::string interactiveMode;        ///< Never | IfAvailable (Always is refused: no terminal)
};

/// Connection and credentials. PEM material is held in memory; file paths are resolved and
/// read by the loaders, except `tokenFile`, which the client re-reads while it runs.
struct ClientConfig {
  std::string server;                 ///< https://host:port (or http:// for tests)
  std::string caPem;                  ///< trusted CA bundle; empty = system default store
  bool insecureSkipTlsVerify = false;
  std::string tlsServerName;          ///< overrides the name checked in the server cert
  std::string bearerToken;            ///< used when tokenFile is empty
  std::string tokenFile;              ///< re-read periodically and on 401
  std::string clientCertPem;          ///< client certificate chain (mutual TLS)
  std::string clientKeyPem;
  /// Set when the user has an exec plugin and no static token or certificate (which win,
  /// as in client-go); the plugin's answer supplies the token or the client certificate.
  std::optional<ExecConfig> exec;
  std::string defaultNamespace = "default";
  std::string source;                 ///< where this came from, for messages
};

/// Reads the process environment; injectable so tests need not touch the real one.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup processEnv();

inline constexpr const char* kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

/// In-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT, `token` (kept as
/// tokenFile so rotation is picked up), `ca.crt` and `namespace` from `saDir`.
Result<ClientConfig> loadInClusterConfig(const EnvLookup& env = processEnv(),
                                         const std::string& saDir = kServiceAccountDir);

/// One kubeconfig file. `context` empty = the file's current-context. Supported: server,
/// certificate-authority(-data), insecure-skip-tls-verify, tls-server-name, token,
/// tokenFile, client-certificate(-data), client-key(-data), exec, context namespace.
/// auth-provider, username/password and proxy-url are refused with an error naming the key.
Result<ClientConfig> loadKubeconfig(const std::string& path, const std::string& context = "");

/// $KUBECONFIG (colon-separated; for each entry name and for current-context the first
/// file that sets it wins), else ~/.kube/config.
Result<ClientConfig> loadKubeconfigFromEnv(const std::string& context = "",
                                           const EnvLookup& env = processEnv());

/// What a daemon does at start-up: an explicit kubeconfig path if given, else in-cluster
/// when KUBERNETES_SERVICE_HOST is set and no context was asked for, else $KUBECONFIG /
/// ~/.kube/config.
Result<ClientConfig> loadDefaultConfig(const std::string& kubeconfigPath = "",
                                       const std::string& context = "",
                                       const EnvLookup& env = processEnv());

}  // namespace vgpu::k8s
