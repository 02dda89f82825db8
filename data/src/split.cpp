#include "asteroid/data/split.hpp"

#include "asteroid/data/data_error.hpp"

namespace asteroid::data {

const char* to_string(split s) {
  return s == split::train ? "train" : "test";
}

split parse_split(const std::string& text) {
  if (text == "train")
    return split::train;
  if (text == "test")
    return split::test;
  throw data_error("unknown split '" + text + "', expected 'train' or 'test'");
}

} // namespace asteroid::data
