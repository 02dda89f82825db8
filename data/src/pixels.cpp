#include "pixels.hpp"

#include <array>

#include <ATen/Parallel.h>

namespace asteroid::data::detail {

torch::Tensor bytes_to_float(const torch::Tensor& pixels, const std::vector<double>& mean,
                             const std::vector<double>& stdev) {
  TORCH_CHECK(pixels.scalar_type() == torch::kUInt8 && pixels.dim() >= 2,
              "bytes_to_float: expected a uint8 tensor [N, C, ...]");
  auto src = pixels.contiguous();
  int64_t channels = src.size(1);
  TORCH_CHECK(static_cast<int64_t>(mean.size()) == channels &&
                static_cast<int64_t>(stdev.size()) == channels,
              "bytes_to_float: one mean and stdev per channel expected");
  std::vector<std::array<float, 256>> table(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c)
    for (int v = 0; v < 256; ++v)
      table[c][v] = static_cast<float>((v / 255.0 - mean[c]) / stdev[c]);
  auto out = torch::empty(src.sizes(), torch::kFloat32);
  int64_t plane = src.numel() / std::max<int64_t>(1, src.size(0) * channels);
  const uint8_t* in = src.data_ptr<uint8_t>();
  float* dst = out.data_ptr<float>();
  // Rows are (sample, channel) planes; each plane uses one table.
  at::parallel_for(0, src.size(0) * channels, 64, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const auto& t = table[static_cast<size_t>(row % channels)];
      const uint8_t* s = in + row * plane;
      float* d = dst + row * plane;
      for (int64_t k = 0; k < plane; ++k)
        d[k] = t[s[k]];
    }
  });
  return out;
}

} // namespace asteroid::data::detail
