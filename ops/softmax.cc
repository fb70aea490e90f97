// Softmax along one axis (ONNX Softmax-13 semantics).
//
//   Y = exp(X - max) / sum(exp(X - max)), max and sum taken along `axis` only (default -1).
//
// Opsets before 13 defined Softmax differently: the input was coerced to 2-D at `axis` (default
// 1) and normalised over the flattened trailing block. This op implements only the opset-13
// form; the ONNX importer must always pass `axis` explicitly, and for an opset < 13 node whose
// axis is not the last dim it has to express the old semantics itself (Flatten, Softmax over the
// last axis, Reshape back). For the common case, axis = rank - 1, both definitions agree.
//
// The max subtraction keeps exp from overflowing. FLOPs: 5 per element (compare, subtract, exp,
// add, scale).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/gemm_kernel.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct SoftmaxDims {
  int64_t outer = 1;  // product of the dims before the axis
  int64_t len = 1;    // the axis
  int64_t inner = 1;  // product of the dims after it
};

Result<SoftmaxDims> softmax_dims(const OpContext& ctx) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  const Shape& x = ctx.input(0).shape;
  Result<int64_t> axis_attr = ctx.attrs().int_or("axis", -1);
  if (!axis_attr.ok()) return ctx.wrap(axis_attr.status());
  Result<int> axis = normalize_axis(*axis_attr, x.rank(), "attribute 'axis'");
  if (!axis.ok()) return ctx.wrap(axis.status());
  SoftmaxDims d;
  Result<int64_t> outer = checked_dims_product(x, 0, *axis);
  if (!outer.ok()) return ctx.wrap(outer.status());
  Result<int64_t> inner = checked_dims_product(x, *axis + 1, x.rank());
  if (!inner.ok()) return ctx.wrap(inner.status());
  d.outer = *outer;
  d.len = x[*axis];
  d.inner = *inner;
  return d;
}

Status infer_softmax(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(softmax_dims(ctx).status());
  outputs->push_back(ctx.input(0));
  return Status();
}

OpCost cost_softmax(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = 5.0 * static_cast<double>(outputs[0].shape.numel());
  return c;
}

Status reference_softmax(const OpContext& ctx, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(SoftmaxDims d, softmax_dims(ctx));
  const float* x = inputs[0].data<float>();
  float* y = outputs[0].data<float>();
  if (inputs[0].numel() == 0) return Status();  // nothing to normalise, whatever the other dims
  if (d.inner == 1) {
    // Contiguous rows.
    for (int64_t o = 0; o < d.outer; ++o) {
      const float* xr = x + o * d.len;
      float* yr = y + o * d.len;
      float m = xr[0];
      for (int64_t i = 1; i < d.len; ++i) m = std::max(m, xr[i]);
      double sum = 0;
      for (int64_t i = 0; i < d.len; ++i) {
        yr[i] = std::exp(xr[i] - m);
        sum += yr[i];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t i = 0; i < d.len; ++i) yr[i] *= inv;
    }
    return Status();
  }
  // Strided axis: process `inner` independent softmaxes at once, vectorised over the inner dim.
  std::unique_ptr<float[]> scratch = alloc_floats(2 * d.inner);
  if (!scratch) return ctx.error("out of memory for softmax scratch");
  float* mx = scratch.get();
  float* sum = scratch.get() + d.inner;
  for (int64_t o = 0; o < d.outer; ++o) {
    const float* xo = x + o * d.len * d.inner;
    float* yo = y + o * d.len * d.inner;
    std::copy_n(xo, d.inner, mx);
    for (int64_t a = 1; a < d.len; ++a) {
      const float* xa = xo + a * d.inner;
      for (int64_t i = 0; i < d.inner; ++i) mx[i] = std::max(mx[i], xa[i]);
    }
    std::fill_n(sum, d.inner, 0.f);
    for (int64_t a = 0; a < d.len; ++a) {
      const float* xa = xo + a * d.inner;
      float* ya = yo + a * d.inner;
      for (int64_t i = 0; i < d.inner; ++i) {
        ya[i] = std::exp(xa[i] - mx[i]);
        sum[i] += ya[i];
      }
    }
    for (int64_t i = 0; i < d.inner; ++i) sum[i] = 1.f / sum[i];
    for (int64_t a = 0; a < d.len; ++a) {
      float* ya = yo + a * d.inner;
      for (int64_t i = 0; i < d.inner; ++i) ya[i] *= sum[i];
    }
  }
  return Status();
}

}  // namespace

const OpSchema kSoftmaxSchema = {
    .kind = OpKind::kSoftmax,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_softmax,
    .cost = cost_softmax,
    .reference = reference_softmax,
};

}  // namespace tessera
