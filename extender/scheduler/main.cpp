// vgpu-scheduler: the kube-scheduler extender (filter, prioritize, bind) and the mutating
// admission webhook, with /metrics, /healthz and /readyz. docs/scheduler.md has the flags
// and the kube-scheduler configuration.
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include <boost/asio/ip/address.hpp>
#include <boost/program_options.hpp>
#include <spdlog/spdlog.h>

#include "service.h"
#include "vgpu/backend_loader.h"
#include "vgpu/config.h"
#include "vgpu/k8s/client.h"
#include "vgpu/k8s/config.h"
#include "vgpu/version.h"

namespace po = boost::program_options;
using namespace vgpu;

namespace {

int fail(const std::string& message) {
  std::cerr << "vgpu-scheduler: " << message << "\n";
  return 2;
}

/// 127.0.0.0/8 or ::1 (an address that is not an IP is left to the server to refuse).
bool isLoopback(const std::string& address) {
  boost::system::error_code ec;
  const auto ip = boost::asio::ip::make_address(address, ec);
  return ec || ip.is_loopback();
}

std::string defaultInstance() {
  if (const char* pod = std::getenv("POD_NAME"); pod && *pod) return pod;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0 && host[0]) return host;
  return "vgpu-scheduler";
}

}  // namespace

