// Verbs, retries, rate limit and credentials over the pooled HTTP transport.

#include "vgpu/k8s/client.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <random>
#include <sstream>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <boost/url/parse.hpp>

#include "http_transport.h"
#include "list_body.h"
#include "vgpu/k8s/exec_credential.h"

namespace vgpu::k8s {
namespace {

namespace json = boost::json;
using detail::HttpResponse;

std::string trim(std::string s) {
  auto notSpace = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), notSpace));
  s.erase(std::find_if(s.rbegin(), s.rend(), notSpace).base(), s.end());
  return s;
}

// "?a=1&b=2" from the non-empty pairs.
class Query {
 public:
  Query& add(std::string_view key, std::string_view value) {
    if (value.empty()) return *this;
    text_ += text_.empty() ? '?' : '&';
    text_ += key;
    text_ += '=';
    text_ += urlEncode(value);
    return *this;
  }
  const std::string& str() const { return text_; }

 private:
  std::string text_;
};

// Reason, message and details.causes of a Status object.
void readStatus(const json::object& status, ApiError& e) {
  if (auto* m = status.if_contains("message"); m && m->is_string()) e.message = m->get_string();
  if (auto* r = status.if_contains("reason"); r && r->is_string()) e.reason = r->get_string();
  const json::value* causes = nullptr;
  if (auto* d = status.if_contains("details"); d && d->is_object()) causes = d->get_object().if_contains("causes");
  if (causes == nullptr || !causes->is_array()) return;
  for (const auto& c : causes->get_array()) {
    const json::value* r = c.is_object() ? c.get_object().if_contains("reason") : nullptr;
    if (r != nullptr && r->is_string()) e.causes.emplace_back(r->get_string());
  }
}

ApiError errorFromResponse(const std::string& verb, const std::string& path,
                           const HttpResponse& res) {
  ApiError e{verb, path, res.status, "", "", {}};
  boost::system::error_code ec;
  auto v = json::parse(res.body, ec);
  if (!ec && v.is_object()) readStatus(v.get_object(), e);
  if (e.message.empty()) e.message = res.body.substr(0, 300);
  return e;
}

}  // namespace

