#include "asteroid/serialization/rng_state.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>
#include <stdexcept>

namespace asteroid::serialization {

std::string capture_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  torch::Tensor state;
  {
    // Generators are shared by all threads; torch locks this mutex too.
    std::lock_guard<std::mutex> lock(gen.mutex());
    state = gen.get_state();
  }
  state = state.contiguous();
  return std::string(static_cast<const char*>(state.data_ptr()), state.nbytes());
}

void restore_rng_state(std::string_view state) {
  auto t = torch::empty({static_cast<int64_t>(state.size())}, torch::kUInt8);
  if (!state.empty())
    std::memcpy(t.data_ptr(), state.data(), state.size());
  auto gen = at::detail::getDefaultCPUGenerator();
  try {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(t);
  } catch (const c10::Error& e) {
    throw std::invalid_argument("rng state of " + std::to_string(state.size())
                                + " bytes rejected: " + e.what_without_backtrace());
  }
}

} // namespace asteroid::serialization
