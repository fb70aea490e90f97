// Element-wise layers: Add/Sub/Mul/Div on XNNPACK's broadcasting N-d operators, activation
// layers, a stand-alone BatchNormalization (per-channel scale and shift) and Softmax on the
// contiguous axis. All of them work in whichever layout their input arrives in, so they never
// force a conversion between NHWC layers.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/simd.h"
#include "ops/unary_math.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {

// ---- Binary ----------------------------------------------------------------------------------

// The shape right-aligned to `rank` with leading 1s.
Shape pad_to_rank(const Shape& s, int rank) {
  std::vector<int64_t> d(static_cast<size_t>(rank - s.rank()), 1);
  d.insert(d.end(), s.dims().begin(), s.dims().end());
  return Shape(std::move(d));
}

xnn_status create_binary_op(OpKind kind, const ClampRange& clamp, xnn_operator_t* op);

class XnnBinaryKernel final : public Kernel {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    // NHWC when the output is rank 4, some activation input already is NHWC, and every
    // lower-rank activation input has the same bytes in both layouts once padded.
    bool nhwc = false, possible = out_rank_ == 4;
    for (size_t i = 0; i < 2; ++i) {
      if (is_const_[i]) continue;
      if (in_shape_[i].rank() == 4 && available[i] == Layout::kNHWC) nhwc = true;
      if (in_shape_[i].rank() < 4 && !layout_trivial(pad_to_rank(in_shape_[i], 4)))
        possible = false;
    }
    const Layout l = nhwc && possible ? Layout::kNHWC : Layout::kNCHW;
    for (size_t i = 0; i < 2; ++i) wanted[i] = in_shape_[i].rank() == 4 ? l : Layout::kNCHW;
    produced[0] = l;
  }

  // XNNPACK (this snapshot) hands each of its threads whole rows of the innermost dimension it
  // is left with after merging dimensions, and two same-shape operands merge into one row: such
  // an Add ran on one thread. So the output is cut along its outermost non-unit dimension into
  // chunks of >= kChunkElems elements, one operator per chunk, run side by side on the pool
  // (each on its thread alone). Small outputs run as one operator on the calling thread.
  static constexpr int64_t kChunkElems = 16384;

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const bool nhwc = out[0].layout == Layout::kNHWC && out[0].shape.rank() == 4;
    const int rank = out[0].shape.rank();
    size_t dims[2][XNN_MAX_TENSOR_DIMS];
    const float* ptr[2];
    for (size_t i = 0; i < 2; ++i) {
      Shape s = pad_to_rank(in[i].shape, rank);
      ptr[i] = static_cast<const float*>(in[i].data);
      if (nhwc) {
        if (in[i].is_constant && !layout_trivial(s)) {
          // A full rank-4 constant: keep an NHWC copy (with XNNPACK's read padding).
          ASSIGN_OR_RETURN(const_copy_[i],
                           Tensor::create(DType::kF32, Shape{s[0], s[2], s[3], s[1]}));
          nchw_to_nhwc(ptr[i], const_copy_[i].data<float>(), s[0], s[1], s[2] * s[3], nullptr);
          ptr[i] = const_copy_[i].data<float>();
        }
        s = Shape{s[0], s[2], s[3], s[1]};
      }
      for (int d = 0; d < rank; ++d) dims[i][d] = static_cast<size_t>(s[d]);
    }
    // The chunks: along axis `a`, the first output dimension longer than 1 (all before it are
    // 1, so a chunk is a contiguous range of the output and of every operand not broadcast
    // along `a`).
    const Shape ps = out[0].physical_shape();
    const int64_t numel = out[0].numel();
    int a = 0;
    while (a < rank - 1 && ps[a] == 1) ++a;
    int64_t chunks = std::min<int64_t>(numel / kChunkElems, 4 * pool.num_threads());
    if (rank == 0 || pool.num_threads() < 2) chunks = 1;
    chunks = std::clamp<int64_t>(chunks, 1, std::max<int64_t>(1, rank > 0 ? ps[a] : 1));
    serial_ = chunks == 1 && numel < 2 * kChunkElems;
    ops_.clear();
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t lo = rank > 0 ? ps[a] * c / chunks : 0;
      const int64_t hi = rank > 0 ? ps[a] * (c + 1) / chunks : 0;
      size_t cd[2][XNN_MAX_TENSOR_DIMS];
      const float* cp[2];
      for (size_t i = 0; i < 2; ++i) {
        std::copy(dims[i], dims[i] + rank, cd[i]);
        cp[i] = ptr[i];
        if (chunks > 1 && dims[i][a] != 1) {
          int64_t inner = 1;
          for (int d = a + 1; d < rank; ++d) inner *= static_cast<int64_t>(dims[i][d]);
          cd[i][a] = static_cast<size_t>(hi - lo);
          cp[i] += lo * inner;
        }
      }
      int64_t out_inner = 1;
      for (int d = a + 1; d < rank; ++d) out_inner *= ps[d];
      XnnOperator op;
      if (c == 0 && op_) {
        op = std::move(op_);
      } else {
        xnn_operator_t raw = nullptr;
        RETURN_IF_ERROR(xnn_check(create_binary_op(kind_, clamp_, &raw), what_));
        op.reset(raw);
      }
      RETURN_IF_ERROR(
          xnn_check(setup(op.get(), rank, cd, cp, out[0].f32() + (chunks > 1 ? lo * out_inner : 0),
                          chunks > 1 || serial_ ? nullptr : pool.pthreadpool()),
                    what_));
      ops_.push_back(std::move(op));
    }
    const size_t channels = rank > 0 ? static_cast<size_t>(ps[rank - 1]) : 1;
    return post_.bind(out[0].f32(), out[0].f32(),
                      static_cast<size_t>(out[0].numel()) / std::max<size_t>(channels, 1), channels,
                      pool);
  }

  Status run(ThreadPool& pool) override {
    if (ops_.size() == 1) {
      RETURN_IF_ERROR(xnn_check(
          xnn_run_operator(ops_[0].get(), serial_ ? nullptr : pool.pthreadpool()), what_));
    } else {
      std::atomic<int> failed{static_cast<int>(xnn_status_success)};
      pool.parallel_for(ops_.size(), 1, [&](size_t b, size_t e) {
        for (size_t c = b; c < e; ++c) {
          const xnn_status st = xnn_run_operator(ops_[c].get(), nullptr);
          if (st != xnn_status_success) failed = static_cast<int>(st);
        }
      });
      RETURN_IF_ERROR(xnn_check(static_cast<xnn_status>(failed.load()), what_));
    }
    return post_.run(pool);
  }
  std::string describe() const override {
    return desc_ + (ops_.size() > 1 ? ", " + std::to_string(ops_.size()) + " chunks" : "");
  }

  // Sets up `op` (an operator of kind_) for one chunk.
  xnn_status setup(xnn_operator_t op, int rank, const size_t (&dims)[2][XNN_MAX_TENSOR_DIMS],
                   const float* const (&ptr)[2], float* y, pthreadpool_t threadpool) const {
    const size_t r = static_cast<size_t>(rank);
    switch (kind_) {
      case OpKind::kAdd:
        return xnn_setup_add_nd_f32(op, r, dims[0], r, dims[1], ptr[0], ptr[1], y, threadpool);
      case OpKind::kSub:
        return xnn_setup_subtract_nd_f32(op, r, dims[0], r, dims[1], ptr[0], ptr[1], y, threadpool);
      case OpKind::kMul:
        return xnn_setup_multiply_nd_f32(op, r, dims[0], r, dims[1], ptr[0], ptr[1], y, threadpool);
      default:
        return xnn_setup_divide_nd_f32(op, r, dims[0], r, dims[1], ptr[0], ptr[1], y, threadpool);
    }
  }

  OpKind kind_ = OpKind::kAdd;
  ClampRange clamp_{};
  int out_rank_ = 0;
  Shape in_shape_[2];
  bool is_const_[2] = {false, false};
  Tensor const_copy_[2];
  XnnOperator op_;                // created at build; becomes ops_[0] at bind
  std::vector<XnnOperator> ops_;  // one per chunk
  bool serial_ = false;
  ActivationPass post_;
  std::string what_;
  std::string desc_;
};

