// PRelu: y = x for x >= 0, slope * x for x < 0, with slope unidirectionally broadcast to x
// (per channel: [C, 1, 1] against [N, C, H, W]; or one shared value). f32. NaN passes through.
#include "ops/broadcast.h"
#include "ops/broadcast_map.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_prelu(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  RETURN_IF_ERROR(require_f32(ctx, 1));
  const Shape& x = ctx.input(0).shape;
  const Shape& slope = ctx.input(1).shape;
  if (!broadcasts_to(slope, x)) {
    return ctx.error("slope " + slope.to_string() + " does not broadcast to the input " +
                     x.to_string());
  }
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_prelu(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(outputs[0].shape.numel());
  return c;
}

Status reference_prelu(const OpContext&, std::span<const Tensor> inputs,
                       std::span<Tensor> outputs) {
  broadcast_map2<float, float, float>(inputs[0], inputs[1], outputs[0],
                                      [](float x, float s) { return x < 0.f ? s * x : x; });
  return Status();
}

}  // namespace

const OpSchema kPReluSchema = {
    .kind = OpKind::kPRelu,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_prelu,
    .cost = cost_prelu,
    .reference = reference_prelu,
};

}  // namespace tessera
