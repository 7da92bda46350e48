#include "vgpu/k8s/object.h"
#include "scenario_support.h"

#include <fstream>
#include <iomanip>

#include "vgpu/annotations.h"
#include "vgpu/codec/assignment_codec.h"

namespace vgpu::realk8s {
namespace json = boost::json;

std::string suiteChartValues() {
  std::string values = kSimChartValues;
  values += "simDevices:\n  devices:\n";
  for (int i = 0; i < kDevicesPerNode; ++i)
    values += "    - {id: SIM-GPU-" + std::to_string(i) + ", model: Sim-80G, memoryMiB: " +
              std::to_string(kDeviceMemoryMiB) + ", computeUnits: 100, numa: 0}\n";
  return values;
}

std::string str(const json::value* v) { return v && v->is_string() ? std::string(v->as_string()) : std::string(); }

const json::value* at(const json::object& obj, std::initializer_list<std::string_view> path) {
  return k8s::findPath(obj, path);
}

json::object draClaimSpec(const std::string& deviceClass, const std::string& memory, const std::string& cores) {
  return {{"devices",
           {{"requests",
             json::array{json::object{{"name", "gpu"},
                                      {"exactly",
                                       {{"deviceClassName", deviceClass},
                                        {"allocationMode", "ExactCount"},
                                        {"count", 1},
                                        {"capacity", {{"requests", {{"memory", memory}, {"cores", cores}}}}}}}}}}}}};
}

std::map<std::string, std::string> simLimits(int count, std::uint64_t memoryMiB, int cores) {
  return {{"vgpu.io/sim", std::to_string(count)},
          {"vgpu.io/sim-memory", std::to_string(memoryMiB)},
          {"vgpu.io/sim-cores", std::to_string(cores)}};
}

json::object podObject(const PodSpec& spec) {
  const auto container = [](const char* name, const std::map<std::string, std::string>& limits) {
    json::object l;
    for (const auto& [k, v] : limits) l[k] = v;
    return json::object{{"name", name}, {"image", "registry.k8s.io/pause:3.10"}, {"resources", {{"limits", l}}}};
  };
  json::object main = container("main", spec.limits);
  if (spec.privileged) main["securityContext"] = json::object{{"privileged", true}};
  json::object podSpec{{"containers", json::array{main}}};
  if (!spec.initLimits.empty()) podSpec["initContainers"] = json::array{container("init", spec.initLimits)};
  if (!spec.group.empty()) podSpec["nodeSelector"] = json::object{{kGroupLabel, spec.group}};
  if (!spec.schedulerName.empty()) podSpec["schedulerName"] = spec.schedulerName;
  if (!spec.nodeName.empty()) podSpec["nodeName"] = spec.nodeName;
  if (!spec.priorityClassName.empty()) podSpec["priorityClassName"] = spec.priorityClassName;
  json::object metadata{{"name", spec.name}};
  if (!spec.labels.empty()) {
    json::object l;
    for (const auto& [k, v] : spec.labels) l[k] = v;
    metadata["labels"] = l;
  }
  if (!spec.annotations.empty()) {
    json::object a;
    for (const auto& [k, v] : spec.annotations) a[k] = v;
    metadata["annotations"] = a;
  }
  return {{"apiVersion", "v1"}, {"kind", "Pod"}, {"metadata", metadata}, {"spec", podSpec}};
}

Status createPod(RealCluster& c, const std::string& ns, const PodSpec& spec) {
  auto r = c.api().post("/api/v1/namespaces/" + ns + "/pods", json::serialize(podObject(spec)));
  if (r.status != 201) return makeError("creating pod " + ns + "/" + spec.name + ": " + r.describe());
  return {};
}

std::optional<json::object> waitForPod(RealCluster& c, const std::string& ns, const std::string& name,
                                       const std::function<bool(const json::object&)>& pred,
                                       std::chrono::milliseconds timeout) {
  std::optional<json::object> found;
  RealCluster::waitFor(
      [&] {
        auto p = c.getObject("/api/v1/namespaces/" + ns + "/pods/" + name);
        if (p.ok() && pred(*p)) found = std::move(p).value();
        return found.has_value();
      },
      timeout);
  return found;
}

std::string nodeOf(const json::object& pod) { return str(at(pod, {"spec", "nodeName"})); }

bool unschedulable(const json::object& pod) {
  if (const auto* conds = at(pod, {"status", "conditions"}); conds && conds->is_array())
    for (const auto& cond : conds->as_array())
      if (cond.is_object() && str(cond.as_object().if_contains("type")) == "PodScheduled")
        return str(cond.as_object().if_contains("status")) == "False" &&
               str(cond.as_object().if_contains("reason")) == "Unschedulable";
  return false;
}

Result<std::vector<json::object>> listPods(RealCluster& c, const std::string& ns, const std::string& fieldSelector) {
  std::string path = "/api/v1/namespaces/" + ns + "/pods";
  if (!fieldSelector.empty()) path += "?fieldSelector=" + fieldSelector;
  auto list = c.getObject(path);
  if (!list.ok()) return std::move(list).error();
  std::vector<json::object> out;
  if (const auto* items = list->if_contains("items"); items && items->is_array())
    for (const auto& item : items->as_array())
      if (item.is_object()) out.push_back(item.as_object());
  return out;
}

std::vector<json::object> podEvents(RealCluster& c, const std::string& ns, const std::string& name) {
  auto list = c.getObject("/api/v1/namespaces/" + ns + "/events?fieldSelector=involvedObject.name%3D" + name +
                          "%2CinvolvedObject.namespace%3D" + ns);
  std::vector<json::object> out;
  if (!list.ok()) return out;
  if (const auto* items = list->if_contains("items"); items && items->is_array())
    for (const auto& item : items->as_array())
      if (item.is_object()) out.push_back(item.as_object());
  return out;
}

Result<FilterVerdict> filterDirect(RealCluster& c, const json::object& pod, const std::vector<std::string>& nodes) {
  json::array names;
  for (const auto& n : nodes) names.emplace_back(n);
  auto reply = c.callVgpuScheduler("/filter", json::serialize(json::object{{"Pod", pod}, {"NodeNames", names}}));
  if (reply.status != 200) return makeError("/filter: " + reply.describe());
  const json::object answer = reply.json();
  FilterVerdict out;
  if (const auto* fitting = answer.if_contains("NodeNames"); fitting && fitting->is_array())
    for (const auto& n : fitting->as_array()) out.fitting.push_back(str(&n));
  for (const char* key : {"FailedNodes", "FailedAndUnresolvableNodes"})
    if (const auto* m = answer.if_contains(key); m && m->is_object())
      for (const auto& [node, why] : m->as_object()) out.refused[std::string(node)] = str(&why);
  out.error = str(answer.if_contains("Error"));
  return out;
}

Status cleanUp(RealCluster& c, const std::string& ns, const std::vector<std::string>& vgpuNodes) {
  const std::string path = "/api/v1/namespaces/" + ns + "/pods";
  auto r = c.api().del(path, R"({"apiVersion":"v1","kind":"DeleteOptions","gracePeriodSeconds":0})");
  if (r.status != 200) return makeError("DELETE " + path + ": " + r.describe());
  if (!RealCluster::waitFor([&] {
        auto left = c.getObject(path + "?limit=1");
        const auto* items = left.ok() ? left->if_contains("items") : nullptr;
        return items && items->is_array() && items->as_array().empty();
      }))
    return makeError("the pods of " + ns + " were still there after their deletion");
  for (const auto& node : vgpuNodes)
    if (auto s = c.removeVgpuNode(node); !s.ok()) return s;
  return {};
}

// ---- Admitter ----

Admitter::Admitter(RealCluster& c, std::string ns)
    : c_(c), ns_(std::move(ns)), api_(c.clientAs(c.tokenFor("admin"))) {
  watcher_ = std::thread([this] { watchLoop(); });
}

Admitter::~Admitter() { stop(); }

void Admitter::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  for (auto& [node, t] : workers_)
    if (t.joinable()) t.join();
}

