// Cast: converts to the dtype named by attribute `to`, an ONNX TensorProto data type:
//   1 float (f32), 2 uint8, 3 int8, 6 int32, 7 int64, 9 bool, 10 float16;
// other ONNX types are Unimplemented. Conversions between every pair of these:
//   float -> integer  truncates toward zero, saturates at the type's range, NaN gives 0
//                     (ONNX leaves out-of-range results undefined; this keeps them defined),
//   integer -> integer wraps modulo 2^bits (two's complement), as a C++ conversion,
//   anything -> bool  is value != 0 (NaN gives true),  bool -> anything is 0 or 1,
//   to/from float16   goes through f32 with round-to-nearest-even.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ops/registry.h"

namespace tessera {

namespace {

struct Half {
  uint16_t bits;
};
struct Bool {
  uint8_t byte;
};

Result<DType> target_dtype(const OpContext& ctx) {
  Result<int64_t> to = ctx.attrs().get_int("to");
  if (!to.ok()) return ctx.wrap(to.status());
  switch (*to) {
    case 1:
      return DType::kF32;
    case 2:
      return DType::kU8;
    case 3:
      return DType::kI8;
    case 6:
      return DType::kI32;
    case 7:
      return DType::kI64;
    case 9:
      return DType::kBool;
    case 10:
      return DType::kF16;
    default:
      break;
  }
  return ctx.unsupported("cast to ONNX data type " + std::to_string(*to) +
                         " is not supported (1, 2, 3, 6, 7, 9, 10 are)");
}

// Loads widen to float (float sources) or int64 (integer and bool sources).
float load(float v) {
  return v;
}
float load(Half v) {
  return half_to_float(v.bits);
}
int64_t load(Bool v) {
  return v.byte != 0 ? 1 : 0;
}
template <std::integral S>
int64_t load(S v) {
  return static_cast<int64_t>(v);
}

template <typename D>
D store(float v) {
  if constexpr (std::is_same_v<D, float>) {
    return v;
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(v)};
  } else if constexpr (std::is_same_v<D, Bool>) {
    return Bool{static_cast<uint8_t>(v != 0.f)};
  } else {
    if (std::isnan(v)) return D{0};
    const double t = std::trunc(static_cast<double>(v));
    // Bounds are exact powers of two (or 0) in double, so the comparisons are exact.
    const double lo = static_cast<double>(std::numeric_limits<D>::min());
    const double hi = static_cast<double>(std::numeric_limits<D>::max());
    if (t <= lo) return std::numeric_limits<D>::min();
    if (t >= hi) return std::numeric_limits<D>::max();
    return static_cast<D>(t);
  }
}

template <typename D>
D store(int64_t v) {
  if constexpr (std::is_same_v<D, float>) {
    return static_cast<float>(v);
  } else if constexpr (std::is_same_v<D, Half>) {
    return Half{float_to_half(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, Bool>) {
    return Bool{static_cast<uint8_t>(v != 0)};
  } else {
    return static_cast<D>(v);  // modulo 2^bits
  }
}

// Calls fn(T{}) with the C++ element type of `t`.
template <typename Fn>
void with_element_type(DType t, Fn&& fn) {
  switch (t) {
    case DType::kF32:
      fn(float{});
      return;
    case DType::kF16:
      fn(Half{});
      return;
    case DType::kI8:
      fn(int8_t{});
      return;
    case DType::kU8:
      fn(uint8_t{});
      return;
    case DType::kI32:
      fn(int32_t{});
      return;
    case DType::kI64:
      fn(int64_t{});
      return;
    case DType::kBool:
      fn(Bool{});
      return;
  }
}

Status infer_cast(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(DType to, target_dtype(ctx));
  outputs->push_back(TensorInfo{to, ctx.input(0).shape});
  return Status();
}

OpCost cost_cast(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(outputs[0].shape.numel());  // one conversion per element
  return c;
}

Status reference_cast(const OpContext&, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const Tensor& in = inputs[0];
  Tensor& out = outputs[0];
  const int64_t n = in.numel();
  if (in.dtype() == out.dtype() && in.dtype() != DType::kBool) {
    if (n > 0) std::memcpy(out.raw(), in.raw(), in.byte_size());
    return Status();
  }
  with_element_type(in.dtype(), [&](auto src_tag) {
    using S = decltype(src_tag);
    with_element_type(out.dtype(), [&](auto dst_tag) {
      using D = decltype(dst_tag);
      const S* src = static_cast<const S*>(in.raw());
      D* dst = static_cast<D*>(out.raw());
      for (int64_t i = 0; i < n; ++i) dst[i] = store<D>(load(src[i]));
    });
  });
  return Status();
}

}  // namespace

const OpSchema kCastSchema = {
    .kind = OpKind::kCast,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_cast,
    .cost = cost_cast,
    .reference = reference_cast,
};

}  // namespace tessera
