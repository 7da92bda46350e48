#include "pki.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

namespace vgpu::realk8s {
namespace {

template <auto Free>
struct Deleter {
  template <class T>
  void operator()(T* p) const {
    Free(p);
  }
};
using KeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY_free>>;
using CertPtr = std::unique_ptr<X509, Deleter<X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO_free>>;

constexpr long kValiditySeconds = 2L * 24 * 3600;

Error sslError(const std::string& what) {
  char buf[256] = "unknown error";
  if (const unsigned long e = ERR_get_error(); e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return makeError("OpenSSL: " + what + ": " + buf);
}

KeyPtr newKey() { return KeyPtr(EVP_EC_gen("P-256")); }

std::string bioText(BIO* bio) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

Result<std::string> keyPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1)
    return sslError("writing a key");
  return bioText(bio.get());
}

Result<std::string> certPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) return sslError("writing a certificate");
  return bioText(bio.get());
}

bool addExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  const bool ok = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return ok;
}

/// A certificate for `key` with subject CN/O, not yet signed; extensions are added by the caller.
CertPtr newCert(EVP_PKEY* key, const std::string& cn, const std::vector<std::string>& orgs) {
  CertPtr cert(X509_new());
  if (!cert) return nullptr;
  unsigned char serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) return nullptr;
  serial[0] &= 0x7f;  // positive
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  const bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) != nullptr;
  BN_free(bn);
  if (!ok || X509_set_version(cert.get(), 2) != 1) return nullptr;
  // A minute back: the components may check validity against a clock a moment behind.
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValiditySeconds);
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& o : orgs)
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  if (X509_set_pubkey(cert.get(), key) != 1) return nullptr;
  return cert;
}

}  // namespace

Result<CertificateAuthority> CertificateAuthority::create(const std::string& commonName) {
  KeyPtr key = newKey();
  if (!key) return sslError("generating the CA key");
  CertPtr cert = newCert(key.get(), commonName, {});
  if (!cert) return sslError("making the CA certificate");
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  if (!addExtension(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !addExtension(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") ||
      !addExtension(cert.get(), cert.get(), NID_subject_key_identifier, "hash"))
    return sslError("the CA's extensions");
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) return sslError("signing the CA certificate");
  CertificateAuthority ca;
  auto c = certPem(cert.get());
  if (!c.ok()) return std::move(c).error();
  auto k = keyPem(key.get());
  if (!k.ok()) return std::move(k).error();
  ca.ca_ = {std::move(c).value(), std::move(k).value()};
  return ca;
}

Result<PemPair> CertificateAuthority::issue(const LeafSpec& spec) const {
  BioPtr caCertBio(BIO_new_mem_buf(ca_.certPem.data(), static_cast<int>(ca_.certPem.size())));
  CertPtr caCert(PEM_read_bio_X509(caCertBio.get(), nullptr, nullptr, nullptr));
  BioPtr caKeyBio(BIO_new_mem_buf(ca_.keyPem.data(), static_cast<int>(ca_.keyPem.size())));
  KeyPtr caKey(PEM_read_bio_PrivateKey(caKeyBio.get(), nullptr, nullptr, nullptr));
  if (!caCert || !caKey) return sslError("reading the CA back");

  KeyPtr key = newKey();
  if (!key) return sslError("generating a key for " + spec.commonName);
  CertPtr cert = newCert(key.get(), spec.commonName, spec.organizations);
  if (!cert) return sslError("making the certificate of " + spec.commonName);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(caCert.get()));
  std::string san;
  for (const auto& d : spec.dnsNames) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : spec.ipAddresses) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  bool ok = addExtension(cert.get(), caCert.get(), NID_basic_constraints, "critical,CA:FALSE") &&
            addExtension(cert.get(), caCert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
            addExtension(cert.get(), caCert.get(), NID_ext_key_usage, spec.server ? "serverAuth" : "clientAuth") &&
            addExtension(cert.get(), caCert.get(), NID_authority_key_identifier, "keyid:always");
  if (ok && !san.empty()) ok = addExtension(cert.get(), caCert.get(), NID_subject_alt_name, san);
  if (!ok) return sslError("the extensions of " + spec.commonName);
  if (X509_sign(cert.get(), caKey.get(), EVP_sha256()) == 0) return sslError("signing " + spec.commonName);
  auto c = certPem(cert.get());
  if (!c.ok()) return std::move(c).error();
  auto k = keyPem(key.get());
  if (!k.ok()) return std::move(k).error();
  return PemPair{std::move(c).value(), std::move(k).value()};
}

Result<PemPair> makeKeyPair() {
  KeyPtr key = newKey();
  if (!key) return sslError("generating a key pair");
  auto k = keyPem(key.get());
  if (!k.ok()) return std::move(k).error();
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_PUBKEY(bio.get(), key.get()) != 1) return sslError("writing a public key");
  return PemPair{bioText(bio.get()), std::move(k).value()};
}

}  // namespace vgpu::realk8s
