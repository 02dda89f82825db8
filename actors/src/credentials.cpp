// Cluster credentials on disk: checking a member's files, and creating a
// cluster's CA and member keys (`asteroid keys`), with OpenSSL's own API so
// that no `openssl` program is needed on a device.
#include "asteroid/actors/credentials.hpp"

#include "tls_context.hpp"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <set>
#include <stdexcept>

namespace asteroid::actors {

namespace {

namespace fs = std::filesystem;

template <class T, void (*Free)(T*)>
struct openssl_deleter {
  void operator()(T* p) const { Free(p); }
};
using bio_ptr = std::unique_ptr<BIO, openssl_deleter<BIO, BIO_free_all>>;
using x509_ptr = std::unique_ptr<X509, openssl_deleter<X509, X509_free>>;
using key_ptr = std::unique_ptr<EVP_PKEY, openssl_deleter<EVP_PKEY, EVP_PKEY_free>>;
using store_ptr
  = std::unique_ptr<X509_STORE, openssl_deleter<X509_STORE, X509_STORE_free>>;
using store_ctx_ptr = std::unique_ptr<
  X509_STORE_CTX, openssl_deleter<X509_STORE_CTX, X509_STORE_CTX_free>>;

/// OpenSSL's queued errors as text (and the queue emptied), so a message
/// says what OpenSSL found rather than only that it failed.
std::string openssl_errors() {
  auto out = detail::take_openssl_errors();
  return out.empty() ? "no details from OpenSSL" : out;
}

bio_ptr open_for_reading(const std::string& path, const char* what) {
  if (path.empty())
    throw std::invalid_argument(std::string("credentials: no ") + what
                                + " file given");
  bio_ptr bio{BIO_new_file(path.c_str(), "r")};
  if (!bio) {
    ERR_clear_error();
    throw std::invalid_argument("credentials: cannot read " + std::string(what)
                                + " '" + path + "': " + std::strerror(errno));
  }
  return bio;
}

x509_ptr read_certificate(const std::string& path, const char* what) {
  auto bio = open_for_reading(path, what);
  x509_ptr x{PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)};
  if (!x)
    throw std::invalid_argument("credentials: " + std::string(what) + " '" + path
                                + "' is not a PEM certificate: "
                                + openssl_errors());
  return x;
}

key_ptr read_key(const std::string& path) {
  auto bio = open_for_reading(path, "private key");
  // No passphrase callback: an encrypted key fails here instead of prompting
  // on a device that has no terminal.
  key_ptr k{PEM_read_bio_PrivateKey(bio.get(), nullptr,
                                    [](char*, int, int, void*) { return 0; },
                                    nullptr)};
  if (!k)
    throw std::invalid_argument("credentials: private key '" + path
                                + "' is not an unencrypted PEM private key: "
                                + openssl_errors());
  return k;
}

/// Writes `text` to a new file (never over an existing one) with `mode`.
void write_new_file(const fs::path& path, const std::string& text, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    throw std::runtime_error("keys: cannot create '" + path.string()
                             + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    auto k = ::write(fd, text.data() + done, text.size() - done);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0) {
      auto why = std::string(std::strerror(errno));
      ::close(fd);
      throw std::runtime_error("keys: cannot write '" + path.string() + "': " + why);
    }
    done += static_cast<size_t>(k);
  }
  if (::close(fd) != 0)
    throw std::runtime_error("keys: cannot write '" + path.string()
                             + "': " + std::strerror(errno));
}

std::string pem_of(X509* x) {
  bio_ptr bio{BIO_new(BIO_s_mem())};
  if (!bio || PEM_write_bio_X509(bio.get(), x) != 1)
    throw std::runtime_error("keys: cannot encode a certificate: " + openssl_errors());
  char* data = nullptr;
  auto n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string pem_of(EVP_PKEY* k) {
  bio_ptr bio{BIO_new(BIO_s_mem())};
  if (!bio
      || PEM_write_bio_PrivateKey(bio.get(), k, nullptr, nullptr, 0, nullptr,
                                  nullptr)
           != 1)
    throw std::runtime_error("keys: cannot encode a key: " + openssl_errors());
  char* data = nullptr;
  auto n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(n));
}

