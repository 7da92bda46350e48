#pragma once
// What the node's two front ends (vgpu-device-plugin and vgpu-dra-plugin, DESIGN.md 8a)
// do alike as daemons: parse their flags, wait for stop signals, serve /metrics and
// /healthz. Header-only, so the DRA front end need not link the device plugin's library.

#include <signal.h>

#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <boost/program_options.hpp>

#include "vgpu/http/server.h"
#include "vgpu/metrics/registry.h"
#include "vgpu/result.h"

namespace vgpu::node {

/// What both front ends are told the same way: which node, which device config, where the
/// backends are, which kubeconfig. Refers to the daemon's own option fields.
struct NodeDaemonFlags {
  std::string& nodeName;
  std::string& configPath;
  std::string& backendDir;
  std::string& kubeconfig;
};

/// Reads NODE_NAME, VGPU_CONFIG, VGPU_BACKEND_DIR and KUBECONFIG_FILE over the fields of
/// `flags` (their defaults) and adds --help, --node-name, --config, --backend-dir and
/// --kubeconfig to `desc`, writing into those fields when parsed.
inline void addNodeDaemonFlags(boost::program_options::options_description& desc, const NodeDaemonFlags& flags,
                               const std::function<std::optional<std::string>(const std::string&)>& env) {
  namespace po = boost::program_options;
  flags.nodeName = env("NODE_NAME").value_or(flags.nodeName);
  flags.configPath = env("VGPU_CONFIG").value_or(flags.configPath);
  flags.backendDir = env("VGPU_BACKEND_DIR").value_or(flags.backendDir);
  flags.kubeconfig = env("KUBECONFIG_FILE").value_or(flags.kubeconfig);
  desc.add_options()
      ("help,h", "print this help")
      ("node-name", po::value(&flags.nodeName), "this node's name [NODE_NAME] (required)")
      ("config", po::value(&flags.configPath), "device-config.yaml [VGPU_CONFIG]")
      ("backend-dir", po::value(&flags.backendDir), "folder of libvgpu-backend-*.so [VGPU_BACKEND_DIR]")
      ("kubeconfig", po::value(&flags.kubeconfig), "kubeconfig file; default: in-cluster, then $KUBECONFIG [KUBECONFIG_FILE]");
}

/// Parses `argv` against `desc` (made with addNodeDaemonFlags) into `vm` and puts the usage
/// text in `usage`. True when --help was asked (nothing else checked). Errors: a flag `desc`
/// does not know or a bad value (with "(see --help)"), no node name.
inline Result<bool> parseNodeDaemonFlags(const boost::program_options::options_description& desc, int argc,
                                         const char* const* argv, const NodeDaemonFlags& flags,
                                         boost::program_options::variables_map& vm, std::string& usage) {
  namespace po = boost::program_options;
  std::ostringstream text;
  text << desc;
  usage = text.str();
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    return makeError(std::string(e.what()) + " (see --help)");
  }
  if (vm.count("help")) return true;
  if (flags.nodeName.empty()) return makeError("no node name: set NODE_NAME (from the pod's spec.nodeName) or --node-name");
  return false;
}

/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread and every thread it starts
/// afterwards, so that waitForStop() alone receives them. Call before starting threads.
inline sigset_t blockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

/// Waits for SIGINT or SIGTERM and returns it; each SIGHUP meanwhile calls `onHangup`.
inline int waitForStop(const sigset_t& signals, const std::function<void()>& onHangup) {
  int sig = 0;
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) onHangup();
  return sig;
}

/// Serves `registry` on /metrics and `readiness` on /healthz (200 when ready, else 503, with
/// its text) at `address` ("host:port", named `flag` in errors), on one thread.
inline Result<std::unique_ptr<http::Server>> startMetricsEndpoint(
    const std::string& address, const std::string& flag, metrics::Registry& registry,
    std::function<std::pair<bool, std::string>()> readiness) {
  http::ServerOptions so;
  if (auto parsed = http::parseListenAddress(address, flag, so); !parsed.ok()) return parsed.error();
  so.threads = 1;
  http::Router router;
  router.get("/metrics", [&registry](const http::Request&) {
    http::Response r = http::Response::text(registry.render());
    r.contentType = metrics::Registry::kContentType;
    return r;
  });
  router.get("/healthz", [readiness = std::move(readiness)](const http::Request&) {
    const auto [ready, text] = readiness();
    return ready ? http::Response::text(text) : http::Response::text(text, 503);
  });
  auto server = http::Server::start(so, std::move(router));
  if (!server.ok()) return makeError("metrics endpoint: " + server.error().message);
  return std::move(server).value();
}

}  // namespace vgpu::node
