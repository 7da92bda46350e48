// vgpu-device-plugin: the node agent (see agent.h and docs/node-agent.md).
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "agent.h"
#include "daemon_support.h"

int main(int argc, char** argv) {
  using namespace vgpu::deviceplugin;
  // The agent is mostly idle threads (gRPC, watch, HTTP): one malloc arena per thread would
  // keep a few MiB of resident memory for no throughput gain.
  mallopt(M_ARENA_MAX, 2);
  auto parsed = parseAgentOptions(argc, argv, vgpu::k8s::processEnv());
  if (!parsed.ok()) {
    std::fprintf(stderr, "vgpu-device-plugin: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) {
    std::cout << parsed->usage;
    return 0;
  }
  const sigset_t signals = vgpu::node::blockStopSignals();

  auto agent = Agent::create(parsed->options);
  if (!agent.ok()) {
    std::fprintf(stderr, "vgpu-device-plugin: %s\n", agent.error().message.c_str());
    return 1;
  }
  if (auto s = (*agent)->start(); !s.ok()) {
    std::fprintf(stderr, "vgpu-device-plugin: %s\n", s.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "vgpu-device-plugin: serving");
  for (const auto& r : (*agent)->resources()) std::fprintf(stderr, " %s", r.c_str());
  if (!(*agent)->metricsUrl().empty()) std::fprintf(stderr, "; metrics on %s", (*agent)->metricsUrl().c_str());
  std::fprintf(stderr, "\n");
  // SIGHUP: look again for devices of backends that serve none (a driver loaded late).
  const int sig = vgpu::node::waitForStop(signals, [&] {
    std::fprintf(stderr, "vgpu-device-plugin: SIGHUP, rediscovering devices\n");
    (*agent)->requestRediscovery();
  });
  std::fprintf(stderr, "vgpu-device-plugin: signal %d, shutting down\n", sig);
  (*agent)->stop();
  return 0;
}
