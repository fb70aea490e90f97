// GroupNormalization (opsets 18 and 21): splits the C channels of X [N, C, D1, ...] into
// num_groups groups of C / num_groups channels and normalises each (n, group) over its channels
// and spatial elements; then y = normalised * scale + bias. Opset 21 gives scale and bias per
// channel ([C]); opset 18 gave them per group ([num_groups]); both shapes are accepted (they
// coincide when num_groups = C). epsilon defaults to 1e-5; stash_type must be 1. f32 only.
#include "ops/attr_util.h"
#include "ops/normalize_rows.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct GroupNormParams {
  int64_t groups = 1;
  float epsilon = 1e-5f;
  bool per_channel = true;
};

Result<GroupNormParams> group_norm_params(const OpContext& ctx) {
  GroupNormParams p;
  const Shape& x = ctx.input(0).shape;
  if (x.rank() < 2) {
    return ctx.error("input 0 must be [N, C, D1, ...] (rank >= 2), has shape " + x.to_string());
  }
  Result<int64_t> groups = ctx.attrs().get_int("num_groups");
  if (!groups.ok()) return ctx.wrap(groups.status());
  if (*groups < 1 || x[1] % *groups != 0) {
    return ctx.error("num_groups = " + std::to_string(*groups) +
                     " must be positive and divide the " + std::to_string(x[1]) + " channels");
  }
  p.groups = *groups;
  ASSIGN_OR_RETURN(p.epsilon, float_attr(ctx, "epsilon", 1e-5f));
  ASSIGN_OR_RETURN(int64_t stash, int_attr(ctx, "stash_type", 1));
  if (stash != 1) {
    return ctx.unsupported("stash_type " + std::to_string(stash) + " (only 1, f32, is supported)");
  }
  const Shape& s = ctx.input(1).shape;
  if (ctx.input(2).shape != s) {
    return ctx.error("scale " + s.to_string() + " and bias " + ctx.input(2).shape.to_string() +
                     " must have the same shape");
  }
  if (s == Shape{x[1]}) {
    p.per_channel = true;
  } else if (s == Shape{p.groups}) {
    p.per_channel = false;
  } else {
    return ctx.error("scale and bias must have shape [" + std::to_string(x[1]) +
                     "] (channels, opset 21) or [" + std::to_string(p.groups) +
                     "] (groups, opset 18), have " + s.to_string());
  }
  return p;
}

Status infer_group_norm(const OpContext& ctx, int /*num_outputs*/,
                        std::vector<TensorInfo>* outputs) {
  for (int i = 0; i < 3; ++i) RETURN_IF_ERROR(require_f32(ctx, i));
  RETURN_IF_ERROR(group_norm_params(ctx).status());
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_group_norm(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = 7.0 * static_cast<double>(ctx.input(0).shape.numel());
  return c;
}

Status reference_group_norm(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(GroupNormParams p, group_norm_params(ctx));
  const Shape& xs = inputs[0].shape();
  const int64_t n = xs[0], c = xs[1];
  const int64_t plane = n * c > 0 ? xs.numel() / (n * c) : 0;
  const int64_t per_group = c / p.groups;
  const float* x = inputs[0].data<float>();
  const float* scale = inputs[1].data<float>();
  const float* bias = inputs[2].data<float>();
  float* y = outputs[0].data<float>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t g = 0; g < p.groups; ++g) {
      const int64_t off = (b * c + g * per_group) * plane;
      normalize_row(x + off, y + off, per_group * plane, p.epsilon);
      for (int64_t k = 0; k < per_group; ++k) {
        const int64_t ch = g * per_group + k;
        const int64_t at = p.per_channel ? ch : g;
        float* yc = y + off + k * plane;
        for (int64_t i = 0; i < plane; ++i) yc[i] = yc[i] * scale[at] + bias[at];
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kGroupNormalizationSchema = {
    .kind = OpKind::kGroupNormalization,
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_group_norm,
    .cost = cost_group_norm,
    .reference = reference_group_norm,
};

}  // namespace tessera
