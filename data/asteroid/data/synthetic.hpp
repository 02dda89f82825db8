#pragma once

#include <cstdint>
#include <vector>

#include "asteroid/data/dataset.hpp"

namespace asteroid::data {

/// Options of make_synthetic_images.
struct synthetic_images_options {
  int64_t count = 1024;                ///< number of samples
  std::vector<int64_t> shape{1, 28, 28}; ///< shape of one input, e.g. {3, 32, 32}
  int64_t num_classes = 10;
  uint64_t seed = 0;   ///< fixes the class prototypes and, with `stream`, the samples
  uint64_t stream = 0; ///< independent draws from one distribution (e.g. 0 train, 1 test)
  double signal = 1.0; ///< scale of the class prototype relative to the unit noise
};

/// Random float32 images with a learnable class signal.
///
/// Each class c has a prototype P_c ~ N(0, 1) drawn from `seed`; sample i has a label y_i drawn
/// uniformly and input signal * P_{y_i} + N(0, 1) noise drawn from (seed, stream). The result
/// depends only on the options (a local generator is used, the global RNG is untouched).
/// Throws data_error for a non-positive count, dimension or class count.
tensor_dataset make_synthetic_images(const synthetic_images_options& options);

/// Options of make_synthetic_tokens.
struct synthetic_tokens_options {
  int64_t count = 1024;   ///< number of sequences
  int64_t length = 32;    ///< tokens per sequence
  int64_t vocab = 1000;   ///< token ids lie in [0, vocab)
  int64_t num_classes = 2;
  uint64_t seed = 0;
  uint64_t stream = 0;    ///< independent draws from one distribution (e.g. 0 train, 1 test)
  double signal = 0.5;    ///< probability that a token is drawn from the sequence's class
};

/// The label rule of synthetic token sequences: the class k in [0, num_classes) whose tokens
/// (ids with id % num_classes == k) occur most often in `tokens`; ties go to the smaller k.
int64_t synthetic_token_label(const int64_t* tokens, int64_t length, int64_t num_classes);

/// Random int64 token sequences [count, length] whose labels are derived from their content.
///
/// Each sequence is generated around a class c: every token is, with probability `signal`, a
/// uniformly drawn id of class c (id % num_classes == c), otherwise a uniformly drawn id. The label
/// is then computed from the tokens by synthetic_token_label, so it is a function of the input
/// alone. Deterministic from (seed, stream). Throws data_error for non-positive sizes,
/// vocab < num_classes or signal outside [0, 1].
tensor_dataset make_synthetic_tokens(const synthetic_tokens_options& options);

} // namespace asteroid::data
