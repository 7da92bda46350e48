// vgpu_http: asynchronous Beast sessions on a small thread pool. Plain handlers run on the
// I/O threads (they are short), so `threads` also bounds how many of them are handled at
// once. Blocking routes' handlers run on a separate bounded pool: a request to one parks its
// connection (no further read until it is answered, which keeps HTTP/1.1 ordering) and its
// answer is written back on the connection's strand, while the I/O threads go on serving.

#include "vgpu/http/server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <deque>
#include <optional>
#include <stop_token>
#include <thread>
#include <unordered_map>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace vgpu::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using ErrorCode = boost::system::error_code;

constexpr std::size_t kHeaderLimit = 64 * 1024;
constexpr std::size_t kReadChunk = 64 * 1024;
// How long a connection closed after an error keeps draining what the peer still sends,
// so the peer reads our answer (e.g. 413) instead of a reset.
constexpr std::chrono::milliseconds kLingerTime{1000};

}  // namespace

std::string_view Request::header(std::string_view lowerName) const {
  auto it = headers.find(std::string(lowerName));
  return it == headers.end() ? std::string_view{} : std::string_view(it->second);
}

Response Response::json(std::string body, int status) {
  Response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

Response Response::text(std::string body, int status) {
  Response r;
  r.status = status;
  r.contentType = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

void Router::add(std::string method, std::string path, Handler handler, bool blocking) {
  routes_[std::move(path)][std::move(method)] = Route{std::move(handler), blocking};
}

bool Router::blocking(const Request& request) const {
  auto byPath = routes_.find(request.path);
  if (byPath == routes_.end()) return false;
  auto byMethod = byPath->second.find(request.method);
  return byMethod != byPath->second.end() && byMethod->second.blocking;
}

bool Router::hasBlocking() const {
  for (const auto& [path, methods] : routes_)
    for (const auto& [method, route] : methods)
      if (route.blocking) return true;
  return false;
}

Response Router::dispatch(const Request& request) const {
  auto byPath = routes_.find(request.path);
  if (byPath == routes_.end()) return Response::text("no such endpoint: " + request.path + "\n", 404);
  auto byMethod = byPath->second.find(request.method);
  if (byMethod == byPath->second.end()) {
    std::string allow;
    for (const auto& [method, route] : byPath->second) allow += (allow.empty() ? "" : ", ") + method;
    Response r = Response::text(request.path + " accepts " + allow + ", not " + request.method + "\n", 405);
    r.headers.emplace_back("Allow", allow);
    return r;
  }
  try {
    return byMethod->second.handler(request);
  } catch (const std::exception& e) {
    return Response::text(std::string("internal error: ") + e.what() + "\n", 500);
  } catch (...) {
    return Response::text("internal error\n", 500);
  }
}

namespace {

// The blocking routes' workers. Bounded: when every worker is busy and `capacity` jobs
// wait, submit refuses and the caller answers 503 at once instead of queueing without end.
class BlockingPool {
 public:
  /// Called once, on a worker with `run` true; or with `run` false when the pool stopped
  /// before it started (answer without running the handler).
  using Job = std::function<void(bool run)>;

  ~BlockingPool() { stop(); }

  void start(int threads, std::size_t capacity) {
    capacity_ = capacity;
    for (int i = 0; i < std::max(1, threads); ++i) {
      ++idle_;
      workers_.emplace_back([this] { work(); });
    }
  }
  bool submit(Job job) {
    {
      std::lock_guard lock(mu_);
      // Jobs an idle worker is about to take do not count against the queue.
      if (stopping_ || workers_.empty() || pending_.size() >= idle_ + capacity_) return false;
      pending_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }
  /// Refuses what still waits, then waits for the jobs running. Safe to call twice.
  void stop() {
    std::deque<Job> refused;
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
      refused.swap(pending_);
    }
    cv_.notify_all();
    for (auto& job : refused) job(false);
    for (auto& t : workers_)
      if (t.joinable()) t.join();
  }

 private:
  void work() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping
      Job job = std::move(pending_.front());
      pending_.pop_front();
      --idle_;
      lock.unlock();
      job(true);
      job = nullptr;  // the connection it holds goes before the lock is taken again
      lock.lock();
      ++idle_;
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> pending_;
  std::size_t idle_ = 0, capacity_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  /// Closes the connection unless a request is being handled or answered.
  virtual void closeIfIdle() = 0;
  virtual void closeNow() = 0;
};

struct Server::Impl {
  ServerOptions options;
  Router router;
  std::unique_ptr<ssl::context> sslCtx;

  std::mutex mu;
  std::condition_variable cv;
  std::unordered_map<std::uint64_t, std::weak_ptr<SessionBase>> sessions;
  std::uint64_t nextId = 0;
  bool stopped = false;

  std::atomic<bool> stopping{false};
  std::atomic<std::uint64_t> connections{0};
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint64_t> busy{0};
  std::uint16_t port = 0;
  std::vector<std::thread> threads;
  std::stop_source cancel;  // requested when stop's grace has run out
  // Stopped (its queue emptied, its workers joined) in stop(), before the I/O context goes:
  // queued jobs hold sessions, whose sockets need the context.
  BlockingPool blocking;

  // Declared last: destroyed first, while the members sessions touch are still alive.
  net::io_context ioc;
  std::optional<tcp::acceptor> acceptor;
  // Keeps the I/O threads running while their only work is a blocking handler's answer,
  // still to be posted (after the acceptor closed in stop, say).
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;

  void accept();
  void forget(std::uint64_t id) {
    std::lock_guard lock(mu);
    sessions.erase(id);
    cv.notify_all();
  }
  std::vector<std::shared_ptr<SessionBase>> liveSessions() {
    std::vector<std::shared_ptr<SessionBase>> out;
    std::lock_guard lock(mu);
    for (auto& [id, weak] : sessions)
      if (auto s = weak.lock()) out.push_back(std::move(s));
    return out;
  }
};

namespace {

template <class Stream>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

 public:
  template <class... Args>
  Session(Server::Impl& server, std::uint64_t id, tcp::socket&& socket, Args&&... args)
      : server_(server), id_(id), stream_(std::move(socket), std::forward<Args>(args)...) {
    // Beast reads no more than the buffer's free capacity at a time (512 bytes when it
    // starts empty): a filter request of 5,000 node names would take ~120 reads.
    buffer_.reserve(kReadChunk);
    ErrorCode ec;
    auto ep = beast::get_lowest_layer(stream_).socket().remote_endpoint(ec);
    if (!ec) remote_ = ep.address().to_string() + ":" + std::to_string(ep.port());
  }
  ~Session() override { server_.forget(id_); }

  void run() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] {
      if constexpr (kTls) {
        beast::get_lowest_layer(self->stream_).expires_after(self->server_.options.readTimeout);
        self->stream_.async_handshake(ssl::stream_base::server, [self](ErrorCode ec) {
          if (ec) return self->close();
          self->read();
        });
      } else {
        self->read();
      }
    });
  }

  void closeIfIdle() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] {
      if (!self->busy_) self->close();
    });
  }
  void closeNow() override {
    net::post(stream_.get_executor(), [self = this->shared_from_this()] { self->close(); });
  }

 private:
  void read() {
    if (server_.stopping) return close();
    parser_.emplace();
    parser_->body_limit(server_.options.maxBodyBytes);
    parser_->header_limit(kHeaderLimit);
    beast::get_lowest_layer(stream_).expires_after(server_.options.readTimeout);
    bhttp::async_read(stream_, buffer_, *parser_,
                      [self = this->shared_from_this()](ErrorCode ec, std::size_t) { self->onRead(ec); });
  }

  void onRead(ErrorCode ec) {
    if (ec == bhttp::error::body_limit) {
      return answerError(413, "request body over the limit of " + std::to_string(server_.options.maxBodyBytes) +
                                  " bytes\n");
    }
    if (ec == bhttp::error::end_of_stream || ec == net::error::operation_aborted || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == net::error::eof || ec == ssl::error::stream_truncated) {
      return close();
    }
    if (ec) {
      // A malformed request: say so, once, then close (the stream cannot be trusted).
      if (parser_ && parser_->got_some()) return answerError(400, "malformed HTTP request: " + ec.message() + "\n");
      return close();
    }
    busy_ = true;
    auto req = parser_->release();
    Request request;
    request.method = std::string(req.method_string());
    std::string_view target = req.target();
    auto q = target.find('?');
    request.path = std::string(target.substr(0, q));
    if (q != std::string_view::npos) request.query = std::string(target.substr(q + 1));
    request.body = std::move(req.body());
    request.remote = remote_;
    request.stop = server_.cancel.get_token();
    for (const auto& field : req) {
      std::string name(field.name_string());
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
      request.headers[std::move(name)] = std::string(field.value());
    }
    if (server_.router.blocking(request)) return offload(std::move(request), req.keep_alive(), req.version());
    Response response = server_.router.dispatch(request);
    write(std::move(response), req.keep_alive() && !server_.stopping, req.version(), false);
  }

  // The connection reads nothing more until the worker's answer is written.
  void offload(Request request, bool keepAlive, unsigned version) {
    const std::string path = request.path;
    auto job = [self = this->shared_from_this(), request = std::move(request), keepAlive, version](bool run) {
      Response response = run ? self->server_.router.dispatch(request)
                              : Response::text("server stopping: " + request.path + " was not handled; retry\n", 503);
      net::post(self->stream_.get_executor(), [self, response = std::move(response), keepAlive, version]() mutable {
        self->write(std::move(response), keepAlive && !self->server_.stopping, version, false);
      });
    };
    if (server_.blocking.submit(std::move(job))) return;
    server_.busy.fetch_add(1);
    Response busy = Response::text("server busy: every worker for " + path + " is taken (" +
                                       std::to_string(std::max(1, server_.options.blockingThreads)) + " workers, " +
                                       std::to_string(server_.options.blockingQueue) +
                                       " queued); retry shortly\n",
                                   503);
    busy.headers.emplace_back("Retry-After", "1");
    write(std::move(busy), keepAlive && !server_.stopping, version, false);
  }

  void answerError(int status, std::string message) {
    busy_ = true;
    write(Response::text(std::move(message), status), false, 11, true);
  }

  void write(Response response, bool keepAlive, unsigned version, bool linger) {
    res_ = {};
    res_.version(version);
    res_.result(static_cast<unsigned>(response.status));
    res_.set(bhttp::field::server, "vgpu");
    res_.set(bhttp::field::content_type, response.contentType);
    for (auto& [name, value] : response.headers) res_.set(name, value);
    res_.body() = std::move(response.body);
    res_.keep_alive(keepAlive);
    res_.prepare_payload();
    server_.requests.fetch_add(1);
    beast::get_lowest_layer(stream_).expires_after(server_.options.writeTimeout);
    bhttp::async_write(stream_, res_, [self = this->shared_from_this(), keepAlive, linger](ErrorCode ec, std::size_t) {
      self->busy_ = false;
      if (ec) return self->close();
      if (keepAlive) return self->awaitNext();
      if (linger) return self->lingerClose();
      self->close();
    });
  }

  /// Between requests on a kept-alive connection: waits up to idleTimeout for the next
  /// one's first bytes, then gives its headers and body readTimeout as usual.
  void awaitNext() {
    if (server_.stopping) return close();
    if (buffer_.size() > 0) return read();  // pipelined: already here
    beast::get_lowest_layer(stream_).expires_after(server_.options.idleTimeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk), [self = this->shared_from_this()](ErrorCode ec, std::size_t n) {
      if (ec) return self->close();
      self->buffer_.commit(n);
      self->read();
    });
  }

  void lingerClose() {
    auto& tcpStream = beast::get_lowest_layer(stream_);
    ErrorCode ignored;
    tcpStream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    tcpStream.expires_after(kLingerTime);
    drain();
  }
  void drain() {
    beast::get_lowest_layer(stream_).async_read_some(
        net::buffer(discard_), [self = this->shared_from_this()](ErrorCode ec, std::size_t) {
          if (ec) return self->close();
          self->drain();
        });
  }

  void close() {
    ErrorCode ignored;
    auto& sock = beast::get_lowest_layer(stream_).socket();
    if (!sock.is_open()) return;
    sock.shutdown(tcp::socket::shutdown_both, ignored);
    sock.close(ignored);
  }

  Server::Impl& server_;
  std::uint64_t id_;
  Stream stream_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  bhttp::response<bhttp::string_body> res_;
  std::array<char, 16 * 1024> discard_{};
  bool busy_ = false;
};

}  // namespace

