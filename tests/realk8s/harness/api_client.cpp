#include "api_client.h"

#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

namespace vgpu::realk8s {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using Clock = std::chrono::steady_clock;

boost::json::object ApiReply::json() const {
  boost::system::error_code ec;
  auto v = boost::json::parse(body, ec);
  if (ec || !v.is_object()) return {};
  return std::move(v.as_object());
}

std::string ApiReply::describe() const {
  if (status == 0) return "no answer: " + error;
  return "HTTP " + std::to_string(status) + ": " + body;
}

namespace {

/// One connection to the apiserver. Every operation runs asynchronously until it completes
/// or the deadline passes (tcp_stream applies its expiry to asynchronous operations only).
class Connection {
 public:
  Connection(const std::string& caFile, Clock::time_point deadline)
      : ssl_(asio::ssl::context::tls_client), deadline_(deadline) {
    boost::system::error_code ec;
    ssl_.load_verify_file(caFile, ec);
    if (ec) setupError_ = "reading the CA " + caFile + ": " + ec.message();
    ssl_.set_verify_mode(asio::ssl::verify_peer);
    stream_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ioc_, ssl_);
  }

  boost::system::error_code connect(std::uint16_t port) {
    if (!setupError_.empty()) return asio::error::invalid_argument;
    // The serving certificate must name 127.0.0.1 among its IP SANs.
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(stream_->native_handle()), "127.0.0.1");
    const asio::ip::tcp::endpoint ep(asio::ip::make_address("127.0.0.1"), port);
    auto ec = run([&](auto done) { lowest().async_connect(ep, std::move(done)); });
    if (ec) return ec;
    return run([&](auto done) { stream_->async_handshake(asio::ssl::stream_base::client, std::move(done)); });
  }

  template <class Start>
  boost::system::error_code run(Start start) {
    boost::system::error_code result = asio::error::would_block;
    lowest().expires_at(deadline_);
    start([&result](boost::system::error_code ec, auto&&...) { result = ec; });
    ioc_.restart();
    ioc_.run();
    return result;
  }

  beast::ssl_stream<beast::tcp_stream>& stream() { return *stream_; }
  const std::string& setupError() const { return setupError_; }

 private:
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(*stream_); }

  asio::io_context ioc_;
  asio::ssl::context ssl_;
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> stream_;
  Clock::time_point deadline_;
  std::string setupError_;
};

http::request<http::string_body> makeRequest(const std::string& method, const std::string& path,
                                             const std::string& body, const std::string& contentType,
                                             const std::string& token) {
  http::request<http::string_body> req{http::string_to_verb(method), path, 11};
  req.set(http::field::host, "127.0.0.1");
  req.set(http::field::user_agent, "vgpu-realk8s-harness");
  req.set(http::field::accept, "application/json");
  if (!token.empty()) req.set(http::field::authorization, "Bearer " + token);
  if (!body.empty()) req.set(http::field::content_type, contentType);
  req.body() = body;
  req.keep_alive(false);
  req.prepare_payload();
  return req;
}

std::string describeError(const boost::system::error_code& ec, const Connection& c) {
  if (!c.setupError().empty()) return c.setupError();
  if (ec == beast::error::timeout) return "timeout";
  return ec.message();
}

template <class Fields>
void copyHeaders(const Fields& fields, ApiReply& reply) {
  for (const auto& f : fields) reply.headers[std::string(f.name_string())] = std::string(f.value());
}

}  // namespace

ApiClient::ApiClient(std::uint16_t port, std::string caFile, std::string token, std::chrono::milliseconds timeout)
    : port_(port), caFile_(std::move(caFile)), token_(std::move(token)), timeout_(timeout) {}

ApiReply ApiClient::request(const std::string& method, const std::string& path, const std::string& body,
                            const std::string& contentType) {
  ApiReply reply;
  Connection c(caFile_, Clock::now() + timeout_);
  if (auto ec = c.connect(port_)) {
    reply.error = "connecting to 127.0.0.1:" + std::to_string(port_) + ": " + describeError(ec, c);
    return reply;
  }
  auto req = makeRequest(method, path, body, contentType, token_);
  if (auto ec = c.run([&](auto done) { http::async_write(c.stream(), req, std::move(done)); })) {
    reply.error = "sending " + method + " " + path + ": " + describeError(ec, c);
    return reply;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  if (auto ec = c.run([&](auto done) { http::async_read(c.stream(), buffer, parser, std::move(done)); })) {
    reply.error = "reading the answer to " + method + " " + path + ": " + describeError(ec, c);
    return reply;
  }
  const auto& res = parser.get();
  reply.status = static_cast<int>(res.result_int());
  reply.body = res.body();
  copyHeaders(res, reply);
  return reply;
}

ApiReply ApiClient::watch(const std::string& path, const std::function<bool(const boost::json::object&)>& onEvent,
                          std::chrono::milliseconds timeout) {
  ApiReply reply;
  Connection c(caFile_, Clock::now() + timeout);
  if (auto ec = c.connect(port_)) {
    reply.error = "connecting to 127.0.0.1:" + std::to_string(port_) + ": " + describeError(ec, c);
    return reply;
  }
  auto req = makeRequest("GET", path, "", "", token_);
  if (auto ec = c.run([&](auto done) { http::async_write(c.stream(), req, std::move(done)); })) {
    reply.error = "sending GET " + path + ": " + describeError(ec, c);
    return reply;
  }
  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);
  if (auto ec = c.run([&](auto done) { http::async_read_header(c.stream(), buffer, parser, std::move(done)); })) {
    reply.error = "reading the answer to GET " + path + ": " + describeError(ec, c);
    return reply;
  }
  reply.status = static_cast<int>(parser.get().result_int());
  copyHeaders(parser.get(), reply);

  // Events are newline-separated JSON objects; a chunk may end mid-event.
  std::string pending;
  bool stop = false;
  const auto deliver = [&] {
    for (auto nl = pending.find('\n'); nl != std::string::npos && !stop; nl = pending.find('\n')) {
      const std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (line.empty()) continue;
      boost::system::error_code ec;
      auto v = boost::json::parse(line, ec);
      if (ec || !v.is_object()) {
        reply.error = "a watch event that is not a JSON object: " + line;
        stop = true;
      } else if (!onEvent(v.as_object())) {
        stop = true;
      }
    }
  };
  auto onChunk = [&](std::uint64_t, beast::string_view data, boost::system::error_code&) -> std::size_t {
    reply.body.append(data.data(), data.size());
    pending.append(data.data(), data.size());
    if (reply.status == 200) deliver();
    return data.size();
  };
  parser.on_chunk_body(onChunk);
  while (!stop && !parser.is_done()) {
    auto ec = c.run([&](auto done) { http::async_read_some(c.stream(), buffer, parser, std::move(done)); });
    if (ec == http::error::end_of_stream || ec == asio::ssl::error::stream_truncated) break;
    if (ec) {
      reply.error = describeError(ec, c);
      return reply;
    }
  }
  // A reply with Content-Length (an error) carries its body whole, without chunks.
  if (!parser.get().body().empty()) {
    reply.body += parser.get().body();
    if (reply.status == 200) {
      pending += parser.get().body() + "\n";
      deliver();
    }
  }
  return reply;
}

}  // namespace vgpu::realk8s
