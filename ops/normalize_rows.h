// The shared step of LayerNormalization, InstanceNormalization and GroupNormalization: each
// normalises contiguous rows of a tensor to zero mean and unit variance,
//   y = (x - mean) / sqrt(var + epsilon),   var = mean((x - mean)^2)   (biased, two passes),
// then applies a scale and bias that depend on the element's place in the row. Mean and variance
// accumulate in double. Pure functions; safe from any thread.
#pragma once

#include <cmath>
#include <cstdint>

namespace tessera {

// Normalises x[0, n) into y and returns {mean, 1 / sqrt(var + epsilon)}. y may equal x.
struct RowMoments {
  float mean = 0;
  float inv_std = 0;
};
inline RowMoments normalize_row(const float* x, float* y, int64_t n, float epsilon) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = n > 0 ? sum / static_cast<double>(n) : 0.0;
  double sq = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  const double var = n > 0 ? sq / static_cast<double>(n) : 0.0;
  const double inv = 1.0 / std::sqrt(var + static_cast<double>(epsilon));
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>((x[i] - mean) * inv);
  return RowMoments{static_cast<float>(mean), static_cast<float>(inv)};
}

}  // namespace tessera
