// Test helpers for the tensor-manipulation ops: typed tensor construction, random shapes and
// naive index arithmetic (flat index <-> coordinates) for writing independent oracles.
#pragma once

#include <cstring>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace tessera::testing {

// Coordinates of flat index `flat` in row-major `shape`.
inline std::vector<int64_t> unravel(int64_t flat, const Shape& shape) {
  std::vector<int64_t> idx(static_cast<size_t>(shape.rank()));
  for (int d = shape.rank() - 1; d >= 0; --d) {
    idx[static_cast<size_t>(d)] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

// Flat index of coordinates `idx` in row-major `shape`.
inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (int d = 0; d < shape.rank(); ++d) flat = flat * shape[d] + idx[static_cast<size_t>(d)];
  return flat;
}

// A tensor of dtype `dtype` holding `values` (T must match the dtype's element size).
template <typename T>
Tensor typed_tensor(DType dtype, const Shape& shape, const std::vector<T>& values) {
  Tensor t = Tensor::create(dtype, shape).value();
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(T));
  return t;
}

inline Tensor i64s(const Shape& shape, const std::vector<int64_t>& v) {
  return typed_tensor<int64_t>(DType::kI64, shape, v);
}
inline Tensor i64s(const std::vector<int64_t>& v) {
  return i64s(Shape{static_cast<int64_t>(v.size())}, v);
}
inline Tensor f32s(const Shape& shape, const std::vector<float>& v) {
  return typed_tensor<float>(DType::kF32, shape, v);
}

// Seeded random integers in [lo, hi] stored as `dtype` (any integer dtype, or f32).
inline Tensor random_int_tensor(DType dtype, const Shape& shape, uint32_t seed, int64_t lo,
                                int64_t hi) {
  Tensor t = Tensor::create(dtype, shape).value();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t v = d(rng);
    switch (dtype) {
      case DType::kF32:
        t.data<float>()[i] = static_cast<float>(v);
        break;
      case DType::kI64:
        t.data<int64_t>()[i] = v;
        break;
      case DType::kI32:
        t.data<int32_t>()[i] = static_cast<int32_t>(v);
        break;
      case DType::kI8:
        t.data<int8_t>()[i] = static_cast<int8_t>(v);
        break;
      case DType::kU8:
      case DType::kBool:
        t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
        break;
      case DType::kF16:
        t.data<uint16_t>()[i] = float_to_half(static_cast<float>(v));
        break;
    }
  }
  return t;
}

// Byte-exact comparison (for data movement, where nothing may change).
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         (a.byte_size() == 0 || std::memcmp(a.raw(), b.raw(), a.byte_size()) == 0);
}

// A random shape of `rank` whose dimensions come from `dims`.
inline Shape random_shape(std::mt19937& rng, int rank, const std::vector<int64_t>& dims) {
  std::uniform_int_distribution<size_t> pick(0, dims.size() - 1);
  std::vector<int64_t> s;
  for (int i = 0; i < rank; ++i) s.push_back(dims[pick(rng)]);
  return Shape(std::move(s));
}

}  // namespace tessera::testing
