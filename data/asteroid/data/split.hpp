#pragma once

#include <string>

namespace asteroid::data {

/// Which part of a dataset to load.
enum class split { train, test };

/// "train" or "test".
const char* to_string(split s);

/// Parses "train" or "test"; throws data_error listing both otherwise.
split parse_split(const std::string& text);

} // namespace asteroid::data