xnn_status create_binary_op(OpKind kind, const ClampRange& clamp, xnn_operator_t* op) {
  switch (kind) {
    case OpKind::kAdd:
      return xnn_create_add_nd_f32(clamp.min, clamp.max, 0, op);
    case OpKind::kSub:
      return xnn_create_subtract_nd_f32(clamp.min, clamp.max, 0, op);
    case OpKind::kMul:
      return xnn_create_multiply_nd_f32(clamp.min, clamp.max, 0, op);
    default:
      return xnn_create_divide_nd_f32(clamp.min, clamp.max, 0, op);
  }
}

Result<std::unique_ptr<Kernel>> make_binary(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& node = req.node;
  if (ctx.num_inputs() != 2 || ctx.input(0).dtype != DType::kF32 ||
      ctx.input(1).dtype != DType::kF32) {
    return decline();
  }
  const TensorInfo& out = req.graph.value(node.outputs[0]).info;
  const int rank = out.shape.rank();
  if (rank < 1 || rank > XNN_MAX_TENSOR_DIMS) return decline();
  // Element-wise ops on only constants are folded away; a lone constant operand is fine.
  if (ctx.constant(0) != nullptr && ctx.constant(1) != nullptr) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(node.attrs));
  const ClampRange clamp = clamp_of(act);
  if (!(clamp.min < clamp.max)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  auto k = std::make_unique<XnnBinaryKernel>();
  k->kind_ = node.kind;
  k->out_rank_ = rank;
  for (int i = 0; i < 2; ++i) {
    k->in_shape_[i] = ctx.input(i).shape;
    k->is_const_[i] = ctx.constant(i) != nullptr;
  }
  k->what_ = "node " + quote_name(node.name) + " (" + op_name(node.kind) + ")";
  k->clamp_ = clamp;
  xnn_operator_t op = nullptr;
  RETURN_IF_ERROR(xnn_check(create_binary_op(node.kind, clamp, &op), k->what_));
  k->op_.reset(op);
  if (!activation_is_clamp(act)) {
    ASSIGN_OR_RETURN(k->post_, ActivationPass::create(act, node.name));
  }
  k->desc_ =
      std::string("xnnpack ") + op_name(node.kind) + " nd" +
      (act.kind != ActivationKind::kNone ? std::string(" +") + activation_name(act.kind) : "");
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- Unary activations ------------------------------------------------------------------------

class UnaryKernel final : public Kernel {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    wanted[0] = available[0];
    produced[0] = available[0];
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const Shape ps = out[0].physical_shape();
    size_t channels = ps.rank() > 0 ? static_cast<size_t>(ps[ps.rank() - 1]) : 1;
    if (channels == 0) channels = 1;
    return pass_.bind(static_cast<const float*>(in[0].data), out[0].f32(),
                      static_cast<size_t>(out[0].numel()) / channels, channels, pool);
  }
  Status run(ThreadPool& pool) override { return pass_.run(pool); }
  std::string describe() const override {
    return std::string("activation ") + activation_name(pass_.activation().kind);
  }

  ActivationPass pass_;
};

