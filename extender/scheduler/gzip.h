#pragma once
// gzip for large answers. kube-scheduler's extender client is Go's default transport, which
// asks for gzip (Accept-Encoding) and unpacks it transparently: a filter answer listing
// thousands of refused nodes under a handful of texts shrinks about tenfold on the wire.

#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vgpu::scheduler {

/// Whether an Accept-Encoding header value allows gzip (a "gzip" token without q=0).
bool acceptsGzip(std::string_view acceptEncoding);

/// `data` as a gzip member (RFC 1952) at a fast level; nullopt if zlib fails.
std::optional<std::string> gzipCompress(std::string_view data);

/// gzipCompress() of the last few different inputs kept with them: kube-scheduler retrying
/// a pod while nothing it depends on changed gets the same answer again, and comparing it
/// with the last one costs a hundredth of packing it. Thread-safe.
class GzipCache {
 public:
  explicit GzipCache(std::size_t entries = 4) : capacity_(entries) {}
  /// gzipCompress(data): the kept result when `data` is a kept input.
  std::optional<std::string> compress(std::string_view data);

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> kept_;  // input, packed; the most recent last
};

}  // namespace vgpu::scheduler
