#pragma once
// The region and the activity board report errors into a caller's buffer (C ABI: no
// exceptions, no allocation), formatted like printf.

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

namespace vgpu::region_detail {

inline void setError(char* err, size_t len, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
inline void setError(char* err, size_t len, const char* fmt, ...) {
  if (err == nullptr || len == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

}  // namespace vgpu::region_detail
