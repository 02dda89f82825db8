#pragma once

// Private: a fast 64-bit checksum that detects accidental corruption (bit
// flips, torn or spliced writes) in checkpoint files. Not cryptographic.

#include <cstdint>
#include <string_view>

namespace asteroid::serialization::detail {

std::uint64_t checksum64(std::string_view bytes);

} // namespace asteroid::serialization::detail
