#include "ops/unary_math.h"

#include <type_traits>

#include "ops/binary_elementwise.h"

namespace tessera {

Result<UnaryMath> unary_math_of_node(const OpContext& ctx) {
  UnaryMath m;
  m.kind = ctx.kind();
  if (m.kind == OpKind::kGelu) {
    Result<std::string> approx = ctx.attrs().string_or("approximate", "none");
    if (!approx.ok()) return ctx.wrap(approx.status());
    if (*approx == "tanh") {
      m.gelu_tanh = true;
    } else if (*approx != "none") {
      return ctx.error("approximate is '" + *approx + "'; expected \"none\" or \"tanh\"");
    }
  }
  return m;
}

Status infer_unary_math(const OpContext& ctx, int /*num_outputs*/,
                        std::vector<TensorInfo>* outputs) {
  const DType t = ctx.input(0).dtype;
  const bool integer_ok = ctx.kind() == OpKind::kAbs || ctx.kind() == OpKind::kNeg;
  if (t != DType::kF32 && !(integer_ok && (t == DType::kI32 || t == DType::kI64))) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(t) + " is not supported (" +
                           (integer_ok ? "f32, i32, i64 are)" : "f32 is)"));
  }
  RETURN_IF_ERROR(unary_math_of_node(ctx).status());
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_unary_math(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  // Transcendental functions cost several FLOPs each; count the polynomial of a typical
  // vectorised implementation.
  const bool transcendental = ctx.kind() != OpKind::kAbs && ctx.kind() != OpKind::kNeg;
  c.flops = static_cast<double>(outputs[0].shape.numel()) * (transcendental ? 10.0 : 1.0);
  return c;
}

namespace {

template <typename T>
void integer_unary(OpKind kind, const Tensor& in, Tensor& out) {
  const T* x = in.data<T>();
  T* y = out.data<T>();
  const int64_t n = in.numel();
  for (int64_t i = 0; i < n; ++i) {
    // Both wrap at the minimum value, as two's complement hardware does.
    const T neg = wrapping_sub(T{0}, x[i]);
    y[i] = kind == OpKind::kNeg ? neg : (x[i] < 0 ? neg : x[i]);
  }
}

}  // namespace

Status reference_unary_math(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(UnaryMath m, unary_math_of_node(ctx));
  const Tensor& in = inputs[0];
  switch (in.dtype()) {
    case DType::kF32: {
      const float* x = in.data<float>();
      float* y = outputs[0].data<float>();
      const int64_t n = in.numel();
      for (int64_t i = 0; i < n; ++i) y[i] = apply_unary_math(m, x[i]);
      return Status();
    }
    case DType::kI32:
      integer_unary<int32_t>(m.kind, in, outputs[0]);
      return Status();
    case DType::kI64:
      integer_unary<int64_t>(m.kind, in, outputs[0]);
      return Status();
    default:
      return ctx.unsupported(std::string("dtype ") + dtype_name(in.dtype()));
  }
}

}  // namespace tessera
