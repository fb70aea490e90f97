// LRN: local response normalisation across channels (ONNX LRN-13).
//
//   X [N, C, ...] (rank >= 2) -> Y, same shape:
//   square_sum[n, c, i] = sum of X[n, c', i]^2 for c' in [c - floor((size - 1) / 2),
//                                                        c + ceil((size - 1) / 2)] within [0, C)
//   Y = X / (bias + alpha / size * square_sum)^beta
// Attributes: size (required, >= 1), alpha (1e-4), beta (0.75), bias (1.0).
// FLOPs: 2 * size (the square-sum multiply-adds) + 4 (scale, bias, pow, divide) per element.
#include <algorithm>
#include <cmath>
#include <string>

#include "ops/gemm_kernel.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

namespace {}  // namespace

Result<LrnParams> lrn_params(const OpContext& ctx) {
  LrnParams p;
  Result<int64_t> size = ctx.attrs().get_int("size");
  if (!size.ok()) return ctx.wrap(size.status());
  if (*size < 1 || *size > kMaxDim) {
    return ctx.error("attribute 'size' = " + std::to_string(*size) + " must be positive");
  }
  p.size = *size;
  Result<float> alpha = ctx.attrs().float_or("alpha", 1e-4f);
  if (!alpha.ok()) return ctx.wrap(alpha.status());
  Result<float> beta = ctx.attrs().float_or("beta", 0.75f);
  if (!beta.ok()) return ctx.wrap(beta.status());
  Result<float> bias = ctx.attrs().float_or("bias", 1.f);
  if (!bias.ok()) return ctx.wrap(bias.status());
  p.alpha = *alpha;
  p.beta = *beta;
  p.bias = *bias;
  return p;
}

namespace {

Status infer_lrn(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  RETURN_IF_ERROR(lrn_params(ctx).status());
  const Shape& x = ctx.input(0).shape;
  if (x.rank() < 2) {
    return ctx.error("input X has shape " + x.to_string() + ", expected rank >= 2 [N, C, ...]");
  }
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_lrn(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  Result<int64_t> size = ctx.attrs().get_int("size");
  const double s = size.ok() ? static_cast<double>(*size) : 1.0;
  c.flops = static_cast<double>(outputs[0].shape.numel()) * (2.0 * s + 4.0);
  return c;
}

Status reference_lrn(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(LrnParams p, lrn_params(ctx));
  const Shape& xs = inputs[0].shape();
  const int64_t n = xs[0];
  const int64_t channels = xs[1];
  const int64_t plane = n == 0 || channels == 0 ? 0 : xs.numel() / (n * channels);
  const float* x = inputs[0].data<float>();
  float* y = outputs[0].data<float>();
  std::unique_ptr<float[]> sq = alloc_floats(plane);
  if (!sq) return ctx.error("out of memory for LRN scratch");
  const int64_t before = (p.size - 1) / 2;      // floor((size - 1) / 2)
  const int64_t after = (p.size - 1) - before;  // ceil((size - 1) / 2)
  const float scale = p.alpha / static_cast<float>(p.size);
  for (int64_t b = 0; b < n; ++b) {
    const float* xb = x + b * channels * plane;
    float* yb = y + b * channels * plane;
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t lo = std::max<int64_t>(0, c - before);
      const int64_t hi = std::min<int64_t>(channels - 1, c + after);
      std::fill_n(sq.get(), plane, 0.f);
      for (int64_t cc = lo; cc <= hi; ++cc) {
        const float* xc = xb + cc * plane;
        for (int64_t i = 0; i < plane; ++i) sq[static_cast<size_t>(i)] += xc[i] * xc[i];
      }
      const float* xc = xb + c * plane;
      float* yc = yb + c * plane;
      for (int64_t i = 0; i < plane; ++i) {
        yc[i] = xc[i] / std::pow(p.bias + scale * sq[static_cast<size_t>(i)], p.beta);
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kLRNSchema = {
    .kind = OpKind::kLRN,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_lrn,
    .cost = cost_lrn,
    .reference = reference_lrn,
};

}  // namespace tessera
