#pragma once

#include <stdexcept>
#include <string>

namespace asteroid::planner {

/// Bad planner input or an impossible request (infeasible plan, bad file).
///
/// The message names the thing at fault: a file and field, a stage, a layer
/// or a device, and what is wrong with it.
class planner_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace asteroid::planner
