#pragma once
// A blocking HTTP/1.1 client for tests and benchmarks of vgpu_http servers: one keep-alive
// connection (reopened when the server closed it), optional TLS without verification, and
// optionally a bound on each request, for tests that talk to servers that may hang or be gone.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace vgpu::testing {

struct HttpReply {
  int status = 0;  ///< 0: no answer (connection failed, was cut, or the request timed out)
  std::string body;
  std::map<std::string, std::string> headers;
  std::string error;
};

/// Compiled once (test_http_client.cpp), so that tests do not parse Beast and Asio.
class TestHttpClient {
 public:
  explicit TestHttpClient(std::uint16_t port, bool tls = false);
  ~TestHttpClient();
  TestHttpClient(TestHttpClient&&) noexcept;
  TestHttpClient& operator=(TestHttpClient&&) noexcept;

  /// Bounds every later request, reconnecting included: one that has no complete reply
  /// within `timeout` fails (status 0, error says so) and drops the connection. Default: none.
  TestHttpClient& setTimeout(std::chrono::milliseconds timeout);

  /// Presents this PEM certificate chain and key in TLS handshakes (before the first request).
  TestHttpClient& useClientCertificate(const std::string& certFile, const std::string& keyFile);

  /// Sends `name: value` with every later request (e.g. Accept-Encoding); "" removes it.
  TestHttpClient& setHeader(const std::string& name, const std::string& value);

  HttpReply post(const std::string& target, const std::string& body) { return request("POST", target, body); }
  HttpReply get(const std::string& target) { return request("GET", target, ""); }
  HttpReply request(const std::string& method, const std::string& target, const std::string& body,
                    const std::string& contentType = "application/json");

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vgpu::testing
