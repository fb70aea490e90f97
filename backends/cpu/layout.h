// NCHW <-> NHWC conversion: a cache-blocked transpose of each image's [C, H*W] matrix, spread
// over the pool. The program inserts one at the slice boundary and wherever a layer that needs
// logical order reads an NHWC tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernel.h"

namespace tessera::cpu {

// dst[n][p][c] = src[n][c][p] for p < hw. `pool` may be null (then single-threaded).
void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t hw, ThreadPool* pool);
// dst[n][c][p] = src[n][p][c].
void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t c, int64_t hw, ThreadPool* pool);

// dst = src, `bytes` bytes, split over the pool in 64 KiB pieces from 128 KiB on (below that a
// fork/join costs more than the copy). `pool` may be null.
void copy_bytes(void* dst, const void* src, size_t bytes, ThreadPool* pool);

// f32 <-> bf16 conversions of the reduced-precision path (docs/precision.md), split over the
// pool from 64 K elements on. `pool` may be null. Rounding: to nearest even (onednn.h).
void f32_to_bf16_array(const float* src, uint16_t* dst, int64_t count, ThreadPool* pool);
void bf16_to_f32_array(const uint16_t* src, float* dst, int64_t count, ThreadPool* pool);
// With the NCHW <-> NHWC transpose in the same pass: dst[n][p][c] = bf16(src[n][c][p]), and
// dst[n][c][p] = f32(src[n][p][c]).
void nchw_f32_to_nhwc_bf16(const float* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw,
                           ThreadPool* pool);
void nhwc_bf16_to_nchw_f32(const uint16_t* src, float* dst, int64_t n, int64_t c, int64_t hw,
                           ThreadPool* pool);

// f32 <-> int8 conversions of the int8 path (docs/precision.md): q = saturate(round-to-nearest-
// even(x / scale) + zero_point) into u8 or s8 as `q` says (NaN -> zero_point, a real 0), and
// x = scale * (q - zero_point): ONNX's QuantizeLinear and DequantizeLinear. Split over the pool
// from 64 K elements on; `pool` may be null. The NCHW <-> NHWC variants transpose in the same pass.
void quantize_array(const float* src, void* dst, int64_t count, QuantParam q, ThreadPool* pool);
void dequantize_array(const void* src, float* dst, int64_t count, QuantParam q, ThreadPool* pool);
void nchw_f32_to_nhwc_int8(const float* src, void* dst, int64_t n, int64_t c, int64_t hw,
                           QuantParam q, ThreadPool* pool);
void nhwc_int8_to_nchw_f32(const void* src, float* dst, int64_t n, int64_t c, int64_t hw,
                           QuantParam q, ThreadPool* pool);

// Per-output-channel symmetric s8 weights of the int8 kernels (oneDNN's and XNNPACK's): `rows`
// rows of `cols` weights each (row r is output channel r); w_q[r][i] = round(w / s[r]) in
// [-127, 127], s[r] = max |w[r]| / 127 (1 for an all-zero or non-finite row).
void quantize_weights_per_channel(const float* w, int64_t rows, int64_t cols,
                                  std::vector<int8_t>* wq, std::vector<float>* scales);

// A step converting one bound tensor between f32 and a reduced precision (bf16, or int8 with the
// value's QuantParam), and between layouts at the same time when they differ (a rank-4 tensor:
// NCHW f32 <-> NHWC reduced).
class PrecisionConversion final : public Kernel {
 public:
  enum class Reduced : uint8_t { kBf16, kInt8 };
  // `to_reduced`: f32 -> reduced; else reduced -> f32.
  PrecisionConversion(Layout from, Layout to, Reduced reduced, bool to_reduced)
      : from_(from), to_(to), reduced_(reduced), to_reduced_(to_reduced) {}
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool& pool) override;
  Status run(ThreadPool& pool) override;
  std::string describe() const override;

 private:
  Layout from_, to_;
  Reduced reduced_;
  bool to_reduced_;
  QuantParam q_;  // int8 only
  const void* src_ = nullptr;
  void* dst_ = nullptr;
  int64_t count_ = 0, n_ = 0, c_ = 0, hw_ = 0;
};

// A step converting one bound tensor into another layout (same logical shape).
class LayoutConversion final : public Kernel {
 public:
  LayoutConversion(Layout from, Layout to) : from_(from), to_(to) {}
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool& pool) override;
  Status run(ThreadPool& pool) override;
  std::string describe() const override;

 private:
  Layout from_, to_;
  const float* src_ = nullptr;
  float* dst_ = nullptr;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
  size_t bytes_ = 0;
};

}  // namespace tessera::cpu
