#include "gzip.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace vgpu::scheduler {

bool acceptsGzip(std::string_view value) {
  while (!value.empty()) {
    const auto comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    value = comma == std::string_view::npos ? std::string_view{} : value.substr(comma + 1);
    auto trim = [](std::string_view s) {
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
      while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
      return s;
    };
    const auto semicolon = item.find(';');
    const std::string_view coding = trim(item.substr(0, semicolon));
    if (coding.size() != 4) continue;
    bool gzip = true;
    for (std::size_t i = 0; i < 4; ++i) gzip = gzip && std::tolower(static_cast<unsigned char>(coding[i])) == "gzip"[i];
    if (!gzip) continue;
    if (semicolon == std::string_view::npos) return true;
    std::string_view params = trim(item.substr(semicolon + 1));
    // "q=0", "q=0.0", "q=0.000": refused; any other weight accepts.
    if (params.size() >= 3 && (params[0] == 'q' || params[0] == 'Q') && params[1] == '=') {
      const std::string_view q = params.substr(2);
      if (q.find_first_not_of("0.") == std::string_view::npos && q.front() == '0') return false;
    }
    return true;
  }
  return false;
}

std::optional<std::string> gzipCompress(std::string_view data) {
  z_stream z{};
  // windowBits 15 + 16: a gzip header and trailer; level 1: the answer is highly repetitive,
  // so the fastest level already takes most of what there is to take.
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return std::nullopt;
  std::string out;
  out.resize(deflateBound(&z, static_cast<uLong>(data.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&z, Z_FINISH);
  const auto written = z.total_out;
  deflateEnd(&z);
  if (rc != Z_STREAM_END) return std::nullopt;
  out.resize(written);
  return out;
}

std::optional<std::string> GzipCache::compress(std::string_view data) {
  {
    std::lock_guard lock(mu_);
    for (auto it = kept_.begin(); it != kept_.end(); ++it)
      if (it->first == data) {
        std::string packed = it->second;
        std::rotate(it, it + 1, kept_.end());  // now the most recent
        return packed;
      }
  }
  auto packed = gzipCompress(data);  // outside the lock: the slow part
  if (!packed || capacity_ == 0) return packed;
  std::lock_guard lock(mu_);
  if (kept_.size() == capacity_) kept_.erase(kept_.begin());
  kept_.emplace_back(std::string(data), *packed);
  return packed;
}

}  // namespace vgpu::scheduler
