#include "requeuer.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "vgpu/codec/timestamp.h"

namespace vgpu::scheduler {
namespace {

/// A node name's key in a refused pod's candidate set: its hash, folded. Hashed for every
/// candidate of every refusal (5,000 at a time), so the cache's eight-bytes-at-a-time hash.
std::uint32_t nameKey(std::string_view name) {
  const std::uint64_t h = nodeNameHash(name);
  return static_cast<std::uint32_t>(h ^ (h >> 32));
}

std::string_view schedulerNameOf(const boost::json::object& pod) {
  if (const auto* spec = pod.if_contains("spec"); spec && spec->is_object())
    if (const auto* n = spec->as_object().if_contains("schedulerName"); n && n->is_string() && !n->as_string().empty())
      return n->as_string();
  return "default-scheduler";
}

bool deleting(const boost::json::object& pod) {
  const auto* meta = pod.if_contains("metadata");
  return meta && meta->is_object() && meta->as_object().contains("deletionTimestamp") &&
         !meta->as_object().at("deletionTimestamp").is_null();
}

}  // namespace

/// Keys as an open-addressing table: built in one pass over a refusal's candidates (no
/// sort: a refusal over thousands of nodes not seen together before costs a pass, not a
/// sort), asked once per node where capacity frees.
class NameKeySet {
 public:
  explicit NameKeySet(const std::vector<std::uint32_t>& keys) {
    std::size_t capacity = 8;
    while (capacity < keys.size() * 2) capacity *= 2;
    slots_.assign(capacity, kEmpty);
    for (const std::uint32_t k : keys) {
      if (k == kEmpty) {
        hasEmptyKey_ = true;
        continue;
      }
      slots_[slotOf(k)] = k;
    }
  }
  bool contains(std::uint32_t key) const { return key == kEmpty ? hasEmptyKey_ : slots_[slotOf(key)] == key; }

 private:
  static constexpr std::uint32_t kEmpty = 0;
  /// Where `key` is, or the empty slot where it would go (keys are hashes already).
  std::size_t slotOf(std::uint32_t key) const {
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = key & mask;; i = (i + 1) & mask)
      if (slots_[i] == key || slots_[i] == kEmpty) return i;
  }
  std::vector<std::uint32_t> slots_;
  bool hasEmptyKey_ = false;
};

Requeuer::Requeuer(ClusterCache& cache, const PlacementEngine& engine, k8s::Client& client, SchedulerMetrics& metrics,
                   std::function<k8s::ObjectPtr(const std::string&)> podLookup, RequeuerOptions options)
    : cache_(cache), engine_(engine), client_(client), metrics_(metrics), podLookup_(std::move(podLookup)),
      options_(std::move(options)), tokens_(static_cast<double>(std::max(1, options_.burst))) {
  if (options_.qps > 0) thread_ = std::thread([this] { run(); });
}

Requeuer::~Requeuer() { stop(); }

void Requeuer::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Requeuer::refused(const PodInfo& pod, std::shared_ptr<const PreparedPod> prepared,
                       const std::vector<std::string_view>& candidates) {
  if (options_.qps <= 0 || pod.uid.empty() || !prepared) return;
  // Pods of one workload are refused over the same candidates, again at every retry: find
  // their set by an order-free signature before building one.
  std::vector<std::uint32_t> keys;
  keys.reserve(candidates.size());
  std::uint64_t sum = candidates.size(), mixed = 0;
  for (const auto name : candidates) {
    const std::uint32_t k = nameKey(name);
    keys.push_back(k);
    sum += k;
    mixed ^= (static_cast<std::uint64_t>(k) + 0x9E3779B97F4A7C15ull) * 0xBF58476D1CE4E5B9ull;
  }
  const std::pair<std::uint64_t, std::uint64_t> signature{sum, mixed};
  std::lock_guard lock(mu_);
  std::shared_ptr<const NameKeySet> set;
  std::erase_if(candidateSets_, [](const auto& entry) { return entry.second.expired(); });
  for (const auto& [sig, weak] : candidateSets_)
    if (sig == signature)
      if (auto found = weak.lock()) {
        set = std::move(found);
        break;
      }
  if (!set) {
    set = std::make_shared<const NameKeySet>(keys);
    candidateSets_.emplace_back(signature, set);
  }
  Refused& r = refused_[pod.uid];
  r.uid = pod.uid;
  r.ns = pod.podNamespace;
  r.name = pod.name;
  r.pod = std::move(prepared);
  r.candidates = std::move(set);
  r.order = ++order_;
  if (refused_.size() > options_.maxTracked) {
    auto oldest = std::min_element(refused_.begin(), refused_.end(),
                                   [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    refused_.erase(oldest);
  }
}

void Requeuer::forget(const std::string& uid) {
  std::lock_guard lock(mu_);
  refused_.erase(uid);
}

void Requeuer::capacityFreed(const std::string& node) {
  if (options_.qps <= 0) return;
  {
    std::lock_guard lock(mu_);
    if (refused_.empty()) return;  // the common case: nobody waits on us
    freed_.insert(node);
  }
  cv_.notify_one();
}

std::size_t Requeuer::tracked() const {
  std::lock_guard lock(mu_);
  return refused_.size();
}

void Requeuer::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return stopping_ || !freed_.empty(); });
    if (stopping_) return;
    const std::string node = *freed_.begin();
    freed_.erase(freed_.begin());
    lock.unlock();
    handle(node);
    lock.lock();
  }
}

