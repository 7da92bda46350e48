// The one translation unit with Beast in the client. Each connection owns its io_context
// and is driven by the calling thread, so a blocking call needs no background thread and
// every operation has a deadline (beast::tcp_stream's expiry).

#include "http_transport.h"

#include <limits>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <openssl/ssl.h>

namespace vgpu::k8s::detail {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using ErrorCode = boost::system::error_code;

// Starts one async operation and runs the connection's io_context until it completes.
template <class Start>
ErrorCode runOp(net::io_context& ioc, Start&& start) {
  ErrorCode result = net::error::would_block;
  start([&result](ErrorCode ec, auto&&...) { result = ec; });
  ioc.restart();
  ioc.run();
  return result;
}

bool isIpAddress(const std::string& host) {
  ErrorCode ec;
  net::ip::make_address(host, ec);
  return !ec;
}

std::string hostHeader(const Endpoint& e) {
  std::string host = e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
  return host + ":" + e.port;
}

}  // namespace

struct HttpTransport::Tls {
  ssl::context ctx{ssl::context::tls_client};
};

struct HttpTransport::Connection {
  std::shared_ptr<HttpTransport::Tls> tlsContext;  // outlives the stream that uses it
  net::io_context ioc{1};
  std::unique_ptr<beast::tcp_stream> plain;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls;
  beast::flat_buffer buffer;

  // Beast reads at most the buffer's free capacity at a time, 512 bytes when it starts
  // empty: a list of 5,000 nodes would take thousands of reads.
  Connection() { buffer.reserve(64 * 1024); }

  beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*tls) : *plain; }
  template <class F>
  void visit(F&& f) {
    if (tls) {
      f(*tls);
    } else {
      f(*plain);
    }
  }
};

namespace {

// While alive, lets `token` interrupt whatever operation runs on `c`. Reset it before the
// connection goes back to the pool or away.
class CancelGuard {
 public:
  template <class Conn>
  CancelGuard(CancelToken* token, Conn* c) : token_(token) {
    if (token_) {
      token_->setCanceller([c] { net::post(c->ioc, [c] { c->lowest().cancel(); }); });
    }
  }
  ~CancelGuard() { reset(); }
  void reset() {
    if (token_) token_->setCanceller(nullptr);
    token_ = nullptr;
  }
  CancelGuard(const CancelGuard&) = delete;
  CancelGuard& operator=(const CancelGuard&) = delete;

 private:
  CancelToken* token_;
};

bool isCancelled(CancelToken* token) { return token != nullptr && token->cancelled(); }

}  // namespace

