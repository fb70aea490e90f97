#include "ops/quantize.h"

#include "ops/attr_util.h"

namespace tessera {

namespace {

bool is_quant_dtype(DType t) {
  return t == DType::kU8 || t == DType::kI8 || t == DType::kI32;
}

// The value of element i of an integer tensor of dtype u8 / i8 / i32.
int32_t int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kU8:
      return t.data<uint8_t>()[i];
    case DType::kI8:
      return t.data<int8_t>()[i];
    default:
      return t.data<int32_t>()[i];
  }
}

}  // namespace

Status check_quant_params(const OpContext& ctx, const Shape& q_shape, int scale_input, int zp_input,
                          int64_t axis, DType* zp_dtype) {
  const std::string sname = "input " + std::to_string(scale_input) + " (scale)";
  if (ctx.input(scale_input).dtype != DType::kF32) {
    return ctx.unsupported(sname + " must be f32, is " + dtype_name(ctx.input(scale_input).dtype));
  }
  const Shape& s = ctx.input(scale_input).shape;
  const bool has_zp = zp_input >= 0 && ctx.has_input(zp_input);
  *zp_dtype = DType::kU8;
  if (has_zp) {
    const TensorInfo& z = ctx.input(zp_input);
    if (!is_quant_dtype(z.dtype)) {
      return ctx.unsupported("input " + std::to_string(zp_input) +
                             " (zero point) must be u8, i8 or i32, is " + dtype_name(z.dtype));
    }
    // A per-tensor pair may mix a scalar and a one-element 1-D tensor (quantize_static writes
    // bias scales that way).
    const bool both_single =
        z.shape.numel() == 1 && s.numel() == 1 && z.shape.rank() <= 1 && s.rank() <= 1;
    if (z.shape != s && !both_single) {
      return ctx.error("input " + std::to_string(zp_input) + " (zero point) has shape " +
                       z.shape.to_string() + ", the scale has " + s.to_string() +
                       "; they must match");
    }
    *zp_dtype = z.dtype;
  }
  if (s.numel() == 1 && s.rank() <= 1) return Status();  // per tensor
  if (s.rank() != 1) {
    return ctx.unsupported(sname + " has shape " + s.to_string() +
                           ": only a scalar (per tensor) or a 1-D scale (per axis) is supported; "
                           "blocked quantisation is not");
  }
  Result<int> a = normalize_axis(axis, q_shape.rank(), "axis");
  if (!a.ok()) return ctx.wrap(a.status());
  if (s[0] != q_shape[*a]) {
    return ctx.error(sname + " has " + std::to_string(s[0]) + " values but dimension " +
                     std::to_string(*a) + " (axis) of the quantised tensor " + q_shape.to_string() +
                     " has " + std::to_string(q_shape[*a]));
  }
  return Status();
}

QuantParams read_quant_params(const Shape& q_shape, const Tensor& scale, const Tensor& zp,
                              int64_t axis) {
  QuantParams p;
  const int64_t n = scale.numel();
  for (int64_t i = 0; i < n; ++i) {
    p.scale.push_back(scale.data<float>()[i]);
    p.zero_point.push_back(zp.raw() != nullptr ? int_at(zp, i) : 0);
  }
  if (scale.shape().rank() == 1 && n > 1) {
    p.axis = static_cast<int>(axis < 0 ? axis + q_shape.rank() : axis);
  }
  return p;
}

void quantize_tensor(const Tensor& x, const QuantParams& p, Tensor* q) {
  int32_t lo, hi;
  quant_range(q->dtype(), &lo, &hi);
  const AxisSplit s = p.per_axis() ? split_at_axis(x.shape(), p.axis) : AxisSplit{1, 1, x.numel()};
  const float* in = x.data<float>();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t a = 0; a < s.axis; ++a) {
      const float scale = p.scale[static_cast<size_t>(a)];
      const int32_t zp = p.zero_point[static_cast<size_t>(a)];
      const int64_t base = (o * s.axis + a) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) {
        const int32_t v = quantize_value(in[base + i], scale, zp, lo, hi);
        if (q->dtype() == DType::kU8) {
          q->data<uint8_t>()[base + i] = static_cast<uint8_t>(v);
        } else if (q->dtype() == DType::kI8) {
          q->data<int8_t>()[base + i] = static_cast<int8_t>(v);
        } else {
          q->data<int32_t>()[base + i] = v;
        }
      }
    }
  }
}

void dequantize_tensor(const Tensor& q, const QuantParams& p, Tensor* x) {
  const AxisSplit s = p.per_axis() ? split_at_axis(q.shape(), p.axis) : AxisSplit{1, 1, q.numel()};
  float* out = x->data<float>();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t a = 0; a < s.axis; ++a) {
      const float scale = p.scale[static_cast<size_t>(a)];
      const int32_t zp = p.zero_point[static_cast<size_t>(a)];
      const int64_t base = (o * s.axis + a) * s.inner;
      for (int64_t i = 0; i < s.inner; ++i) {
        out[base + i] = static_cast<float>(int_at(q, base + i) - zp) * scale;
      }
    }
  }
}

}  // namespace tessera
