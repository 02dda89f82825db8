#include "asteroid/planner/plan_validation.hpp"

#include <string>
#include <vector>

#include "asteroid/planner/error.hpp"

namespace asteroid::planner {

void validate(const plan& p, int num_layers, const cluster& c) {
  auto fail = [](const std::string& what) { throw planner_error("plan: " + what); };
  if (p.batch_size <= 0)
    fail("batch_size must be positive, got " + std::to_string(p.batch_size));
  if (p.micro_batches <= 0)
    fail("micro_batches must be positive, got " + std::to_string(p.micro_batches));
  if (p.batch_size % p.micro_batches != 0)
    fail("batch_size " + std::to_string(p.batch_size) + " is not a multiple of micro_batches " +
         std::to_string(p.micro_batches));
  if (p.stages.empty())
    fail("no stages");
  std::vector<int> owner(c.devices.size(), -1);
  int expected_first = 0;
  for (size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    auto at = "stage " + std::to_string(s) + ": ";
    if (st.first_layer != expected_first) {
      if (s == 0)
        fail(at + "starts at layer " + std::to_string(st.first_layer) +
             ", expected layer 0 (layers 0.." + std::to_string(st.first_layer - 1) +
             " are not covered)");
      if (st.first_layer > expected_first)
        fail(at + "starts at layer " + std::to_string(st.first_layer) + " but stage " +
             std::to_string(s - 1) + " ends before layer " + std::to_string(expected_first) +
             " (layer " + std::to_string(expected_first) + " is not covered)");
      fail(at + "starts at layer " + std::to_string(st.first_layer) + " but stage " +
           std::to_string(s - 1) + " already covers layers up to " +
           std::to_string(expected_first - 1) + " (layer " + std::to_string(st.first_layer) +
           " is in two stages)");
    }
    if (st.end_layer <= st.first_layer)
      fail(at + "empty layer range [" + std::to_string(st.first_layer) + ", " +
           std::to_string(st.end_layer) + ")");
    if (st.end_layer > num_layers)
      fail(at + "ends at layer " + std::to_string(st.end_layer - 1) + " but the model has " +
           std::to_string(num_layers) + " layers");
    expected_first = st.end_layer;
    if (st.devices.empty())
      fail(at + "no devices");
    if (st.shares.size() != st.devices.size())
      fail(at + std::to_string(st.devices.size()) + " devices but " +
           std::to_string(st.shares.size()) + " shares");
    int64_t sum = 0;
    for (size_t i = 0; i < st.devices.size(); ++i) {
      int d = st.devices[i];
      if (d < 0 || d >= c.size())
        fail(at + "device " + std::to_string(d) + " does not exist (cluster has " +
             std::to_string(c.size()) + " devices)");
      if (owner[d] >= 0)
        fail(at + "device " + std::to_string(d) + " (" + c.devices[d].name +
             ") is already used by stage " + std::to_string(owner[d]));
      owner[d] = static_cast<int>(s);
      if (st.shares[i] < 0)
        fail(at + "device " + std::to_string(d) + " (" + c.devices[d].name +
             ") has a negative share " + std::to_string(st.shares[i]));
      if (st.shares[i] == 0)
        fail(at + "device " + std::to_string(d) + " (" + c.devices[d].name +
             ") has a zero share: a device either computes part of every micro-batch "
             "or is not in the group (remove it from the stage)");
      sum += st.shares[i];
    }
    if (sum != p.micro_batch_size())
      fail(at + "shares sum to " + std::to_string(sum) + " but the micro-batch size is " +
           std::to_string(p.micro_batch_size()));
  }
  if (expected_first != num_layers)
    fail("layers " + std::to_string(expected_first) + ".." + std::to_string(num_layers - 1) +
         " are not covered (the last stage ends before layer " +
         std::to_string(expected_first) + ")");
}

} // namespace asteroid::planner
