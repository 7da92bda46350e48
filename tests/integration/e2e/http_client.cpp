#include "http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace vgpu::e2e {
namespace {

using Clock = std::chrono::steady_clock;

int msLeft(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

/// Waits for `events` on `fd` until the deadline.
bool ready(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, msLeft(deadline));
    if (n > 0) return true;
    if (n == 0 || errno != EINTR) return false;
  }
}

/// Undoes Transfer-Encoding: chunked.
Result<std::string> dechunk(const std::string& body) {
  std::string out;
  size_t pos = 0;
  for (;;) {
    const size_t eol = body.find("\r\n", pos);
    if (eol == std::string::npos) return makeError("truncated chunked body");
    const size_t size = std::strtoul(body.substr(pos, eol - pos).c_str(), nullptr, 16);
    if (size == 0) return out;
    if (eol + 2 + size > body.size()) return makeError("truncated chunk");
    out.append(body, eol + 2, size);
    pos = eol + 2 + size + 2;
  }
}

}  // namespace

Result<HttpReply> httpRequest(const std::string& method, const std::string& baseUrl, const std::string& path,
                              const std::string& body, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string prefix = "http://";
  const auto colon = baseUrl.rfind(':');
  if (baseUrl.rfind(prefix, 0) != 0 || colon == std::string::npos || colon < prefix.size())
    return makeError("not an http://host:port URL: " + baseUrl);
  const std::string host = baseUrl.substr(prefix.size(), colon - prefix.size());
  const int port = std::atoi(baseUrl.c_str() + colon + 1);
  const std::string where = method + " " + baseUrl + path;

  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) return makeError(where + ": not an IPv4 address");
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return makeError(where + ": socket: " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};

  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS || !ready(fd, POLLOUT, deadline)) return makeError(where + ": connect timed out");
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return makeError(where + ": connect: " + std::strerror(err));
  }
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n";
  if (!body.empty()) request += "Content-Type: application/json\r\n";
  request += "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  for (size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!ready(fd, POLLOUT, deadline)) return makeError(where + ": sending timed out");
    } else {
      return makeError(where + ": send: " + std::strerror(errno));
    }
  }
  // Connection: close, so the reply ends at EOF.
  std::string raw;
  for (;;) {
    if (!ready(fd, POLLIN, deadline)) return makeError(where + ": no complete reply within the deadline");
    char buf[16384];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return makeError(where + ": recv: " + std::strerror(errno));
    }
    raw.append(buf, static_cast<size_t>(n));
  }
  const auto headerEnd = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.", 0) != 0 || raw.size() < 12 || headerEnd == std::string::npos)
    return makeError(where + ": malformed reply");
  HttpReply reply;
  reply.status = std::atoi(raw.c_str() + 9);
  std::string headers = raw.substr(0, headerEnd);
  for (auto& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  reply.body = raw.substr(headerEnd + 4);
  if (headers.find("transfer-encoding: chunked") != std::string::npos) {
    auto plain = dechunk(reply.body);
    if (!plain.ok()) return makeError(where + ": " + plain.error().message);
    reply.body = std::move(plain).value();
  }
  return reply;
}

}  // namespace vgpu::e2e
