// Small pieces shared by the client: the system clock, cancellation, error text, paths.

#include <thread>

#include "vgpu/k8s/api_error.h"
#include "vgpu/k8s/clock.h"
#include "vgpu/k8s/resource.h"
#include "vgpu/k8s/watch.h"

namespace vgpu::k8s {
namespace {

class SystemClock final : public Clock {
 public:
  TimePoint now() override { return std::chrono::steady_clock::now(); }
  void sleepFor(Duration d) override { std::this_thread::sleep_for(d); }
};

}  // namespace

std::shared_ptr<Clock> systemClock() {
  static auto clock = std::make_shared<SystemClock>();
  return clock;
}

void CancelToken::cancel() {
  std::lock_guard lock(mu_);
  cancelled_.store(true);
  if (canceller_) canceller_();
}

void CancelToken::setCanceller(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  canceller_ = std::move(fn);
  if (canceller_ && cancelled_.load()) canceller_();
}

std::string ApiError::describe() const {
  std::string out = verb + " " + path + ": ";
  if (httpStatus == 0) {
    out += "no response: ";
  } else {
    out += "HTTP " + std::to_string(httpStatus);
    if (!reason.empty()) out += " (" + reason + ")";
    out += ": ";
  }
  out += message.empty() ? std::string("(no message)") : message;
  return out;
}

std::string urlEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
        ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out.push_back(static_cast<char>(ch));
    } else {
      out.push_back('%');
      out.push_back(kHex[ch >> 4]);
      out.push_back(kHex[ch & 15]);
    }
  }
  return out;
}

std::string ResourceType::collectionPath(std::string_view ns) const {
  std::string out(apiPrefix);
  if (namespaced && !ns.empty()) {
    out += "/namespaces/";
    out += urlEncode(ns);
  }
  out += "/";
  out += plural;
  return out;
}

std::string ResourceType::objectPath(std::string_view ns, std::string_view name) const {
  return collectionPath(namespaced ? ns : std::string_view()) + "/" + urlEncode(name);
}

}  // namespace vgpu::k8s
