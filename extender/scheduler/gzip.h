#pragma once
// gzip for large answers. kube-scheduler's extender client is Go's default transport, which
// asks for gzip (Accept-Encoding) and unpacks it transparently: a filter answer listing
// thousands of refused nodes under a handful of texts shrinks about tenfold on the wire.

#include <optional>
#include <string>
#include <string_view>

namespace vgpu::scheduler {

/// Whether an Accept-Encoding header value allows gzip (a "gzip" token without q=0).
bool acceptsGzip(std::string_view acceptEncoding);

/// `data` as a gzip member (RFC 1952) at a fast level; nullopt if zlib fails.
std::optional<std::string> gzipCompress(std::string_view data);

}  // namespace vgpu::scheduler