Result<std::unique_ptr<Kernel>> make_unary(const KernelRequest& req) {
  if (req.ctx.input(0).dtype != DType::kF32 || req.ctx.constant(0) != nullptr) return decline();
  ASSIGN_OR_RETURN(std::optional<Activation> act, activation_of_node(req.ctx));
  if (!act) return decline();
  ASSIGN_OR_RETURN(Activation fused, parse_fused_activation(req.node.attrs));
  if (fused.kind != ActivationKind::kNone) return decline();
  auto k = std::make_unique<UnaryKernel>();
  ASSIGN_OR_RETURN(k->pass_, ActivationPass::create(*act, req.node.name));
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- SiLU (x * sigmoid(x)), fused by fuse_silu
// ----------------------------------------------------

// Blocks of kBlock values handed to the threads one at a time: XNNPACK's sigmoid of the block
// into y (each thread its own operator, set up per block and run on that thread), then y *= x
// while both are in the cache.
class FusedSiluKernel final : public Kernel {
 public:
  static constexpr int64_t kBlock = 16384;
  FusedSiluKernel(int x_input, std::string what) : x_input_(x_input), what_(std::move(what)) {}
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    // Element by element: any layout, as long as x, the sigmoid's view of it and y agree.
    std::fill(wanted.begin(), wanted.end(), available[static_cast<size_t>(x_input_)]);
    produced[0] = available[static_cast<size_t>(x_input_)];
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    x_ = in[static_cast<size_t>(x_input_)].f32();
    y_ = out[0].f32();
    n_ = out[0].numel();
    RETURN_IF_ERROR(ensure_xnnpack());
    ops_.clear();
    for (int t = 0; t < pool.num_threads(); ++t) {
      xnn_operator_t op = nullptr;
      RETURN_IF_ERROR(xnn_check(xnn_create_sigmoid_nc_f32(1, 1, 1, 0, &op), what_));
      ops_.emplace_back(op);
    }
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const float* x = x_;
    float* y = y_;
    std::atomic<bool> failed{false};
    pool.parallel_items(static_cast<size_t>((n_ + kBlock - 1) / kBlock), [&](int w, size_t b) {
      const int64_t lo = static_cast<int64_t>(b) * kBlock, len = std::min(kBlock, n_ - lo);
      xnn_operator_t op = ops_[static_cast<size_t>(w)].get();
      if (xnn_setup_sigmoid_nc_f32(op, static_cast<size_t>(len), x + lo, y + lo, nullptr) !=
              xnn_status_success ||
          xnn_run_operator(op, nullptr) != xnn_status_success) {
        failed.store(true, std::memory_order_relaxed);
        return;
      }
      for (int64_t i = lo; i < lo + len; ++i) y[i] *= x[i];
    });
    return failed.load() ? internal_error(what_ + ": XNNPACK sigmoid failed") : Status();
  }
  std::string describe() const override { return "tessera silu (x * xnnpack sigmoid, blocked)"; }

 private:
  int x_input_;
  std::string what_;
  const float* x_ = nullptr;
  float* y_ = nullptr;
  int64_t n_ = 0;
  std::vector<XnnOperator> ops_;
};

// ---- BatchNormalization -----------------------------------------------------------------------

class BatchNormKernel final : public Kernel {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    for (size_t i = 0; i < wanted.size(); ++i) wanted[i] = Layout::kNCHW;
    wanted[0] = available[0];
    produced[0] = available[0];
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    x_ = in[0].f32();
    y_ = out[0].f32();
    const Shape& s = in[0].shape;
    n_ = s[0];
    inner_ = 1;
    for (int i = 2; i < s.rank(); ++i) inner_ *= s[i];
    nhwc_ = in[0].layout == Layout::kNHWC && s.rank() == 4;
    return post_.bind(y_, y_, static_cast<size_t>(out[0].numel() / std::max<int64_t>(c_(), 1)),
                      static_cast<size_t>(c_()), pool);
  }
  Status run(ThreadPool& pool) override {
    const int64_t c = c_();
    if (nhwc_) {
      pool.parallel_for(static_cast<size_t>(n_ * inner_), 64, [&](size_t b, size_t e) {
        for (size_t p = b; p < e; ++p) {
          const float* x = x_ + static_cast<int64_t>(p) * c;
          float* y = y_ + static_cast<int64_t>(p) * c;
          for (int64_t ch = 0; ch < c; ++ch)
            y[ch] = x[ch] * scale_[static_cast<size_t>(ch)] + shift_[static_cast<size_t>(ch)];
        }
      });
    } else {
      pool.parallel_for(static_cast<size_t>(n_ * c), 1, [&](size_t b, size_t e) {
        for (size_t row = b; row < e; ++row) {
          const size_t ch = row % static_cast<size_t>(c);
          const float s = scale_[ch], t = shift_[ch];
          const float* x = x_ + static_cast<int64_t>(row) * inner_;
          float* y = y_ + static_cast<int64_t>(row) * inner_;
          for (int64_t i = 0; i < inner_; ++i) y[i] = x[i] * s + t;
        }
      });
    }
    return post_.run(pool);
  }
  std::string describe() const override { return "tessera batchnorm scale-shift"; }
  uint64_t owned_bytes() const override { return 2 * scale_.size() * sizeof(float); }

  int64_t c_() const { return static_cast<int64_t>(scale_.size()); }
  std::vector<float> scale_, shift_;
  ActivationPass post_;
  const float* x_ = nullptr;
  float* y_ = nullptr;
  int64_t n_ = 0, inner_ = 0;
  bool nhwc_ = false;
};

Result<std::unique_ptr<Kernel>> make_batch_norm(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() < 2 ||
      req.node.outputs.size() != 1) {
    return decline();
  }
  const Tensor* p[4];
  const int64_t c = ctx.input(0).shape[1];
  for (int i = 0; i < 4; ++i) {
    p[i] = ctx.constant(i + 1);
    if (p[i] == nullptr || p[i]->dtype() != DType::kF32 || p[i]->numel() != c) return decline();
  }
  ASSIGN_OR_RETURN(float eps, req.node.attrs.float_or("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(req.node.attrs));
  auto k = std::make_unique<BatchNormKernel>();
  k->scale_.resize(static_cast<size_t>(c));
  k->shift_.resize(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    // Same arithmetic as the reference: (x - mean) / sqrt(var + eps) * gamma + beta.
    const float s = p[0]->data<float>()[i] / std::sqrt(p[3]->data<float>()[i] + eps);
    k->scale_[static_cast<size_t>(i)] = s;
    k->shift_[static_cast<size_t>(i)] = p[1]->data<float>()[i] - p[2]->data<float>()[i] * s;
  }
  ASSIGN_OR_RETURN(k->post_, ActivationPass::create(act, req.node.name));
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- BatchNormalization on int8 -----------------------------------------------------------------
//
// y = act(x * scale[c] + shift[c]) on int8 NHWC tensors: with x = s_x (q - zp_x) and
// q_y = round(y / s_y) + zp_y, q_y = clamp(round(q * A[c] + B[c]) + zp_y) where
// A[c] = s_x scale[c] / s_y and B[c] = (shift[c] - s_x zp_x scale[c]) / s_y; ReLU and Clip become
// the clamp's bounds (a real 0 is q = zp_y). One rounding instead of the f32 path's three, so an
// element may differ from converting to f32 and back by one step.

#if TESSERA_X86_64
// GCC 12 warns about the _mm512_undefined_* placeholders inside the conversion intrinsics.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// One pixel's `c` channels with AVX-512 (16 at a time, the tail masked).
template <bool kInUnsigned, bool kOutUnsigned>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void int8_affine_avx512(
    const uint8_t* x, uint8_t* y, int64_t c, const float* a, const float* b, float zp, float lo,
    float hi) {
  for (int64_t ch = 0; ch < c; ch += 16) {
    const __mmask16 k = c - ch >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - ch)) - 1);
    const __m128i q8 = _mm_maskz_loadu_epi8(k, x + ch);
    const __m512i q32 = kInUnsigned ? _mm512_cvtepu8_epi32(q8) : _mm512_cvtepi8_epi32(q8);
    __m512 v = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q32), _mm512_maskz_loadu_ps(k, a + ch),
                               _mm512_maskz_loadu_ps(k, b + ch));
    v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
                      _mm512_set1_ps(zp));
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps(lo)), _mm512_set1_ps(hi));
    const __m512i r = _mm512_cvtps_epi32(v);
    const __m128i out = kOutUnsigned ? _mm512_cvtusepi32_epi8(r) : _mm512_cvtsepi32_epi8(r);
    _mm_mask_storeu_epi8(y + ch, k, out);
  }
}
#pragma GCC diagnostic pop
#endif

