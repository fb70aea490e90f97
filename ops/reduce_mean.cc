// ReduceMean: the mean over `axes` (attribute in opsets 11-17, constant input 1 in opset 18;
// negative axes allowed). No axes, or an empty list, reduces every dimension unless
// noop_with_empty_axes = 1 (then the op is an identity). keepdims (default 1) keeps reduced
// dimensions as size 1. f32 only; sums accumulate in double.
#include <cstring>

#include "ops/broadcast.h"
#include "ops/data_movement.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

Result<ReduceParams> reduce_mean_params(const OpContext& ctx) {
  ReduceParams p;
  const Shape& shape = ctx.input(0).shape;
  const int rank = shape.rank();
  Result<int64_t> keepdims = ctx.attrs().int_or("keepdims", 1);
  if (!keepdims.ok()) return ctx.wrap(keepdims.status());
  p.keepdims = *keepdims != 0;
  Result<int64_t> noop = ctx.attrs().int_or("noop_with_empty_axes", 0);
  if (!noop.ok()) return ctx.wrap(noop.status());
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, axes_from_attribute_or_input(ctx, 1));
  p.reduced.assign(static_cast<size_t>(rank), false);
  if (!axes || axes->empty()) {
    if (*noop != 0) {
      p.noop = true;
    } else {
      p.reduced.assign(static_cast<size_t>(rank), true);
    }
    return p;
  }
  ASSIGN_OR_RETURN(std::vector<int> norm, normalize_axes(ctx, *axes, rank));
  for (int a : norm) p.reduced[static_cast<size_t>(a)] = true;
  return p;
}

Status infer_reduction(const OpContext& ctx, int /*num_outputs*/,
                       std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  ASSIGN_OR_RETURN(ReduceParams p, reduce_mean_params(ctx));
  const Shape& in = ctx.input(0).shape;
  if (p.noop) {
    outputs->push_back(ctx.input(0));
    return Status();
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < in.rank(); ++d) {
    if (!p.reduced[static_cast<size_t>(d)]) {
      dims.push_back(in[d]);
    } else if (p.keepdims) {
      dims.push_back(1);
    }
  }
  outputs->push_back(TensorInfo{DType::kF32, Shape(std::move(dims))});
  return Status();
}

namespace {

// The shape of the result with reduced dimensions kept as 1.
Shape kept_shape(const Shape& in, const ReduceParams& p) {
  Shape s = in;
  for (int d = 0; d < in.rank(); ++d) {
    if (p.reduced[static_cast<size_t>(d)]) s[d] = 1;
  }
  return s;
}

OpCost cost_reduce_mean(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  // One add per input element, one division per output element.
  c.flops = static_cast<double>(ctx.input(0).shape.numel() + outputs[0].shape.numel());
  return c;
}

Status reference_reduce_mean(const OpContext& ctx, std::span<const Tensor> inputs,
                             std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(ReduceParams p, reduce_mean_params(ctx));
  const Tensor& in = inputs[0];
  Tensor& out = outputs[0];
  if (p.noop) {
    copy_tensor_bytes(in, &out);
    return Status();
  }
  // Walk the input once; the accumulator is the output broadcast back over the reduced
  // dimensions, so each row either sums into one accumulator or adds into a run of them.
  const Shape acc_shape = kept_shape(in.shape(), p);
  const int64_t count = out.numel() > 0 ? in.numel() / out.numel() : 0;
  std::vector<double> acc(static_cast<size_t>(out.numel()), 0.0);
  const Shape shapes[] = {acc_shape};
  const BroadcastPlan plan = plan_broadcast(in.shape(), shapes);
  const float* x = in.data<float>();
  double* a = acc.data();
  const bool acc_moves = plan.inner_stride(0) == 1;
  for_each_broadcast_row(plan, [&](int64_t xo, const int64_t* ao, int64_t n) {
    const float* rx = x + xo;
    double* ra = a + ao[0];
    if (acc_moves) {
      for (int64_t i = 0; i < n; ++i) ra[i] += rx[i];
    } else {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += rx[i];
      *ra += s;
    }
  });
  // The mean of nothing (a reduced dimension of size 0) is NaN, as 0 / 0.
  float* y = out.data<float>();
  const double scale = 1.0 / static_cast<double>(count);
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<float>(acc[i] * scale);
  return Status();
}

}  // namespace

const OpSchema kReduceMeanSchema = {
    .kind = OpKind::kReduceMean,
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_reduction,
    .cost = cost_reduce_mean,
    .reference = reference_reduce_mean,
};

}  // namespace tessera
