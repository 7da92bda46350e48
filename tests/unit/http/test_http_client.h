#pragma once
// A blocking HTTP/1.1 client for tests and benchmarks of vgpu_http servers: one keep-alive
// connection (reopened when the server closed it), optional TLS without verification.

#include <map>
#include <memory>
#include <optional>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace vgpu::testing {

struct HttpReply {
  int status = 0;  ///< 0: no answer (connection failed or was cut)
  std::string body;
  std::map<std::string, std::string> headers;
  std::string error;
};

class TestHttpClient {
 public:
  explicit TestHttpClient(std::uint16_t port, bool tls = false)
      : port_(port), tls_(tls), sslCtx_(boost::asio::ssl::context::tls_client) {
    sslCtx_.set_verify_mode(boost::asio::ssl::verify_none);
  }

  HttpReply post(const std::string& target, const std::string& body) { return request("POST", target, body); }
  HttpReply get(const std::string& target) { return request("GET", target, ""); }

  HttpReply request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& contentType = "application/json") {
    namespace http = boost::beast::http;
    HttpReply reply;
    for (int attempt = 0; attempt < 2; ++attempt) {
      boost::system::error_code ec;
      if (!connected_ && !connect(ec)) {
        reply.error = "connect: " + ec.message();
        return reply;
      }
      http::request<http::string_body> req{http::string_to_verb(method), target, 11};
      req.set(http::field::host, "127.0.0.1");
      req.set(http::field::content_type, contentType);
      req.body() = body;
      req.keep_alive(true);
      req.prepare_payload();
      http::response<http::string_body> res;
      boost::beast::flat_buffer buffer;
      buffer.reserve(64 * 1024);  // Beast reads at most the free capacity: 512 bytes when empty
      if (tls_) {
        http::write(*tlsStream_, req, ec);
        if (!ec) http::read(*tlsStream_, buffer, res, ec);
      } else {
        http::write(*socket_, req, ec);
        if (!ec) http::read(*socket_, buffer, res, ec);
      }
      if (ec) {
        connected_ = false;
        reply.error = ec.message();
        if (attempt == 0 && requestsOnConnection_ > 0) {  // the server closed an idle keep-alive
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
  bool connect(boost::system::error_code& ec) {
    using tcp = boost::asio::ip::tcp;
    requestsOnConnection_ = 0;
    tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), port_);
    if (tls_) {
      tlsStream_ = std::make_unique<boost::asio::ssl::stream<tcp::socket>>(ioc_, sslCtx_);
      tlsStream_->next_layer().connect(ep, ec);
      if (!ec) tlsStream_->handshake(boost::asio::ssl::stream_base::client, ec);
    } else {
      socket_ = std::make_unique<tcp::socket>(ioc_);
      socket_->connect(ep, ec);
      if (!ec) socket_->set_option(tcp::no_delay(true), ec);
    }
    connected_ = !ec;
    return connected_;
  }

  std::uint16_t port_;
  bool tls_;
  boost::asio::io_context ioc_;
  boost::asio::ssl::context sslCtx_;
  std::unique_ptr<boost::asio::ip::tcp::socket> socket_;
  std::unique_ptr<boost::asio::ssl::stream<boost::asio::ip::tcp::socket>> tlsStream_;
  bool connected_ = false;
  int requestsOnConnection_ = 0;
};

}  // namespace vgpu::testing
