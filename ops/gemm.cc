// Gemm: Y = alpha * A' * B' + beta * C (ONNX Gemm-11/13).
//
//   A [M, K] ([K, M] with transA), B [K, N] ([N, K] with transB), optional C broadcastable to
//   [M, N] one way (scalar, [N], [1, N], [M, 1], [M, N], ...)  ->  Y [M, N]
//
// FLOPs: 2 * M * N * K; the alpha/beta scaling and the C term are not counted (as Conv's bias).
// Reference: the product through ops/gemm_kernel.h (transposes are just swapped strides), then
// one pass applying alpha and beta * C.
#include <algorithm>
#include <string>

#include "ops/gemm_kernel.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct GemmDims {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1;
  float beta = 1;
};

Result<bool> read_flag(const OpContext& ctx, const char* name) {
  Result<int64_t> v = ctx.attrs().int_or(name, 0);
  if (!v.ok()) return ctx.wrap(v.status());
  if (*v != 0 && *v != 1) {
    return ctx.error("attribute '" + std::string(name) + "' = " + std::to_string(*v) +
                     " must be 0 or 1");
  }
  return *v == 1;
}

Result<GemmDims> gemm_dims(const OpContext& ctx) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  RETURN_IF_ERROR(require_f32(ctx, 1));
  GemmDims d;
  ASSIGN_OR_RETURN(d.trans_a, read_flag(ctx, "transA"));
  ASSIGN_OR_RETURN(d.trans_b, read_flag(ctx, "transB"));
  Result<float> alpha = ctx.attrs().float_or("alpha", 1.f);
  if (!alpha.ok()) return ctx.wrap(alpha.status());
  Result<float> beta = ctx.attrs().float_or("beta", 1.f);
  if (!beta.ok()) return ctx.wrap(beta.status());
  d.alpha = *alpha;
  d.beta = *beta;
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  if (a.rank() != 2) return ctx.error("input A has shape " + a.to_string() + ", expected rank 2");
  if (b.rank() != 2) return ctx.error("input B has shape " + b.to_string() + ", expected rank 2");
  d.m = d.trans_a ? a[1] : a[0];
  d.k = d.trans_a ? a[0] : a[1];
  const int64_t kb = d.trans_b ? b[1] : b[0];
  d.n = d.trans_b ? b[0] : b[1];
  if (kb != d.k) {
    return ctx.error("inner dimensions differ: A " + a.to_string() +
                     (d.trans_a ? " (transposed)" : "") + " has K = " + std::to_string(d.k) +
                     ", B " + b.to_string() + (d.trans_b ? " (transposed)" : "") +
                     " has K = " + std::to_string(kb));
  }
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(require_f32(ctx, 2));
    const Shape& c = ctx.input(2).shape;
    // Unidirectional broadcast to [M, N]: right-aligned, each dim 1 or equal.
    const int64_t target[2] = {d.m, d.n};
    bool ok = c.rank() <= 2;
    for (int i = 0; ok && i < c.rank(); ++i) {
      const int64_t dim = c[c.rank() - 1 - i];
      ok = dim == 1 || dim == target[1 - i];
    }
    if (!ok) {
      return ctx.error("input C has shape " + c.to_string() + ", not broadcastable to [" +
                       std::to_string(d.m) + ", " + std::to_string(d.n) + "]");
    }
  }
  return d;
}

Status infer_gemm(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(GemmDims d, gemm_dims(ctx));
  outputs->push_back(TensorInfo{DType::kF32, Shape{d.m, d.n}});
  return Status();
}

OpCost cost_gemm(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  Result<GemmDims> d = gemm_dims(ctx);
  if (d.ok()) {
    c.flops =
        2.0 * static_cast<double>(d->m) * static_cast<double>(d->n) * static_cast<double>(d->k);
  }
  return c;
}

Status reference_gemm(const OpContext& ctx, std::span<const Tensor> inputs,
                      std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(GemmDims d, gemm_dims(ctx));
  const Tensor& a = inputs[0];
  const Tensor& b = inputs[1];
  float* y = outputs[0].data<float>();
  std::fill_n(y, d.m * d.n, 0.f);
  // A stored [M, K] (row stride K) or [K, M] (transA: element (i, k) at k * M + i).
  const MatrixView av =
      d.trans_a ? MatrixView{a.data<float>(), 1, d.m} : MatrixView{a.data<float>(), d.k, 1};
  const MatrixView bv =
      d.trans_b ? MatrixView{b.data<float>(), 1, d.k} : MatrixView{b.data<float>(), d.n, 1};
  Status s = gemm_f32(d.m, d.n, d.k, av, bv, y, d.n);
  if (!s.ok()) return ctx.wrap(s);

  // Y = alpha * Y + beta * C, with C broadcast through zero strides.
  const bool has_c = ctx.has_input(2);
  int64_t c_rs = 0, c_cs = 0;
  const float* c = nullptr;
  if (has_c) {
    const Shape& cs = inputs[2].shape();
    c = inputs[2].data<float>();
    const int64_t rows = cs.rank() == 2 ? cs[0] : 1;
    const int64_t cols = cs.rank() >= 1 ? cs[cs.rank() - 1] : 1;
    c_rs = rows == 1 ? 0 : cols;
    c_cs = cols == 1 ? 0 : 1;
  }
  if (!has_c && d.alpha == 1.f) return Status();
  for (int64_t i = 0; i < d.m; ++i) {
    float* row = y + i * d.n;
    if (has_c) {
      const float* crow = c + i * c_rs;
      for (int64_t j = 0; j < d.n; ++j) row[j] = d.alpha * row[j] + d.beta * crow[j * c_cs];
    } else {
      for (int64_t j = 0; j < d.n; ++j) row[j] *= d.alpha;
    }
  }
  return Status();
}

}  // namespace

const OpSchema kGemmSchema = {
    .kind = OpKind::kGemm,
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = true,
    .infer = infer_gemm,
    .cost = cost_gemm,
    .reference = reference_gemm,
};

}  // namespace tessera
