#pragma once

#include <stdexcept>
#include <string>

namespace asteroid::data {

/// Thrown when a data file or a dataset request is invalid.
///
/// The message names the offending thing (usually a file path) and the problem, e.g.
/// "/data/train-images-idx3-ubyte.gz: wrong magic 1234, expected 2051 (IDX images)".
class data_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace asteroid::data
