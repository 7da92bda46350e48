// Listen addresses of the daemons' flags, parsed in one place (vgpu/http/server.h).
#include <string>

#include "vgpu/http/server.h"

namespace vgpu::http {

Status parseListenAddress(std::string_view text, std::string_view flag, ServerOptions& out) {
  const auto refuse = [&](const std::string& why) -> Status {
    return makeError(std::string(flag) + " must be address:port, [ipv6]:port or :port, got \"" + std::string(text) +
                     "\": " + why);
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return refuse("no ':port'");
  std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (port.empty()) return refuse("no port after ':'");
  std::uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return refuse("the port \"" + std::string(port) + "\" is not a number");
    value = value * 10 + static_cast<std::uint32_t>(c - '0');
    if (value > 65535) return refuse("the port " + std::string(port) + " is above 65535");
  }
  out.address = host.empty() ? "0.0.0.0" : std::string(host);
  out.port = static_cast<std::uint16_t>(value);
  return {};
}

}  // namespace vgpu::http
