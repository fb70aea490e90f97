// TopK (opsets 11-21): the K largest (largest = 1, default) or smallest elements along `axis`
// (default -1) and their indices (i64). K is input 1, a constant one-element integer tensor
// (output shapes are static), 0 <= K <= the axis length. The results are always sorted (best
// first), which sorted = 0 permits; equal values keep the lower index first, as ONNX Runtime
// orders them. A NaN sorts above every number for largest = 1 and below for largest = 0. f32.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/attr_util.h"
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct TopKParams {
  int axis = 0;
  int64_t k = 0;
  bool largest = true;
};

Result<TopKParams> top_k_params(const OpContext& ctx) {
  TopKParams p;
  const Shape& in = ctx.input(0).shape;
  if (in.rank() == 0) return ctx.error("input 0 must have rank >= 1, is a scalar");
  ASSIGN_OR_RETURN(int64_t axis, int_attr(ctx, "axis", -1));
  Result<int> a = normalize_axis(axis, in.rank(), "axis");
  if (!a.ok()) return ctx.wrap(a.status());
  p.axis = *a;
  ASSIGN_OR_RETURN(int64_t largest, int_attr(ctx, "largest", 1));
  p.largest = largest != 0;
  ASSIGN_OR_RETURN(std::vector<int64_t> k, constant_int_list(ctx, 1, "K"));
  if (k.size() != 1) {
    return ctx.error("input 1 (K) must hold one value, holds " + std::to_string(k.size()));
  }
  if (k[0] < 0 || k[0] > in[p.axis]) {
    return ctx.error("K = " + std::to_string(k[0]) + " must be in [0, " +
                     std::to_string(in[p.axis]) + "], the length of axis " +
                     std::to_string(p.axis));
  }
  p.k = k[0];
  return p;
}

Status infer_top_k(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  ASSIGN_OR_RETURN(TopKParams p, top_k_params(ctx));
  Shape out = ctx.input(0).shape;
  out[p.axis] = p.k;
  outputs->push_back(TensorInfo{DType::kF32, out});
  if (num_outputs > 1) outputs->push_back(TensorInfo{DType::kI64, out});
  return Status();
}

OpCost cost_top_k(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  const double n = static_cast<double>(ctx.input(0).shape.numel());
  c.flops =
      n * std::max(1.0, std::log2(std::max(2.0, static_cast<double>(outputs[0].shape.numel()))));
  return c;
}

Status reference_top_k(const OpContext& ctx, std::span<const Tensor> inputs,
                       std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(TopKParams p, top_k_params(ctx));
  const AxisSplit s = split_at_axis(inputs[0].shape(), p.axis);
  const float* x = inputs[0].data<float>();
  float* values = outputs[0].data<float>();
  int64_t* indices = outputs.size() > 1 ? outputs[1].data<int64_t>() : nullptr;
  std::vector<int64_t> order(static_cast<size_t>(s.axis));
  for (int64_t o = 0; o < s.outer; ++o) {
    for (int64_t i = 0; i < s.inner; ++i) {
      const float* col = x + o * s.axis * s.inner + i;
      // a before b: better value, NaN first (largest) or last (smallest), then lower index.
      auto before = [&](int64_t a, int64_t b) {
        const float va = col[a * s.inner], vb = col[b * s.inner];
        const bool na = std::isnan(va), nb = std::isnan(vb);
        if (na || nb) {
          if (na && nb) return a < b;
          return p.largest ? na : nb;
        }
        if (va != vb) return p.largest ? va > vb : va < vb;
        return a < b;
      };
      std::iota(order.begin(), order.end(), int64_t{0});
      std::partial_sort(order.begin(), order.begin() + p.k, order.end(), before);
      for (int64_t j = 0; j < p.k; ++j) {
        const int64_t at = (o * p.k + j) * s.inner + i;
        values[at] = col[order[static_cast<size_t>(j)] * s.inner];
        if (indices != nullptr) indices[at] = order[static_cast<size_t>(j)];
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kTopKSchema = {
    .kind = OpKind::kTopK,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 2,
    .accepts_fused_activation = false,
    .infer = infer_top_k,
    .cost = cost_top_k,
    .reference = reference_top_k,
};

}  // namespace tessera