void Server::Impl::accept() {
  acceptor->async_accept(net::make_strand(ioc), [this](ErrorCode ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor->is_open()) return;
    if (!ec && !stopping) {
      connections.fetch_add(1);
      ErrorCode ignored;
      socket.set_option(tcp::no_delay(true), ignored);
      std::shared_ptr<SessionBase> session;
      std::uint64_t id;
      {
        std::lock_guard lock(mu);
        id = nextId++;
      }
      if (sslCtx) {
        auto s = std::make_shared<Session<beast::ssl_stream<beast::tcp_stream>>>(*this, id, std::move(socket), *sslCtx);
        session = s;
        { std::lock_guard lock(mu); sessions[id] = session; }
        s->run();
      } else {
        auto s = std::make_shared<Session<beast::tcp_stream>>(*this, id, std::move(socket));
        session = s;
        { std::lock_guard lock(mu); sessions[id] = session; }
        s->run();
      }
    }
    accept();
  });
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() { stop(); }

Result<std::unique_ptr<Server>> Server::start(ServerOptions options, Router router) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->router = std::move(router);
  const ServerOptions& o = impl->options;
  if (o.certFile.empty() != o.keyFile.empty())
    return makeError("HTTPS needs both a certificate and a key file (got only " +
                     std::string(o.certFile.empty() ? "the key" : "the certificate") + ")");
  if (!o.certFile.empty()) {
    impl->sslCtx = std::make_unique<ssl::context>(ssl::context::tls_server);
    ErrorCode ec;
    impl->sslCtx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                                  ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                              ec);
    impl->sslCtx->use_certificate_chain_file(o.certFile, ec);
    if (ec) return makeError("TLS certificate " + o.certFile + ": " + ec.message() + " (a PEM certificate chain is expected)");
    impl->sslCtx->use_private_key_file(o.keyFile, ssl::context::pem, ec);
    if (ec) return makeError("TLS key " + o.keyFile + ": " + ec.message() + " (a PEM private key is expected)");
    if (SSL_CTX_check_private_key(impl->sslCtx->native_handle()) != 1)
      return makeError("TLS key " + o.keyFile + " does not match the certificate " + o.certFile);
    if (!o.clientCaFile.empty()) {
      impl->sslCtx->load_verify_file(o.clientCaFile, ec);
      if (ec) return makeError("client CA " + o.clientCaFile + ": " + ec.message() + " (PEM certificates are expected)");
      impl->sslCtx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
  } else if (!o.clientCaFile.empty()) {
    return makeError("a client CA (" + o.clientCaFile + ") needs HTTPS: give a certificate and a key too");
  }
  ErrorCode ec;
  auto address = net::ip::make_address(o.address, ec);
  if (ec) return makeError("listen address \"" + o.address + "\" is not an IP address");
  tcp::endpoint endpoint(address, o.port);
  impl->acceptor.emplace(impl->ioc);
  impl->acceptor->open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor->set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(endpoint, ec);
  if (!ec) impl->acceptor->listen(net::socket_base::max_listen_connections, ec);
  if (ec) return makeError("cannot listen on " + o.address + ":" + std::to_string(o.port) + ": " + ec.message());
  impl->port = impl->acceptor->local_endpoint().port();
  impl->accept();
  impl->work.emplace(impl->ioc.get_executor());
  if (impl->router.hasBlocking()) impl->blocking.start(o.blockingThreads, o.blockingQueue);
  const int threads = std::max(1, o.threads);
  Impl* raw = impl.get();
  for (int i = 0; i < threads; ++i) raw->threads.emplace_back([raw] { raw->ioc.run(); });
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

