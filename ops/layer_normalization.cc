// LayerNormalization (opset 17): normalises X over its dimensions [axis, rank) (axis default
// -1, negative allowed), then Y = normalised * Scale + B, where Scale and the optional B
// broadcast (numpy rules, one way) to X.shape[axis:]. epsilon defaults to 1e-5. The optional
// outputs Mean and InvStdDev have X's shape with the normalised dimensions set to 1.
// stash_type must be 1 (f32; Tessera computes the moments in double either way). f32 only.
#include <vector>

#include "ops/attr_util.h"
#include "ops/normalize_rows.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct LayerNormParams {
  int axis = 0;
  float epsilon = 1e-5f;
  int64_t rows = 1;
  int64_t row = 1;
};

Result<LayerNormParams> layer_norm_params(const OpContext& ctx) {
  LayerNormParams p;
  const Shape& x = ctx.input(0).shape;
  ASSIGN_OR_RETURN(int64_t axis, int_attr(ctx, "axis", -1));
  Result<int> a = normalize_axis(axis, x.rank(), "axis");
  if (!a.ok()) return ctx.wrap(a.status());
  p.axis = *a;
  ASSIGN_OR_RETURN(p.epsilon, float_attr(ctx, "epsilon", 1e-5f));
  ASSIGN_OR_RETURN(int64_t stash, int_attr(ctx, "stash_type", 1));
  if (stash != 1) {
    return ctx.unsupported("stash_type " + std::to_string(stash) + " (only 1, f32, is supported)");
  }
  for (int d = 0; d < p.axis; ++d) p.rows *= x[d];
  for (int d = p.axis; d < x.rank(); ++d) p.row *= x[d];
  return p;
}

// For each position of a row (the shape X.shape[axis:]), the flat index into a parameter of
// shape `param` broadcast to it (right-aligned, each dimension equal or 1).
Result<std::vector<int64_t>> row_index(const OpContext& ctx, int input, const Shape& x, int axis) {
  const Shape& s = ctx.input(input).shape;
  const int row_rank = x.rank() - axis;
  if (s.rank() > row_rank) {
    return ctx.error("input " + std::to_string(input) + " of shape " + s.to_string() +
                     " does not broadcast to the normalised shape of X " + x.to_string() +
                     " from axis " + std::to_string(axis));
  }
  for (int k = 0; k < s.rank(); ++k) {
    const int64_t pd = s[s.rank() - 1 - k], xd = x[x.rank() - 1 - k];
    if (pd != xd && pd != 1) {
      return ctx.error("input " + std::to_string(input) + " of shape " + s.to_string() +
                       " does not broadcast to the normalised shape of X " + x.to_string() +
                       " from axis " + std::to_string(axis));
    }
  }
  int64_t n = 1;
  for (int d = axis; d < x.rank(); ++d) n *= x[d];
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, flat = 0, stride = 1;
    for (int k = 0; k < row_rank; ++k) {
      const int64_t xd = x[x.rank() - 1 - k];
      const int64_t coord = rem % xd;
      rem /= xd;
      if (k < s.rank()) {
        const int64_t pd = s[s.rank() - 1 - k];
        if (pd != 1) flat += coord * stride;
        stride *= pd;
      }
    }
    idx[static_cast<size_t>(i)] = flat;
  }
  return idx;
}

Status infer_layer_norm(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  RETURN_IF_ERROR(require_f32(ctx, 1));
  if (ctx.has_input(2)) RETURN_IF_ERROR(require_f32(ctx, 2));
  const Shape& x = ctx.input(0).shape;
  if (x.rank() == 0) return ctx.error("input 0 (X) must have rank >= 1, is a scalar");
  ASSIGN_OR_RETURN(LayerNormParams p, layer_norm_params(ctx));
  ASSIGN_OR_RETURN(std::vector<int64_t> si, row_index(ctx, 1, x, p.axis));
  if (ctx.has_input(2)) RETURN_IF_ERROR(row_index(ctx, 2, x, p.axis).status());
  outputs->push_back(ctx.input(0));
  Shape stat = x;
  for (int d = p.axis; d < x.rank(); ++d) stat[d] = 1;
  for (int o = 1; o < num_outputs; ++o) outputs->push_back(TensorInfo{DType::kF32, stat});
  return Status();
}

OpCost cost_layer_norm(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = 7.0 * static_cast<double>(ctx.input(0).shape.numel());
  return c;
}

Status reference_layer_norm(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(LayerNormParams p, layer_norm_params(ctx));
  const Shape& xs = inputs[0].shape();
  ASSIGN_OR_RETURN(std::vector<int64_t> si, row_index(ctx, 1, xs, p.axis));
  std::vector<int64_t> bi;
  if (ctx.has_input(2)) {
    ASSIGN_OR_RETURN(bi, row_index(ctx, 2, xs, p.axis));
  }
  const float* x = inputs[0].data<float>();
  const float* scale = inputs[1].data<float>();
  const float* bias = ctx.has_input(2) ? inputs[2].data<float>() : nullptr;
  float* y = outputs[0].data<float>();
  float* mean = outputs.size() > 1 ? outputs[1].data<float>() : nullptr;
  float* inv_std = outputs.size() > 2 ? outputs[2].data<float>() : nullptr;
  for (int64_t r = 0; r < p.rows; ++r) {
    float* yr = y + r * p.row;
    const RowMoments m = normalize_row(x + r * p.row, yr, p.row, p.epsilon);
    for (int64_t i = 0; i < p.row; ++i) {
      const size_t k = static_cast<size_t>(i);
      yr[i] = yr[i] * scale[si[k]] + (bias != nullptr ? bias[bi[k]] : 0.f);
    }
    if (mean != nullptr) mean[r] = m.mean;
    if (inv_std != nullptr) inv_std[r] = m.inv_std;
  }
  return Status();
}

}  // namespace

const OpSchema kLayerNormalizationSchema = {
    .kind = OpKind::kLayerNormalization,
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 3,
    .accepts_fused_activation = false,
    .infer = infer_layer_norm,
    .cost = cost_layer_norm,
    .reference = reference_layer_norm,
};

}  // namespace tessera
