#include "asteroid/data/data_error.hpp"
#include "asteroid/data/synthetic.hpp"
#include "random.hpp"

namespace asteroid::data {

int64_t synthetic_token_label(const int64_t* tokens, int64_t length, int64_t num_classes) {
  std::vector<int64_t> counts(static_cast<size_t>(num_classes), 0);
  for (int64_t i = 0; i < length; ++i)
    ++counts[static_cast<size_t>(tokens[i] % num_classes)];
  int64_t best = 0;
  for (int64_t k = 1; k < num_classes; ++k)
    if (counts[k] > counts[best])
      best = k;
  return best;
}

tensor_dataset make_synthetic_tokens(const synthetic_tokens_options& o) {
  auto fail = [](const std::string& what) { throw data_error("synthetic-tokens: " + what); };
  if (o.count < 1)
    fail("count must be positive, got " + std::to_string(o.count));
  if (o.length < 1)
    fail("length must be positive, got " + std::to_string(o.length));
  if (o.num_classes < 1)
    fail("num_classes must be positive, got " + std::to_string(o.num_classes));
  if (o.vocab < o.num_classes)
    fail("vocab " + std::to_string(o.vocab) + " is smaller than num_classes " +
         std::to_string(o.num_classes) + ", so some class has no tokens");
  if (!(o.signal >= 0 && o.signal <= 1))
    fail("signal must lie in [0, 1], got " + std::to_string(o.signal));
  std::mt19937_64 rng(detail::derive_seed(o.seed, o.stream));
  auto inputs = torch::empty({o.count, o.length}, torch::kInt64);
  auto targets = torch::empty({o.count}, torch::kInt64);
  auto* tokens = inputs.data_ptr<int64_t>();
  auto* labels = targets.data_ptr<int64_t>();
  auto classes = static_cast<uint64_t>(o.num_classes);
  auto vocab = static_cast<uint64_t>(o.vocab);
  for (int64_t s = 0; s < o.count; ++s) {
    uint64_t c = detail::uniform_below(rng, classes);
    // Ids with id % classes == c: c, c + classes, ...; at least one since vocab >= classes.
    uint64_t members = (vocab - c + classes - 1) / classes;
    int64_t* row = tokens + s * o.length;
    for (int64_t t = 0; t < o.length; ++t) {
      bool from_class = detail::uniform_unit(rng) < o.signal;
      row[t] = static_cast<int64_t>(from_class ? c + classes * detail::uniform_below(rng, members)
                                               : detail::uniform_below(rng, vocab));
    }
    labels[s] = synthetic_token_label(row, o.length, o.num_classes);
  }
  return tensor_dataset(std::move(inputs), std::move(targets), o.num_classes, "synthetic-tokens");
}

} // namespace asteroid::data
