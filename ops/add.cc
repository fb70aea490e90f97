// Add: y = a + b, with numpy broadcasting; f32, i32 and i64 (integers wrap on overflow).
// Accepts a fused activation (f32 only). Shared machinery: ops/binary_elementwise.h.
#include "ops/binary_elementwise.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct AddFn {
  float operator()(float a, float b) const { return a + b; }
  template <std::signed_integral T>
  T operator()(T a, T b) const {
    return wrapping_add(a, b);
  }
};

Status reference_add(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs) {
  return reference_binary_elementwise<AddFn>(ctx, inputs, outputs);
}

}  // namespace

const OpSchema kAddSchema = {
    .kind = OpKind::kAdd,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = true,
    .infer = infer_binary_elementwise,
    .cost = cost_binary_elementwise,
    .reference = reference_add,
};

}  // namespace tessera
