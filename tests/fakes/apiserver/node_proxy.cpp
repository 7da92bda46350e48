// The double's node proxy: finds the node's address in its status and forwards the GET.
#include "node_proxy.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>

namespace vgpu::fakes::detail {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;

namespace {

std::string addressOf(const json::object& node) {
  std::string hostname;
  const auto* status = node.if_contains("status");
  const auto* addresses = status && status->is_object() ? status->as_object().if_contains("addresses") : nullptr;
  if (addresses && addresses->is_array())
    for (const auto& a : addresses->as_array()) {
      if (!a.is_object()) continue;
      const auto* type = a.as_object().if_contains("type");
      const auto* address = a.as_object().if_contains("address");
      if (!type || !address || !type->is_string() || !address->is_string()) continue;
      if (type->as_string() == "InternalIP") return std::string(address->as_string());
      if (type->as_string() == "Hostname") hostname = address->as_string();
    }
  return hostname;
}

}  // namespace

Reply proxyToNode(Store& store, const std::vector<std::string>& rest, const std::string& query) {
  const std::string& target = rest[1];
  const auto colon = target.rfind(':');
  if (colon == std::string::npos)
    return statusReply(503, "ServiceUnavailable", "the double proxies to nodes over http with a port only: nodes/<node>:<port>/proxy");
  const std::string name = target.substr(0, colon), port = target.substr(colon + 1);
  Reply got = store.get("nodes", "", name);
  if (got.status != 200 || !got.object) return got;
  const std::string address = addressOf(*got.object);
  if (address.empty()) return statusReply(503, "ServiceUnavailable", "no preferred addresses found; known addresses: []");
  std::string path;
  for (std::size_t i = 3; i < rest.size(); ++i) path += "/" + rest[i];
  if (path.empty()) path = "/";
  if (!query.empty()) path += "?" + query;
  try {
    net::io_context io;
    beast::tcp_stream stream(io);
    stream.expires_after(std::chrono::seconds(10));
    stream.connect(net::ip::tcp::resolver(io).resolve(address, port));
    http::request<http::empty_body> req{http::verb::get, path, 11};
    req.set(http::field::host, address + ":" + port);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    http::read(stream, buffer, res);
    beast::error_code ignored;
    stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ignored);
    return Reply{static_cast<int>(res.result_int()), std::move(res.body()), nullptr};
  } catch (const std::exception& e) {
    return statusReply(503, "ServiceUnavailable",
                       "error trying to reach service: dial tcp " + address + ":" + port + ": " + e.what());
  }
}

}  // namespace vgpu::fakes::detail