key_ptr new_key() {
  key_ptr k{EVP_EC_gen("P-256")};
  if (!k)
    throw std::runtime_error("keys: cannot generate a P-256 key: " + openssl_errors());
  return k;
}

void add_extension(X509* x, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, x, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (!ext || X509_add_ext(x, ext, -1) != 1) {
    X509_EXTENSION_free(ext);
    throw std::runtime_error("keys: cannot add a certificate extension: "
                             + openssl_errors());
  }
  X509_EXTENSION_free(ext);
}

/// A certificate for `key` named `common_name`, signed by `issuer_key`
/// (self-signed when `issuer` is null: the CA).
x509_ptr new_certificate(EVP_PKEY* key, const std::string& common_name,
                         X509* issuer, EVP_PKEY* issuer_key, int days) {
  x509_ptr x{X509_new()};
  std::unique_ptr<BIGNUM, openssl_deleter<BIGNUM, BN_free>> serial{BN_new()};
  bool ok = x && serial && X509_set_version(x.get(), 2) == 1
            && BN_rand(serial.get(), 127, BN_RAND_TOP_ANY, BN_RAND_BOTTOM_ANY) == 1
            && BN_to_ASN1_INTEGER(serial.get(), X509_get_serialNumber(x.get()))
            // An hour back: a device whose clock is a little behind the
            // one that made the keys still accepts them.
            && X509_gmtime_adj(X509_getm_notBefore(x.get()), -3600)
            && X509_gmtime_adj(X509_getm_notAfter(x.get()), long{days} * 86400)
            && X509_set_pubkey(x.get(), key) == 1
            && X509_NAME_add_entry_by_txt(
                 X509_get_subject_name(x.get()), "CN", MBSTRING_UTF8,
                 reinterpret_cast<const unsigned char*>(common_name.c_str()),
                 -1, -1, 0)
                 == 1
            && X509_set_issuer_name(x.get(),
                                    X509_get_subject_name(issuer ? issuer : x.get()))
                 == 1;
  if (!ok)
    throw std::runtime_error("keys: cannot build a certificate: " + openssl_errors());
  auto* signer = issuer ? issuer : x.get();
  add_extension(x.get(), signer, NID_subject_key_identifier, "hash");
  if (issuer) {
    add_extension(x.get(), signer, NID_authority_key_identifier, "keyid:always");
    add_extension(x.get(), signer, NID_basic_constraints, "critical,CA:FALSE");
    add_extension(x.get(), signer, NID_key_usage, "critical,digitalSignature");
    // Every member is a server (it listens) and a client (it connects).
    add_extension(x.get(), signer, NID_ext_key_usage, "serverAuth,clientAuth");
  } else {
    add_extension(x.get(), signer, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_extension(x.get(), signer, NID_key_usage, "critical,keyCertSign,cRLSign");
  }
  if (X509_sign(x.get(), issuer_key, EVP_sha256()) <= 0)
    throw std::runtime_error("keys: cannot sign a certificate: " + openssl_errors());
  return x;
}

void check_member_names(const std::vector<std::string>& members) {
  std::set<std::string> seen;
  for (auto& m : members) {
    // "ca.pem" and "ca.key" are the CA's own files in the same folder.
    bool ok = !m.empty() && m.size() <= 64 && m != "." && m != ".."
              && m != "ca.pem" && m != "ca.key";
    for (char c : m)
      ok = ok
           && (std::isalnum(static_cast<unsigned char>(c)) || c == '-'
               || c == '_' || c == '.');
    if (!ok)
      throw std::invalid_argument("keys: bad member name '" + m
                                  + "' (1-64 letters, digits, '-', '_' or '.')");
    if (!seen.insert(m).second)
      throw std::invalid_argument("keys: member '" + m + "' named twice");
  }
  if (members.empty())
    throw std::invalid_argument("keys: no members named");
}

void check_days(int days) {
  if (days < 1 || days > 36500)
    throw std::invalid_argument("keys: validity of " + std::to_string(days)
                                + " days is outside [1, 36500]");
}

void write_members(const fs::path& dir, X509* ca, EVP_PKEY* ca_key,
                   const std::vector<std::string>& members, int days) {
  auto ca_pem = pem_of(ca);
  for (auto& m : members) {
    auto folder = dir / m;
    std::error_code ec;
    if (!fs::create_directory(folder, ec) || ec)
      throw std::runtime_error("keys: cannot create member folder '"
                               + folder.string() + "': "
                               + (ec ? ec.message() : "it exists already"));
    fs::permissions(folder, fs::perms::owner_all, ec);
    auto key = new_key();
    auto cert = new_certificate(key.get(), m, ca, ca_key, days);
    write_new_file(folder / "key.pem", pem_of(key.get()), 0600);
    write_new_file(folder / "cert.pem", pem_of(cert.get()), 0644);
    write_new_file(folder / "ca.pem", ca_pem, 0644);
  }
}

} // namespace

