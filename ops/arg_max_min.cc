// ArgMax, ArgMin (opsets 11-13): the index (i64) of the largest / smallest element along `axis`
// (default 0, negative allowed). keepdims (default 1) keeps the axis as size 1. Ties go to the
// first index, or to the last with select_last_index = 1. A NaN counts as larger than every
// number for ArgMax and smaller for ArgMin (the first NaN wins), as in NumPy. f32 only; the
// reduced axis must not be empty.
#include <cmath>

#include "ops/attr_util.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct ArgParams {
  int axis = 0;
  bool keepdims = true;
  bool last = false;
};

Result<ArgParams> arg_params(const OpContext& ctx) {
  ArgParams p;
  const int rank = ctx.input(0).shape.rank();
  ASSIGN_OR_RETURN(int64_t axis, int_attr(ctx, "axis", 0));
  Result<int> a = normalize_axis(axis, rank, "axis");
  if (!a.ok()) return ctx.wrap(a.status());
  p.axis = *a;
  ASSIGN_OR_RETURN(int64_t keepdims, int_attr(ctx, "keepdims", 1));
  ASSIGN_OR_RETURN(int64_t last, int_attr(ctx, "select_last_index", 0));
  p.keepdims = keepdims != 0;
  p.last = last != 0;
  return p;
}

Status infer_arg(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  if (ctx.input(0).shape.rank() == 0) return ctx.error("input 0 must have rank >= 1, is a scalar");
  ASSIGN_OR_RETURN(ArgParams p, arg_params(ctx));
  const Shape& in = ctx.input(0).shape;
  if (in[p.axis] == 0) {
    return ctx.error("axis " + std::to_string(p.axis) + " of input shape " + in.to_string() +
                     " is empty: there is no element to pick");
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    if (d != p.axis) {
      dims.push_back(in[d]);
    } else if (p.keepdims) {
      dims.push_back(1);
    }
  }
  outputs->push_back(TensorInfo{DType::kI64, Shape(std::move(dims))});
  return Status();
}

OpCost cost_arg(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(ctx.input(0).shape.numel());
  return c;
}

// `better(v, best)`: v replaces the current pick (strictly better, or NaN over a number).
template <typename Better>
Status reference_arg(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs, Better better) {
  ASSIGN_OR_RETURN(ArgParams p, arg_params(ctx));
  const AxisSplit s = split_at_axis(inputs[0].shape(), p.axis);
  const float* x = inputs[0].data<float>();
  int64_t* y = outputs[0].data<int64_t>();
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const float* col = x + o * s.axis * s.inner + i;
      int64_t pick = 0;
      float best = col[0];
      for (int64_t k = 1; k < s.axis; ++k) {
        const float v = col[k * s.inner];
        if (std::isnan(best)) break;  // the first NaN wins
        if (better(v, best) || (p.last && v == best)) {
          pick = k;
          best = v;
        }
      }
      y[o * s.inner + i] = pick;
    }
  }
  return Status();
}

Status reference_arg_max(const OpContext& ctx, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  return reference_arg(ctx, inputs, outputs,
                       [](float v, float best) { return v > best || std::isnan(v); });
}

Status reference_arg_min(const OpContext& ctx, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  return reference_arg(ctx, inputs, outputs,
                       [](float v, float best) { return v < best || std::isnan(v); });
}

}  // namespace

const OpSchema kArgMaxSchema = {
    .kind = OpKind::kArgMax,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_arg,
    .cost = cost_arg,
    .reference = reference_arg_max,
};

const OpSchema kArgMinSchema = {
    .kind = OpKind::kArgMin,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_arg,
    .cost = cost_arg,
    .reference = reference_arg_min,
};

}  // namespace tessera
