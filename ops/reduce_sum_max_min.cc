// ReduceSum, ReduceMax, ReduceMin: the sum / maximum / minimum over `axes`, read as ReduceMean
// reads them (reduce_mean_params): the attribute `axes` in the older opsets, the constant input 1
// from opset 13 (ReduceSum) or 18 (ReduceMax/ReduceMin); negative axes allowed; no axes reduces
// every dimension unless noop_with_empty_axes = 1; keepdims (default 1).
// f32 only. Sums accumulate in double. Max/Min propagate NaN (a NaN anywhere in a reduced set
// gives NaN); over an empty set they give -inf / +inf, the identities of max and min.
#include <cmath>
#include <limits>

#include "ops/broadcast.h"
#include "ops/data_movement.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

namespace {

OpCost cost_reduce(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(ctx.input(0).shape.numel());  // one add/compare per element
  return c;
}

// Folds every input element into the output element it reduces to, with `combine(acc, x)`;
// the accumulators start at `init`.
template <typename Acc, typename Combine>
Status reduce_into(const OpContext& ctx, std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   Acc init, Combine combine) {
  ASSIGN_OR_RETURN(ReduceParams p, reduce_mean_params(ctx));
  const Tensor& in = inputs[0];
  Tensor& out = outputs[0];
  if (p.noop) {
    copy_tensor_bytes(in, &out);
    return Status();
  }
  Shape acc_shape = in.shape();
  for (int d = 0; d < acc_shape.rank(); ++d) {
    if (p.reduced[static_cast<size_t>(d)]) acc_shape[d] = 1;
  }
  std::vector<Acc> acc(static_cast<size_t>(out.numel()), init);
  const Shape shapes[] = {acc_shape};
  const BroadcastPlan plan = plan_broadcast(in.shape(), shapes);
  const float* x = in.data<float>();
  Acc* a = acc.data();
  const bool acc_moves = plan.inner_stride(0) == 1;
  for_each_broadcast_row(plan, [&](int64_t xo, const int64_t* ao, int64_t n) {
    const float* rx = x + xo;
    Acc* ra = a + ao[0];
    if (acc_moves) {
      for (int64_t i = 0; i < n; ++i) ra[i] = combine(ra[i], rx[i]);
    } else {
      Acc s = *ra;
      for (int64_t i = 0; i < n; ++i) s = combine(s, rx[i]);
      *ra = s;
    }
  });
  float* y = out.data<float>();
  for (size_t i = 0; i < acc.size(); ++i) y[i] = static_cast<float>(acc[i]);
  return Status();
}

Status reference_reduce_sum(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs) {
  return reduce_into<double>(ctx, inputs, outputs, 0.0,
                             [](double s, float v) { return s + static_cast<double>(v); });
}

Status reference_reduce_max(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs) {
  return reduce_into<float>(ctx, inputs, outputs, -std::numeric_limits<float>::infinity(),
                            [](float m, float v) { return (v > m || std::isnan(v)) ? v : m; });
}

Status reference_reduce_min(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs) {
  return reduce_into<float>(ctx, inputs, outputs, std::numeric_limits<float>::infinity(),
                            [](float m, float v) { return (v < m || std::isnan(v)) ? v : m; });
}

}  // namespace

const OpSchema kReduceSumSchema = {
    .kind = OpKind::kReduceSum,
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_reduction,
    .cost = cost_reduce,
    .reference = reference_reduce_sum,
};

const OpSchema kReduceMaxSchema = {
    .kind = OpKind::kReduceMax,
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_reduction,
    .cost = cost_reduce,
    .reference = reference_reduce_max,
};

const OpSchema kReduceMinSchema = {
    .kind = OpKind::kReduceMin,
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_reduction,
    .cost = cost_reduce,
    .reference = reference_reduce_min,
};

}  // namespace tessera
