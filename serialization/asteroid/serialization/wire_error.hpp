#pragma once

#include <stdexcept>
#include <string>

namespace asteroid::serialization {

/// Thrown when bytes do not form a valid Asteroid wire record.
///
/// The message names the problem ("truncated: need 16 bytes, have 3",
/// "unknown dtype code 77", ...) and, where it helps, the byte offset. Bytes
/// come from the network or from disk, so callers treat this as bad input,
/// never as a bug.
class wire_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace asteroid::serialization
