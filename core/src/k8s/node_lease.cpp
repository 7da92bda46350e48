// The node agent's liveness Lease (node_lease.h): its name, its body and how it is read.

#include "vgpu/k8s/node_lease.h"

#include <cstdio>
#include <ctime>

#include "vgpu/codec/timestamp.h"
#include "vgpu/k8s/object.h"

namespace vgpu {
namespace json = boost::json;

namespace {

/// metav1.MicroTime: RFC 3339 in UTC with six fractional digits.
std::string microTime(std::chrono::system_clock::time_point t) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(us / 1000000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<long long>(us % 1000000));
  return buf;
}

}  // namespace

std::string nodeLeaseName(std::string_view node) {
  std::string name = "vgpu-node-" + std::string(node);
  return name.size() > 253 ? std::string() : name;
}

json::object nodeLeaseObject(std::string_view node, std::string_view ns, std::chrono::system_clock::time_point now,
                             std::chrono::seconds duration, bool patchOnly) {
  json::object spec{{"holderIdentity", node},
                    {"renewTime", microTime(now)},
                    {"leaseDurationSeconds", duration.count()}};
  if (patchOnly) return {{"spec", std::move(spec)}};
  return {{"apiVersion", "coordination.k8s.io/v1"},
          {"kind", "Lease"},
          {"metadata",
           {{"name", nodeLeaseName(node)}, {"namespace", ns}, {"labels", {{kNodeLeaseLabel, "true"}}}}},
          {"spec", std::move(spec)}};
}

std::optional<NodeLeaseRenewal> parseNodeLease(const json::object& lease) {
  if (k8s::label(lease, kNodeLeaseLabel) != "true") return std::nullopt;
  const auto* spec = lease.if_contains("spec");
  if (spec == nullptr || !spec->is_object()) return std::nullopt;
  const auto* holder = spec->as_object().if_contains("holderIdentity");
  const auto* renew = spec->as_object().if_contains("renewTime");
  if (holder == nullptr || !holder->is_string() || holder->as_string().empty() || renew == nullptr ||
      !renew->is_string())
    return std::nullopt;
  auto t = parseTimestamp(std::string_view(renew->as_string()));
  if (!t.ok()) return std::nullopt;
  return NodeLeaseRenewal{std::string(holder->as_string()), *t};
}

}  // namespace vgpu
