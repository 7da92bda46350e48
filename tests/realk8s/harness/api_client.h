#pragma once
// An HTTPS client for the test's side of a real kube-apiserver: the server's certificate
// verified against the cluster's CA (for 127.0.0.1), a bearer token, one connection per
// request, every request bounded by a deadline, and watches read event by event as the
// stream arrives. Deliberately independent of vgpu's own Kubernetes client (core/k8s),
// which these tests exist to check.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <boost/json/object.hpp>

namespace vgpu::realk8s {

struct ApiReply {
  int status = 0;  ///< 0: no answer (connection failed, TLS failed, or the deadline passed)
  std::string body;
  std::map<std::string, std::string> headers;  ///< names as the server sent them
  std::string error;                           ///< why there is no answer
  /// The body as a JSON object; empty when it is not one.
  boost::json::object json() const;
  /// "HTTP 410: {...}" or "no answer: ...", for failure messages.
  std::string describe() const;
};

class ApiClient {
 public:
  ApiClient(std::uint16_t port, std::string caFile, std::string token,
            std::chrono::milliseconds timeout = std::chrono::seconds(30));

  ApiReply request(const std::string& method, const std::string& path, const std::string& body = "",
                   const std::string& contentType = "application/json");
  ApiReply get(const std::string& path) { return request("GET", path); }
  ApiReply post(const std::string& path, const std::string& body) { return request("POST", path, body); }
  ApiReply put(const std::string& path, const std::string& body) { return request("PUT", path, body); }
  /// A JSON merge patch (RFC 7386) unless `contentType` says otherwise.
  ApiReply patch(const std::string& path, const std::string& body,
                 const std::string& contentType = "application/merge-patch+json") {
    return request("PATCH", path, body, contentType);
  }
  ApiReply del(const std::string& path, const std::string& body = "") { return request("DELETE", path, body); }

  /// GET `path` (a watch: `watch=true` in the query) and hand each event ({"type","object"})
  /// to `onEvent` as it arrives, until `onEvent` returns false, the server ends the stream
  /// or `timeout` passes (then error says "timeout"; status stays the server's). A reply
  /// that is not 200 comes back whole in body, with no event.
  ApiReply watch(const std::string& path, const std::function<bool(const boost::json::object&)>& onEvent,
                 std::chrono::milliseconds timeout);

 private:
  std::uint16_t port_;
  std::string caFile_;
  std::string token_;
  std::chrono::milliseconds timeout_;
};

}  // namespace vgpu::realk8s
