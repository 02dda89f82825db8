#pragma once
/// \file
/// A cluster's credentials: one certificate authority (CA) per cluster, and
/// per member (a node, or the program that runs a job) a private key and a
/// certificate the CA signed. Every connection between members, CAF and data
/// plane, is TLS with both sides showing a certificate of the same CA
/// (docs/security.md); a peer without one is dropped in the handshake.
///
/// On disk (what `asteroid keys` writes):
///
///     DIR/ca.pem, DIR/ca.key             the CA; ca.key stays with the owner
///     DIR/MEMBER/ca.pem, cert.pem, key.pem   one folder per member
///
/// A member is given its folder (`--credentials DIR/MEMBER`); nothing else.
#include <chrono>
#include <string>
#include <vector>

namespace asteroid::actors {

struct credentials {
  std::string ca;   ///< PEM file: the cluster's CA certificate
  std::string cert; ///< PEM file: this member's certificate, signed by `ca`
  std::string key;  ///< PEM file: this member's private key (unencrypted)

  /// No credentials: connections are plain TCP (loopback, or `--insecure`).
  bool empty() const { return ca.empty() && cert.empty() && key.empty(); }

  /// The three files of a member folder written by `make_cluster_keys`.
  /// Does not read them; `check` does.
  static credentials from_folder(const std::string& dir);

  /// Reads and checks the files: each is readable PEM, the key belongs to
  /// the certificate, and the certificate is signed by the CA and valid now.
  /// Throws std::invalid_argument naming the file and what is wrong with it.
  void check() const;
};

/// Creates a cluster's CA in `dir` and one member folder per name of
/// `members` (letters, digits, '-', '_', '.'), each valid for `days`.
/// Keys are ECDSA P-256; key files are written readable by their owner only.
/// Refuses (std::invalid_argument) a bad name, a duplicate, or a `dir` that
/// already holds a CA, so that a cluster's keys are never replaced by
/// accident; throws std::runtime_error when a file cannot be written.
void make_cluster_keys(const std::string& dir,
                       const std::vector<std::string>& members, int days = 365);

/// Adds member folders to the cluster whose CA is in `dir` (ca.pem and
/// ca.key), e.g. for a new device. Refuses a member folder that exists.
void add_cluster_members(const std::string& dir,
                         const std::vector<std::string>& members, int days = 365);

} // namespace asteroid::actors
