#pragma once
// The certificates and keys of a test cluster, made with OpenSSL's C API: one CA, serving
// certificates it signs (kube-apiserver, vgpu-scheduler), client certificates, and the
// service-account signing key. EC P-256 throughout, valid for two days.

#include <string>
#include <vector>

#include "vgpu/result.h"

namespace vgpu::realk8s {

struct PemPair {
  std::string certPem;
  std::string keyPem;  ///< PKCS#8 ("PRIVATE KEY")
};

struct LeafSpec {
  std::string commonName{};
  std::vector<std::string> organizations{};  ///< a client certificate's groups
  std::vector<std::string> dnsNames{};
  std::vector<std::string> ipAddresses{};
  bool server = true;  ///< extended key usage serverAuth, else clientAuth
};

class CertificateAuthority {
 public:
  /// A self-signed CA certificate and its key.
  static Result<CertificateAuthority> create(const std::string& commonName);
  /// A certificate for `spec`, signed by this CA.
  Result<PemPair> issue(const LeafSpec& spec) const;
  const PemPair& pem() const { return ca_; }

 private:
  PemPair ca_;
};

/// A key pair without a certificate: kube-apiserver's --service-account-signing-key-file
/// (keyPem) and --service-account-key-file (certPem holds the public key, "PUBLIC KEY").
Result<PemPair> makeKeyPair();

}  // namespace vgpu::realk8s