std::uint16_t Server::port() const { return impl_->port; }

bool Server::tls() const { return impl_->sslCtx != nullptr; }

std::string Server::url() const {
  std::string host = impl_->options.address;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return std::string(tls() ? "https://" : "http://") + host + ":" + std::to_string(impl_->port);
}

ServerStats Server::stats() const {
  return {impl_->connections.load(), impl_->requests.load(), impl_->busy.load()};
}

void Server::stop(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mu);
    if (s.stopped) return;
    s.stopped = true;
  }
  s.stopping = true;
  net::post(s.ioc, [&s] {
    ErrorCode ignored;
    s.acceptor->close(ignored);
  });
  for (auto& session : s.liveSessions()) session->closeIfIdle();
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, grace, [&s] { return s.sessions.empty(); });
  }
  s.cancel.request_stop();
  for (auto& session : s.liveSessions()) session->closeNow();
  // Queued blocking requests are answered 503 (on connections just closed: nobody reads it),
  // the running ones have been told to give up and are waited for.
  s.blocking.stop();
  {
    std::unique_lock lock(s.mu);
    s.cv.wait_for(lock, std::chrono::milliseconds(1000), [&s] { return s.sessions.empty(); });
  }
  s.ioc.stop();
  for (auto& t : s.threads)
    if (t.joinable()) t.join();
}

}  // namespace vgpu::http
