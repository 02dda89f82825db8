#pragma once

#include <string>
#include <string_view>

namespace asteroid::serialization {

/// Returns the state of torch's default CPU generator as opaque bytes.
///
/// Restoring it with restore_rng_state() makes later torch::rand* calls,
/// dropout masks and shuffles repeat exactly.
std::string capture_rng_state();

/// Restores the default CPU generator from capture_rng_state() bytes.
///
/// Throws std::invalid_argument naming the problem when the bytes are not a
/// valid generator state (wrong size or corrupted).
void restore_rng_state(std::string_view state);

} // namespace asteroid::serialization
