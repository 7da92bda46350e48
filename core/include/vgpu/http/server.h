#pragma once
// A small HTTP/1.1 server for the daemons' endpoints (scheduler extender, webhook,
// /metrics, /healthz): routes by method and exact path, a body size cap, read/write
// timeouts, optional TLS from PEM files, port 0 for tests and a graceful stop. Handlers
// are plain functions from Request to Response; no Beast type appears here. Routes whose
// handlers wait on something slow (the apiserver) are added as blocking: they run on a
// bounded pool of workers, so the I/O threads keep answering the other routes meanwhile.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::http {

struct Request {
  std::string method;  ///< "GET", "POST", ...
  std::string path;    ///< the target without its query, e.g. "/filter"
  std::string query;   ///< after '?', undecoded; empty when absent
  std::string body;
  std::string remote;  ///< "address:port" of the peer, for logs
  /// Header names in lower case.
  std::map<std::string, std::string> headers;
  /// Requested when Server::stop's grace has run out: a blocking handler that can give up
  /// early (stop waits for it) should then do so.
  std::stop_token stop;

  /// A header's value by lower-case name, or "" when absent.
  std::string_view header(std::string_view lowerName) const;
};

struct Response {
  int status = 200;
  std::string contentType = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  ///< extra headers

  static Response json(std::string body, int status = 200);
  static Response text(std::string body, int status = 200);
};

/// Runs on one of the server's I/O threads, or for a blocking route on one of its blocking
/// workers; must be thread-safe. Only a blocking route's handler may wait on anything slow
/// (e.g. the apiserver), for as long as the peer's timeout allows: a plain one holds an I/O
/// thread, and so every connection served by it. An exception it throws is answered with
/// 500 and never reaches the server.
using Handler = std::function<Response(const Request&)>;

struct ServerOptions {
  std::string address = "127.0.0.1";  ///< "0.0.0.0" / "::" to listen everywhere
  std::uint16_t port = 0;             ///< 0 = any free port (see Server::port)
  /// Both set: HTTPS with this PEM certificate chain and private key (TLS 1.2+).
  std::string certFile;
  std::string keyFile;
  /// With HTTPS: only clients presenting a certificate signed by a CA in this PEM file are
  /// served (the handshake fails otherwise). Empty: no client certificate asked for.
  std::string clientCaFile;
  std::size_t maxBodyBytes = 4u << 20;  ///< larger bodies are answered 413
  std::chrono::milliseconds readTimeout{10000};   ///< a request's headers and body
  /// How long a kept-alive connection may sit idle between requests. Longer than clients
  /// keep theirs (Go's http.Transport, and so kube-apiserver's webhook and kube-scheduler's
  /// extender clients: 90 s), so the client always closes first: a server closing an idle
  /// connection races a request the client is sending on it, which a Go client does not
  /// send again when it is a POST (the admission review fails "broken pipe").
  std::chrono::milliseconds idleTimeout{120000};
  std::chrono::milliseconds writeTimeout{10000};
  int threads = 4;  ///< I/O threads; the handlers of plain routes run on them
  /// Workers for the handlers of blocking routes (started only when there is one); < 1 is 1.
  int blockingThreads = 4;
  /// Blocking requests waiting for a worker when all are busy; one more is answered 503.
  std::size_t blockingQueue = 64;
};

/// The one parser of the daemons' listen flags: "host:port", "[ipv6]:port" or ":port" (every
/// address, 0.0.0.0). The port is 0..65535, digits only; anything else is refused with an
/// error naming `flag` and the text. On success sets out.address and out.port.
Status parseListenAddress(std::string_view text, std::string_view flag, ServerOptions& out);

/// Routes by method and exact path. Unknown paths get 404, a known path with another
/// method 405 with an Allow header.
class Router {
 public:
  /// `blocking`: the handler may wait on something slow; it runs on the server's blocking
  /// workers (ServerOptions::blockingThreads), never on an I/O thread.
  void add(std::string method, std::string path, Handler handler, bool blocking = false);
  Router& get(std::string path, Handler handler) { add("GET", std::move(path), std::move(handler)); return *this; }
  Router& post(std::string path, Handler handler) { add("POST", std::move(path), std::move(handler)); return *this; }
  Router& getBlocking(std::string path, Handler handler) {
    add("GET", std::move(path), std::move(handler), true);
    return *this;
  }
  Router& postBlocking(std::string path, Handler handler) {
    add("POST", std::move(path), std::move(handler), true);
    return *this;
  }
  /// Runs the handler on the calling thread (the server calls it on the right one).
  Response dispatch(const Request& request) const;
  /// The request's route was added as blocking (false for unknown paths and methods).
  bool blocking(const Request& request) const;
  bool hasBlocking() const;

 private:
  struct Route {
    Handler handler;
    bool blocking = false;
  };
  std::map<std::string, std::map<std::string, Route>> routes_;  // path -> method -> route
};

/// Counters for tests and metrics.
struct ServerStats {
  std::uint64_t connections = 0;  ///< accepted so far
  std::uint64_t requests = 0;     ///< answered so far (any status)
  /// Requests to blocking routes answered 503 because every worker was busy and the queue full.
  std::uint64_t busy = 0;
};

class Server {
 public:
  /// Listens and starts the threads. Errors: the address cannot be parsed or bound, the
  /// certificate or key cannot be read or do not match (the file is named).
  static Result<std::unique_ptr<Server>> start(ServerOptions options, Router router);
  ~Server();  ///< stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  std::uint16_t port() const;
  /// "http(s)://address:port", for tests and logs.
  std::string url() const;
  bool tls() const;
  ServerStats stats() const;

  /// Stops accepting, lets requests being handled finish and answer (closing their
  /// connections afterwards), closes idle connections, waits up to `grace` and then
  /// cuts whatever is left: blocking requests still queued are answered 503, those running
  /// see Request::stop requested and are waited for (a blocking handler must return soon
  /// after, or within its own bounded timeout). Safe to call twice and from any thread but
  /// a handler's.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));

  struct Impl;  ///< Implementation detail (named by server.cpp's sessions).

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace vgpu::http