// One pixel's `c` channels: q_y = clamp(round(q_x * a[ch] + b[ch]) + zp_y, lo, hi) from x of
// quantisation qx into y of qy (AVX-512 where `avx512`, the same arithmetic on scalars else).
void int8_affine(const uint8_t* x, uint8_t* y, int64_t c, const float* a, const float* b,
                 QuantParam qx, QuantParam qy, float lo, float hi, bool avx512) {
  const float zp = static_cast<float>(qy.zero_point);
#if TESSERA_X86_64
  if (avx512) {
    if (qx.is_unsigned && qy.is_unsigned) int8_affine_avx512<true, true>(x, y, c, a, b, zp, lo, hi);
    if (qx.is_unsigned && !qy.is_unsigned)
      int8_affine_avx512<true, false>(x, y, c, a, b, zp, lo, hi);
    if (!qx.is_unsigned && qy.is_unsigned)
      int8_affine_avx512<false, true>(x, y, c, a, b, zp, lo, hi);
    if (!qx.is_unsigned && !qy.is_unsigned)
      int8_affine_avx512<false, false>(x, y, c, a, b, zp, lo, hi);
    return;
  }
#else
  (void)avx512;
#endif
  for (int64_t ch = 0; ch < c; ++ch) {
    const float q =
        qx.is_unsigned ? static_cast<float>(x[ch]) : static_cast<float>(static_cast<int8_t>(x[ch]));
    float v = std::nearbyint(q * a[ch] + b[ch]) + zp;
    v = std::min(std::max(v, lo), hi);
    y[ch] = qy.is_unsigned ? static_cast<uint8_t>(v) : static_cast<uint8_t>(static_cast<int8_t>(v));
  }
}

// Whether a per-channel kernel's operand has its channels innermost: [N, C], or rank 4 in NHWC
// (or a layout-trivial shape).
Status channels_innermost(const Operand& x, const std::string& what) {
  const Shape& s = x.shape;
  if ((s.rank() != 4 && s.rank() != 2) ||
      (s.rank() == 4 && x.layout != Layout::kNHWC && !layout_trivial(s)))
    return internal_error(what + ": channels are not innermost");
  return Status();
}

class Int8BatchNormKernel final : public Kernel {
 public:
  bool int8_io() const override { return true; }
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    for (size_t i = 0; i < wanted.size(); ++i) wanted[i] = Layout::kNCHW;
    wanted[0] = available[0];
    produced[0] = available[0];
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    if (!in[0].int8 || !out[0].int8 || !(in[0].quant == qx_) || !(out[0].quant == qy_))
      return internal_error(what_ + ": bound to tensors of another quantisation");
    RETURN_IF_ERROR(channels_innermost(in[0], what_));
    x_ = static_cast<const uint8_t*>(in[0].data);
    y_ = static_cast<uint8_t*>(out[0].data);
    pixels_ = in[0].numel() / std::max<int64_t>(c_(), 1);
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const int64_t c = c_();
    pool.parallel_for(static_cast<size_t>(pixels_), std::max<size_t>(1, 4096 / c + 1),
                      [&](size_t b, size_t e) {
                        for (size_t p = b; p < e; ++p) pixel(p, c);
                      });
    return Status();
  }
  void pixel(size_t p, int64_t c) const {
    const int64_t at = static_cast<int64_t>(p) * c;
    int8_affine(x_ + at, y_ + at, c, a_.data(), b_.data(), qx_, qy_, lo_, hi_, avx512_);
  }
  std::string describe() const override {
    return std::string("tessera int8 batchnorm scale-shift") + (relu_ ? " +relu" : "") +
           (avx512_ ? " (avx512)" : "");
  }
  uint64_t owned_bytes() const override { return 2 * a_.size() * sizeof(float); }

  int64_t c_() const { return static_cast<int64_t>(a_.size()); }
  std::string what_;
  QuantParam qx_, qy_;
  std::vector<float> a_, b_;
  float lo_ = 0, hi_ = 0;  // the output's bounds in q, with the activation's
  bool relu_ = false;
  bool avx512_ = false;
  const uint8_t* x_ = nullptr;
  uint8_t* y_ = nullptr;
  int64_t pixels_ = 0;
};

// ---- Per-channel scale-shift on bf16: BatchNormalization, Mul by a gate -------------------------
//
// y = act(x * a[c] + b[c]) on bf16 NHWC tensors (channels innermost): widened to f32 exactly,
// one multiply-add, rounded back to bf16 to nearest even (f32_to_bf16). The same arithmetic as
// the f32 kernels between two conversions, so the result equals the f32 round trip bit for bit.

#if TESSERA_X86_64
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// One pixel's `c` channels, 16 at a time (the tail masked); lo/hi clamp (ReLU, Clip; +-inf
// for none).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void bf16_affine_avx512(
    const uint16_t* x, uint16_t* y, int64_t c, const float* a, const float* b, float lo, float hi) {
  const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff);
  for (int64_t ch = 0; ch < c; ch += 16) {
    const __mmask16 k = c - ch >= 16 ? __mmask16(0xffff) : __mmask16((1u << (c - ch)) - 1);
    const __m512i w =
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, x + ch)), 16);
    __m512 v = _mm512_fmadd_ps(_mm512_castsi512_ps(w), _mm512_maskz_loadu_ps(k, a + ch),
                               _mm512_maskz_loadu_ps(k, b + ch));
    // max/min return the second operand for a NaN first one: clamp only numbers.
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    v = _mm512_mask_min_ps(v, ~nan, _mm512_max_ps(v, _mm512_set1_ps(lo)), _mm512_set1_ps(hi));
    const __m512i u = _mm512_castps_si512(v);
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u,
                         _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one))),
        16);
    r = _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
    _mm256_mask_storeu_epi16(y + ch, k, _mm512_cvtepi32_epi16(r));
  }
}
#pragma GCC diagnostic pop
#endif

