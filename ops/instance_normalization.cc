// InstanceNormalization (opsets 6-22): normalises each (n, c) plane of X [N, C, D1, ...] over its
// spatial elements, then y = normalised * scale[c] + B[c]; scale and B have shape [C]. epsilon
// defaults to 1e-5. f32 only; rank >= 3 as ONNX requires.
#include <algorithm>

#include "ops/attr_util.h"
#include "ops/normalize_rows.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_instance_norm(const OpContext& ctx, int /*num_outputs*/,
                           std::vector<TensorInfo>* outputs) {
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(require_f32(ctx, i));
  const Shape& x = ctx.input(0).shape;
  if (x.rank() < 3) {
    return ctx.error("input 0 must be [N, C, D1, ...] (rank >= 3), has shape " + x.to_string());
  }
  for (int i = 1; i < 3; ++i) {
    if (ctx.input(i).shape != Shape{x[1]}) {
      return ctx.error("input " + std::to_string(i) + (i == 1 ? " (scale)" : " (B)") +
                       " must have shape [" + std::to_string(x[1]) + "] (the channels of X), has " +
                       ctx.input(i).shape.to_string());
    }
  }
  RETURN_IF_ERROR(float_attr(ctx, "epsilon", 1e-5f).status());
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_instance_norm(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = 7.0 * static_cast<double>(ctx.input(0).shape.numel());
  return c;
}

Status reference_instance_norm(const OpContext& ctx, std::span<const Tensor> inputs,
                               std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(float epsilon, float_attr(ctx, "epsilon", 1e-5f));
  const Shape& xs = inputs[0].shape();
  const int64_t n = xs[0], c = xs[1], plane = xs.numel() / std::max<int64_t>(1, n * c);
  const float* x = inputs[0].data<float>();
  const float* scale = inputs[1].data<float>();
  const float* bias = inputs[2].data<float>();
  float* y = outputs[0].data<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t off = (b * c + ch) * plane;
      normalize_row(x + off, y + off, plane, epsilon);
      for (int64_t i = 0; i < plane; ++i) y[off + i] = y[off + i] * scale[ch] + bias[ch];
    }
  }
  return Status();
}

}  // namespace

const OpSchema kInstanceNormalizationSchema = {
    .kind = OpKind::kInstanceNormalization,
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_instance_norm,
    .cost = cost_instance_norm,
    .reference = reference_instance_norm,
};

}  // namespace tessera
