// Linear quantisation shared by QuantizeLinear, DequantizeLinear, QLinearConv and QLinearMatMul
// (ONNX semantics, computed as ONNX Runtime computes them):
//   quantise    q = saturate(round_half_even(x / scale) + zero_point)   (to u8 or i8)
//   dequantise  x = (q - zero_point) * scale                           (from u8, i8 or i32)
// A scale and its zero point are either per tensor (a scalar or one-element tensor) or per axis
// (1-D, one value per index of dimension `axis` of the quantised tensor). Tessera runs quantised
// models in float: weights are dequantised when constants are folded, and a QuantizeLinear ->
// DequantizeLinear pair on an activation applies the same rounding and clamping the int8 model
// applies. Pure functions; safe from any thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace tessera {

// One scale / zero-point pair as the kernels use it. `scale` and `zero_point` hold one value
// (per tensor) or `axis_len` values (per axis).
struct QuantParams {
  std::vector<float> scale;
  std::vector<int32_t> zero_point;
  int axis = -1;  // the normalised axis; -1 when per tensor
  bool per_axis() const { return axis >= 0; }
};

// Checks the shapes and dtypes of the scale (input `scale_input`, f32) and the optional zero
// point (input `zp_input`, -1 for none; i8, u8 or i32, the shape of the scale) against the
// quantised tensor's shape `q_shape`. `axis` is the attribute value (negative allowed); it is only
// read when the scale is 1-D with more than one element. `zp_dtype` receives the zero point's
// dtype (kU8 when it is absent).
Status check_quant_params(const OpContext& ctx, const Shape& q_shape, int scale_input, int zp_input,
                          int64_t axis, DType* zp_dtype);

// Reads the values of a checked scale / zero-point pair from the tensors of a kernel call
// (`zp` undefined when absent).
QuantParams read_quant_params(const Shape& q_shape, const Tensor& scale, const Tensor& zp,
                              int64_t axis);

// The range of a quantised dtype (u8: [0, 255], i8: [-128, 127], i32).
inline void quant_range(DType t, int32_t* lo, int32_t* hi) {
  if (t == DType::kI8) {
    *lo = -128;
    *hi = 127;
  } else if (t == DType::kU8) {
    *lo = 0;
    *hi = 255;
  } else {
    *lo = INT32_MIN;
    *hi = INT32_MAX;
  }
}

// round_half_even(x / scale) + zero_point, clamped to [lo, hi]. std::nearbyint rounds to even
// in the default rounding mode, which Tessera never changes.
inline int32_t quantize_value(float x, float scale, int32_t zero_point, int32_t lo, int32_t hi) {
  float v = std::nearbyint(x / scale) + static_cast<float>(zero_point);
  if (!(v >= static_cast<float>(lo))) v = static_cast<float>(lo);  // NaN goes to lo
  if (v > static_cast<float>(hi)) v = static_cast<float>(hi);
  return static_cast<int32_t>(v);
}

// Element-wise over a tensor quantised with `p`: out[i] = f(i, scale, zero_point) of its group.
// `x` is f32, `q` is u8 / i8 (quantise: x -> q) or u8 / i8 / i32 (dequantise: q -> x).
void quantize_tensor(const Tensor& x, const QuantParams& p, Tensor* q);
void dequantize_tensor(const Tensor& q, const QuantParams& p, Tensor* x);

}  // namespace tessera