// One pixel on scalars (no AVX-512 BW/VL), the same arithmetic.
void bf16_affine_scalar(const uint16_t* x, uint16_t* y, int64_t c, const float* a, const float* b,
                        float lo, float hi) {
  for (int64_t ch = 0; ch < c; ++ch) {
    float v = bf16_to_f32(x[ch]) * a[ch] + b[ch];
    if (v == v) v = std::min(std::max(v, lo), hi);
    y[ch] = f32_to_bf16(v);
  }
}

// Runs `pixel_fn(p)` over `pixels` pixels of `c` channels on the pool.
template <typename F>
void over_pixels(ThreadPool& pool, int64_t pixels, int64_t c, F&& pixel_fn) {
  pool.parallel_for(static_cast<size_t>(pixels),
                    std::max<size_t>(1, 4096 / std::max<int64_t>(c, 1) + 1),
                    [&](size_t b, size_t e) {
                      for (size_t p = b; p < e; ++p) pixel_fn(static_cast<int64_t>(p));
                    });
}

void bf16_affine(const uint16_t* x, uint16_t* y, int64_t c, const float* a, const float* b,
                 float lo, float hi) {
#if TESSERA_X86_64
  if (has_avx512_bw_vl()) return bf16_affine_avx512(x, y, c, a, b, lo, hi);
#endif
  bf16_affine_scalar(x, y, c, a, b, lo, hi);
}

// BatchNormalization of a bf16 program: bf16 NHWC (or [N, C]) in and out; ReLU or Clip fused.
class Bf16BatchNormKernel final : public Kernel {
 public:
  bool bf16_io() const override { return true; }
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    for (size_t i = 0; i < wanted.size(); ++i) wanted[i] = Layout::kNCHW;
    wanted[0] = available[0];
    produced[0] = available[0];
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    if (!in[0].bf16 || !out[0].bf16)
      return internal_error(what_ + ": bound to tensors of another precision");
    RETURN_IF_ERROR(channels_innermost(in[0], what_));
    x_ = static_cast<const uint16_t*>(in[0].data);
    y_ = static_cast<uint16_t*>(out[0].data);
    pixels_ = in[0].numel() / std::max<int64_t>(c(), 1);
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const int64_t ch = c();
    over_pixels(pool, pixels_, ch, [&](int64_t p) {
      bf16_affine(x_ + p * ch, y_ + p * ch, ch, a_.data(), b_.data(), lo_, hi_);
    });
    return Status();
  }
  std::string describe() const override {
    return std::string("tessera bf16 batchnorm scale-shift") + activation_;
  }
  uint64_t owned_bytes() const override { return 2 * a_.size() * sizeof(float); }
  int64_t c() const { return static_cast<int64_t>(a_.size()); }

  std::string what_, activation_;
  std::vector<float> a_, b_;
  float lo_ = -INFINITY, hi_ = INFINITY;
  const uint16_t* x_ = nullptr;
  uint16_t* y_ = nullptr;
  int64_t pixels_ = 0;
};

// What the bf16 and int8 Muls by a per-channel gate share: which input is the activation x
// (the other is the gate s, f32 [N or 1, C, 1, 1]), the layouts (x and y NHWC, s as it is), and
// the binding of x's geometry and the gate.
class ChannelGateKernel : public Kernel {
 public:
  size_t reduced_input() const override { return xi_; }
  void choose_layouts(std::span<const Layout>, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    for (size_t i = 0; i < wanted.size(); ++i) wanted[i] = Layout::kNCHW;
    wanted[xi_] = Layout::kNHWC;
    produced[0] = Layout::kNHWC;
  }

  std::string what_;
  size_t xi_ = 0;  // the activation; the gate is the other input

 protected:
  // x's geometry and the gate from the operands; `reduced` says whether x and y are bound in the
  // kernel's precision (the gate must be f32).
  Status bind_gate(std::span<const Operand> in, bool reduced) {
    const Operand& x = in[xi_];
    const Operand& g = in[1 - xi_];
    if (!reduced || g.int8 || g.bf16)
      return internal_error(what_ + ": bound to tensors of another precision");
    if (x.shape.rank() != 4 || (x.layout != Layout::kNHWC && !layout_trivial(x.shape)))
      return internal_error(what_ + ": channels are not innermost");
    n_ = x.shape[0];
    c_ = x.shape[1];
    hw_ = x.shape[2] * x.shape[3];
    if (g.numel() != c_ && g.numel() != n_ * c_)
      return internal_error(what_ + ": the gate has " + std::to_string(g.numel()) + " values for " +
                            std::to_string(c_) + " channels");
    gate_batch_ = g.numel() == n_ * c_ && n_ > 1;
    gate_ = g.f32();
    return Status();
  }
  // The gate of image n.
  const float* gate(int64_t n) const { return gate_ + (gate_batch_ ? n * c_ : 0); }

  int64_t n_ = 0, c_ = 0, hw_ = 0;
  bool gate_batch_ = false;  // a gate per image, not one for all
  const float* gate_ = nullptr;
};

// Mul of a bf16 program by a per-channel f32 gate (as Int8ChannelGateKernel below): y = x * s[n,
// c].
class Bf16ChannelGateKernel final : public ChannelGateKernel {
 public:
  bool bf16_io() const override { return true; }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    RETURN_IF_ERROR(bind_gate(in, in[xi_].bf16 && out[0].bf16));
    x_ = static_cast<const uint16_t*>(in[xi_].data);
    y_ = static_cast<uint16_t*>(out[0].data);
    zeros_.assign(static_cast<size_t>(c_), 0.f);
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const int64_t c = c_;
    over_pixels(pool, n_ * hw_, c, [&](int64_t p) {
      bf16_affine(x_ + p * c, y_ + p * c, c, gate(p / hw_), zeros_.data(), -INFINITY, INFINITY);
    });
    return Status();
  }
  std::string describe() const override { return "tessera bf16 mul by channel gate"; }

 private:
  const uint16_t* x_ = nullptr;
  uint16_t* y_ = nullptr;
  std::vector<float> zeros_;
};

