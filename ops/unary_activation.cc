#include "ops/unary_activation.h"

#include "ops/activation.h"

namespace tessera {

Status infer_unary_activation(const OpContext& ctx, int /*num_outputs*/,
                              std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  ASSIGN_OR_RETURN(std::optional<Activation> act, activation_of_node(ctx));
  if (!act) return internal_error("not an activation op");
  // Clip with min > max is valid (Clip-13: every value becomes max), and min(max(x, lo), hi)
  // computes exactly that.
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_unary_activation(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(outputs[0].shape.numel());
  return c;
}

Status reference_unary_activation(const OpContext& ctx, std::span<const Tensor> inputs,
                                  std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(std::optional<Activation> act, activation_of_node(ctx));
  const float* x = inputs[0].data<float>();
  float* y = outputs[0].data<float>();
  const int64_t n = inputs[0].numel();
  for (int64_t i = 0; i < n; ++i) y[i] = activate(*act, x[i]);
  return Status();
}

}  // namespace tessera
