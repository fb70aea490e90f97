// MatMul: numpy matmul semantics (ONNX MatMul-13).
//
//   A [..., M, K] x B [..., K, N] -> Y [batch..., M, N], the batch dims broadcast numpy-style.
//   A 1-D A is [K] promoted to [1, K] and the M dim is dropped from Y; a 1-D B is [K] promoted
//   to [K, 1] and the N dim is dropped.
//
// FLOPs: 2 * prod(batch) * M * N * K.
// Reference: ops/gemm_kernel.h per batch entry; when B has no batch (the usual weight matrix)
// A's batch dims fold into M and the whole product is one GEMM.
#include <algorithm>
#include <string>

#include "ops/gemm_kernel.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct MatMulDims {
  int64_t m = 1;
  int64_t n = 1;
  int64_t k = 0;
  std::vector<int64_t> batch;    // broadcast batch dims of Y
  std::vector<int64_t> a_batch;  // A's batch dims right-aligned to batch (1 where absent)
  std::vector<int64_t> b_batch;
  Shape out;
};

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

Result<MatMulDims> matmul_dims(const OpContext& ctx) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  RETURN_IF_ERROR(require_f32(ctx, 1));
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  if (a.rank() < 1 || b.rank() < 1) {
    return ctx.error("inputs must have rank >= 1, got A " + a.to_string() + " and B " +
                     b.to_string());
  }
  MatMulDims d;
  const bool a_vec = a.rank() == 1;
  const bool b_vec = b.rank() == 1;
  d.m = a_vec ? 1 : a[a.rank() - 2];
  d.k = a[a.rank() - 1];
  const int64_t kb = b_vec ? b[0] : b[b.rank() - 2];
  d.n = b_vec ? 1 : b[b.rank() - 1];
  if (kb != d.k) {
    return ctx.error("inner dimensions differ: A " + a.to_string() +
                     " has K = " + std::to_string(d.k) + ", B " + b.to_string() +
                     " has K = " + std::to_string(kb));
  }
  const int a_nb = a_vec ? 0 : a.rank() - 2;
  const int b_nb = b_vec ? 0 : b.rank() - 2;
  const int nb = std::max(a_nb, b_nb);
  d.batch.assign(static_cast<size_t>(nb), 1);
  d.a_batch.assign(static_cast<size_t>(nb), 1);
  d.b_batch.assign(static_cast<size_t>(nb), 1);
  for (int i = 0; i < a_nb; ++i) d.a_batch[static_cast<size_t>(nb - a_nb + i)] = a[i];
  for (int i = 0; i < b_nb; ++i) d.b_batch[static_cast<size_t>(nb - b_nb + i)] = b[i];
  for (size_t i = 0; i < d.batch.size(); ++i) {
    const int64_t x = d.a_batch[i], y = d.b_batch[i];
    if (x != y && x != 1 && y != 1) {
      return ctx.error("batch dims of A " + a.to_string() + " and B " + b.to_string() +
                       " do not broadcast");
    }
    d.batch[i] = x == 1 ? y : x;
  }
  std::vector<int64_t> out = d.batch;
  if (!a_vec) out.push_back(d.m);
  if (!b_vec) out.push_back(d.n);
  d.out = Shape(std::move(out));
  return d;
}

Status infer_matmul(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(MatMulDims d, matmul_dims(ctx));
  outputs->push_back(TensorInfo{DType::kF32, d.out});
  return Status();
}

OpCost cost_matmul(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  Result<MatMulDims> d = matmul_dims(ctx);
  if (d.ok()) {
    c.flops = 2.0 * static_cast<double>(product(d->batch)) * static_cast<double>(d->m) *
              static_cast<double>(d->n) * static_cast<double>(d->k);
  }
  return c;
}

Status reference_matmul(const OpContext& ctx, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(MatMulDims d, matmul_dims(ctx));
  const float* a = inputs[0].data<float>();
  const float* b = inputs[1].data<float>();
  float* y = outputs[0].data<float>();
  const int64_t total = product(d.batch);
  std::fill_n(y, total * d.m * d.n, 0.f);
  // A entries are row-major [M, K]; B entries [K, N] (a 1-D B is [K, 1]: row stride 1).
  const int64_t b_rs = d.n;

  if (product(d.b_batch) == 1) {
    // One B for every batch entry: fold A's batch into M (A's batch dims are Y's).
    Status s =
        gemm_f32(total * d.m, d.n, d.k, MatrixView{a, d.k, 1}, MatrixView{b, b_rs, 1}, y, d.n);
    return ctx.wrap(s);
  }

  // General broadcast: walk Y's batch index, with zero strides where an operand broadcasts.
  const size_t nb = d.batch.size();
  std::vector<int64_t> a_stride(nb, 0), b_stride(nb, 0), idx(nb, 0);
  int64_t as = d.m * d.k, bs = d.k * d.n;
  for (size_t i = nb; i-- > 0;) {
    a_stride[i] = d.a_batch[i] == 1 ? 0 : as;
    b_stride[i] = d.b_batch[i] == 1 ? 0 : bs;
    as *= d.a_batch[i];
    bs *= d.b_batch[i];
  }
  for (int64_t t = 0; t < total; ++t) {
    int64_t a_off = 0, b_off = 0;
    for (size_t i = 0; i < nb; ++i) {
      a_off += idx[i] * a_stride[i];
      b_off += idx[i] * b_stride[i];
    }
    Status s = gemm_f32(d.m, d.n, d.k, MatrixView{a + a_off, d.k, 1},
                        MatrixView{b + b_off, b_rs, 1}, y + t * d.m * d.n, d.n);
    if (!s.ok()) return ctx.wrap(s);
    for (size_t i = nb; i-- > 0;) {
      if (++idx[i] < d.batch[i]) break;
      idx[i] = 0;
    }
  }
  return Status();
}

}  // namespace

const OpSchema kMatMulSchema = {
    .kind = OpKind::kMatMul,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = true,
    .infer = infer_matmul,
    .cost = cost_matmul,
    .reference = reference_matmul,
};

}  // namespace tessera
