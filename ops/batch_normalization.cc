// BatchNormalization, inference mode (ONNX BatchNormalization-9/14/15).
//
//   X [N, C, ...] (rank >= 2, channels in dim 1), scale [C], B [C], mean [C], var [C]  ->  Y
//   Y = (X - mean) / sqrt(var + epsilon) * scale + B
//
// Only the inference form is supported: the optional training outputs (running mean/var, saved
// mean/var) and training_mode = 1 are rejected. `momentum` only matters in training and is
// ignored. FLOPs: 2 per element, the per-channel multiply-add y = x * a + b that backends fold
// the op into (the reference kernel subtracts the mean first for precision).
#include <cmath>
#include <string>

#include "ops/registry.h"

namespace tessera {

namespace {

const char* const kParamNames[] = {"X", "scale", "B", "input_mean", "input_var"};

Result<float> bn_epsilon(const OpContext& ctx) {
  Result<float> eps = ctx.attrs().float_or("epsilon", 1e-5f);
  if (!eps.ok()) return ctx.wrap(eps.status());
  if (!(*eps >= 0.f) || !std::isfinite(*eps)) {
    return ctx.error("attribute 'epsilon' = " + std::to_string(*eps) +
                     " must be finite and non-negative");
  }
  return *eps;
}

Status infer_batch_normalization(const OpContext& ctx, int num_outputs,
                                 std::vector<TensorInfo>* outputs) {
  if (num_outputs != 1) {
    return ctx.unsupported("has " + std::to_string(num_outputs) +
                           " outputs; only inference mode (the single output Y) is supported, "
                           "not the training outputs (running/saved mean and variance)");
  }
  Result<int64_t> training = ctx.attrs().int_or("training_mode", 0);
  if (!training.ok()) return ctx.wrap(training.status());
  if (*training != 0) {
    return ctx.unsupported("attribute 'training_mode' = " + std::to_string(*training) +
                           "; only inference mode is supported");
  }
  RETURN_IF_ERROR(bn_epsilon(ctx).status());
  for (int i = 0; i < 5; ++i) RETURN_IF_ERROR(require_f32(ctx, i));
  const Shape& x = ctx.input(0).shape;
  if (x.rank() < 2) {
    return ctx.error("input X has shape " + x.to_string() + ", expected rank >= 2 [N, C, ...]");
  }
  for (int i = 1; i < 5; ++i) {
    const Shape& p = ctx.input(i).shape;
    if (p.rank() != 1 || p[0] != x[1]) {
      return ctx.error("input " + std::to_string(i) + " (" + kParamNames[i] + ") has shape " +
                       p.to_string() + ", expected [" + std::to_string(x[1]) + "]");
    }
  }
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_batch_normalization(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = 2.0 * static_cast<double>(outputs[0].shape.numel());
  return c;
}

Status reference_batch_normalization(const OpContext& ctx, std::span<const Tensor> inputs,
                                     std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(const float eps, bn_epsilon(ctx));
  const Shape& xs = inputs[0].shape();
  const int64_t n = xs[0];
  const int64_t c = xs[1];
  const int64_t plane = c == 0 || n == 0 ? 0 : xs.numel() / (n * c);
  const float* x = inputs[0].data<float>();
  const float* scale = inputs[1].data<float>();
  const float* bias = inputs[2].data<float>();
  const float* mean = inputs[3].data<float>();
  const float* var = inputs[4].data<float>();
  float* y = outputs[0].data<float>();
  for (int64_t ch = 0; ch < c; ++ch) {
    // y = (x - mean) * a + B with a = scale / sqrt(var + eps) computed in double. Subtracting the
    // mean first keeps the precision the folded form x * a + (B - mean * a) loses when |mean| is
    // large compared with the spread of x.
    const float a = static_cast<float>(static_cast<double>(scale[ch]) /
                                       std::sqrt(static_cast<double>(var[ch]) + eps));
    const float m = mean[ch];
    const float b = bias[ch];
    for (int64_t i = 0; i < n; ++i) {
      const float* xp = x + (i * c + ch) * plane;
      float* yp = y + (i * c + ch) * plane;
      for (int64_t j = 0; j < plane; ++j) yp[j] = (xp[j] - m) * a + b;
    }
  }
  return Status();
}

}  // namespace

const OpSchema kBatchNormalizationSchema = {
    .kind = OpKind::kBatchNormalization,
    .min_inputs = 5,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 5,
    .accepts_fused_activation = true,
    .infer = infer_batch_normalization,
    .cost = cost_batch_normalization,
    .reference = reference_batch_normalization,
};

}  // namespace tessera
