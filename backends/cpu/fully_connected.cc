// GEMM-shaped layers: Gemm and MatMul with a constant weight matrix run as XNNPACK fully
// connected operators (weights packed once, bias = beta * C, alpha folded into the weights), or
// at batch 1 on an AVX-512 CPU as Tessera's GEMV (gemv.h: the weights streamed once by all
// threads, each its own contiguous part);
// MatMul of two activations runs as one OpenBLAS sgemm per batch entry, spread over the pool.
#include <cstdio>
#include <cstring>
#include <optional>

#include "backends/cpu/fully_connected.h"

#include "backends/cpu/activation.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/gemv.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/openblas.h"
#include "backends/cpu/simd.h"

namespace tessera::cpu {

namespace {

// A float as a key: every bit of it ("%a").
std::string exact(float v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%a", static_cast<double>(v));
  return buf;
}

}  // namespace

Result<std::optional<FcParams>> gemm_params(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& node = req.node;
  const Tensor* b = ctx.constant(1);
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 2 || b == nullptr ||
      b->dtype() != DType::kF32 || b->rank() != 2) {
    return std::optional<FcParams>();
  }
  ASSIGN_OR_RETURN(int64_t trans_a, node.attrs.int_or("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, node.attrs.int_or("transB", 0));
  ASSIGN_OR_RETURN(float alpha, node.attrs.float_or("alpha", 1.f));
  ASSIGN_OR_RETURN(float beta, node.attrs.float_or("beta", 1.f));
  if (trans_a != 0) return std::optional<FcParams>();
  const int64_t m = ctx.input(0).shape[0], k = ctx.input(0).shape[1];
  const int64_t n = trans_b != 0 ? b->dim(0) : b->dim(1);
  if ((trans_b != 0 ? b->dim(1) : b->dim(0)) != k) return std::optional<FcParams>();
  std::optional<FcParams> p(std::in_place);
  // Bias: C must broadcast along rows (one value per column, or one value).
  if (ctx.has_input(2)) {
    const Tensor* c = ctx.constant(2);
    if (c == nullptr || c->dtype() != DType::kF32) return std::optional<FcParams>();
    const bool per_col = c->numel() == n && c->shape().dims().back() == n;
    if (!per_col && c->numel() != 1) return std::optional<FcParams>();
    p->bias.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j)
      p->bias[static_cast<size_t>(j)] = beta * c->data<float>()[per_col ? j : 0];
  }
  p->w = b->data<float>();
  if (alpha != 1.f) {
    p->scaled.assign(p->w, p->w + b->numel());
    for (float& v : p->scaled) v *= alpha;
    p->w = p->scaled.data();
  }
  p->batch = static_cast<size_t>(m);
  p->k = static_cast<size_t>(k);
  p->n = static_cast<size_t>(n);
  p->w_is_k_by_n = trans_b == 0;
  p->w_value = node.inputs[1];
  p->packing = "alpha=" + exact(alpha);
  if (ctx.has_input(2)) p->packing += " bias=" + std::to_string(node.inputs[2]) + "*" + exact(beta);
  return p;
}

Result<std::optional<FcParams>> fc_params(const KernelRequest& req) {
  if (req.node.kind == OpKind::kGemm) return gemm_params(req);
  if (req.node.kind == OpKind::kMatMul) return matmul_params(req);
  return std::optional<FcParams>();
}

std::optional<FcParams> matmul_params(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Shape& a = ctx.input(0).shape;
  const Shape& b = ctx.input(1).shape;
  const Tensor* bc = ctx.constant(1);
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(1).dtype != DType::kF32 || a.rank() < 1 ||
      b.rank() != 2 || bc == nullptr || b[0] != a[a.rank() - 1]) {
    return std::nullopt;
  }
  std::optional<FcParams> p(std::in_place);
  p->k = static_cast<size_t>(b[0]);
  p->n = static_cast<size_t>(b[1]);
  p->batch = static_cast<size_t>(a.numel() / std::max<int64_t>(b[0], 1));
  p->w = bc->data<float>();
  p->w_value = req.node.inputs[1];
  p->packing = "alpha=" + exact(1.f);  // as a Gemm without C: the two share one packing
  return p;
}

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

// Creates the XNNPACK operator for the product.
Result<std::unique_ptr<Kernel>> make_fc(const Node& node, const FcParams& p) {
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(node.attrs));
  const ClampRange clamp = clamp_of(act);
  if (!(clamp.min < clamp.max)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  auto kern = std::make_unique<XnnFullyConnectedKernel>();
  kern->what_ = "node " + quote_name(node.name) + " (" + op_name(node.kind) + ")";
  xnn_operator_t op = nullptr;
  RETURN_IF_ERROR(
      xnn_check(xnn_create_fully_connected_nc_f32(
                    p.k, p.n, p.k, p.n, p.w, p.bias.empty() ? nullptr : p.bias.data(), clamp.min,
                    clamp.max, p.w_is_k_by_n ? XNN_FLAG_TRANSPOSE_WEIGHTS : 0, &op),
                kern->what_));
  RETURN_IF_ERROR(kern->adopt(op, act, node.name));
  kern->batch_ = p.batch;
  kern->n_ = p.n;
  kern->packed_bytes_ = (p.k + 1) * p.n * sizeof(float);
  kern->desc_ = "xnnpack fully connected " + std::to_string(p.k) + "->" + std::to_string(p.n);
  return std::unique_ptr<Kernel>(std::move(kern));
}

