// vgpu-dra-plugin: the node agent's DRA front end (see dra_agent.h and docs/dra.md).
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <iostream>

#include "daemon_support.h"
#include "dra_agent.h"

int main(int argc, char** argv) {
  using namespace vgpu::dra;
  mallopt(M_ARENA_MAX, 2);
  auto parsed = parseDraAgentOptions(argc, argv, vgpu::k8s::processEnv());
  if (!parsed.ok()) {
    std::fprintf(stderr, "vgpu-dra-plugin: %s\n", parsed.error().message.c_str());
    return 2;
  }
  if (parsed->help) {
    std::cout << parsed->usage;
    return 0;
  }
  const sigset_t signals = vgpu::node::blockStopSignals();

  auto agent = DraAgent::create(parsed->options);
  if (!agent.ok()) {
    std::fprintf(stderr, "vgpu-dra-plugin: %s\n", agent.error().message.c_str());
    return 1;
  }
  if (auto s = (*agent)->start(); !s.ok()) {
    std::fprintf(stderr, "vgpu-dra-plugin: %s\n", s.error().message.c_str());
    return 1;
  }
  std::fprintf(stderr, "vgpu-dra-plugin: serving");
  for (const auto& d : (*agent)->drivers()) std::fprintf(stderr, " %s", d.c_str());
  std::fprintf(stderr, "\n");
  // SIGHUP: rediscover devices and republish now.
  const int sig = vgpu::node::waitForStop(signals, [&] { (*agent)->resyncNow(); });
  std::fprintf(stderr, "vgpu-dra-plugin: signal %d, shutting down\n", sig);
  (*agent)->stop();
  return 0;
}
