#include "common/derived_identity.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <memory>

#include "absl/status/status.h"

namespace trl {
namespace {

template <typename T, void (*Free)(T*)>
struct Deleter {
  void operator()(T* p) const { Free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, Deleter<EVP_PKEY, EVP_PKEY_free>>;
using X509Ptr = std::unique_ptr<X509, Deleter<X509, X509_free>>;
using BioPtr = std::unique_ptr<BIO, Deleter<BIO, BIO_free_all>>;

// The context string keeps this key apart from any other use of the token.
constexpr char kContext[] = "trl-launch tls identity v1";

std::string BioText(BIO* bio) {
  char* data = nullptr;
  const long size = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(size));
}

bool AddExtension(X509* cert, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext =
      X509V3_EXT_conf_nid(nullptr, &ctx, nid, const_cast<char*>(value));
  if (ext == nullptr) return false;
  const bool added = X509_add_ext(cert, ext, -1) == 1;
  X509_EXTENSION_free(ext);
  return added;
}

}  // namespace

absl::StatusOr<DerivedIdentity> DeriveIdentity(const std::string& token) {
  if (token.empty()) {
    return absl::InvalidArgumentError("no token to derive an identity from");
  }
  unsigned char seed[32];
  unsigned int seed_size = 0;
  if (HMAC(EVP_sha256(), kContext, sizeof(kContext) - 1,
           reinterpret_cast<const unsigned char*>(token.data()), token.size(),
           seed, &seed_size) == nullptr ||
      seed_size != sizeof(seed)) {
    return absl::InternalError("HMAC-SHA256 failed");
  }
  PkeyPtr key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed,
                                           sizeof(seed)));
  OPENSSL_cleanse(seed, sizeof(seed));
  if (!key) return absl::InternalError("cannot make an Ed25519 key");

  X509Ptr cert(X509_new());
  X509_NAME* name = X509_get_subject_name(cert.get());
  const bool built =
      X509_set_version(cert.get(), 2) == 1 &&
      ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), 1) == 1 &&
      ASN1_TIME_set_string(X509_getm_notBefore(cert.get()),
                           "20000101000000Z") == 1 &&
      ASN1_TIME_set_string(X509_getm_notAfter(cert.get()), "20991231235959Z") ==
          1 &&
      X509_NAME_add_entry_by_txt(
          name, "CN", MBSTRING_ASC,
          reinterpret_cast<const unsigned char*>(kDerivedServerName), -1, -1,
          0) == 1 &&
      X509_set_issuer_name(cert.get(), name) == 1 &&
      X509_set_pubkey(cert.get(), key.get()) == 1 &&
      AddExtension(cert.get(), NID_basic_constraints, "critical,CA:TRUE") &&
      AddExtension(cert.get(), NID_key_usage,
                   "critical,digitalSignature,keyCertSign") &&
      AddExtension(cert.get(), NID_ext_key_usage, "serverAuth,clientAuth") &&
      AddExtension(cert.get(), NID_subject_alt_name, "DNS:trl-launch") &&
      X509_sign(cert.get(), key.get(), nullptr) > 0;  // Ed25519: no digest
  if (!built) return absl::InternalError("cannot build the certificate");

  BioPtr key_bio(BIO_new(BIO_s_mem()));
  BioPtr cert_bio(BIO_new(BIO_s_mem()));
  if (PEM_write_bio_PrivateKey(key_bio.get(), key.get(), nullptr, nullptr, 0,
                               nullptr, nullptr) != 1 ||
      PEM_write_bio_X509(cert_bio.get(), cert.get()) != 1) {
    return absl::InternalError("cannot write the identity as PEM");
  }
  return DerivedIdentity{BioText(key_bio.get()), BioText(cert_bio.get())};
}

}  // namespace trl
