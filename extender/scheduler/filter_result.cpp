#include "filter_result.h"

#include <algorithm>
#include <cstring>

#include <boost/json/serialize.hpp>

#include "json_writer.h"

namespace vgpu::scheduler {

FilterResult::FilterResult(std::size_t candidates) { passed_.reserve(candidates); }

FilterResult::ReasonId FilterResult::reason(std::string_view text) {
  if (auto it = ids_.find(text); it != ids_.end()) return it->second;
  const auto id = static_cast<ReasonId>(reasons_.size());
  reasons_.emplace_back(text);
  ids_.emplace(reasons_.back(), id);
  return id;
}

std::string FilterResult::summary(std::size_t candidates) const {
  constexpr std::size_t kShown = 6;
  std::vector<std::pair<std::size_t, ReasonId>> byReason(reasons_.size());
  for (ReasonId id = 0; id < reasons_.size(); ++id) byReason[id].second = id;
  for (const auto& f : failed_) ++byReason[f.reason].first;
  // Commonest first; ties in reason order, so the message is stable.
  std::stable_sort(byReason.begin(), byReason.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = std::to_string(passed_.size()) + "/" + std::to_string(candidates) + " nodes can take the pod";
  std::size_t shown = 0, rest = 0;
  for (const auto& [count, id] : byReason) {
    if (count == 0) continue;
    if (shown == kShown) {
      rest += count;
      continue;
    }
    out += shown++ == 0 ? ": " : ", ";
    out += std::to_string(count) + " " + reasons_[id];
  }
  if (rest > 0) out += ", " + std::to_string(rest) + " for other reasons";
  return out;
}

void FilterResult::appendPassedNames(std::string& out, const ExtenderArgs& args) const {
  // Neighbours in the request that both pass are copied with what lies between their
  // tokens (a comma and whitespace): when most nodes fit, the answer is a few copies.
  const char* runBegin = nullptr;
  const char* runEnd = nullptr;
  auto flush = [&] {
    if (runBegin) out.append(runBegin, static_cast<std::size_t>(runEnd - runBegin));
    runBegin = nullptr;
  };
  for (std::size_t k = 0; k < passed_.size(); ++k) {
    const std::uint32_t index = passed_[k];
    const std::string_view name = args.names[index];
    const bool raw = args.inBody(name);
    if (raw && runBegin && passed_[k - 1] + 1 == index) {
      runEnd = name.data() + name.size() + 1;
      continue;
    }
    flush();
    if (k) out += ',';
    if (raw) {
      runBegin = name.data() - 1;
      runEnd = name.data() + name.size() + 1;
    } else {
      appendJsonString(out, name);
    }
  }
  flush();
}

std::string FilterResult::toJson(const ExtenderArgs& args) const {
  std::size_t size = 128;
  for (const auto index : passed_) size += args.names[index].size() + 3;
  for (const auto& f : failed_) size += args.names[f.index].size() + reasons_[f.reason].size() + 6;
  std::string body;
  body.reserve(size);  // escapes and the request's spacing between copied names aside, the exact size
  if (args.cacheCapable) {
    body += "{\"Nodes\":null,\"NodeNames\":[";
    appendPassedNames(body, args);
    body += "],";
  } else {
    body += "{\"Nodes\":{\"metadata\":{},\"items\":[";
    for (std::size_t k = 0; k < passed_.size(); ++k) {
      if (k) body += ',';
      body += boost::json::serialize(args.nodes[passed_[k]]);
    }
    body += "]},\"NodeNames\":null,";
  }
  // Each reason escaped once, then copied per node.
  std::vector<std::string> quoted(reasons_.size());
  for (std::size_t id = 0; id < reasons_.size(); ++id) appendJsonString(quoted[id], printfSafe(reasons_[id]));
  auto appendFailures = [&](bool unresolvable) {
    body += '{';
    // Thousands of `"name":"reason",` written into room made first: a string's append per
    // piece, with its capacity check, cost more than the copies.
    std::size_t room = 0;
    for (const auto& f : failed_)
      if (f.unresolvable == unresolvable) room += args.names[f.index].size() + quoted[f.reason].size() + 4;
    const std::size_t start = body.size();
    body.resize(start + room);
    char* out = body.data() + start;
    bool first = true;
    for (const auto& f : failed_) {
      if (f.unresolvable != unresolvable) continue;
      if (!first) *out++ = ',';
      first = false;
      const std::string_view name = args.names[f.index];
      if (args.inBody(name)) {
        std::memcpy(out, name.data() - 1, name.size() + 2);
        out += name.size() + 2;
      } else {  // escaped: may be longer than its size + 2 (rare: names are DNS labels)
        std::string token;
        appendJsonString(token, name);
        const std::size_t at = static_cast<std::size_t>(out - body.data());
        body.resize(body.size() + token.size());
        out = body.data() + at;
        std::memcpy(out, token.data(), token.size());
        out += token.size();
      }
      *out++ = ':';
      const std::string& reason = quoted[f.reason];
      std::memcpy(out, reason.data(), reason.size());
      out += reason.size();
    }
    body.resize(static_cast<std::size_t>(out - body.data()));
    body += '}';
  };
  body += "\"FailedNodes\":";
  appendFailures(false);
  body += ",\"FailedAndUnresolvableNodes\":";
  appendFailures(true);
  body += ",\"Error\":";
  appendJsonString(body, printfSafe(error_));
  body += '}';
  return body;
}

}  // namespace vgpu::scheduler
