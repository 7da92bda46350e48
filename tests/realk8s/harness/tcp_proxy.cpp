// TcpProxy: one thread accepting, one thread per relayed connection moving bytes both ways
// with poll() in 100 ms steps, so that hold(), dropAll() and the destructor act within one.
#include "tcp_proxy.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "free_port.h"

namespace vgpu::realk8s {

namespace {
sockaddr_in loopback(std::uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

/// Moves what `from` has to `to`; false when either side is closed.
bool pump(int from, int to) {
  char buf[16384];
  const ssize_t n = ::read(from, buf, sizeof buf);
  if (n <= 0) return false;
  for (ssize_t off = 0; off < n;) {
    const ssize_t w = ::write(to, buf + off, static_cast<size_t>(n - off));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += w;
  }
  return true;
}
}  // namespace

Result<std::unique_ptr<TcpProxy>> TcpProxy::start(std::uint16_t upstreamPort) {
  const std::uint16_t port = freePort();
  if (port == 0) return makeError("TcpProxy: no free port");
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return makeError(std::string("TcpProxy: socket: ") + std::strerror(errno));
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in a = loopback(port);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 128) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return makeError("TcpProxy: listening on 127.0.0.1:" + std::to_string(port) + ": " + why);
  }
  return std::unique_ptr<TcpProxy>(new TcpProxy(fd, port, upstreamPort));
}

TcpProxy::TcpProxy(int listenFd, std::uint16_t port, std::uint16_t upstreamPort)
    : listenFd_(listenFd), port_(port), upstreamPort_(upstreamPort) {
  acceptor_ = std::thread([this] { acceptLoop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  if (acceptor_.joinable()) acceptor_.join();
  ::close(listenFd_);
  std::lock_guard lock(mu_);
  for (auto& r : relays_)
    if (r.thread.joinable()) r.thread.join();
}

void TcpProxy::dropAll() { ++generation_; }

void TcpProxy::acceptLoop() {
  while (!stopping_) {
    pollfd p{listenFd_, POLLIN, 0};
    // While held, connections queue in the backlog unanswered, as behind a stalled link.
    if (held_ || ::poll(&p, 1, 100) <= 0) {
      if (held_) ::usleep(100000);
      continue;
    }
    const int client = ::accept4(listenFd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    ++accepted_;
    std::lock_guard lock(mu_);
    for (auto it = relays_.begin(); it != relays_.end();) {
      if (!*it->done) {
        ++it;
        continue;
      }
      it->thread.join();
      it = relays_.erase(it);
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    relays_.push_back({std::thread([this, client, g = generation_.load(), done] { relay(client, g, *done); }), done});
  }
}

void TcpProxy::relay(int client, std::uint64_t generation, std::atomic<bool>& done) {
  const int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in a = loopback(upstreamPort_);
  if (upstream < 0 || ::connect(upstream, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    if (upstream >= 0) ::close(upstream);
    ::close(client);  // as a refused connection: the client retries
    done = true;
    return;
  }
  while (!stopping_ && generation_ == generation) {
    if (held_) {
      ::usleep(100000);
      continue;
    }
    pollfd p[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
    if (::poll(p, 2, 100) <= 0) continue;
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(client, upstream)) break;
    if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && !pump(upstream, client)) break;
  }
  // A reset, not a polite FIN, when dropped: what a broken link looks like to the client.
  if (generation_ != generation) {
    const linger l{1, 0};
    ::setsockopt(client, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  }
  ::close(upstream);
  ::close(client);
  done = true;
}

}  // namespace vgpu::realk8s