// Batch 1 on Tessera's GEMV (gemv.h): the weights streamed once per run, each thread its own
// contiguous range of column panels at a time; bias and clamp in the kernel, other activations
// after.
class GemvKernel final : public Kernel {
 public:
  explicit GemvKernel(SharedPacking<PackedGemv> w) : gemv_(std::move(w)) {}
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    x_ = in[0].f32();
    y_ = out[0].f32();
    gemv_.bind(pool.num_threads());
    return post_.bind(y_, y_, 1, static_cast<size_t>(gemv_.w().n()), pool);
  }
  Status run(ThreadPool& pool) override {
    gemv_.run(pool, x_, y_, clamp_.min, clamp_.max);
    return post_.run(pool);
  }
  std::string describe() const override {
    return "tessera gemv " + std::to_string(gemv_.w().k()) + "->" + std::to_string(gemv_.w().n());
  }
  uint64_t owned_bytes() const override { return gemv_.owned_bytes(); }

  Gemv gemv_;
  ClampRange clamp_{};
  ActivationPass post_;
  const float* x_ = nullptr;
  float* y_ = nullptr;
};

Result<std::unique_ptr<Kernel>> make_gemv(const KernelRequest& req, const FcParams& p) {
  const Node& node = req.node;
  if (p.batch != 1 || !gemm_available()) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(node.attrs));
  // The panels hold W (alpha folded in) and the bias: shared between nodes with the same W,
  // transB, alpha, bias and beta.
  const std::string how = "gemv k=" + std::to_string(p.k) + " n=" + std::to_string(p.n) +
                          " kxn=" + std::to_string(p.w_is_k_by_n ? 1 : 0) + " " + p.packing;
  auto kern =
      std::make_unique<GemvKernel>(share_packing<PackedGemv>(req.packs, p.w_value, how, [&] {
        return PackedGemv::pack(p.w, static_cast<int64_t>(p.k), static_cast<int64_t>(p.n),
                                p.w_is_k_by_n, 1.f, p.bias.empty() ? nullptr : p.bias.data());
      }));
  kern->clamp_ = clamp_of(act);
  if (!activation_is_clamp(act)) {
    ASSIGN_OR_RETURN(kern->post_, ActivationPass::create(act, node.name));
  }
  return std::unique_ptr<Kernel>(std::move(kern));
}

// The bf16 GEMV (gemv.h) of a bf16 program: x and y held in bf16, bias and a fused ReLU / Clip
// in f32 before y is rounded.
class Bf16GemvKernel final : public Kernel {
 public:
  explicit Bf16GemvKernel(SharedPacking<PackedGemvBf16> w) : gemv_(std::move(w)) {}
  bool bf16_io() const override { return true; }
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    if (!in[0].bf16 || !out[0].bf16) return internal_error("bf16 gemv: bound to f32 tensors");
    x_ = static_cast<const uint16_t*>(in[0].data);
    y_ = static_cast<uint16_t*>(out[0].data);
    gemv_.bind(pool.num_threads());
    return Status();
  }
  Status run(ThreadPool& pool) override { return gemv_.run(pool, x_, y_, clamp_.min, clamp_.max); }
  std::string describe() const override {
    return "tessera bf16 gemv " + std::to_string(gemv_.w().k()) + "->" +
           std::to_string(gemv_.w().n());
  }
  uint64_t owned_bytes() const override { return gemv_.owned_bytes(); }

  GemvBf16 gemv_;
  ClampRange clamp_{};
  const uint16_t* x_ = nullptr;
  uint16_t* y_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_bf16_gemv(const KernelRequest& req) {
  if (!has_avx512_bf16()) return decline();
  ASSIGN_OR_RETURN(std::optional<FcParams> p, fc_params(req));
  if (!p || p->batch != 1 || p->k == 0 || p->n == 0) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(req.node.attrs));
  if (!activation_is_clamp(act)) return decline();
  const std::string how = "bf16 gemv k=" + std::to_string(p->k) + " n=" + std::to_string(p->n) +
                          " kxn=" + std::to_string(p->w_is_k_by_n ? 1 : 0) + " " + p->packing;
  auto kern = std::make_unique<Bf16GemvKernel>(
      share_packing<PackedGemvBf16>(req.packs, p->w_value, how, [&] {
        return PackedGemvBf16::pack(p->w, static_cast<int64_t>(p->k), static_cast<int64_t>(p->n),
                                    p->w_is_k_by_n, p->bias.empty() ? nullptr : p->bias.data());
      }));
  kern->clamp_ = clamp_of(act);
  return std::unique_ptr<Kernel>(std::move(kern));
}

