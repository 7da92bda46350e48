#pragma once
// A loopback TCP relay the harness puts between a component and kube-apiserver, so that a
// test can break that one connection path: drop every relayed connection, or hold them
// (bytes stop moving both ways, the sockets stay open) as a stalled network would.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::realk8s {

class TcpProxy {
 public:
  /// Listens on 127.0.0.1 at a port of freePort() and relays each connection to
  /// 127.0.0.1:`upstreamPort` (TLS passes through untouched: the server's certificate names
  /// 127.0.0.1, whatever the port).
  static Result<std::unique_ptr<TcpProxy>> start(std::uint16_t upstreamPort);
  ~TcpProxy();  ///< closes the listener and every relayed connection
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;

  std::uint16_t port() const { return port_; }
  /// Closes every relayed connection now (the client sees a reset or EOF); new ones pass.
  void dropAll();
  /// While held, no byte moves on any connection and new connections wait unanswered.
  void hold(bool on) { held_ = on; }
  /// Connections relayed since the start.
  std::uint64_t accepted() const { return accepted_; }

 private:
  TcpProxy(int listenFd, std::uint16_t port, std::uint16_t upstreamPort);
  void acceptLoop();
  void relay(int client, std::uint64_t generation, std::atomic<bool>& done);

  int listenFd_;
  std::uint16_t port_;
  std::uint16_t upstreamPort_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> held_{false};
  std::atomic<std::uint64_t> generation_{0};  ///< dropAll() bumps it; older relays close
  std::atomic<std::uint64_t> accepted_{0};
  std::mutex mu_;
  struct Relay {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Relay> relays_;  ///< finished ones joined at the next accept
  std::thread acceptor_;
};

}  // namespace vgpu::realk8s
