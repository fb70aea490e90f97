// Div: y = a / b, with numpy broadcasting; f32, i32 and i64.
// Integer division truncates toward zero (as C and ONNX Runtime); a zero divisor is an error
// reported before anything is computed, and INT_MIN / -1 wraps to INT_MIN. Float division
// follows IEEE (x / 0 is +-Inf or NaN). Accepts a fused activation (f32 only).
// Shared machinery: ops/binary_elementwise.h.
#include "ops/binary_elementwise.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct DivFn {
  float operator()(float a, float b) const { return a / b; }
  template <std::signed_integral T>
  T operator()(T a, T b) const {
    return b == -1 ? wrapping_sub(T{0}, a) : static_cast<T>(a / b);
  }
};

template <typename T>
Status check_no_zero_divisor(const OpContext& ctx, const Tensor& b) {
  const T* p = b.data<T>();
  const int64_t n = b.numel();
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] == 0) {
      return ctx.error("integer division by zero (divisor element " + std::to_string(i) +
                       " of input 1 is 0)");
    }
  }
  return Status();
}

Status reference_div(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs) {
  // With an empty output no division happens, so zeros in the divisor do not matter.
  if (outputs[0].numel() > 0) {
    if (inputs[1].dtype() == DType::kI32)
      RETURN_IF_ERROR(check_no_zero_divisor<int32_t>(ctx, inputs[1]));
    if (inputs[1].dtype() == DType::kI64)
      RETURN_IF_ERROR(check_no_zero_divisor<int64_t>(ctx, inputs[1]));
  }
  return reference_binary_elementwise<DivFn>(ctx, inputs, outputs);
}

}  // namespace

const OpSchema kDivSchema = {
    .kind = OpKind::kDiv,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = true,
    .infer = infer_binary_elementwise,
    .cost = cost_binary_elementwise,
    .reference = reference_div,
};

}  // namespace tessera
