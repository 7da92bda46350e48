#include "test_http_client.h"

#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace vgpu::testing {

class TestHttpClient::Impl {
 public:
  Impl(std::uint16_t port, bool tls)
      : port_(port), tls_(tls), sslCtx_(boost::asio::ssl::context::tls_client) {
    sslCtx_.set_verify_mode(boost::asio::ssl::verify_none);
  }

  void setTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }
  void useClientCertificate(const std::string& certFile, const std::string& keyFile) {
    sslCtx_.use_certificate_chain_file(certFile);
    sslCtx_.use_private_key_file(keyFile, boost::asio::ssl::context::pem);
  }
  void setHeader(const std::string& name, const std::string& value) {
    if (value.empty())
      extraHeaders_.erase(name);
    else
      extraHeaders_[name] = value;
  }

  HttpReply request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& contentType) {
    namespace http = boost::beast::http;
    if (timeout_) deadline_ = Clock::now() + *timeout_;
    HttpReply reply;
    for (int attempt = 0; attempt < 2; ++attempt) {
      boost::system::error_code ec;
      if (!connected_ && !connect(ec)) {
        reply.error = "connect: " + ec.message();
        return reply;
      }
      if (timeout_) tcpLayer().expires_at(deadline_);
      http::request<http::string_body> req{http::string_to_verb(method), target, 11};
      req.set(http::field::host, "127.0.0.1");
      req.set(http::field::content_type, contentType);
      for (const auto& [name, value] : extraHeaders_) req.set(name, value);
      req.body() = body;
      req.keep_alive(true);
      req.prepare_payload();
      http::response<http::string_body> res;
      boost::beast::flat_buffer buffer;
      buffer.reserve(64 * 1024);  // Beast reads at most the free capacity: 512 bytes when empty
      auto exchange = [&](auto& stream) {
        step(
            ec, [&](auto& e) { http::write(stream, req, e); },
            [&](auto done) { http::async_write(stream, req, std::move(done)); });
        if (ec) return;
        step(
            ec, [&](auto& e) { http::read(stream, buffer, res, e); },
            [&](auto done) { http::async_read(stream, buffer, res, std::move(done)); });
      };
      if (tls_)
        exchange(*tlsStream_);
      else
        exchange(*tcpStream_);
      if (ec) {
        connected_ = false;
        reply.error = ec.message();
        // The server closed an idle keep-alive: once more on a new connection (a timeout
        // has used up the deadline, so it is final).
        if (attempt == 0 && requestsOnConnection_ > 0 && ec != boost::beast::error::timeout) {
          requestsOnConnection_ = 0;
          continue;
        }
        return reply;
      }
      ++requestsOnConnection_;
      reply.status = static_cast<int>(res.result_int());
      reply.body = res.body();
      for (const auto& f : res) reply.headers[std::string(f.name_string())] = std::string(f.value());
      reply.error.clear();
      if (!res.keep_alive()) connected_ = false;
      return reply;
    }
    return reply;
  }

 private:
  using Clock = std::chrono::steady_clock;
  using TcpStream = boost::beast::tcp_stream;

  TcpStream& tcpLayer() { return tls_ ? tlsStream_->next_layer() : *tcpStream_; }

  /// One step of a request. Without a timeout it blocks (the path the benchmarks time);
  /// with one it runs asynchronously, because tcp_stream applies its expiry to asynchronous
  /// operations only.
  template <class Blocking, class Async>
  void step(boost::system::error_code& ec, Blocking blocking, Async async) {
    if (!timeout_) return blocking(ec);
    async([&ec](boost::system::error_code e, auto&&...) { ec = e; });
    ioc_.restart();
    ioc_.run();
  }

  bool connect(boost::system::error_code& ec) {
    using tcp = boost::asio::ip::tcp;
    requestsOnConnection_ = 0;
    const tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), port_);
    if (tls_)
      tlsStream_ = std::make_unique<boost::asio::ssl::stream<TcpStream>>(ioc_, sslCtx_);
    else
      tcpStream_ = std::make_unique<TcpStream>(ioc_);
    if (timeout_) tcpLayer().expires_at(deadline_);
    step(
        ec, [&](auto& e) { tcpLayer().socket().connect(ep, e); },
        [&](auto done) { tcpLayer().async_connect(ep, std::move(done)); });
    if (!ec && tls_)
      step(
          ec, [&](auto& e) { tlsStream_->handshake(boost::asio::ssl::stream_base::client, e); },
          [&](auto done) { tlsStream_->async_handshake(boost::asio::ssl::stream_base::client, std::move(done)); });
    if (!ec && !tls_) tcpLayer().socket().set_option(tcp::no_delay(true), ec);
    connected_ = !ec;
    return connected_;
  }

  std::uint16_t port_;
  bool tls_;
  std::optional<std::chrono::milliseconds> timeout_;
  Clock::time_point deadline_;  ///< of the request under way, when there is a timeout
  boost::asio::io_context ioc_;
  boost::asio::ssl::context sslCtx_;
  std::map<std::string, std::string> extraHeaders_;
  std::unique_ptr<TcpStream> tcpStream_;
  std::unique_ptr<boost::asio::ssl::stream<TcpStream>> tlsStream_;
  bool connected_ = false;
  int requestsOnConnection_ = 0;
};


TestHttpClient::TestHttpClient(std::uint16_t port, bool tls) : impl_(std::make_unique<Impl>(port, tls)) {}
TestHttpClient::~TestHttpClient() = default;
TestHttpClient::TestHttpClient(TestHttpClient&&) noexcept = default;
TestHttpClient& TestHttpClient::operator=(TestHttpClient&&) noexcept = default;

TestHttpClient& TestHttpClient::useClientCertificate(const std::string& certFile, const std::string& keyFile) {
  impl_->useClientCertificate(certFile, keyFile);
  return *this;
}

TestHttpClient& TestHttpClient::setHeader(const std::string& name, const std::string& value) {
  impl_->setHeader(name, value);
  return *this;
}

TestHttpClient& TestHttpClient::setTimeout(std::chrono::milliseconds timeout) {
  impl_->setTimeout(timeout);
  return *this;
}

HttpReply TestHttpClient::request(const std::string& method, const std::string& target, const std::string& body,
                                  const std::string& contentType) {
  return impl_->request(method, target, body, contentType);
}

}  // namespace vgpu::testing