credentials credentials::from_folder(const std::string& dir) {
  fs::path d{dir};
  return {(d / "ca.pem").string(), (d / "cert.pem").string(),
          (d / "key.pem").string()};
}

void credentials::check() const {
  auto ca_cert = read_certificate(ca, "CA certificate");
  auto own = read_certificate(cert, "certificate");
  auto own_key = read_key(key);
  if (X509_check_private_key(own.get(), own_key.get()) != 1) {
    ERR_clear_error();
    throw std::invalid_argument("credentials: private key '" + key
                                + "' does not belong to certificate '" + cert + "'");
  }
  store_ptr store{X509_STORE_new()};
  store_ctx_ptr ctx{X509_STORE_CTX_new()};
  if (!store || !ctx || X509_STORE_add_cert(store.get(), ca_cert.get()) != 1
      || X509_STORE_CTX_init(ctx.get(), store.get(), own.get(), nullptr) != 1)
    throw std::runtime_error("credentials: cannot check '" + cert
                             + "': " + openssl_errors());
  X509_STORE_CTX_set_purpose(ctx.get(), X509_PURPOSE_SSL_CLIENT);
  if (X509_verify_cert(ctx.get()) != 1) {
    auto err = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    throw std::invalid_argument("credentials: certificate '" + cert
                                + "' is not valid for CA '" + ca
                                + "': " + X509_verify_cert_error_string(err));
  }
}

void make_cluster_keys(const std::string& dir,
                       const std::vector<std::string>& members, int days) {
  check_member_names(members);
  check_days(days);
  fs::path d{dir};
  std::error_code ec;
  fs::create_directories(d, ec);
  if (ec)
    throw std::runtime_error("keys: cannot create '" + dir + "': " + ec.message());
  if (fs::exists(d / "ca.pem") || fs::exists(d / "ca.key"))
    throw std::invalid_argument("keys: '" + dir
                                + "' already holds a cluster CA; use "
                                  "`asteroid keys --add` to add members to it");
  auto ca_key = new_key();
  auto ca = new_certificate(ca_key.get(), "asteroid cluster CA " + d.filename().string(),
                            nullptr, ca_key.get(), days);
  write_new_file(d / "ca.key", pem_of(ca_key.get()), 0600);
  write_new_file(d / "ca.pem", pem_of(ca.get()), 0644);
  write_members(d, ca.get(), ca_key.get(), members, days);
}

void add_cluster_members(const std::string& dir,
                         const std::vector<std::string>& members, int days) {
  check_member_names(members);
  check_days(days);
  fs::path d{dir};
  auto ca = read_certificate((d / "ca.pem").string(), "CA certificate");
  auto ca_key = read_key((d / "ca.key").string());
  if (X509_check_private_key(ca.get(), ca_key.get()) != 1) {
    ERR_clear_error();
    throw std::invalid_argument("keys: '" + (d / "ca.key").string()
                                + "' is not the key of '" + (d / "ca.pem").string()
                                + "'");
  }
  write_members(d, ca.get(), ca_key.get(), members, days);
}

} // namespace asteroid::actors
