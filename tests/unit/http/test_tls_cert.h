#pragma once
// A self-signed EC certificate for TLS tests, made with the openssl program that configure
// found (VGPU_OPENSSL; cmake/VgpuTools.cmake). Without it (-DVGPU_WITHOUT_TLS_TESTS=ON) the
// tests that need one are skipped with that reason.
#include <cstdlib>
#include <filesystem>
#include <string>

namespace vgpu::testing {

#ifdef VGPU_OPENSSL
inline constexpr bool kCanMakeCerts = true;
#else
inline constexpr bool kCanMakeCerts = false;
#define VGPU_OPENSSL "openssl"
#endif
inline constexpr const char* kNoCertsReason = "left out by VGPU_WITHOUT_TLS_TESTS (no openssl program)";

/// Writes tls.crt and tls.key for `commonName`, valid for 127.0.0.1, into `dir`.
inline bool makeSelfSignedCert(const std::filesystem::path& dir, const std::string& commonName = "localhost") {
  const std::string cmd = std::string(VGPU_OPENSSL) +
                          " req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=" +
                          commonName + " -addext subjectAltName=IP:127.0.0.1 -keyout " + (dir / "tls.key").string() +
                          " -out " + (dir / "tls.crt").string() + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

}  // namespace vgpu::testing