std::string rfc3339Now() {
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

struct Client::Impl {
  ClientConfig config;
  ClientOptions options;
  std::shared_ptr<Clock> clock;
  std::unique_ptr<detail::HttpTransport> transport;
  std::string basePath;

  std::mutex rateMu;
  bool rateStarted = false;
  double tokens = 0;
  Clock::TimePoint rateLast{};

  std::mutex tokenMu;
  std::string token;
  bool tokenLoaded = false;
  Clock::TimePoint tokenReadAt{};

  std::mutex rngMu;
  std::mt19937_64 rng;

  std::unique_ptr<ExecCredentialPlugin> exec;
  std::mutex certMu;
  std::uint64_t certGeneration = 0;  // the exec credential whose certificate the transport has

  // Client-side token bucket: reserve a slot, then sleep outside the lock until it is due.
  void throttle() {
    if (options.qps <= 0) return;
    Clock::Duration wait{};
    {
      std::lock_guard lock(rateMu);
      auto now = clock->now();
      double burst = std::max(1, options.burst);
      if (!rateStarted) {
        rateStarted = true;
        tokens = burst;
        rateLast = now;
      }
      double elapsed = std::chrono::duration<double>(now - rateLast).count();
      if (elapsed > 0) {
        tokens = std::min(burst, tokens + elapsed * options.qps);
        rateLast = now;
      }
      tokens -= 1;
      if (tokens < 0) {
        wait = std::chrono::duration_cast<Clock::Duration>(
            std::chrono::duration<double>(-tokens / options.qps));
      }
    }
    if (wait > Clock::Duration::zero()) clock->sleepFor(wait);
  }

  std::string bearer(bool force) {
    if (config.tokenFile.empty()) return config.bearerToken;
    std::lock_guard lock(tokenMu);
    auto now = clock->now();
    if (force || !tokenLoaded || now - tokenReadAt >= options.tokenRefresh) {
      std::ifstream in(config.tokenFile);
      std::stringstream ss;
      ss << in.rdbuf();
      std::string t = trim(ss.str());
      // A rotation in progress may leave the file briefly empty: keep the last good token.
      if (in && !t.empty()) token = t;
      if (token.empty()) token = config.bearerToken;
      tokenLoaded = true;
      tokenReadAt = now;
    }
    return token;
  }

  // Exponential backoff with "equal jitter": half fixed, half random.
  Clock::Duration backoff(int attempt) {
    auto base = std::chrono::duration_cast<std::chrono::microseconds>(options.backoffBase);
    auto cap = std::chrono::duration_cast<std::chrono::microseconds>(options.backoffMax);
    auto d = base * (std::int64_t{1} << std::min(attempt, 20));
    if (d > cap) d = cap;
    std::lock_guard lock(rngMu);
    std::uniform_int_distribution<std::int64_t> dist(0, std::max<std::int64_t>(0, d.count() / 2));
    return std::chrono::microseconds(d.count() - d.count() / 2 + dist(rng));
  }

  // The exec plugin's credential (cached or fresh); a new client certificate goes into
  // the transport before the request that needs it.
  Result<ExecCredential> execCredential() {
    auto c = exec->get();
    if (!c || c->clientCertPem.empty()) return c;
    std::lock_guard lock(certMu);
    if (c->generation != certGeneration) {
      auto s = transport->setClientCertificate(c->clientCertPem, c->clientKeyPem);
      if (!s) return makeError("exec credential plugin " + exec->command() + ": " + s.error().message);
      certGeneration = c->generation;
    }
    return c;
  }

  // `execGeneration` receives the exec credential used, for refreshAfterUnauthorized.
  Result<std::vector<std::pair<std::string, std::string>>> headers(const std::string& contentType,
                                                                   bool forceToken,
                                                                   std::uint64_t* execGeneration = nullptr) {
    std::vector<std::pair<std::string, std::string>> h;
    h.emplace_back("Accept", "application/json");
    h.emplace_back("User-Agent", options.userAgent);
    if (!contentType.empty()) h.emplace_back("Content-Type", contentType);
    std::string t;
    if (exec) {
      auto c = execCredential();
      if (!c) return std::move(c).error();
      t = c->token;
      if (execGeneration != nullptr) *execGeneration = c->generation;
    } else {
      t = bearer(forceToken);
    }
    if (!t.empty()) h.emplace_back("Authorization", "Bearer " + t);
    return h;
  }

  ApiResult<HttpResponse> execute(const std::string& method, const std::string& target,
                                  const std::string& body = "",
                                  const std::string& contentType = "",
                                  CancelToken* cancel = nullptr) {
    bool refreshed = false;
    bool forceToken = false;
    auto cancelled = [&] { return cancel != nullptr && cancel->cancelled(); };
    for (int attempt = 0;; ++attempt) {
      throttle();
      if (cancelled()) return ApiError{method, target, 0, "", "cancelled", {}};
      std::uint64_t execGeneration = 0;
      auto h = headers(contentType, forceToken, &execGeneration);
      if (!h) return ApiError{method, target, 0, "", "getting credentials: " + h.error().message, {}};
      detail::HttpRequest req{method, basePath + target, std::move(*h), body};
      forceToken = false;
      auto r = transport->send(req, options.requestTimeout, cancel);
      if (cancelled()) return ApiError{method, target, 0, "", "cancelled", {}};
      if (!r) {
        if (attempt < options.maxRetries) {
          clock->sleepFor(backoff(attempt));
          continue;
        }
        return ApiError{method, target, 0, "",
                        r.error().message + " (" + std::to_string(attempt + 1) + " attempts)", {}};
      }
      HttpResponse& res = *r;
      if (res.status == 401 && !refreshed && exec) {
        // The plugin's credential was revoked or expired early: run it again (unless another
        // request's 401 already did) and retry this request once.
        refreshed = true;
        auto fresh = exec->refreshAfterUnauthorized(execGeneration);
        if (!fresh) {
          auto e = errorFromResponse(method, target, res);
          e.message += " (and running the exec credential plugin again failed: " + fresh.error().message + ")";
          return e;
        }
        --attempt;
        continue;
      }
      if (res.status == 401 && !refreshed && !config.tokenFile.empty()) {
        // The token may have been rotated under us: re-read it and try once more.
        refreshed = true;
        forceToken = true;
        --attempt;
        continue;
      }
      bool retryable = res.status == 429 || (res.status >= 500 && res.status != 501);
      if (res.status == 504) {
        // Asking again for a version the apiserver lacks only repeats its wait; the
        // caller (the informer) has a better move: relist from the most recent.
        auto e = errorFromResponse(method, target, res);
        if (e.isResourceVersionTooLarge()) return e;
      }
      if (retryable && attempt < options.maxRetries) {
        Clock::Duration wait = backoff(attempt);
        if (res.status == 429 && !res.retryAfter.empty()) {
          char* end = nullptr;
          long secs = std::strtol(res.retryAfter.c_str(), &end, 10);
          if (end != res.retryAfter.c_str() && secs >= 0) {
            wait = std::chrono::seconds(std::min(secs, 60L));
          }
        }
        clock->sleepFor(wait);
        continue;
      }
      if (res.status >= 200 && res.status < 300) return std::move(res);
      return errorFromResponse(method, target, res);
    }
  }

  ApiResult<json::object> parseObject(const std::string& method, const std::string& target,
                                      const HttpResponse& res) {
    boost::system::error_code ec;
    auto v = json::parse(res.body, ec);
    if (ec || !v.is_object()) {
      return ApiError{method, target, res.status, "", "the response is not a JSON object", {}};
    }
    return std::move(v.get_object());
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

Result<std::unique_ptr<Client>> Client::create(ClientConfig config, ClientOptions options) {
  auto impl = std::make_unique<Impl>();
  auto parsed = boost::urls::parse_uri(config.server);
  if (!parsed) {
    return makeError("kubernetes client: server \"" + config.server + "\" (from " + config.source +
                     ") is not a URL: " + parsed.error().message());
  }
  detail::Endpoint ep;
  std::string scheme(parsed->scheme());
  if (scheme == "https") {
    ep.tls = true;
  } else if (scheme == "http") {
    ep.tls = false;
  } else {
    return makeError("kubernetes client: server \"" + config.server + "\" (from " + config.source +
                     ") must start with https:// or http://");
  }
  std::string host(parsed->encoded_host());
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) {
    return makeError("kubernetes client: server \"" + config.server + "\" has no host");
  }
  ep.host = host;
  ep.port = parsed->has_port() ? std::string(parsed->port()) : (ep.tls ? "443" : "80");
  ep.serverName = config.tlsServerName.empty() ? host : config.tlsServerName;
  ep.caPem = config.caPem;
  ep.insecureSkipVerify = config.insecureSkipTlsVerify;
  ep.clientCertPem = config.clientCertPem;
  ep.clientKeyPem = config.clientKeyPem;
  ep.maxIdle = options.maxIdleConnections;
  ep.maxBodyBytes = options.maxResponseBytes;
  auto transport = detail::HttpTransport::create(ep);
  if (!transport) {
    return makeError("kubernetes client for " + config.server + " (from " + config.source +
                     "): " + transport.error().message);
  }
  impl->transport = std::move(*transport);
  std::string path(parsed->encoded_path());
  while (!path.empty() && path.back() == '/') path.pop_back();
  impl->basePath = path;
  impl->clock = options.clock ? options.clock : systemClock();
  impl->rng.seed(options.jitterSeed != 0 ? options.jitterSeed : std::random_device{}());
  if (config.exec) {
    ExecPluginOptions eo;
    eo.timeout = options.execTimeout;
    eo.now = options.wallClock;
    impl->exec = std::make_unique<ExecCredentialPlugin>(config, std::move(eo));
  }
  impl->config = std::move(config);
  impl->options = std::move(options);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

const ClientConfig& Client::config() const { return impl_->config; }
std::uint64_t Client::connectionsOpened() const { return impl_->transport->connectionsOpened(); }

ApiResult<json::object> Client::get(const ResourceType& type, std::string_view ns,
                                    std::string_view name) {
  std::string target = type.objectPath(ns, name);
  auto r = impl_->execute("GET", target);
  if (!r) return std::move(r).error();
  return impl_->parseObject("GET", target, *r);
}

ApiResult<std::string> Client::getText(std::string_view path) {
  auto r = impl_->execute("GET", std::string(path));
  if (!r) return std::move(r).error();
  return std::move(r->body);
}

ApiResult<ListResult> Client::listPage(const ResourceType& type, const ListOptions& options,
                                      CancelToken* cancel) {
  Query q;
  q.add("labelSelector", options.labelSelector).add("fieldSelector", options.fieldSelector);
  if (options.limit > 0) q.add("limit", std::to_string(options.limit));
  q.add("continue", options.continueToken).add("resourceVersion", options.resourceVersion);
  q.add("resourceVersionMatch", options.resourceVersionMatch);
  std::string target = type.collectionPath(options.ns) + q.str();
  auto r = impl_->execute("GET", target, "", "", cancel);
  if (!r) return std::move(r).error();
  // Item by item (list_body.h): with a transform only its cut-down copies outlive the
  // item's decoding, so the page's text is the most a page costs.
  ListResult out;
  auto meta = detail::readListBody(r->body, [&](const json::object& item) {
    if (options.transform) {
      out.items.push_back(options.transform(item));
    } else {
      out.items.emplace_back(item, json::storage_ptr());
    }
  });
  if (!meta) return ApiError{"GET", target, r->status, "", meta.error().message, {}};
  out.resourceVersion = std::move(meta->resourceVersion);
  out.continueToken = std::move(meta->continueToken);
  return out;
}

ApiResult<ListResult> Client::list(const ResourceType& type, ListOptions options,
                                  CancelToken* cancel) {
  // A continue token that expires (410) means the snapshot is gone: start a fresh list.
  for (int restart = 0;; ++restart) {
    ListResult all;
    ListOptions page = options;
    page.continueToken.clear();
    bool expired = false;
    for (;;) {
      auto r = listPage(type, page, cancel);
      if (!r) {
        if (r.error().isGone() && !page.continueToken.empty() && restart < 3) {
          expired = true;
          break;
        }
        return std::move(r).error();
      }
      if (all.resourceVersion.empty()) all.resourceVersion = r->resourceVersion;
      if (all.items.empty()) {
        all.items = std::move(r->items);
      } else {
        std::move(r->items.begin(), r->items.end(), std::back_inserter(all.items));
      }
      if (r->continueToken.empty()) break;
      page.continueToken = r->continueToken;
      // The token carries the list's version; a resourceVersion beside it is a 400.
      page.resourceVersion.clear();
      page.resourceVersionMatch.clear();
    }
    if (!expired) return all;
  }
}

ApiStatus Client::watch(const ResourceType& type, const WatchOptions& options,
                        const WatchHandler& handler, CancelToken* cancel) {
  Query q;
  q.add("watch", "true").add("resourceVersion", options.resourceVersion);
  if (options.allowBookmarks) q.add("allowWatchBookmarks", "true");
  if (options.sendInitialEvents) q.add("sendInitialEvents", "true").add("resourceVersionMatch", "NotOlderThan");
  if (options.timeoutSeconds > 0) q.add("timeoutSeconds", std::to_string(options.timeoutSeconds));
  q.add("labelSelector", options.labelSelector).add("fieldSelector", options.fieldSelector);
  std::string target = type.collectionPath(options.ns) + q.str();

  std::optional<ApiError> streamError;
  auto handleLine = [&](std::string_view line) -> bool {
    boost::system::error_code ec;
    auto v = json::parse(line, ec);
    const json::object* ev = (!ec && v.is_object()) ? &v.get_object() : nullptr;
    const json::value* t = ev ? ev->if_contains("type") : nullptr;
    const json::value* o = ev ? ev->if_contains("object") : nullptr;
    if (t == nullptr || !t->is_string() || o == nullptr || !o->is_object()) {
      streamError = ApiError{"GET", target, 200, "",
                             "malformed watch event: " + std::string(line.substr(0, 200)), {}};
      return false;
    }
    std::string_view evType = t->get_string();
    WatchEvent event;
    if (evType == "ADDED") {
      event.type = WatchEventType::kAdded;
    } else if (evType == "MODIFIED") {
      event.type = WatchEventType::kModified;
    } else if (evType == "DELETED") {
      event.type = WatchEventType::kDeleted;
    } else if (evType == "BOOKMARK") {
      event.type = WatchEventType::kBookmark;
    } else if (evType == "ERROR") {
      const auto& st = o->get_object();
      ApiError e{"GET", target, 500, "", "", {}};
      if (auto* c = st.if_contains("code"); c && c->is_int64()) e.httpStatus = static_cast<int>(c->get_int64());
      readStatus(st, e);
      streamError = std::move(e);
      return false;
    } else {
      streamError = ApiError{"GET", target, 200, "", "unknown watch event type " + std::string(evType), {}};
      return false;
    }
    event.object = std::move(v.get_object()["object"].get_object());
    return handler(std::move(event));
  };

  std::string pending;
  bool stopped = false;
  auto onData = [&](std::string_view data) -> bool {
    pending.append(data);
    std::size_t start = 0;
    for (std::size_t pos; (pos = pending.find('\n', start)) != std::string::npos; start = pos + 1) {
      std::string_view line(pending.data() + start, pos - start);
      if (line.find_first_not_of(" \r\t") == std::string_view::npos) continue;
      if (!handleLine(line)) {
        stopped = true;
        return false;
      }
    }
    pending.erase(0, start);
    // A line without end would otherwise grow until memory runs out.
    if (pending.size() > impl_->options.maxWatchEventBytes) {
      streamError = ApiError{"GET", target, 200, "",
                             "watch event longer than " + std::to_string(impl_->options.maxWatchEventBytes) +
                                 " bytes without a newline (ClientOptions::maxWatchEventBytes)",
                             {}};
      stopped = true;
      return false;
    }
    return true;
  };

  impl_->throttle();
  std::uint64_t execGeneration = 0;
  auto h = impl_->headers("", false, &execGeneration);
  if (!h) return ApiError{"GET", target, 0, "", "getting credentials: " + h.error().message, {}};
  detail::HttpRequest req{"GET", impl_->basePath + target, std::move(*h), ""};
  auto idle = std::chrono::seconds(options.timeoutSeconds > 0 ? options.timeoutSeconds + 30 : 3600);
  auto r = impl_->transport->stream(req, impl_->options.requestTimeout, idle, onData, cancel);
  if (cancel && cancel->cancelled()) return {};
  if (!r) return ApiError{"GET", target, 0, "", r.error().message, {}};
  if (r->status != 200) {
    if (r->status == 401) {
      // The caller re-watches; it should do so with a fresh credential.
      if (impl_->exec) {
        (void)impl_->exec->refreshAfterUnauthorized(execGeneration);
      } else {
        impl_->bearer(true);
      }
    }
    return errorFromResponse("GET", target, *r);
  }
  if (streamError) return *std::move(streamError);
  if (!stopped && !(cancel && cancel->cancelled()) &&
      pending.find_first_not_of(" \r\t\n") != std::string::npos) {
    handleLine(pending);
    if (streamError) return *std::move(streamError);
  }
  return {};
}

ApiResult<json::object> Client::mergePatch(const ResourceType& type, std::string_view ns,
                                           std::string_view name, const json::object& patch) {
  std::string target = type.objectPath(ns, name);
  auto r = impl_->execute("PATCH", target, json::serialize(patch), "application/merge-patch+json");
  if (!r) return std::move(r).error();
  return impl_->parseObject("PATCH", target, *r);
}

ApiResult<json::object> Client::patchMetadata(const ResourceType& type, std::string_view ns,
                                              std::string_view name, const MetadataPatch& patch) {
  json::object metadata;
  auto toJson = [](const std::map<std::string, std::optional<std::string>>& m) {
    json::object o;
    for (const auto& [k, v] : m) {
      if (v) {
        o[k] = *v;
      } else {
        o[k] = nullptr;
      }
    }
    return o;
  };
  if (!patch.annotations.empty()) metadata["annotations"] = toJson(patch.annotations);
  if (!patch.labels.empty()) metadata["labels"] = toJson(patch.labels);
  if (!patch.resourceVersion.empty()) metadata["resourceVersion"] = patch.resourceVersion;
  json::object body;
  body["metadata"] = std::move(metadata);
  return mergePatch(type, ns, name, body);
}

ApiStatus Client::bind(const BindRequest& request) {
  json::object metadata{{"name", request.pod}, {"namespace", request.ns}};
  if (!request.uid.empty()) metadata["uid"] = request.uid;
  if (!request.annotations.empty()) {
    json::object a;
    for (const auto& [k, v] : request.annotations) a[k] = v;
    metadata["annotations"] = std::move(a);
  }
  json::object body{{"apiVersion", "v1"},
                    {"kind", "Binding"},
                    {"metadata", std::move(metadata)},
                    {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", request.node}}}};
  std::string target = kPods.objectPath(request.ns, request.pod) + "/binding";
  auto r = impl_->execute("POST", target, json::serialize(body), "application/json");
  if (!r) return std::move(r).error();
  return {};
}

ApiResult<json::object> Client::createEvent(const EventSpec& e) {
  std::string ns = e.ns.empty() ? "default" : e.ns;
  auto nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  char hex[32];
  std::snprintf(hex, sizeof hex, "%llx", static_cast<unsigned long long>(nanos));
  std::string now = rfc3339Now();
  json::object involved{{"kind", e.kind}, {"name", e.name}, {"apiVersion", e.apiVersion}};
  if (!e.ns.empty()) involved["namespace"] = e.ns;
  if (!e.uid.empty()) involved["uid"] = e.uid;
  json::object body{
      {"apiVersion", "v1"},
      {"kind", "Event"},
      {"metadata", {{"name", e.name + "." + hex}, {"namespace", ns}}},
      {"involvedObject", std::move(involved)},
      {"reason", e.reason},
      {"message", e.message},
      {"type", e.type},
      {"source", {{"component", e.component}, {"host", e.host}}},
      {"firstTimestamp", now},
      {"lastTimestamp", now},
      {"count", 1},
      {"reportingComponent", e.component},
      {"reportingInstance", e.host},
  };
  return create(kEvents, ns, body);
}

ApiResult<json::object> Client::create(const ResourceType& type, std::string_view ns,
                                       const json::object& object) {
  std::string target = type.collectionPath(ns);
  auto r = impl_->execute("POST", target, json::serialize(object), "application/json");
  if (!r) return std::move(r).error();
  return impl_->parseObject("POST", target, *r);
}

ApiStatus Client::remove(const ResourceType& type, std::string_view ns, std::string_view name) {
  std::string target = type.objectPath(ns, name);
  auto r = impl_->execute("DELETE", target);
  if (!r) return std::move(r).error();
  return {};
}

}  // namespace vgpu::k8s
