// vgpu-dra-plugin: the node agent's DRA front end (see dra_agent.h and docs/dra.md).
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <iostream>

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
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

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
  int sig = 0;
  // SIGHUP: rediscover devices and republish now.
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) (*agent)->resyncNow();
  std::fprintf(stderr, "vgpu-dra-plugin: signal %d, shutting down\n", sig);
  (*agent)->stop();
  return 0;
}
