// The double's HTTP side: one thread per connection with blocking Beast I/O, which keeps
// watch streaming, hangs and abrupt cuts simple to express. Loopback test traffic only.

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <deque>
#include <filesystem>
#include <fstream>
#include <list>
#include <mutex>
#include <sstream>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>

#include "fixtures.h"
#include "node_proxy.h"
#include "store.h"
#include "tls_cert.h"
#include "vgpu/fakes/fake_apiserver.h"

namespace vgpu::fakes {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = net::ssl;
namespace json = boost::json;
using tcp = net::ip::tcp;
using ErrorCode = boost::system::error_code;
using detail::Reply;
using detail::statusReply;
using Request = http::request<http::string_body>;

constexpr std::size_t kRequestLogLimit = 10000;

// Per connection thread: when the request being served arrived, and whether its answer
// is to be lost (Fault::Action::kLoseReply).
thread_local std::chrono::steady_clock::time_point tArrived;
thread_local bool tLoseReply = false;

// One field error of a ListOptions validation, as apimachinery's field.Error renders it.
struct FieldError {
  std::string type;    // cause reason, e.g. FieldValueForbidden
  std::string body;    // "Forbidden: ...", without the field
  std::string field;
};

// 422 Invalid for ListOptions, the shape errors.NewInvalid gives
// (staging/src/k8s.io/apiserver/pkg/endpoints/handlers/get.go).
Reply invalidListOptions(const std::vector<FieldError>& errs) {
  std::string agg;
  json::array causes;
  for (const auto& e : errs) {
    if (!agg.empty()) agg += ", ";
    agg += e.field + ": " + e.body;
    causes.push_back(json::object{{"reason", e.type}, {"message", e.body}, {"field", e.field}});
  }
  if (errs.size() > 1) agg = "[" + agg + "]";
  json::object o{{"kind", "Status"},
                 {"apiVersion", "v1"},
                 {"metadata", json::object()},
                 {"status", "Failure"},
                 {"message", "ListOptions.meta.k8s.io \"\" is invalid: " + agg},
                 {"reason", "Invalid"},
                 {"details", json::object{{"group", "meta.k8s.io"}, {"kind", "ListOptions"}, {"causes", causes}}},
                 {"code", 422}};
  return Reply{422, json::serialize(o), nullptr};
}

FieldError forbidden(const std::string& field, const std::string& detail) {
  return {"FieldValueForbidden", "Forbidden: " + detail, field};
}

// k8s.io/apimachinery/pkg/apis/meta/internalversion/validation: ValidateListOptions, with
// the WatchList gate as `watchList` (on by default in 1.34 and 1.37).
std::optional<Reply> validateListOptions(const std::map<std::string, std::string>& params, bool watch,
                                         bool watchList) {
  auto has = [&](const char* k) { return params.count(k) > 0; };
  auto param = [&](const char* k) {
    auto it = params.find(k);
    return it == params.end() ? std::string() : it->second;
  };
  const std::string match = param("resourceVersionMatch");
  std::vector<FieldError> errs;
  if (watch) {
    if (has("sendInitialEvents") && match != "NotOlderThan")
      errs.push_back(forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"));
    if (has("sendInitialEvents") && !watchList)
      errs.push_back(forbidden("sendInitialEvents",
                               "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"));
    if (!match.empty()) {
      if (!has("sendInitialEvents"))
        errs.push_back(forbidden("resourceVersionMatch",
                                 "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"));
      if (match != "NotOlderThan")
        errs.push_back({"FieldValueNotSupported",
                        "Unsupported value: \"" + match + "\": supported values: \"NotOlderThan\"", "resourceVersionMatch"});
      if (!param("continue").empty())
        errs.push_back(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
    }
  } else {
    if (!match.empty()) {
      if (param("resourceVersion").empty())
        errs.push_back(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"));
      if (!param("continue").empty())
        errs.push_back(forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided"));
      if (match != "Exact" && match != "NotOlderThan")
        errs.push_back({"FieldValueNotSupported",
                        "Unsupported value: \"" + match + "\": supported values: \"Exact\", \"NotOlderThan\", \"\"",
                        "resourceVersionMatch"});
      if (match == "Exact" && param("resourceVersion") == "0")
        errs.push_back(forbidden("resourceVersionMatch", "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""));
    }
    if (has("sendInitialEvents")) errs.push_back(forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list"));
  }
  if (errs.empty()) return std::nullopt;
  return invalidListOptions(errs);
}

// A resourceVersion as the apiserver's versioner parses it ("" and "0" are 0).
std::optional<std::uint64_t> parseVersion(const std::string& rv) {
  if (rv.empty()) return 0;
  if (rv.find_first_not_of("0123456789") != std::string::npos || rv.size() > 20) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(rv.c_str(), &end, 10);
  if (errno != 0) return std::nullopt;
  return v;
}

Result<json::object> objectOrError(Reply r) {
  if (r.status >= 300) {
    ErrorCode ec;
    auto v = json::parse(r.body, ec);
    std::string msg = r.body;
    if (!ec && v.is_object()) {
      if (auto* m = v.get_object().if_contains("message"); m && m->is_string()) msg = m->get_string();
    }
    return makeError("fake apiserver: HTTP " + std::to_string(r.status) + ": " + msg);
  }
  return *r.object;
}

}  // namespace

struct FakeApiServer::Impl {
  FakeApiServerOptions options;
  detail::Store store;
  std::unique_ptr<ssl::context> sslCtx;
  std::string certPem;
  net::io_context ioc;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::thread acceptThread;
  std::atomic<bool> acceptStopping{false};
  std::uint16_t port = 0;
  std::atomic<std::uint64_t> accepted{0};

  struct Conn {
    std::shared_ptr<tcp::socket> sock;
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::mutex connMu;
  std::list<Conn> conns;

  mutable std::mutex mu;
  std::string token;
  std::vector<Fault> faults;
  std::deque<RequestRecord> log;
  std::uint64_t requestTotal = 0;
  bool stopped = false;

  Status listen(std::uint16_t p) {
    ErrorCode ec;
    auto addr = net::ip::make_address(options.bindAddress, ec);
    if (ec) return makeError("fake apiserver: bad bind address " + options.bindAddress);
    tcp::endpoint ep(addr, p);
    acceptor = std::make_unique<tcp::acceptor>(ioc);
    acceptor->open(ep.protocol(), ec);
    if (!ec) acceptor->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(ep, ec);
    if (!ec) acceptor->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return makeError("fake apiserver: cannot listen on " + options.bindAddress + ":" +
                       std::to_string(p) + ": " + ec.message());
    }
    port = acceptor->local_endpoint().port();
    acceptStopping = false;
    acceptThread = std::thread([this] { acceptLoop(); });
    return {};
  }

  void acceptLoop() {
    for (;;) {
      auto sock = std::make_shared<tcp::socket>(ioc);
      ErrorCode ec;
      acceptor->accept(*sock, ec);
      if (acceptStopping) return;
      if (ec) {
        // Out of descriptors or the like: do not spin while it lasts.
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      accepted.fetch_add(1);
      sock->set_option(tcp::no_delay(true), ec);
      auto done = std::make_shared<std::atomic<bool>>(false);
      std::lock_guard lock(connMu);
      for (auto it = conns.begin(); it != conns.end();) {
        if (*it->done) {
          it->thread.join();
          it = conns.erase(it);
        } else {
          ++it;
        }
      }
      conns.push_back(Conn{sock, std::thread([this, sock, done] {
                             serve(*sock);
                             ErrorCode ignored;
                             sock->shutdown(tcp::socket::shutdown_both, ignored);
                             *done = true;
                           }),
                           done});
    }
  }

  void stopListening() {
    if (!acceptor) return;
    acceptStopping = true;
    ::shutdown(acceptor->native_handle(), SHUT_RDWR);
    if (acceptThread.joinable()) acceptThread.join();
    ErrorCode ec;
    acceptor->close(ec);
    acceptor.reset();
  }

  void killConnections() {
    store.setStopping(true);
    std::list<Conn> all;
    {
      std::lock_guard lock(connMu);
      for (auto& c : conns) ::shutdown(c.sock->native_handle(), SHUT_RDWR);
      all.swap(conns);
    }
    for (auto& c : all) c.thread.join();
    store.setStopping(false);
  }

  void serve(tcp::socket& sock) {
    if (sslCtx) {
      beast::ssl_stream<tcp::socket&> s(sock, *sslCtx);
      ErrorCode ec;
      s.handshake(ssl::stream_base::server, ec);
      if (ec) return;
      session(s);
    } else {
      session(sock);
    }
  }

  template <class S>
  void session(S& s) {
    beast::flat_buffer buf;
    buf.reserve(64 * 1024);  // Beast reads at most the free capacity: 512 bytes when empty
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.body_limit(std::uint64_t{256} << 20);
      ErrorCode ec;
      http::read(s, buf, parser, ec);
      if (ec) return;
      if (!handle(s, parser.get())) return;
    }
  }

  void record(const std::string& method, const std::string& path, const std::string& query,
              int status) {
    std::lock_guard lock(mu);
    ++requestTotal;
    log.push_back(RequestRecord{method, path, query, status, tArrived});
    if (log.size() > kRequestLogLimit) log.pop_front();
  }

  template <class S>
  bool respond(S& s, const Request& req, const Reply& r, const std::string& path,
               const std::string& query, int retryAfter = -1) {
    if (tLoseReply) {
      // Served (and applied), but the answer never reaches the client.
      record(std::string(req.method_string()), path, query, 0);
      return false;
    }
    http::response<http::string_body> res{static_cast<http::status>(r.status), 11};
    res.set(http::field::content_type, "application/json");
    if (retryAfter < 0) retryAfter = r.retryAfterSeconds;
    if (retryAfter >= 0) res.set(http::field::retry_after, std::to_string(retryAfter));
    res.keep_alive(req.keep_alive());
    res.body() = r.body;
    res.prepare_payload();
    record(std::string(req.method_string()), path, query, r.status);
    ErrorCode ec;
    http::write(s, res, ec);
    return !ec && res.keep_alive();
  }

  // Returns the fault to apply to this request, if any.
  std::optional<Fault> takeFault(const std::string& method, const std::string& path,
                                 const std::string& query, bool watch) {
    std::lock_guard lock(mu);
    for (auto& f : faults) {
      if (f.times == 0) continue;
      if (!f.method.empty() && f.method != method) continue;
      if (!f.pathPrefix.empty() && path.rfind(f.pathPrefix, 0) != 0) continue;
      if (!f.queryContains.empty() && query.find(f.queryContains) == std::string::npos) continue;
      if (f.watch == Fault::Watch::kOnly && !watch) continue;
      if (f.watch == Fault::Watch::kNever && watch) continue;
      if (f.times > 0) --f.times;
      return f;
    }
    return std::nullopt;
  }

  template <class S>
  bool handle(S& s, const Request& req) {
    tArrived = std::chrono::steady_clock::now();
    tLoseReply = false;
    std::string method(req.method_string());
    auto url = boost::urls::parse_origin_form(req.target());
    if (!url) {
      return respond(s, req, statusReply(400, "BadRequest", "malformed request target"),
                     std::string(req.target()), "");
    }
    std::string path(url->path());
    std::string query(url->query());
    std::vector<std::string> segs;
    for (auto seg : url->segments()) segs.push_back(seg);
    std::map<std::string, std::string> params;
    for (auto p : url->params()) params[p.key] = p.value;
    auto param = [&](const char* k) {
      auto it = params.find(k);
      return it == params.end() ? std::string() : it->second;
    };
    bool watch = param("watch") == "true" || param("watch") == "1";

    {
      std::string want;
      {
        std::lock_guard lock(mu);
        want = token;
      }
      if (!want.empty() && req[http::field::authorization] != "Bearer " + want) {
        return respond(s, req, statusReply(401, "Unauthorized", "Unauthorized"), path, query);
      }
    }
    if (auto fault = takeFault(method, path, query, watch)) {
      switch (fault->action) {
        case Fault::Action::kStatus: {
          int code = fault->status;
          auto reason = detail::reasonFor(code);
          std::string msg = code == 429 ? "Too many requests, please try again later."
                                        : "injected failure " + std::to_string(code);
          if (code == 410) msg = "too old resource version";
          if (!fault->message.empty()) msg = fault->message;
          return respond(s, req, statusReply(code, reason, msg), path, query, fault->retryAfterSeconds);
        }
        case Fault::Action::kHang:
          record(method, path, query, 0);
          store.hang();
          return false;
        case Fault::Action::kDrop:
          record(method, path, query, 0);
          return false;
        case Fault::Action::kDelay:
          store.sleep(fault->delay);
          break;
        case Fault::Action::kLoseReply:
          tLoseReply = true;
          break;
      }
    }

    if (segs.size() == 1 && (segs[0] == "healthz" || segs[0] == "readyz" || segs[0] == "livez")) {
      return respond(s, req, Reply{200, "\"ok\"", nullptr}, path, query);
    }
    if (segs.size() == 1 && segs[0] == "version") {
      return respond(s, req,
                     Reply{200, R"({"major":"1","minor":"34","gitVersion":"v1.34.0-vgpu-fake"})", nullptr},
                     path, query);
    }
    auto notFound = [&] {
      return respond(s, req, statusReply(404, "NotFound", "the server could not find the requested resource"),
                     path, query);
    };
    // /api/v1/... (core) or /apis/<group>/<version>/... (resource.k8s.io/v1).
    const bool core = segs.size() >= 3 && segs[0] == "api" && segs[1] == "v1";
    const bool grouped = segs.size() >= 4 && segs[0] == "apis";
    if (!core && !grouped) return notFound();
    const std::string apiVersion = core ? "v1" : segs[1] + "/" + segs[2];
    std::string ns, plural, name, sub;
    std::vector<std::string> rest(segs.begin() + (core ? 2 : 3), segs.end());
    if (core && rest.size() >= 3 && rest[0] == "nodes" && rest[2] == "proxy")  // a GET forwarded to the node
      return respond(s, req, method == "GET" ? detail::proxyToNode(store, rest, query) : statusReply(405, "MethodNotAllowed", "GET only"), path, query);
    bool inNamespace = rest[0] == "namespaces" && rest.size() >= 3;
    if (inNamespace) {
      ns = rest[1];
      plural = rest[2];
      if (rest.size() >= 4) name = rest[3];
      if (rest.size() >= 5) sub = rest[4];
      if (rest.size() > 5) return notFound();
    } else {
      plural = rest[0];
      if (rest.size() >= 2) name = rest[1];
      if (rest.size() >= 3) sub = rest[2];
      if (rest.size() > 3) return notFound();
    }
    const detail::KindInfo* kind = detail::kindByPlural(plural);
    if (kind == nullptr || kind->apiVersion != apiVersion || (inNamespace && !kind->namespaced) ||
        (!inNamespace && kind->namespaced && !name.empty())) {
      return notFound();
    }
    auto methodNotAllowed = [&] {
      return respond(s, req, statusReply(405, "MethodNotAllowed", "the server does not allow this method on the requested resource"),
                     path, query);
    };
    auto parseBody = [&](json::value& out) -> bool {
      ErrorCode ec;
      out = json::parse(req.body(), ec);
      return !ec;
    };
    auto badBody = [&] {
      return respond(s, req, statusReply(400, "BadRequest", "the request body is not valid JSON"), path, query);
    };

    if (name.empty()) {
      if (method == "GET") {
        if (auto invalid = validateListOptions(params, watch, options.watchList)) return respond(s, req, *invalid, path, query);
        auto sel = detail::Selectors::parse(plural, param("labelSelector"), param("fieldSelector"));
        if (!sel.error.empty()) return respond(s, req, statusReply(400, "BadRequest", sel.error), path, query);
        if (watch) return serveWatch(s, req, plural, ns, std::move(sel), params, path, query);
        std::int64_t limit = 0;
        if (auto l = param("limit"); !l.empty()) {
          char* end = nullptr;
          limit = std::strtoll(l.c_str(), &end, 10);
          if (*end != '\0' || limit < 0) {
            return respond(s, req, statusReply(400, "BadRequest", "limit must be a non-negative integer"), path, query);
          }
        }
        return respond(s, req, serveList(plural, ns, sel, limit, params), path, query);
      }
      if (method == "POST") {
        json::value body;
        if (!parseBody(body)) return badBody();
        return respond(s, req, store.create(plural, ns, std::move(body)), path, query);
      }
      return methodNotAllowed();
    }
    if (sub == "binding") {
      if (plural != "pods" || method != "POST") return methodNotAllowed();
      json::value body;
      if (!parseBody(body)) return badBody();
      return respond(s, req, store.bind(ns, name, body), path, query);
    }
    if (sub == "eviction") {
      if (plural != "pods" || method != "POST") return methodNotAllowed();
      json::value body;
      if (!parseBody(body)) return badBody();
      return respond(s, req, store.evict(ns, name, body), path, query);
    }
    if (!sub.empty()) return notFound();
    if (method == "GET") return respond(s, req, store.get(plural, ns, name), path, query);
    if (method == "DELETE") return respond(s, req, store.remove(plural, ns, name), path, query);
    if (method == "PATCH") {
      std::string ct(req[http::field::content_type]);
      if (ct.rfind("application/merge-patch+json", 0) != 0 &&
          ct.rfind("application/strategic-merge-patch+json", 0) != 0) {
        return respond(s, req,
                       statusReply(415, "UnsupportedMediaType",
                                   "the body of the request was in an unknown format - accepted "
                                   "media types include: application/merge-patch+json, "
                                   "application/strategic-merge-patch+json"),
                       path, query);
      }
      json::value body;
      if (!parseBody(body)) return badBody();
      return respond(s, req, store.patch(plural, ns, name, body), path, query);
    }
    if (method == "PUT") {
      json::value body;
      if (!parseBody(body) || !body.is_object()) return badBody();
      auto& md = body.get_object()["metadata"];
      if (!md.is_object()) md = json::object();
      md.get_object()["name"] = name;
      if (kind->namespaced) md.get_object()["namespace"] = ns;
      return respond(s, req, store.update(plural, std::move(body.get_object())), path, query);
    }
    return methodNotAllowed();
  }

  // A list as the real apiserver serves it for each combination of resourceVersion,
  // resourceVersionMatch, limit and continue (after validation): cacher/delegator.go
  // ShouldDelegateList, watch_cache.go waitUntilFreshAndList, storage.ValidateListOptions
  // and etcd3/store.go GetList. The double is its own watch cache, always up to date.
  Reply serveList(const std::string& plural, const std::string& ns, const detail::Selectors& sel, std::int64_t limit,
                  const std::map<std::string, std::string>& params) {
    auto param = [&](const char* k) {
      auto it = params.find(k);
      return it == params.end() ? std::string() : it->second;
    };
    const std::string rv = param("resourceVersion");
    const std::string match = param("resourceVersionMatch");
    detail::ListRead read;
    read.limit = limit;
    read.continueToken = param("continue");
    if (!read.continueToken.empty()) {
      if (!detail::Store::validContinueToken(read.continueToken)) {
        return statusReply(400, "BadRequest", "invalid continue token: continue key is not valid: " + read.continueToken);
      }
      if (!rv.empty() && rv != "0") {
        return statusReply(400, "BadRequest", "specifying resource version is not allowed when using continue");
      }
      return store.list(plural, ns, sel, read);
    }
    const auto version = parseVersion(rv);
    if (!version) {
      return statusReply(400, "BadRequest",
                         "invalid resource version: resourceVersion: Invalid value: \"" + rv +
                             "\": strconv.ParseUint: parsing \"" + rv + "\": invalid syntax");
    }
    if (rv.empty() || *version == 0) {
      // "": the most recent (a consistent read), paged. "0": any version, from the watch
      // cache, which ignores limit for it.
      if (!rv.empty()) read.limit = 0;
      return store.list(plural, ns, sel, read);
    }
    // A version: Exact (asked for, or the legacy meaning of a version with a limit) reads
    // at exactly it, else NotOlderThan. Either waits for a store that has not reached it yet.
    if (auto tooLarge = store.waitForVersion(rv, options.tooLargeResourceVersionWait)) return *tooLarge;
    if (match == "Exact" || (match.empty() && limit > 0)) read.exact = *version;
    return store.list(plural, ns, sel, read);
  }

  template <class S>
  bool serveWatch(S& s, const Request& req, const std::string& plural, const std::string& ns,
                  detail::Selectors sel, const std::map<std::string, std::string>& params,
                  const std::string& path, const std::string& query) {
    auto param = [&](const char* k) {
      auto it = params.find(k);
      return it == params.end() ? std::string() : it->second;
    };
    detail::Store::Watch w;
    w.plural = plural;
    w.ns = ns;
    w.sel = std::move(sel);
    w.bookmarks = param("allowWatchBookmarks") == "true" && options.bookmarkInterval.count() > 0;
    long timeout = 1800;
    if (auto t = param("timeoutSeconds"); !t.empty()) timeout = std::max(1L, std::strtol(t.c_str(), nullptr, 10));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);

    std::vector<std::string> lines;
    auto begun = detail::Store::WaitResult::kGone;  // kGone: end after `lines`
    if (param("sendInitialEvents") == "true") {
      // A version the store lacks is refused as the real one does past authorization: an
      // ERROR event on a 200 stream. Otherwise the state now (not older than the version
      // asked for), its end bookmark and the changes after it.
      auto tooLarge = store.waitForVersion(param("resourceVersion"), options.tooLargeResourceVersionWait);
      if (tooLarge) {
        lines.push_back(R"({"type":"ERROR","object":)" + tooLarge->body + "}");
      } else {
        store.beginWatchList(w, lines);
        begun = detail::Store::WaitResult::kLines;
      }
    } else {
      begun = store.beginWatch(w, param("resourceVersion"), lines);
    }
    record(std::string(req.method_string()), path, query, 200);

    http::response<http::empty_body> res{http::status::ok, 11};
    res.set(http::field::content_type, "application/json");
    res.chunked(true);
    res.keep_alive(req.keep_alive());
    http::response_serializer<http::empty_body> sr{res};
    ErrorCode ec;
    http::write_header(s, sr, ec);
    if (ec) return false;
    store.watchOpened(1);
    struct Closer {
      detail::Store& store;
      ~Closer() { store.watchOpened(-1); }
    } closer{store};

    auto send = [&]() -> bool {
      if (lines.empty()) return true;
      std::string data;
      for (const auto& l : lines) {
        data += l;
        data += '\n';
      }
      lines.clear();
      net::write(s, http::make_chunk(net::buffer(data)), ec);
      return !ec;
    };
    auto finish = [&]() -> bool {
      net::write(s, http::make_chunk_last(), ec);
      return !ec && req.keep_alive();
    };
    if (!send()) return false;
    if (begun == detail::Store::WaitResult::kGone) return finish();
    auto bookmarkAt = std::chrono::steady_clock::now() + options.bookmarkInterval;
    for (;;) {
      auto r = store.next(w, deadline, bookmarkAt, lines);
      switch (r) {
        case detail::Store::WaitResult::kLines:
          if (!send()) return false;
          bookmarkAt = std::chrono::steady_clock::now() + options.bookmarkInterval;
          break;
        case detail::Store::WaitResult::kGone:
          if (!send()) return false;
          return finish();
        case detail::Store::WaitResult::kTimeout:
          return finish();
        case detail::Store::WaitResult::kBroken:
          return false;  // cut without the final chunk
      }
    }
  }
};

FakeApiServer::FakeApiServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

FakeApiServer::~FakeApiServer() { stop(); }

Result<std::unique_ptr<FakeApiServer>> FakeApiServer::start(FakeApiServerOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->token = options.token;
  if (options.tls) {
    std::string cert = options.certPem;
    std::string key = options.keyPem;
    if (cert.empty() || key.empty()) {
      auto made = detail::makeSelfSignedCert();
      if (!made) return std::move(made).error();
      cert = made->certPem;
      key = made->keyPem;
    }
    impl->sslCtx = std::make_unique<ssl::context>(ssl::context::tls_server);
    ErrorCode ec;
    impl->sslCtx->use_certificate_chain(net::buffer(cert), ec);
    if (!ec) impl->sslCtx->use_private_key(net::buffer(key), ssl::context::pem, ec);
    if (ec) return makeError("fake apiserver: unusable TLS certificate or key: " + ec.message());
    impl->certPem = cert;
  }
  impl->options = std::move(options);
  auto s = impl->listen(impl->options.port);
  if (!s) return s.error();
  return std::unique_ptr<FakeApiServer>(new FakeApiServer(std::move(impl)));
}

std::string FakeApiServer::url() const {
  std::string host = impl_->options.bindAddress;
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  return (impl_->sslCtx ? "https://" : "http://") + host + ":" + std::to_string(impl_->port);
}
std::uint16_t FakeApiServer::port() const { return impl_->port; }
const std::string& FakeApiServer::caPem() const { return impl_->certPem; }

Result<json::object> FakeApiServer::create(std::string_view plural, json::object obj) {
  if (!detail::kindByPlural(plural)) return makeError("fake apiserver: unknown kind " + std::string(plural));
  return objectOrError(impl_->store.create(plural, "", std::move(obj)));
}
Result<json::object> FakeApiServer::update(std::string_view plural, json::object obj) {
  if (!detail::kindByPlural(plural)) return makeError("fake apiserver: unknown kind " + std::string(plural));
  return objectOrError(impl_->store.update(plural, std::move(obj)));
}
Result<json::object> FakeApiServer::patch(std::string_view plural, std::string_view ns,
                                          std::string_view name, const json::object& patch) {
  return objectOrError(impl_->store.patch(plural, ns, name, patch));
}
Status FakeApiServer::remove(std::string_view plural, std::string_view ns, std::string_view name) {
  auto r = objectOrError(impl_->store.remove(plural, ns, name));
  if (!r) return r.error();
  return {};
}
std::optional<json::object> FakeApiServer::get(std::string_view plural, std::string_view ns,
                                               std::string_view name) const {
  auto r = impl_->store.get(plural, ns, name);
  if (r.status != 200) return std::nullopt;
  return *r.object;
}
std::vector<json::object> FakeApiServer::list(std::string_view plural) const {
  std::vector<json::object> out;
  for (const auto& p : impl_->store.all(plural)) out.push_back(*p);
  return out;
}
std::uint64_t FakeApiServer::resourceVersion() const { return impl_->store.resourceVersion(); }
void FakeApiServer::setDraConsumableCapacity(bool on) { impl_->store.setDraConsumableCapacity(on); }
void FakeApiServer::setDraDeviceTaints(bool on) { impl_->store.setDraDeviceTaints(on); }

Status FakeApiServer::loadFixtureText(const std::string& text, const std::string& sourceName) {
  auto objs = detail::parseFixtures(text, sourceName);
  if (!objs) return objs.error();
  for (auto& [plural, obj] : *objs) {
    auto r = create(plural, std::move(obj));
    if (!r) return makeError(sourceName + ": " + r.error().message);
  }
  return {};
}

Status FakeApiServer::loadFixtures(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return makeError("fake apiserver: fixtures " + dir + " is not a directory");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    auto ext = e.path().extension().string();
    if (e.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    if (!in) return makeError("fake apiserver: cannot read " + f.string());
    auto s = loadFixtureText(ss.str(), f.string());
    if (!s) return s;
  }
  return {};
}

void FakeApiServer::addFault(Fault fault) {
  std::lock_guard lock(impl_->mu);
  impl_->faults.push_back(std::move(fault));
}
void FakeApiServer::clearFaults() {
  std::lock_guard lock(impl_->mu);
  impl_->faults.clear();
}
void FakeApiServer::breakWatches() { impl_->store.breakWatches(); }
void FakeApiServer::compactHistory() { impl_->store.compactHistory(); }
void FakeApiServer::setToken(std::string token) {
  std::lock_guard lock(impl_->mu);
  impl_->token = std::move(token);
}
void FakeApiServer::releaseHangs() { impl_->store.releaseHangs(); }

Status FakeApiServer::restart(bool keepHistory) {
  {
    // After stop() too: the apiserver comes back after an outage.
    std::lock_guard lock(impl_->mu);
    impl_->stopped = false;
  }
  impl_->stopListening();
  impl_->killConnections();
  if (!keepHistory) impl_->store.compactHistory();
  return impl_->listen(impl_->port);
}

StoreBackup FakeApiServer::backup() const {
  return StoreBackup{std::make_shared<const detail::StoreBackup>(impl_->store.backup())};
}

Status FakeApiServer::restoreBackup(const StoreBackup& backup) {
  if (!backup.state) return makeError("fake apiserver: restoreBackup needs a backup() result");
  {
    std::lock_guard lock(impl_->mu);
    impl_->stopped = false;
  }
  impl_->stopListening();
  impl_->killConnections();
  impl_->store.restore(*backup.state);
  return impl_->listen(impl_->port);
}

void FakeApiServer::stop() {
  {
    std::lock_guard lock(impl_->mu);
    if (impl_->stopped) return;
    impl_->stopped = true;
  }
  impl_->stopListening();
  impl_->killConnections();
}

std::uint64_t FakeApiServer::connectionsAccepted() const { return impl_->accepted.load(); }
std::uint64_t FakeApiServer::requestCount() const {
  std::lock_guard lock(impl_->mu);
  return impl_->requestTotal;
}
std::vector<RequestRecord> FakeApiServer::requests() const {
  std::lock_guard lock(impl_->mu);
  return {impl_->log.begin(), impl_->log.end()};
}
std::size_t FakeApiServer::openWatches() const { return impl_->store.openWatches(); }

}  // namespace vgpu::fakes
