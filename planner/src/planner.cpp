#include "asteroid/planner/planner.hpp"

#include "asteroid/planner/asteroid_planner.hpp"
#include "asteroid/planner/baselines.hpp"
#include "asteroid/planner/error.hpp"
#include "asteroid/planner/exhaustive_planner.hpp"

namespace asteroid::planner {

std::vector<std::string> planner_names() {
  return {"asteroid", "on-device", "dp-even",  "dp-proportional", "pp",
          "pipedream", "ftpipehd", "pipeedge", "exhaustive"};
}

std::unique_ptr<planner_base> make_planner(const std::string& name) {
  if (name == "asteroid")
    return std::make_unique<asteroid_planner>();
  if (name == "on-device")
    return std::make_unique<on_device_planner>();
  if (name == "dp-even")
    return std::make_unique<data_parallel_planner>(false);
  if (name == "dp-proportional")
    return std::make_unique<data_parallel_planner>(true);
  if (name == "pp")
    return std::make_unique<gpipe_planner>();
  if (name == "pipedream")
    return std::make_unique<pipedream_planner>();
  if (name == "ftpipehd")
    return std::make_unique<ftpipehd_planner>();
  if (name == "pipeedge")
    return std::make_unique<pipeedge_planner>();
  if (name == "exhaustive")
    return std::make_unique<exhaustive_planner>();
  std::string known;
  for (const auto& n : planner_names())
    known += (known.empty() ? "" : ", ") + n;
  throw planner_error("unknown planner \"" + name + "\" (known: " + known + ")");
}

std::vector<int> micro_batch_candidates(int64_t batch_size) {
  std::vector<int> out;
  for (int64_t m = 1; m <= batch_size; ++m)
    if (batch_size % m == 0)
      out.push_back(static_cast<int>(m));
  return out;
}

} // namespace asteroid::planner
