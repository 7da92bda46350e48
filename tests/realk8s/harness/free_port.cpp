// freePort: random ports in [20000, 30000), each checked by binding it and held by a lock file.
// Binding port 0 and handing the number on (the old way) raced: the kernel gave the same
// ephemeral port to a component's outgoing connection, or to another test, before the component
// bound it ("address already in use" in a second cluster's kube-apiserver).
#include "free_port.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <mutex>
#include <random>
#include <set>
#include <string>

namespace vgpu::realk8s {
namespace {

constexpr int kFirst = 20000;  // below 32768, where Linux's default ephemeral range starts
constexpr int kCount = 10000;  // below 30000, where Services' NodePorts start
constexpr const char* kLockDir = "/run/lock";

bool bindable(std::uint16_t port, in_addr_t address) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // as the components bind
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(address);
  addr.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Holds the port's lock file open (and so its flock) until the process exits.
bool reserve(std::uint16_t port) {
  const std::string path = std::string(kLockDir) + "/vgpu-test-port-" + std::to_string(port) + ".lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return true;  // no lock folder: fall back to the bind check alone
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  return true;  // the descriptor is deliberately kept
}

}  // namespace

std::uint16_t freePort() {
  static std::mutex mutex;
  static std::set<std::uint16_t> handedOut;
  static std::mt19937 random{std::random_device{}()};
  std::lock_guard lock(mutex);
  std::uniform_int_distribution<int> pick(kFirst, kFirst + kCount - 1);
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const auto port = static_cast<std::uint16_t>(pick(random));
    if (handedOut.count(port)) continue;
    if (!bindable(port, INADDR_LOOPBACK) || !bindable(port, INADDR_ANY)) continue;
    if (!reserve(port)) continue;
    handedOut.insert(port);
    return port;
  }
  return 0;
}

}  // namespace vgpu::realk8s