// ---- Mul by a per-channel gate on int8 ----------------------------------------------------------
//
// y = x * s[n, c] with x int8 NHWC [N, C, H, W] and the gate s f32 [N or 1, C, 1, 1] (a
// squeeze-and-excitation block's sigmoid or hard-sigmoid, computed at run time): the affine
// requantisation of the int8 BatchNormalization with A[n, c] = s_x s[n, c] / s_y and
// B[n, c] = -s_x zp_x s[n, c] / s_y, made for each run from the gate. So the gated tensor stays in
// int8 and the block costs no conversion of it. One rounding: within one step of the f32 round
// trip.

class Int8ChannelGateKernel final : public ChannelGateKernel {
 public:
  bool int8_io() const override { return true; }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    const Operand& x = in[xi_];
    RETURN_IF_ERROR(bind_gate(in, x.int8 && out[0].int8 && x.quant == qx_ && out[0].quant == qy_));
    x_ = static_cast<const uint8_t*>(x.data);
    y_ = static_cast<uint8_t*>(out[0].data);
    a_.resize(static_cast<size_t>(n_ * c_));
    b_.resize(a_.size());
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const float k = qx_.scale / qy_.scale, zx = static_cast<float>(qx_.zero_point);
    for (int64_t n = 0; n < n_; ++n) {
      const float* g = gate(n);
      for (int64_t ch = 0; ch < c_; ++ch) {
        const float a = k * g[ch];
        a_[static_cast<size_t>(n * c_ + ch)] = a;
        b_[static_cast<size_t>(n * c_ + ch)] = -zx * a;
      }
    }
    const int64_t c = c_;
    pool.parallel_for(static_cast<size_t>(n_ * hw_), std::max<size_t>(1, 4096 / c + 1),
                      [&](size_t b, size_t e) {
                        for (size_t p = b; p < e; ++p) pixel(p, c);
                      });
    return Status();
  }
  void pixel(size_t p, int64_t c) const {
    const int64_t at = static_cast<int64_t>(p) * c;
    const size_t row = static_cast<size_t>(static_cast<int64_t>(p) / hw_ * c);
    int8_affine(x_ + at, y_ + at, c, a_.data() + row, b_.data() + row, qx_, qy_, lo_, hi_, avx512_);
  }
  std::string describe() const override {
    return std::string("tessera int8 mul by channel gate ") + (qx_.is_unsigned ? "u8" : "s8") +
           "->" + (qy_.is_unsigned ? "u8" : "s8") + (avx512_ ? " (avx512)" : "");
  }

  QuantParam qx_, qy_;
  float lo_ = 0, hi_ = 0;
  bool avx512_ = false;
  const uint8_t* x_ = nullptr;
  uint8_t* y_ = nullptr;
  std::vector<float> a_, b_;  // per image and channel, made each run
};

}  // namespace

// Which input of a Mul is the activation x [N, C, H, W] that the other, an f32 gate
// [N or 1, C, 1, 1] (or [C, 1, 1]) computed at run time, scales per channel; -1 for other Muls.
Result<int> channel_gate_input(const KernelRequest& req) {
  const Node& n = req.node;
  if (n.kind != OpKind::kMul || n.inputs.size() != 2 || n.outputs.size() != 1) return -1;
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  if (act.kind != ActivationKind::kNone) return -1;
  const TensorInfo& out = req.graph.value(n.outputs[0]).info;
  if (out.dtype != DType::kF32 || out.shape.rank() != 4) return -1;
  int xi = -1;
  for (int i = 0; i < 2; ++i) {
    const Value& v = req.graph.value(n.inputs[static_cast<size_t>(i)]);
    if (!v.is_constant && v.info.dtype == DType::kF32 && v.info.shape == out.shape) {
      if (xi >= 0) return -1;  // both full size: not a gate
      xi = i;
    }
  }
  if (xi < 0) return -1;
  const Value& gv = req.graph.value(n.inputs[static_cast<size_t>(1 - xi)]);
  if (gv.is_constant || gv.info.dtype != DType::kF32) return -1;
  const Shape& gs = gv.info.shape;
  const int64_t c = out.shape[1];
  const bool gate_shape = (gs.rank() == 4 && (gs[0] == 1 || gs[0] == out.shape[0]) && gs[1] == c &&
                           gs[2] == 1 && gs[3] == 1) ||
                          (gs.rank() == 3 && gs[0] == c && gs[1] == 1 && gs[2] == 1);
  return gate_shape ? xi : -1;
}

Result<std::unique_ptr<Kernel>> make_bf16_channel_gate(const KernelRequest& req) {
  ASSIGN_OR_RETURN(int xi, channel_gate_input(req));
  if (xi < 0) return decline();
  auto k = std::make_unique<Bf16ChannelGateKernel>();
  k->what_ = "node " + quote_name(req.node.name) + " (Mul)";
  k->xi_ = static_cast<size_t>(xi);
  return std::unique_ptr<Kernel>(std::move(k));
}

Result<std::unique_ptr<Kernel>> make_bf16_batch_norm(const KernelRequest& req) {
  const Node& n = req.node;
  if (n.kind != OpKind::kBatchNormalization || n.inputs.empty() || n.outputs.size() != 1)
    return decline();
  const int rank = req.ctx.input(0).shape.rank();
  if (rank != 4 && rank != 2) return decline();
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> f32, make_batch_norm(req));
  if (f32 == nullptr) return decline();
  const auto& bn = static_cast<const BatchNormKernel&>(*f32);
  const Activation& act = bn.post_.activation();
  auto k = std::make_unique<Bf16BatchNormKernel>();
  k->what_ = "node " + quote_name(n.name) + " (BatchNormalization)";
  if (act.kind == ActivationKind::kRelu) {
    k->lo_ = 0.f;
    k->activation_ = " +relu";
  } else if (act.kind == ActivationKind::kClip) {
    k->lo_ = act.alpha;
    k->hi_ = act.beta;
    k->activation_ = " +clip";
  } else if (act.kind != ActivationKind::kNone) {
    return decline();
  }
  k->a_ = bn.scale_;
  k->b_ = bn.shift_;
  return std::unique_ptr<Kernel>(std::move(k));
}

