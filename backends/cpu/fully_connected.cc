// GEMM-shaped layers: Gemm and MatMul with a constant weight matrix run as XNNPACK fully
// connected operators (weights packed once, bias = beta * C, alpha folded into the weights);
// MatMul of two activations runs as one OpenBLAS sgemm per batch entry, spread over the pool.
#include <cstring>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/openblas.h"

namespace tessera::cpu {

namespace {

class XnnFullyConnectedKernel final : public XnnOperatorKernel {
 public:
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    RETURN_IF_ERROR(xnn_check(xnn_setup_fully_connected_nc_f32(op_.get(), batch_, in[0].f32(),
                                                               out[0].f32(), pool.pthreadpool()),
                              what_));
    return post_.bind(out[0].f32(), out[0].f32(), batch_, n_, pool);
  }

  size_t batch_ = 0;
  size_t n_ = 0;
};

// Creates the operator for X[batch, k] * W -> [batch, n], W given as [k, n] (transposed) or
// [n, k].
Result<std::unique_ptr<Kernel>> make_fc(const Node& node, size_t batch, size_t k, size_t n,
                                        const float* w, bool w_is_k_by_n, const float* bias) {
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(node.attrs));
  const ClampRange clamp = clamp_of(act);
  if (!(clamp.min < clamp.max)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  auto kern = std::make_unique<XnnFullyConnectedKernel>();
  kern->what_ = "node '" + node.name + "' (" + op_name(node.kind) + ")";
  xnn_operator_t op = nullptr;
  RETURN_IF_ERROR(xnn_check(
      xnn_create_fully_connected_nc_f32(k, n, k, n, w, bias, clamp.min, clamp.max,
                                        w_is_k_by_n ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0, &op),
      kern->what_));
  RETURN_IF_ERROR(kern->adopt(op, act, node.name));
  kern->batch_ = batch;
  kern->n_ = n;
  kern->packed_bytes_ = (k + 1) * n * sizeof(float);
  kern->desc_ = "xnnpack fully connected " + std::to_string(k) + "->" + std::to_string(n);
  return std::unique_ptr<Kernel>(std::move(kern));
}

Result<std::unique_ptr<Kernel>> make_gemm(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& node = req.node;
  const Tensor* b = ctx.constant(1);
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 2 || b == nullptr ||
      b->dtype() != DType::kF32 || b->rank() != 2) {
    return decline();
  }
  ASSIGN_OR_RETURN(int64_t trans_a, node.attrs.int_or("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, node.attrs.int_or("transB", 0));
  ASSIGN_OR_RETURN(float alpha, node.attrs.float_or("alpha", 1.f));
  ASSIGN_OR_RETURN(float beta, node.attrs.float_or("beta", 1.f));
  if (trans_a != 0) return decline();
  const int64_t m = ctx.input(0).shape[0], k = ctx.input(0).shape[1];
  const int64_t n = trans_b != 0 ? b->dim(0) : b->dim(1);
  if ((trans_b != 0 ? b->dim(1) : b->dim(0)) != k) return decline();
  // Bias: C must broadcast along rows (one value per column, or one value).
  std::vector<float> bias;
  if (ctx.has_input(2)) {
    const Tensor* c = ctx.constant(2);
    if (c == nullptr || c->dtype() != DType::kF32) return decline();
    const bool per_col = c->numel() == n && c->shape().dims().back() == n;
    if (!per_col && c->numel() != 1) return decline();
    bias.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j)
      bias[static_cast<size_t>(j)] = beta * c->data<float>()[per_col ? j : 0];
  }
  std::vector<float> scaled;
  const float* w = b->data<float>();
  if (alpha != 1.f) {
    scaled.assign(w, w + b->numel());
    for (float& v : scaled) v *= alpha;
    w = scaled.data();
  }
  return make_fc(node, static_cast<size_t>(m), static_cast<size_t>(k), static_cast<size_t>(n), w,
                 trans_b == 0, bias.empty() ? nullptr : bias.data());
}

// Batched product of two activations on OpenBLAS: A[b, m, k] * B[b, k, n] (B may have no
// batch dims and be shared).
class BlasMatMulKernel final : public Kernel {
 public:
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    a_ = in[0].f32();
    b_ = static_cast<const float*>(in[1].data);
    y_ = out[0].f32();
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const OpenBlas& blas = openblas();
    pool.parallel_for(static_cast<size_t>(batch_), 1, [&](size_t lo, size_t hi) {
      for (size_t i = lo; i < hi; ++i) {
        const int64_t bi = b_batched_ ? static_cast<int64_t>(i) : 0;
        blas.sgemm(kRowMajor, kNoTrans, kNoTrans, static_cast<int>(m_), static_cast<int>(n_),
                   static_cast<int>(k_), 1.f, a_ + static_cast<int64_t>(i) * m_ * k_,
                   static_cast<int>(k_), b_ + bi * k_ * n_, static_cast<int>(n_), 0.f,
                   y_ + static_cast<int64_t>(i) * m_ * n_, static_cast<int>(n_));
      }
    });
    return post_.run(pool);
  }
  std::string describe() const override { return "openblas sgemm batched"; }

  int64_t batch_ = 1, m_ = 0, n_ = 0, k_ = 0;
  bool b_batched_ = false;
  const float* a_ = nullptr;
  const float* b_ = nullptr;
  float* y_ = nullptr;
  ActivationPass post_;
};

Result<std::unique_ptr<Kernel>> make_matmul(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& node = req.node;
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(1).dtype != DType::kF32 || a.rank() < 1 ||
      b.rank() < 2) {
    return decline();
  }
  const int64_t k = a[a.rank() - 1];
  const int64_t n = b[b.rank() - 1];
  if (b[b.rank() - 2] != k) return decline();
  const Tensor* bc = ctx.constant(1);
  if (bc != nullptr && b.rank() == 2) {
    return make_fc(node, static_cast<size_t>(a.numel() / std::max<int64_t>(k, 1)),
                   static_cast<size_t>(k), static_cast<size_t>(n), bc->data<float>(), true,
                   nullptr);
  }
  // Two activations: OpenBLAS when the batch dims match exactly (or B has none).
  if (bc != nullptr || !openblas().available() || a.rank() < 2) return decline();
  const bool b_batched = b.rank() > 2;
  if (b_batched) {
    if (b.rank() != a.rank()) return decline();
    for (int i = 0; i < a.rank() - 2; ++i) {
      if (a[i] != b[i]) return decline();
    }
  }
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(node.attrs));
  if (act.kind != ActivationKind::kNone) return decline();
  auto kern = std::make_unique<BlasMatMulKernel>();
  kern->m_ = a[a.rank() - 2];
  kern->k_ = k;
  kern->n_ = n;
  kern->batch_ = a.numel() / std::max<int64_t>(kern->m_ * k, 1);
  kern->b_batched_ = b_batched;
  return std::unique_ptr<Kernel>(std::move(kern));
}

}  // namespace

const KernelEntry kFullyConnectedKernels[] = {
    {OpKind::kGemm, "xnnpack_fully_connected_nc_f32", make_gemm},
    {OpKind::kMatMul, "xnnpack_fully_connected_nc_f32|openblas_sgemm", make_matmul},
};
const size_t kNumFullyConnectedKernels =
    sizeof(kFullyConnectedKernels) / sizeof(kFullyConnectedKernels[0]);

}  // namespace tessera::cpu