namespace {

Status configureTls(ssl::context& ctx, const Endpoint& endpoint) {
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                  ssl::context::no_sslv3 | ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  ErrorCode ec;
  if (!endpoint.caPem.empty()) {
    ctx.add_certificate_authority(net::buffer(endpoint.caPem), ec);
    if (ec) return makeError("the CA certificate is not valid PEM: " + ec.message());
  } else {
    ctx.set_default_verify_paths(ec);
    if (ec) return makeError("cannot load the system CA store: " + ec.message());
  }
  if (!endpoint.clientCertPem.empty() || !endpoint.clientKeyPem.empty()) {
    if (endpoint.clientCertPem.empty() || endpoint.clientKeyPem.empty())
      return makeError("a client certificate needs both the certificate and the key");
    ctx.use_certificate_chain(net::buffer(endpoint.clientCertPem), ec);
    if (ec) return makeError("the client certificate is not valid PEM: " + ec.message());
    ctx.use_private_key(net::buffer(endpoint.clientKeyPem), ssl::context::pem, ec);
    if (ec) return makeError("the client key is not valid PEM or does not match: " + ec.message());
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<HttpTransport>> HttpTransport::create(const Endpoint& endpoint) {
  std::unique_ptr<HttpTransport> t(new HttpTransport());
  t->endpoint_ = endpoint;
  if (endpoint.tls) {
    t->tls_ = std::make_shared<Tls>();
    if (auto s = configureTls(t->tls_->ctx, endpoint); !s) return s.error();
  }
  return t;
}

Status HttpTransport::setClientCertificate(const std::string& certPem, const std::string& keyPem) {
  if (!endpoint_.tls) return {};
  Endpoint e = endpoint_;
  e.clientCertPem = certPem;
  e.clientKeyPem = keyPem;
  auto fresh = std::make_shared<Tls>();
  if (auto s = configureTls(fresh->ctx, e); !s) return s.error();
  std::vector<std::unique_ptr<Connection>> old;
  {
    std::lock_guard lock(mu_);
    tls_ = std::move(fresh);
    old.swap(idle_);
  }
  return {};
}

HttpTransport::~HttpTransport() = default;

std::unique_ptr<HttpTransport::Connection> HttpTransport::acquire(bool& reused) {
  std::lock_guard lock(mu_);
  if (idle_.empty()) return nullptr;
  auto c = std::move(idle_.back());
  idle_.pop_back();
  reused = true;
  return c;
}

void HttpTransport::release(std::unique_ptr<Connection> c) {
  // A cancel that raced with the end of the last call may have left a handler queued: run
  // it now, while no operation is pending, rather than into the next user's request.
  c->ioc.restart();
  c->ioc.poll();
  std::lock_guard lock(mu_);
  if (idle_.size() < endpoint_.maxIdle && c->tlsContext == tls_) idle_.push_back(std::move(c));
}

Result<std::unique_ptr<HttpTransport::Connection>> HttpTransport::connect(
    std::chrono::milliseconds timeout) {
  auto c = std::make_unique<Connection>();
  tcp::resolver resolver(c->ioc);
  ErrorCode ec;
  auto endpoints = resolver.resolve(endpoint_.host, endpoint_.port, ec);
  if (ec) return makeError("cannot resolve " + endpoint_.host + ": " + ec.message());
  {
    std::lock_guard lock(mu_);
    c->tlsContext = tls_;
  }
  if (c->tlsContext) {
    c->tls = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(c->ioc, c->tlsContext->ctx);
  } else {
    c->plain = std::make_unique<beast::tcp_stream>(c->ioc);
  }
  c->lowest().expires_after(timeout);
  ec = runOp(c->ioc, [&](auto h) { c->lowest().async_connect(endpoints, h); });
  if (ec) return makeError("cannot connect to " + hostHeader(endpoint_) + ": " + ec.message());
  c->lowest().socket().set_option(tcp::no_delay(true), ec);
  if (c->tls) {
    const std::string& name = endpoint_.serverName.empty() ? endpoint_.host : endpoint_.serverName;
    if (!isIpAddress(name)) SSL_set_tlsext_host_name(c->tls->native_handle(), name.c_str());
    if (endpoint_.insecureSkipVerify) {
      c->tls->set_verify_mode(ssl::verify_none);
    } else {
      c->tls->set_verify_mode(ssl::verify_peer);
      c->tls->set_verify_callback(ssl::host_name_verification(name));
    }
    ec = runOp(c->ioc, [&](auto h) { c->tls->async_handshake(ssl::stream_base::client, h); });
    if (ec) {
      return makeError("TLS handshake with " + hostHeader(endpoint_) + " failed: " + ec.message() +
                       " (check the CA, the server name and the client certificate)");
    }
  }
  opened_.fetch_add(1);
  return c;
}

namespace {

http::request<http::string_body> buildMessage(const HttpRequest& r, const Endpoint& e) {
  http::request<http::string_body> msg;
  msg.method_string(r.method);
  msg.target(r.target);
  msg.version(11);
  msg.set(http::field::host, hostHeader(e));
  for (const auto& [k, v] : r.headers) msg.set(k, v);
  msg.keep_alive(true);
  if (!r.body.empty() || r.method == "POST" || r.method == "PATCH" || r.method == "PUT") {
    msg.body() = r.body;
  }
  msg.prepare_payload();
  return msg;
}

}  // namespace

Error HttpTransport::bodyTooLarge() const {
  return makeError("the response from " + hostHeader(endpoint_) + " is larger than " +
                   std::to_string(endpoint_.maxBodyBytes) + " bytes (ClientOptions::maxResponseBytes)");
}

Result<HttpResponse> HttpTransport::send(const HttpRequest& request,
                                         std::chrono::milliseconds timeout, CancelToken* cancel) {
  auto msg = buildMessage(request, endpoint_);
  // A pooled connection may have been closed by the server while idle: one retry on a
  // fresh connection covers that without counting as a failure.
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    auto c = attempt == 0 ? acquire(reused) : nullptr;
    if (!c) {
      auto fresh = connect(timeout);
      if (!fresh) return std::move(fresh).error();
      c = std::move(*fresh);
    }
    CancelGuard guard(cancel, c.get());
    if (isCancelled(cancel)) return makeError("cancelled");
    c->lowest().expires_after(timeout);
    ErrorCode ec = runOp(c->ioc, [&](auto h) {
      c->visit([&](auto& s) { http::async_write(s, msg, h); });
    });
    http::response_parser<http::string_body> parser;
    parser.body_limit(static_cast<std::uint64_t>(endpoint_.maxBodyBytes));
    parser.header_limit(1 << 20);
    if (!ec && !isCancelled(cancel)) {
      ec = runOp(c->ioc, [&](auto h) {
        c->visit([&](auto& s) { http::async_read(s, c->buffer, parser, h); });
      });
    }
    if (isCancelled(cancel)) return makeError("cancelled");
    if (ec) {
      if (reused && ec != beast::error::timeout) continue;
      if (ec == beast::error::timeout) {
        return makeError("no response within " + std::to_string(timeout.count()) + " ms");
      }
      if (ec == http::error::body_limit) return bodyTooLarge();
      return makeError("connection to " + hostHeader(endpoint_) + " failed: " + ec.message());
    }
    auto& res = parser.get();
    HttpResponse out;
    out.status = static_cast<int>(res.result_int());
    out.retryAfter = std::string(res[http::field::retry_after]);
    out.body = std::move(res.body());
    guard.reset();
    if (res.keep_alive()) release(std::move(c));
    return out;
  }
}

Result<HttpResponse> HttpTransport::stream(const HttpRequest& request,
                                           std::chrono::milliseconds connectTimeout,
                                           std::chrono::milliseconds idleTimeout,
                                           const std::function<bool(std::string_view)>& onData,
                                           CancelToken* cancel) {
  auto msg = buildMessage(request, endpoint_);
  for (int attempt = 0;; ++attempt) {
    bool reused = false;
    auto c = attempt == 0 ? acquire(reused) : nullptr;
    if (!c) {
      auto fresh = connect(connectTimeout);
      if (!fresh) return std::move(fresh).error();
      c = std::move(*fresh);
    }
    CancelGuard guard(cancel, c.get());
    HttpResponse out;
    if (isCancelled(cancel)) return out;  // status 0: nothing was asked
    c->lowest().expires_after(connectTimeout);
    ErrorCode ec = runOp(c->ioc, [&](auto h) {
      c->visit([&](auto& s) { http::async_write(s, msg, h); });
    });
    http::response_parser<http::buffer_body> parser;
    parser.body_limit(boost::none);
    parser.header_limit(1 << 20);
    if (!ec && !isCancelled(cancel)) {
      ec = runOp(c->ioc, [&](auto h) {
        c->visit([&](auto& s) { http::async_read_header(s, c->buffer, parser, h); });
      });
    }
    if (isCancelled(cancel)) return out;
    if (ec) {
      if (reused && ec != beast::error::timeout) continue;
      return makeError("connection to " + hostHeader(endpoint_) + " failed: " + ec.message());
    }
    out.status = static_cast<int>(parser.get().result_int());
    out.retryAfter = std::string(parser.get()[http::field::retry_after]);
    std::string buf(64 * 1024, '\0');
    bool stopped = false;
    Result<HttpResponse> result = out;
    while (!parser.is_done()) {
      if (cancel && cancel->cancelled()) {
        stopped = true;
        break;
      }
      parser.get().body().data = buf.data();
      parser.get().body().size = buf.size();
      c->lowest().expires_after(out.status == 200 ? idleTimeout : connectTimeout);
      ec = runOp(c->ioc, [&](auto h) {
        c->visit([&](auto& s) { http::async_read_some(s, c->buffer, parser, h); });
      });
      if (ec == http::error::need_buffer) ec = {};
      std::size_t n = buf.size() - parser.get().body().size;
      if (n > 0) {
        if (out.status == 200) {
          if (!onData(std::string_view(buf.data(), n))) {
            stopped = true;
            break;
          }
        } else if (result.value().body.size() + n > endpoint_.maxBodyBytes) {
          result = bodyTooLarge();
          stopped = true;
          break;
        } else {
          result.value().body.append(buf.data(), n);
        }
      }
      if (ec) {
        stopped = true;
        if (cancel && cancel->cancelled()) break;
        if (ec == beast::error::timeout) {
          result = makeError("no data for " + std::to_string(idleTimeout.count()) + " ms");
        } else {
          result = makeError("stream from " + hostHeader(endpoint_) + " broken: " + ec.message());
        }
        break;
      }
    }
    guard.reset();
    if (!stopped && parser.get().keep_alive()) release(std::move(c));
    return result;
  }
}

}  // namespace vgpu::k8s::detail