Result<std::unique_ptr<Kernel>> make_int8_channel_gate(const KernelRequest& req,
                                                       const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  ASSIGN_OR_RETURN(int xi, channel_gate_input(req));
  if (xi < 0) return decline();
  const QuantParam qx = quant_of(quant, n.inputs[static_cast<size_t>(xi)]);
  const QuantParam qy = quant_of(quant, n.outputs[0]);
  if (!qx.valid() || !qy.valid()) return decline();
  auto k = std::make_unique<Int8ChannelGateKernel>();
  k->what_ = "node " + quote_name(n.name) + " (Mul)";
  k->xi_ = static_cast<size_t>(xi);
  k->qx_ = qx;
  k->qy_ = qy;
  k->lo_ = qy.is_unsigned ? 0.f : -128.f;
  k->hi_ = qy.is_unsigned ? 255.f : 127.f;
#if TESSERA_X86_64
  k->avx512_ = has_avx512_bw_vl();
#endif
  return std::unique_ptr<Kernel>(std::move(k));
}

namespace {

// ---- Softmax ------------------------------------------------------------------------------------

class XnnSoftmaxKernel final : public Kernel {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    // The normalised axis must be contiguous: the last logical axis, or C of an NHWC tensor.
    (void)available;
    const Layout need = (axis_ == rank_ - 1) ? Layout::kNCHW : Layout::kNHWC;
    wanted[0] = need;
    produced[0] = need;
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const int64_t len = in[0].shape[axis_];
    const bool contiguous = axis_ == rank_ - 1 || in[0].layout == Layout::kNHWC;
    if (!contiguous) return internal_error(what_ + ": softmax axis is not contiguous");
    RETURN_IF_ERROR(ensure_xnnpack());
    xnn_operator_t op = nullptr;
    const size_t c = static_cast<size_t>(len);
    RETURN_IF_ERROR(xnn_check(xnn_create_softmax_nc_f32(c, c, c, 0, &op), what_));
    op_.reset(op);
    return xnn_check(
        xnn_setup_softmax_nc_f32(op, static_cast<size_t>(in[0].numel() / std::max<int64_t>(len, 1)),
                                 in[0].f32(), out[0].f32(), pool.pthreadpool()),
        what_);
  }
  Status run(ThreadPool& pool) override {
    return xnn_check(xnn_run_operator(op_.get(), pool.pthreadpool()), what_);
  }
  std::string describe() const override { return "xnnpack softmax"; }

  int rank_ = 0;
  int axis_ = 0;
  XnnOperator op_;
  std::string what_;
};

Result<std::unique_ptr<Kernel>> make_softmax(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() < 1) return decline();
  ASSIGN_OR_RETURN(int64_t axis, req.node.attrs.int_or("axis", -1));
  const int rank = ctx.input(0).shape.rank();
  if (axis < -rank || axis >= rank) return decline();
  if (axis < 0) axis += rank;
  if (axis != rank - 1 && !(rank == 4 && axis == 1)) return decline();
  if (ctx.input(0).shape[static_cast<int>(axis)] == 0) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(req.node.attrs));
  if (act.kind != ActivationKind::kNone) return decline();
  auto k = std::make_unique<XnnSoftmaxKernel>();
  k->rank_ = rank;
  k->axis_ = static_cast<int>(axis);
  k->what_ = "node " + quote_name(req.node.name) + " (Softmax)";
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- Element-wise math (Sqrt, Exp, Log, Erf, Abs, Neg, Reciprocal, Softplus, Mish, Gelu)
// ---------

// The reference's element function (ops/unary_math.h), over tiles of the tensor spread on the
// pool's threads; in whichever layout the input arrives.
class UnaryMathKernel final : public Kernel {
 public:
  static constexpr size_t kTile = 4096;

  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    wanted[0] = available[0];
    produced[0] = available[0];
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    x_ = static_cast<const float*>(in[0].data);
    y_ = out[0].f32();
    n_ = static_cast<size_t>(out[0].numel());
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const UnaryMath m = m_;
    const float* x = x_;
    float* y = y_;
    pool.parallel_for(n_, kTile, [m, x, y](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) y[i] = apply_unary_math(m, x[i]);
    });
    return Status();
  }
  std::string describe() const override {
    return std::string("tessera ") + op_name(m_.kind) + (m_.gelu_tanh ? " tanh" : "") +
           " f32 (threads)";
  }

  UnaryMath m_;
  const float* x_ = nullptr;
  float* y_ = nullptr;
  size_t n_ = 0;
};

Result<std::unique_ptr<Kernel>> make_unary_math(const KernelRequest& req) {
  if (req.ctx.input(0).dtype != DType::kF32 || req.ctx.constant(0) != nullptr) return decline();
  auto k = std::make_unique<UnaryMathKernel>();
  ASSIGN_OR_RETURN(k->m_, unary_math_of_node(req.ctx));
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- PRelu with one slope per channel (or one for all) ------------------------------------------

// y = x < 0 ? slope[c] * x : x for an input of rank >= 2 whose slope varies only along dimension
// 1 (shape [C, 1, ..., 1] or [1] or []): rows of the NCHW plane, or pixels of NHWC, on the
// pool's threads.
class ChannelPReluKernel final : public Kernel {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    wanted[0] = available[0];
    produced[0] = available[0];
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    x_ = static_cast<const float*>(in[0].data);
    y_ = out[0].f32();
    const Shape& s = out[0].shape;
    channels_ = s[1];
    inner_ = s.numel() / std::max<int64_t>(1, s[0] * s[1]);
    outer_ = s[0];
    nhwc_ = out[0].layout == Layout::kNHWC && s.rank() == 4;
    slope_.assign(static_cast<size_t>(channels_), 0.f);
    const Tensor& t = *in[1].constant;
    for (int64_t c = 0; c < channels_; ++c) {
      slope_[static_cast<size_t>(c)] = t.data<float>()[t.numel() == 1 ? 0 : c];
    }
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const float* x = x_;
    float* y = y_;
    const float* s = slope_.data();
    const int64_t c = channels_, inner = inner_;
    if (nhwc_) {  // pixels of c channels
      const size_t pixels = static_cast<size_t>(outer_ * inner);
      pool.parallel_for(pixels, 256, [=](size_t begin, size_t end) {
        for (size_t p = begin; p < end; ++p) {
          const float* xp = x + static_cast<int64_t>(p) * c;
          float* yp = y + static_cast<int64_t>(p) * c;
          for (int64_t k = 0; k < c; ++k) yp[k] = xp[k] < 0.f ? s[k] * xp[k] : xp[k];
        }
      });
    } else {  // rows of `inner` elements, one per (batch, channel)
      pool.parallel_for(static_cast<size_t>(outer_ * c), 1, [=](size_t begin, size_t end) {
        for (size_t r = begin; r < end; ++r) {
          const float a = s[static_cast<int64_t>(r) % c];
          const float* xr = x + static_cast<int64_t>(r) * inner;
          float* yr = y + static_cast<int64_t>(r) * inner;
          for (int64_t i = 0; i < inner; ++i) yr[i] = xr[i] < 0.f ? a * xr[i] : xr[i];
        }
      });
    }
    return Status();
  }
  std::string describe() const override {
    return std::string("tessera prelu per-channel f32 ") + (nhwc_ ? "nhwc" : "nchw");
  }

  const float* x_ = nullptr;
  float* y_ = nullptr;
  int64_t channels_ = 1, inner_ = 1, outer_ = 1;
  bool nhwc_ = false;
  std::vector<float> slope_;
};