bool Requeuer::takeToken() {
  // Blocks the requeuer's thread (never a request) until the rate allows one more touch.
  std::unique_lock lock(mu_);
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    tokens_ = std::min(static_cast<double>(std::max(1, options_.burst)),
                       tokens_ + std::chrono::duration<double>(now - refill_).count() * options_.qps);
    refill_ = now;
    if (tokens_ >= 1) {
      tokens_ -= 1;
      return true;
    }
    const auto wait = std::chrono::duration<double>((1 - tokens_) / options_.qps);
    if (cv_.wait_for(lock, wait, [this] { return stopping_; })) return false;
  }
}

void Requeuer::handle(const std::string& node) {
  const std::uint32_t key = nameKey(node);
  std::vector<Refused> waiting;
  {
    std::lock_guard lock(mu_);
    for (const auto& [uid, r] : refused_)
      if (r.candidates->contains(key)) waiting.push_back(r);
  }
  if (waiting.empty()) return;
  std::sort(waiting.begin(), waiting.end(), [](const Refused& a, const Refused& b) { return a.order < b.order; });
  // Those that fit now, oldest first, each counted as placed for the next: no more pods woken
  // than the freed capacity can take.
  std::vector<const Refused*> fitting;
  cache_.read([&](const ClusterCache::Lookup& lookup, std::chrono::system_clock::time_point now) {
    const NodeEntry* entry = lookup(node);
    if (!entry || !nodeUsable(*entry, now, options_.heartbeatTimeout)) return;
    NodeState state = entry->state;
    for (const Refused& r : waiting) {
      auto placed = engine_.assign(*r.pod, state);
      if (!placed.ok()) continue;
      fitting.push_back(&r);
      (void)state.add(*placed);
    }
  });
  for (const Refused* r : fitting) {
    {
      std::lock_guard lock(mu_);
      auto it = refused_.find(r->uid);
      if (it == refused_.end() || it->second.order != r->order) continue;  // placed, or refused again since
      if (std::chrono::steady_clock::now() - it->second.lastTouch < options_.perPodInterval) continue;
    }
    if (!takeToken()) return;
    if (touch(*r, node)) {
      std::lock_guard lock(mu_);
      if (auto it = refused_.find(r->uid); it != refused_.end()) it->second.lastTouch = std::chrono::steady_clock::now();
    }
  }
}

bool Requeuer::touch(const Refused& r, const std::string& node) {
  const std::string key = r.ns + "/" + r.name;
  const k8s::ObjectPtr pod = podLookup_ ? podLookup_(key) : nullptr;
  // Only our own pods still waiting for a node, exactly the one we refused.
  if (!pod || k8s::uid(*pod) != r.uid || !k8s::nodeName(*pod).empty() || deleting(*pod) ||
      schedulerNameOf(*pod) != options_.schedulerName) {
    forget(r.uid);
    return false;
  }
  k8s::MetadataPatch patch;
  std::uint64_t n;
  {
    std::lock_guard lock(mu_);
    n = ++touches_;
  }
  patch.annotations[std::string(kCapacityFreedAnnotation)] =
      node + " " + formatTimestamp(std::chrono::system_clock::now()) + " #" + std::to_string(n);
  // Against the version we judged: if the pod changed meanwhile (bound, or any update, which
  // moves it in kube-scheduler's queue by itself), this one is not needed.
  patch.resourceVersion = std::string(k8s::resourceVersion(*pod));
  auto patched = client_.patchMetadata(k8s::kPods, r.ns, r.name, patch);
  if (!patched.ok()) {
    if (!patched.error().isConflict() && !patched.error().isNotFound()) {
      metrics_.podsRequeued.inc({"error"});
      spdlog::warn("pod={} could not be woken up for capacity freed on node {}: {}", key, node,
                   patched.error().describe());
    }
    return false;
  }
  metrics_.podsRequeued.inc({"touched"});
  spdlog::info("pod={} woken up: capacity freed on node {} where it now fits", key, node);
  return true;
}

}  // namespace vgpu::scheduler