bool Admitter::stopping() {
  std::lock_guard lock(mu_);
  return stopping_;
}

std::size_t Admitter::admitted() const {
  std::lock_guard lock(mu_);
  return admitted_;
}

std::vector<std::string> Admitter::refusals() const {
  std::lock_guard lock(mu_);
  return refusals_;
}

std::vector<std::vector<e2e::AuditPod>> Admitter::bindViews() const {
  std::lock_guard lock(mu_);
  return bindViews_;
}

bool Admitter::caughtUp() {
  auto bound = listPods(c_, ns_, "spec.nodeName%21%3D");
  if (!bound.ok()) return false;
  std::lock_guard lock(mu_);
  for (const auto& pod : *bound)
    if (!through_.count(str(at(pod, {"metadata", "uid"})))) return false;
  return true;
}

bool Admitter::waitCaughtUp(std::chrono::milliseconds timeout) {
  return RealCluster::waitFor([&] { return caughtUp(); }, timeout);
}

void Admitter::watchLoop() {
  // The pods bound in the namespace: a list, then watches from its version that the
  // apiserver ends every second (so that stop() is never kept waiting); a list again
  // whenever the version is gone.
  const std::string base = "/api/v1/namespaces/" + ns_ + "/pods";
  const std::string selector = "fieldSelector=spec.nodeName%21%3D";
  std::string rv;
  while (!stopping()) {
    if (rv.empty()) {
      auto r = api_.get(base + "?" + selector);
      if (r.status != 200) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_; });
        continue;
      }
      const json::object list = r.json();
      rv = str(at(list, {"metadata", "resourceVersion"}));
      std::set<std::string> listed;
      if (const auto* items = list.if_contains("items"); items && items->is_array())
        for (const auto& item : items->as_array())
          if (item.is_object()) {
            listed.insert(str(at(item.as_object(), {"metadata", "uid"})));
            offer(item.as_object());
          }
      // A relist after a broken watch (compaction, restarts) shows no DELETED events: the
      // pods gone meanwhile are the ones it no longer lists.
      std::lock_guard lock(mu_);
      std::erase_if(current_, [&](const auto& entry) { return !listed.count(entry.first); });
    }
    bool relist = false;
    auto reply = api_.watch(
        base + "?watch=true&timeoutSeconds=1&resourceVersion=" + rv + "&" + selector,
        [&](const json::object& event) {
          const std::string type = str(event.if_contains("type"));
          const auto* obj = event.if_contains("object");
          if (type == "ERROR" || !obj || !obj->is_object()) {
            relist = true;
            return false;
          }
          if (const std::string v = str(at(obj->as_object(), {"metadata", "resourceVersion"})); !v.empty()) rv = v;
          if (type == "ADDED" || type == "MODIFIED") offer(obj->as_object());
          if (type == "DELETED") forget(obj->as_object());
          return !stopping();
        },
        std::chrono::seconds(10));
    if (relist || (reply.status != 200 && reply.status != 0)) rv.clear();
    if (reply.status == 0 && !stopping()) {
      // No apiserver (a test restarts it): try again shortly.
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_; });
    }
  }
}

