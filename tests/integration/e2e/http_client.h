#pragma once
// A blocking HTTP/1.1 client for loopback, with a deadline on every request: the tests play
// kube-scheduler and the apiserver's admission step against vgpu-scheduler, and scrape the
// daemons' /metrics. Plain HTTP only (the daemons run without TLS in these tests).

#include <chrono>
#include <string>

#include "vgpu/result.h"

namespace vgpu::e2e {

struct HttpReply {
  int status = 0;
  std::string body;
};

/// `method` on `baseUrl` ("http://127.0.0.1:PORT") + `path`, JSON body when non-empty.
/// Errors: connection refused, a malformed reply, or no complete reply by `timeout`.
Result<HttpReply> httpRequest(const std::string& method, const std::string& baseUrl, const std::string& path,
                              const std::string& body = {},
                              std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace vgpu::e2e