Result<std::unique_ptr<Kernel>> make_channel_prelu(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Tensor* slope = ctx.constant(1);
  const Shape& x = ctx.input(0).shape;
  if (ctx.input(0).dtype != DType::kF32 || ctx.constant(0) != nullptr || slope == nullptr ||
      x.rank() < 2) {
    return decline();
  }
  // The slope must vary along dimension 1 only: rank <= rank(x) - 1 with [C, 1, ...] (right-
  // aligned to dims 1..), or a single value.
  const Shape& s = slope->shape();
  if (slope->numel() != 1) {
    if (s.rank() != x.rank() - 1 || s[0] != x[1]) return decline();
    for (int d = 1; d < s.rank(); ++d) {
      if (s[d] != 1) return decline();
    }
  }
  return std::unique_ptr<Kernel>(std::make_unique<ChannelPReluKernel>());
}

}  // namespace

std::unique_ptr<Kernel> make_fused_silu(int x_input, const std::string& mul_name) {
  return std::make_unique<FusedSiluKernel>(x_input, "node " + quote_name(mul_name) + " (SiLU)");
}

const KernelEntry kElementwiseKernels[] = {
    {OpKind::kAdd, "xnnpack_add_nd_f32", make_binary},
    {OpKind::kSub, "xnnpack_subtract_nd_f32", make_binary},
    {OpKind::kMul, "xnnpack_multiply_nd_f32", make_binary},
    {OpKind::kDiv, "xnnpack_divide_nd_f32", make_binary},
    {OpKind::kRelu, "xnnpack_clamp_nc_f32", make_unary},
    {OpKind::kClip, "xnnpack_clamp_nc_f32", make_unary},
    {OpKind::kLeakyRelu, "xnnpack_leaky_relu_nc_f32", make_unary},
    {OpKind::kSigmoid, "xnnpack_sigmoid_nc_f32", make_unary},
    {OpKind::kHardSwish, "xnnpack_hardswish_nc_f32", make_unary},
    {OpKind::kHardSigmoid, "tessera_hard_sigmoid_f32", make_unary},
    {OpKind::kTanh, "tessera_tanh_f32", make_unary},
    {OpKind::kBatchNormalization, "tessera_batchnorm_f32", make_batch_norm},
    {OpKind::kSoftmax, "xnnpack_softmax_nc_f32", make_softmax},
    {OpKind::kSqrt, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kExp, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kLog, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kErf, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kAbs, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kNeg, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kReciprocal, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kSoftplus, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kMish, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kGelu, "tessera_unary_math_f32", make_unary_math},
    {OpKind::kPRelu, "tessera_prelu_channel_f32", make_channel_prelu},
};
const size_t kNumElementwiseKernels = sizeof(kElementwiseKernels) / sizeof(kElementwiseKernels[0]);

Result<std::unique_ptr<Kernel>> make_int8_batch_norm(const KernelRequest& req,
                                                     const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  auto q = [&](ValueId v) { return quant_of(quant, v); };
  if (n.kind != OpKind::kBatchNormalization || n.inputs.empty() || n.outputs.size() != 1)
    return decline();
  const QuantParam qx = q(n.inputs[0]), qy = q(n.outputs[0]);
  if (!qx.valid() || !qy.valid()) return decline();
  // Channels innermost: rank 4 (int8 tensors are NHWC) or [N, C]; other ranks keep logical order.
  const int rank = req.ctx.input(0).shape.rank();
  if (rank != 4 && rank != 2) return decline();
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> f32, make_batch_norm(req));
  if (f32 == nullptr) return decline();
  const auto& bn = static_cast<const BatchNormKernel&>(*f32);
  const Activation& act = bn.post_.activation();
  auto k = std::make_unique<Int8BatchNormKernel>();
  k->what_ = "node " + quote_name(n.name) + " (BatchNormalization)";
  k->qx_ = qx;
  k->qy_ = qy;
  k->lo_ = qy.is_unsigned ? 0.f : -128.f;
  k->hi_ = qy.is_unsigned ? 255.f : 127.f;
  const float zp = static_cast<float>(qy.zero_point);
  if (act.kind == ActivationKind::kRelu) {
    k->relu_ = true;
    k->lo_ = std::max(k->lo_, zp);
  } else if (act.kind == ActivationKind::kClip) {
    k->lo_ = std::max(k->lo_, std::nearbyint(act.alpha / qy.scale) + zp);
    k->hi_ = std::min(k->hi_, std::nearbyint(act.beta / qy.scale) + zp);
  } else if (act.kind != ActivationKind::kNone) {
    return decline();  // activations that do not commute with the requantisation stay f32
  }
  const size_t c = bn.scale_.size();
  k->a_.resize(c);
  k->b_.resize(c);
  for (size_t i = 0; i < c; ++i) {
    k->a_[i] = qx.scale * bn.scale_[i] / qy.scale;
    k->b_[i] =
        (bn.shift_[i] - qx.scale * static_cast<float>(qx.zero_point) * bn.scale_[i]) / qy.scale;
  }
#if TESSERA_X86_64
  k->avx512_ = has_avx512_bw_vl();
#endif
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace tessera::cpu