namespace {

// The int8 GEMV (gemv.h) of an int8 program: x held in int8 (its QuantParam), y in f32 (as
// oneDNN's int8 matmul writes it: logits keep f32's resolution), bias and a fused ReLU / Clip in
// the f32 epilogue.
class Int8GemvKernel final : public Kernel {
 public:
  Int8GemvKernel(SharedPacking<PackedGemvInt8> w, QuantParam q)
      : gemv_(std::move(w), q.scale, q.zero_point, q.is_unsigned), q_(q) {}
  bool int8_io() const override { return true; }
  bool int8_output() const override { return false; }
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    if (!in[0].int8 || !(in[0].quant == q_) || out[0].int8 || out[0].bf16) {
      return internal_error("int8 gemv: bound to tensors of another precision");
    }
    x_ = static_cast<const uint8_t*>(in[0].data);
    y_ = out[0].f32();
    gemv_.bind(pool.num_threads());
    return Status();
  }
  Status run(ThreadPool& pool) override { return gemv_.run(pool, x_, y_, clamp_.min, clamp_.max); }
  std::string describe() const override {
    return "tessera int8 gemv " + std::to_string(gemv_.w().k()) + "->" +
           std::to_string(gemv_.w().n()) + (q_.is_unsigned ? " u8" : " s8") + "->f32";
  }
  uint64_t owned_bytes() const override { return gemv_.owned_bytes(); }

  GemvInt8 gemv_;
  QuantParam q_;
  ClampRange clamp_{};
  const uint8_t* x_ = nullptr;
  float* y_ = nullptr;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_int8_gemv(const KernelRequest& req,
                                               const std::vector<QuantParam>& quant) {
  if (!has_avx512_vnni()) return decline();
  const QuantParam in = quant_of(quant, req.node.inputs[0]);
  if (!in.valid()) return decline();
  ASSIGN_OR_RETURN(std::optional<FcParams> p, fc_params(req));
  if (!p || p->batch != 1 || p->k == 0 || p->n == 0 ||
      static_cast<int64_t>(p->k) > PackedGemvInt8::kMaxK) {
    return decline();
  }
  // x is read in logical order: a rank-4 input is held NHWC by the program (as for the bf16
  // and oneDNN int8 products), so only where both orders have the same bytes.
  const Shape& xs = req.ctx.input(0).shape;
  if (xs.rank() == 4 && !layout_trivial(xs)) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(req.node.attrs));
  if (!activation_is_clamp(act)) return decline();
  const std::string how = "int8 gemv k=" + std::to_string(p->k) + " n=" + std::to_string(p->n) +
                          " kxn=" + std::to_string(p->w_is_k_by_n ? 1 : 0) + " " + p->packing;
  auto kern = std::make_unique<Int8GemvKernel>(
      share_packing<PackedGemvInt8>(req.packs, p->w_value, how,
                                    [&] {
                                      return PackedGemvInt8::pack(
                                          p->w, static_cast<int64_t>(p->k),
                                          static_cast<int64_t>(p->n), p->w_is_k_by_n,
                                          p->bias.empty() ? nullptr : p->bias.data());
                                    }),
      in);
  kern->clamp_ = clamp_of(act);
  return std::unique_ptr<Kernel>(std::move(kern));
}

namespace {

Result<std::unique_ptr<Kernel>> make_gemm(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<FcParams> p, gemm_params(req));
  if (!p) return decline();
  return make_fc(req.node, *p);
}

Result<std::unique_ptr<Kernel>> make_gemm_gemv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<FcParams> p, gemm_params(req));
  if (!p) return decline();
  return make_gemv(req, *p);
}

Result<std::unique_ptr<Kernel>> make_matmul_gemv(const KernelRequest& req) {
  const std::optional<FcParams> p = matmul_params(req);
  if (!p) return decline();
  return make_gemv(req, *p);
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
  if (const std::optional<FcParams> p = matmul_params(req)) return make_fc(node, *p);
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
    {OpKind::kGemm, "tessera_gemv_f32", make_gemm_gemv, Isa::kAvx512f},
    {OpKind::kGemm, "xnnpack_fully_connected_nc_f32", make_gemm},
    {OpKind::kMatMul, "tessera_gemv_f32", make_matmul_gemv, Isa::kAvx512f},
    {OpKind::kMatMul, "xnnpack_fully_connected_nc_f32|openblas_sgemm", make_matmul},
};
const size_t kNumFullyConnectedKernels =
    sizeof(kFullyConnectedKernels) / sizeof(kFullyConnectedKernels[0]);

}  // namespace tessera::cpu
