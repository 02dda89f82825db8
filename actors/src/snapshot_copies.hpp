#pragma once
// Which snapshots a recovery copies from node to node, over the data plane,
// so that every device of the next plan rebuilds its stage from its own
// node's snapshots. Why: the alternative reads the state into the
// supervisor's process and sends it out again, both over CAF, which moves a
// state of 100+ MiB twice across the links and through one process.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace asteroid::actors::detail {

/// Device `device` will run layers [first_layer, end_layer).
struct snapshot_need {
  int device = -1;
  int first_layer = 0;
  int end_layer = 0;
};

/// Snapshot `key` (a held layer range) goes from `holder` to `target`.
struct snapshot_copy {
  int holder = -1;
  int target = -1;
  std::string key;
};

/// For each need whose device's inventory (`inventories`: device ->
/// {"L0-3": [versions], ...}) does not tile its range at `version`: the
/// copies of whole ranges held by other devices that, with what the device
/// holds, tile it exactly, copying as few layers as can be (then as few
/// ranges). A need that no
/// such combination tiles gets none (its state is shipped instead), and a
/// need whose device holds its range gets none. Each key comes from the
/// holder with the fewest copies so far (the lowest device on a tie), so
/// the copies spread over the links.
std::vector<snapshot_copy> plan_snapshot_copies(const std::vector<snapshot_need>& needs,
                                                const std::map<int, nlohmann::json>& inventories,
                                                int64_t version);

} // namespace asteroid::actors::detail
