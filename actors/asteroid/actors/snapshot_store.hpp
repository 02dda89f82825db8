#pragma once
/// \file
/// What a node keeps for fault tolerance: encoded stage states by layer
/// range and version (the step they precede). A node holds the snapshots of
/// its own replicas and the replica of a neighbouring stage; after a loss the
/// supervisor restores every stage from these at one common version, so
/// replay starts from a consistent mini-batch boundary.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace asteroid::actors {

/// An encoded stage state as a node holds it: shared and never changed, so
/// the thread that builds a replica from it may read it while the store
/// takes new snapshots and drops old ones.
using snapshot_bytes = std::shared_ptr<const std::string>;

class snapshot_store {
public:
  /// Versions kept per key: the newest may be incomplete elsewhere (a
  /// neighbour died while sending its copy), so one older stays usable.
  explicit snapshot_store(int keep = 2) : keep_(keep) {}

  /// Stores `state` under `key` ("L<first>-<end>") at `version`; returns an
  /// error text (and stores nothing) for a malformed key or version.
  std::string put(const std::string& key, int64_t version, std::string state);
  /// The state held under `key` at `version` (shared, not copied); null
  /// when none is.
  snapshot_bytes get(const std::string& key, int64_t version) const;
  /// {"L0-3": [4, 5], ...}: the versions held per key.
  nlohmann::json inventory() const;
  /// One encoded stage state for layers [first, end) at `version`, merged
  /// from held ranges that tile it exactly; empty when they do not. The
  /// same as merge(parts(...)) in one call, on the caller's thread: a
  /// device never calls it (it merges off the thread that answers
  /// heartbeats); the tests take it as the expected merge.
  std::string assemble(int first, int end, int64_t version) const;
  /// The held states that tile [first, end) at `version` exactly, in layer
  /// order; empty when they do not. Taking them copies no bytes: a device
  /// hands them to its builder, which merges them (`merge`) off the thread
  /// that answers heartbeats.
  std::vector<snapshot_bytes> parts(int first, int end, int64_t version) const;
  /// One encoded stage state from `parts` (as `parts` gives them).
  static std::string merge(const std::vector<snapshot_bytes>& parts);
  size_t bytes() const;
  /// Drops `key` at `version`, if held.
  void erase(const std::string& key, int64_t version);
  /// Drops every snapshot (a new job starts: an earlier job's states must
  /// never be restored into it).
  void clear() { entries_.clear(); }

  /// Parses "L<first>-<end>"; false for anything else.
  static bool parse_key(const std::string& key, int& first, int& end);

private:
  int keep_;
  std::map<std::string, std::map<int64_t, snapshot_bytes>> entries_;
};

} // namespace asteroid::actors
