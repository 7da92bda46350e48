// vgpu-fake-apiserver: serves a fixture folder for end-to-end tests of the daemons.
//   vgpu-fake-apiserver [--fixtures DIR] [--port N] [--address A] [--tls] [--token T]
//                       [--ca-out FILE] [--bookmark-ms N] [--no-watch-list]
// Prints "listening on URL" on stdout once ready; runs until SIGINT or SIGTERM.

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "vgpu/fakes/fake_apiserver.h"

namespace {

int usage(const std::string& why) {
  std::cerr << "vgpu-fake-apiserver: " << why << "\n"
            << "usage: vgpu-fake-apiserver [--fixtures DIR] [--port N] [--address A] [--tls]\n"
            << "       [--token T] [--ca-out FILE] [--bookmark-ms N] [--no-watch-list]\n";
  return 2;
}

bool parseNumber(const std::string& s, long max, long& out) {
  char* end = nullptr;
  out = std::strtol(s.c_str(), &end, 10);
  return !s.empty() && *end == '\0' && out >= 0 && out <= max;
}

}  // namespace

int main(int argc, char** argv) {
  vgpu::fakes::FakeApiServerOptions options;
  std::string fixtures;
  std::string caOut;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (arg == "--tls") {
      options.tls = true;
    } else if (arg == "--no-watch-list") {
      options.watchList = false;
    } else if (arg == "--fixtures" || arg == "--port" || arg == "--address" || arg == "--token" ||
               arg == "--ca-out" || arg == "--bookmark-ms") {
      const char* v = value();
      if (v == nullptr) return usage(arg + " needs a value");
      long n = 0;
      if (arg == "--fixtures") {
        fixtures = v;
      } else if (arg == "--port") {
        if (!parseNumber(v, 65535, n)) return usage("--port \"" + std::string(v) + "\" is not a port");
        options.port = static_cast<std::uint16_t>(n);
      } else if (arg == "--address") {
        options.bindAddress = v;
      } else if (arg == "--token") {
        options.token = v;
      } else if (arg == "--ca-out") {
        caOut = v;
      } else {
        if (!parseNumber(v, 3600000, n)) return usage("--bookmark-ms \"" + std::string(v) + "\" is not a number");
        options.bookmarkInterval = std::chrono::milliseconds(n);
      }
    } else {
      return usage("unknown argument " + arg);
    }
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before threads start, so only sigwait sees them

  auto server = vgpu::fakes::FakeApiServer::start(options);
  if (!server) {
    std::cerr << server.error().message << "\n";
    return 1;
  }
  if (!fixtures.empty()) {
    auto s = (*server)->loadFixtures(fixtures);
    if (!s) {
      std::cerr << s.error().message << "\n";
      return 1;
    }
  }
  if (!caOut.empty()) {
    std::ofstream out(caOut);
    out << (*server)->caPem();
    if (!out) {
      std::cerr << "vgpu-fake-apiserver: cannot write " << caOut << "\n";
      return 1;
    }
  }
  std::cout << "listening on " << (*server)->url() << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  (*server)->stop();
  return 0;
}
