#pragma once
// HTTP/1.1 over TCP or TLS with a pool of keep-alive connections. Internal to vgpu_k8s:
// the only place that includes Beast, so the rest of the client compiles quickly.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vgpu/k8s/watch.h"
#include "vgpu/result.h"

namespace vgpu::k8s::detail {

struct HttpRequest {
  std::string method;  ///< GET, POST, PATCH, DELETE
  std::string target;  ///< path and query
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
};

struct HttpResponse {
  int status = 0;
  std::string body;
  std::string retryAfter;  ///< the Retry-After header, if any
};

struct Endpoint {
  bool tls = true;
  std::string host;  ///< without brackets
  std::string port;
  std::string serverName;  ///< name verified in the certificate (and sent as SNI)
  std::string caPem;
  bool insecureSkipVerify = false;
  std::string clientCertPem;
  std::string clientKeyPem;
  std::size_t maxIdle = 16;
  std::size_t maxBodyBytes = std::size_t{512} << 20;  ///< send(), and a stream's non-200 body
};

class HttpTransport {
 public:
  static Result<std::unique_ptr<HttpTransport>> create(const Endpoint& endpoint);
  ~HttpTransport();

  /// One request/response within `timeout`. Errors are transport failures (no response),
  /// or "cancelled" when `cancel` fired.
  Result<HttpResponse> send(const HttpRequest& request, std::chrono::milliseconds timeout,
                            CancelToken* cancel = nullptr);

  /// Streams a 200 response's body to `onData` (return false to stop); a non-200
  /// response is returned whole. `idleTimeout` bounds the wait for each piece of data.
  /// A cancelled stream returns what arrived (status 0 if cancelled before the header).
  Result<HttpResponse> stream(const HttpRequest& request, std::chrono::milliseconds connectTimeout,
                              std::chrono::milliseconds idleTimeout,
                              const std::function<bool(std::string_view)>& onData,
                              CancelToken* cancel);

  std::uint64_t connectionsOpened() const { return opened_.load(); }

  /// New client certificate for connections opened from now on (an exec plugin rotated
  /// it); idle connections made with the old one are closed, busy ones are not reused.
  /// No effect over plain HTTP.
  Status setClientCertificate(const std::string& certPem, const std::string& keyPem);

 private:
  struct Connection;
  struct Tls;
  HttpTransport() = default;
  std::unique_ptr<Connection> acquire(bool& reused);
  void release(std::unique_ptr<Connection> c);
  Result<std::unique_ptr<Connection>> connect(std::chrono::milliseconds timeout);
  Error bodyTooLarge() const;

  Endpoint endpoint_;
  std::shared_ptr<Tls> tls_;  ///< guarded by mu_; connections keep the one they were made with
  std::mutex mu_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::atomic<std::uint64_t> opened_{0};
};

}  // namespace vgpu::k8s::detail