int main(int argc, char** argv) {
  po::options_description options("vgpu-scheduler: scheduler extender and admission webhook for shared devices");
  options.add_options()("help,h", "show this help")("version", "print the version")(
      "config", po::value<std::string>()->default_value("/etc/vgpu/device-config.yaml"), "device-config.yaml")(
      "backend-dir", po::value<std::string>(), "where libvgpu-backend-<name>.so live (default <bin>/../lib/vgpu/backends)")(
      "kubeconfig", po::value<std::string>()->default_value(""),
      "kubeconfig file; empty = in-cluster when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config")(
      "context", po::value<std::string>()->default_value(""), "kubeconfig context (default: its current-context)")(
      "listen", po::value<std::string>()->default_value("0.0.0.0:8443"),
      "address:port of the admission webhook, /metrics, /healthz and /readyz")(
      "tls-cert", po::value<std::string>()->default_value(""), "PEM certificate chain; with --tls-key serves HTTPS")(
      "tls-key", po::value<std::string>()->default_value(""), "PEM private key")(
      "extender-listen", po::value<std::string>()->default_value("127.0.0.1:8888"),
      "address:port of the extender verbs (filter, prioritize, bind): loopback, next to kube-scheduler in its pod; "
      "any other address needs --extender-tls-cert, --extender-tls-key and --extender-client-ca")(
      "extender-tls-cert", po::value<std::string>()->default_value(""), "PEM certificate chain of the extender verbs")(
      "extender-tls-key", po::value<std::string>()->default_value(""), "PEM private key of the extender verbs")(
      "extender-client-ca", po::value<std::string>()->default_value(""),
      "PEM CA file: the extender verbs serve only clients with a certificate it signed (kube-scheduler's "
      "tlsConfig certFile/keyFile)")(
      "scheduler-name", po::value<std::string>()->default_value("vgpu-scheduler"),
      "schedulerName the webhook sets on pods (the kube-scheduler profile that calls this extender)")(
      "webhook-env-policy", po::value<std::string>()->default_value("refuse"),
      "what the webhook does with a container that sets a variable only the node agent may set "
      "(NVIDIA_VISIBLE_DEVICES, LD_PRELOAD, the limiter's): refuse the pod, or strip the variable")(
      "trusted-users", po::value<std::string>()->default_value(""),
      "comma-separated users (system:serviceaccount:<namespace>:<name>) that may write vgpu's reserved pod "
      "annotations: vgpu-scheduler's and the node agent's service accounts; everyone else's are removed "
      "(create) or refused (update)")(
      "hami-compat", po::bool_switch(),
      "HAMi-compatibility mode: the webhook accepts what HAMi accepts and vgpu would refuse, as HAMi takes it, "
      "with a warning (a cores request above 100, e.g. nvidia.com/gpucores: 150, becomes 100)")(
      "lease-namespace", po::value<std::string>()->default_value(""),
      "namespace of the node agents' liveness Leases (the chart's); empty = only the Nodes' vgpu.io/heartbeat "
      "annotations say whether a node's agent is alive")(
      "log-level", po::value<std::string>()->default_value("info"), "trace, debug, info, warn, error")(
      "hami-metrics", po::bool_switch(),
      "also export HAMi's metric names and labels on /metrics (hami_gpu_*, hami_vgpu_*), for HAMi's dashboards "
      "and alerts (docs/metrics.md)")(
      "threads", po::value<int>()->default_value(8),
      "HTTP threads of the extender verbs (filter and prioritize requests handled at once)")(
      "bind-threads", po::value<int>()->default_value(32),
      "workers for /bind, which waits on the apiserver and on confusable pods (binds handled at once; 64 more may wait, then 503)")(
      "bind-hold-timeout", po::value<int>()->default_value(3000),
      "ms a bind waits for a confusable pod on the same node to be allocated before failing (retried)")(
      "requeue-qps", po::value<double>()->default_value(20),
      "refused pods woken up per second when capacity frees where they fit (0: never)")(
      "requeue-burst", po::value<int>()->default_value(50), "refused pods woken up at once")(
      "qps", po::value<double>()->default_value(1000), "apiserver requests per second (client-side limit)")(
      "burst", po::value<int>()->default_value(2000), "apiserver request burst");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, options), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return fail(std::string(e.what()) + " (see --help)");
  }
  if (vm.count("help")) {
    std::cout << options << "\n";
    return 0;
  }
  if (vm.count("version")) {
    std::cout << "vgpu-scheduler " << versionString() << "\n";
    return 0;
  }
  const auto level = spdlog::level::from_str(vm["log-level"].as<std::string>());
  if (level == spdlog::level::off && vm["log-level"].as<std::string>() != "off")
    return fail("--log-level must be trace, debug, info, warn, error or off");
  spdlog::set_level(level);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %^%l%$ %v");

  scheduler::ServiceOptions service;
  service.schedulerName = vm["scheduler-name"].as<std::string>();
  auto envPolicy = scheduler::parseEnvPolicy(vm["webhook-env-policy"].as<std::string>());
  if (!envPolicy.ok()) return fail("--webhook-env-policy: " + envPolicy.error().message);
  service.webhook.envPolicy = *envPolicy;
  auto trustedUsers = scheduler::parseTrustedUsers(vm["trusted-users"].as<std::string>());
  if (!trustedUsers.ok()) return fail("--trusted-users: " + trustedUsers.error().message);
  service.webhook.trustedUsers = std::move(*trustedUsers);
  service.webhook.hamiCompat = vm["hami-compat"].as<bool>();
  service.instance = defaultInstance();
  service.hamiMetrics = vm["hami-metrics"].as<bool>();
  service.leaseNamespace = vm["lease-namespace"].as<std::string>();
  service.extender.bindHoldTimeout = std::chrono::milliseconds(std::max(0, vm["bind-hold-timeout"].as<int>()));
  service.requeue.qps = vm["requeue-qps"].as<double>();
  service.requeue.burst = std::max(1, vm["requeue-burst"].as<int>());
  if (auto s = http::parseListenAddress(vm["listen"].as<std::string>(), "--listen", service.http); !s.ok())
    return fail(s.error().message);
  service.http.certFile = vm["tls-cert"].as<std::string>();
  service.http.keyFile = vm["tls-key"].as<std::string>();
  service.http.threads = 2;  // the webhook and scrapes; the verbs have their own threads
  if (auto s = http::parseListenAddress(vm["extender-listen"].as<std::string>(), "--extender-listen",
                                        service.extenderHttp);
      !s.ok())
    return fail(s.error().message);
  service.extenderHttp.certFile = vm["extender-tls-cert"].as<std::string>();
  service.extenderHttp.keyFile = vm["extender-tls-key"].as<std::string>();
  service.extenderHttp.clientCaFile = vm["extender-client-ca"].as<std::string>();
  service.extenderHttp.threads = std::max(1, vm["threads"].as<int>());
  service.extenderHttp.blockingThreads = std::max(1, vm["bind-threads"].as<int>());
  // /bind binds pods: off loopback, only for clients with a certificate we trust.
  if (!isLoopback(service.extenderHttp.address) &&
      (service.extenderHttp.certFile.empty() || service.extenderHttp.clientCaFile.empty()))
    return fail("--extender-listen " + vm["extender-listen"].as<std::string>() +
                " is not a loopback address: whoever reaches it could bind pods, so serve it with "
                "--extender-tls-cert, --extender-tls-key and --extender-client-ca (kube-scheduler then presents a "
                "client certificate: tlsConfig certFile/keyFile), or keep it on 127.0.0.1 next to kube-scheduler");

  auto config = loadDeviceConfig(vm["config"].as<std::string>());
  if (!config.ok()) return fail(config.error().message);
  const std::filesystem::path backendDir =
      vm.count("backend-dir") ? std::filesystem::path(vm["backend-dir"].as<std::string>()) : defaultBackendDir();
  BackendLoadOutcome loaded = loadEnabledBackends(*config, backendDir, "");
  for (const auto& failure : loaded.failures) spdlog::error("backend not loaded: {}", failure.message);
  if (loaded.backends.empty()) return fail("no backend could be loaded from " + backendDir.string());

  auto clientConfig = k8s::loadDefaultConfig(vm["kubeconfig"].as<std::string>(), vm["context"].as<std::string>());
  if (!clientConfig.ok()) return fail(clientConfig.error().message);
  k8s::ClientOptions clientOptions;
  clientOptions.qps = vm["qps"].as<double>();
  clientOptions.burst = vm["burst"].as<int>();
  clientOptions.userAgent = std::string("vgpu-scheduler/") + versionString();
  // A bind makes up to three calls and must answer inside kube-scheduler's extender
  // httpTimeout (5 s in docs/scheduler.md's example) even while the apiserver is away:
  // at most ~0.7 s of backoff per call; kube-scheduler retries the pod anyway.
  clientOptions.maxRetries = 3;
  clientOptions.backoffMax = std::chrono::milliseconds(1000);
  auto client = k8s::Client::create(*clientConfig, clientOptions);
  if (!client.ok()) return fail(client.error().message);
  // Events get their own client and rate limit, as kube-scheduler's do: with one shared
  // limit, each placement's event would halve the binds per second the limit allows.
  auto eventClient = k8s::Client::create(std::move(*clientConfig), clientOptions);
  if (!eventClient.ok()) return fail(eventClient.error().message);
  service.eventClient = eventClient->get();

  // Signals are taken by sigwait below, never by the worker threads started next.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  scheduler::tuneAllocator();
  auto running = scheduler::SchedulerService::start(*config, loaded.backends, **client, service);
  if (!running.ok()) return fail(running.error().message);
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("signal {}: stopping", sig);
  (*running)->stop();
  return 0;
}