void Admitter::offer(const json::object& pod) {
  const std::string uid = str(at(pod, {"metadata", "uid"}));
  const std::string node = nodeOf(pod);
  if (uid.empty() || node.empty()) return;
  const std::string key = str(at(pod, {"metadata", "namespace"})) + "/" + str(at(pod, {"metadata", "name"}));
  const std::string assignmentKey(keys::kPodAssignment);
  std::optional<Assignment> assignment;
  if (auto a = decodeAssignment(str(at(pod, {"metadata", "annotations", assignmentKey.c_str()}))); a.ok())
    assignment = std::move(a).value();
  std::lock_guard lock(mu_);
  // Every change of a bound pod's assignment or bind phase, in the run's folder: who moved
  // which share when (the agent corrects an assignment to what the kubelet handed out).
  const std::string annotations = str(at(pod, {"metadata", "annotations", assignmentKey.c_str()})) + " " +
                                  str(at(pod, {"metadata", "annotations", std::string(keys::kPodBindPhase).c_str()}));
  if (auto& last = history_[uid]; last != annotations) {
    last = annotations;
    std::ofstream out(c_.dir() + "/assignments.txt", std::ios::app);
    out << std::fixed << std::setprecision(3)
        << std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() << " " << key
        << " rv=" << str(at(pod, {"metadata", "resourceVersion"})) << " " << annotations << "\n";
  }
  // A pod that finished (the kubelet refused it: Failed) or is going holds nothing from
  // then on, and the kubelet admits neither.
  const std::string phase = str(at(pod, {"status", "phase"}));
  if (phase == "Failed" || phase == "Succeeded" || at(pod, {"metadata", "deletionTimestamp"}) != nullptr) {
    current_.erase(uid);
    seen_.insert(uid);
    return;
  }
  const bool bound = !seen_.count(uid);
  current_[uid] = {key, uid, node, std::move(assignment)};
  if (bound) {
    std::vector<e2e::AuditPod> view;
    for (const auto& [u, p] : current_)
      if (p.node == node) view.push_back(p);
    bindViews_.push_back(std::move(view));
  }
  if (stopping_ || !seen_.insert(uid).second) return;
  queues_[node].push_back(pod);
  if (!workers_.count(node)) workers_[node] = std::thread([this, node] { work(node); });
  cv_.notify_all();
}

void Admitter::forget(const json::object& pod) {
  std::lock_guard lock(mu_);
  current_.erase(str(at(pod, {"metadata", "uid"})));
}

void Admitter::work(const std::string& node) {
  for (;;) {
    json::object pod;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queues_[node].empty(); });
      if (stopping_) return;
      pod = std::move(queues_[node].front());
      queues_[node].pop_front();
      // Deleted while it waited in the queue: a kubelet admits only the pods it still sees.
      const std::string uid = str(at(pod, {"metadata", "uid"}));
      if (!current_.count(uid)) {
        through_.insert(uid);
        continue;
      }
    }
    auto result = c_.admitPod(pod);
    const std::string key = str(at(pod, {"metadata", "namespace"})) + "/" + str(at(pod, {"metadata", "name"}));
    std::lock_guard lock(mu_);
    through_.insert(str(at(pod, {"metadata", "uid"})));
    if (result.ok() && result->admitted)
      ++admitted_;
    else
      refusals_.push_back(key + " on " + node + ": " + (result.ok() ? result->error : result.error().message));
  }
}

}  // namespace vgpu::realk8s
