// Synthetic activations for the packing codec's tests and benchmarks.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace tessera {

// A ReLU output of C x H x W with spatially coherent zeros (as a conv layer's are): a smooth
// field per channel plus a little noise, thresholded so that `zero_fraction` of it is zero.
inline std::vector<float> relu_activation(int c, int h, int w, double zero_fraction,
                                          uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(c) * h * w);
  for (int ch = 0; ch < c; ++ch) {
    const float fx = 0.05f + 0.3f * u(rng), fy = 0.05f + 0.3f * u(rng);
    const float px = 6.28f * u(rng), py = 6.28f * u(rng), gain = 0.5f + 2.0f * u(rng);
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        v[(static_cast<size_t>(ch) * h + y) * w + x] =
            gain * std::sin(fx * x + px) * std::cos(fy * y + py) + 0.05f * (u(rng) - 0.5f);
      }
    }
  }
  std::vector<float> sorted = v;
  const auto k = static_cast<size_t>(zero_fraction * static_cast<double>(v.size()));
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(k), sorted.end());
  const float threshold = sorted[k];
  for (float& x : v) x = std::max(0.0f, x - threshold);
  return v;
}

}  // namespace tessera
