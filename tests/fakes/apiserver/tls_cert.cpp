#include "tls_cert.h"

#include <memory>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace vgpu::fakes::detail {
namespace {

struct Free {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509_EXTENSION* p) const { X509_EXTENSION_free(p); }
};

bool addExtension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  std::unique_ptr<X509_EXTENSION, Free> ext(
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, const_cast<char*>(value)));
  return ext && X509_add_ext(cert, ext.get(), -1) == 1;
}

std::string bioText(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

}  // namespace

Result<CertAndKey> makeSelfSignedCert() {
  std::unique_ptr<EVP_PKEY, Free> key(EVP_EC_gen("P-256"));
  if (!key) return makeError("fake apiserver: cannot generate a TLS key");
  std::unique_ptr<X509, Free> cert(X509_new());
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 24 * 3600);
  X509_set_pubkey(cert.get(), key.get());
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>("vgpu-fake-apiserver"), -1, -1, 0);
  X509_set_issuer_name(cert.get(), name);
  if (!addExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !addExtension(cert.get(), NID_key_usage, "critical,digitalSignature,keyCertSign") ||
      !addExtension(cert.get(), NID_subject_alt_name, "DNS:localhost,IP:127.0.0.1,IP:::1")) {
    return makeError("fake apiserver: cannot add certificate extensions");
  }
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) == 0) {
    return makeError("fake apiserver: cannot sign the certificate");
  }
  std::unique_ptr<BIO, Free> certBio(BIO_new(BIO_s_mem()));
  std::unique_ptr<BIO, Free> keyBio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(certBio.get(), cert.get());
  PEM_write_bio_PrivateKey(keyBio.get(), key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  return CertAndKey{bioText(certBio.get()), bioText(keyBio.get())};
}

}  // namespace vgpu::fakes::detail
