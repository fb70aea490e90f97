// Pooling on XNNPACK in NHWC: MaxPool, AveragePool (count_include_pad = 0, the only mode
// XNNPACK has), GlobalAveragePool; GlobalMaxPool with Tessera's own channel-vectorised loop, and
// the bf16 program's MaxPool (make_bf16_max_pool).
#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/simd.h"
#include "ops/conv_pool_util.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {

enum class PoolKind { kMax, kAverage, kGlobalAverage };

class XnnPoolKernel final : public NhwcIo<> {
 public:
  // Creates the operator for outputs `output_stride` floats apart per pixel (XNNPACK fixes the
  // stride at creation).
  using Create = std::function<xnn_status(size_t output_stride, xnn_operator_t* op)>;
  Status create(size_t output_stride) {
    xnn_operator_t op = nullptr;
    RETURN_IF_ERROR(xnn_check(create_(output_stride, &op), what_));
    op_.reset(op);
    output_stride_ = output_stride;
    return Status();
  }

  // The windowed pools (a global pool's 1x1 output is never a channel slice).
  bool writes_strided_output() const override { return create_ != nullptr; }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const Shape& x = in[0].shape;
    const size_t n = static_cast<size_t>(x[0]), h = static_cast<size_t>(x[2]),
                 w = static_cast<size_t>(x[3]);
    const size_t stride = static_cast<size_t>(out[0].pixel_stride_or_dense());
    if (create_ != nullptr && stride != output_stride_) RETURN_IF_ERROR(create(stride));
    switch (kind_) {
      case PoolKind::kMax:
        return xnn_check(xnn_setup_max_pooling2d_nhwc_f32(op_.get(), n, h, w, in[0].f32(),
                                                          out[0].f32(), pool.pthreadpool()),
                         what_);
      case PoolKind::kAverage:
        return xnn_check(xnn_setup_average_pooling2d_nhwc_f32(op_.get(), n, h, w, in[0].f32(),
                                                              out[0].f32(), pool.pthreadpool()),
                         what_);
      case PoolKind::kGlobalAverage:
        return xnn_check(xnn_setup_global_average_pooling_nwc_f32(op_.get(), n, h * w, in[0].f32(),
                                                                  out[0].f32(), pool.pthreadpool()),
                         what_);
    }
    return Status();
  }

  Status run(ThreadPool& pool) override {
    return xnn_check(xnn_run_operator(op_.get(), pool.pthreadpool()), what_);
  }
  std::string describe() const override { return desc_; }

  PoolKind kind_ = PoolKind::kMax;
  Create create_;  // windowed pools
  size_t output_stride_ = 0;
  XnnOperator op_;
  std::string what_;
  std::string desc_;
};

}  // namespace

Result<std::optional<XnnPoolWindow>> xnn_pool_window(const KernelRequest& req, bool average) {
  const OpContext& ctx = req.ctx;
  const Node& n = req.node;
  const std::optional<XnnPoolWindow> none;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 4) return none;
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return none;  // MaxPool Indices
  const Shape& xs = ctx.input(0).shape;
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, read_pool_kernel(ctx, 2));
  ForwardWindowOptions opt;
  ASSIGN_OR_RETURN(opt.ceil_mode, read_flag(ctx, "ceil_mode"));
  opt.pads_below_kernel = true;
  const int64_t in[2] = {xs[2], xs[3]};
  ASSIGN_OR_RETURN(WindowGeometry geo, forward_window(ctx, in, kernel, opt));
  if (average) {
    ASSIGN_OR_RETURN(bool include_pad, read_flag(ctx, "count_include_pad"));
    bool padded = false;
    for (int i = 0; i < 2; ++i) padded = padded || geo.pads_begin[i] > 0 || geo.pads_end[i] > 0;
    if ((include_pad && padded) || opt.ceil_mode) return none;
    if (geo.dilations[0] != 1 || geo.dilations[1] != 1) return none;
  }
  if (geo.kernel[0] * geo.kernel[1] <= 1) return none;  // XNNPACK rejects 1x1 windows
  // Ceil mode: extend the end padding so that XNNPACK's floor rounding gives the same size
  // (MaxPool ignores padding, so the extra cells change nothing).
  int64_t pe[2];
  for (int i = 0; i < 2; ++i) {
    pe[i] = std::max<int64_t>(0, (geo.output[i] - 1) * geo.strides[i] + geo.effective_kernel(i) -
                                     geo.input[i] - geo.pads_begin[i]);
    if (!opt.ceil_mode) pe[i] = geo.pads_end[i];
    const int64_t out =
        (geo.input[i] + geo.pads_begin[i] + pe[i] - geo.effective_kernel(i)) / geo.strides[i] + 1;
    if (out != geo.output[i]) return none;
  }
  const auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  XnnPoolWindow w;
  w.top = u(geo.pads_begin[0]);
  w.right = u(pe[1]);
  w.bottom = u(pe[0]);
  w.left = u(geo.pads_begin[1]);
  w.kh = u(geo.kernel[0]);
  w.kw = u(geo.kernel[1]);
  w.sh = u(geo.strides[0]);
  w.sw = u(geo.strides[1]);
  w.dh = u(geo.dilations[0]);
  w.dw = u(geo.dilations[1]);
  w.channels = static_cast<size_t>(xs[1]);
  return std::optional<XnnPoolWindow>(w);
}

namespace {

Result<std::unique_ptr<Kernel>> make_window_pool(const KernelRequest& req, PoolKind kind) {
  const Node& n = req.node;
  ASSIGN_OR_RETURN(std::optional<XnnPoolWindow> window,
                   xnn_pool_window(req, kind == PoolKind::kAverage));
  if (!window) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  if (!activation_is_clamp(act)) return decline();
  const ClampRange clamp = clamp_of(act);
  if (!(clamp.min < clamp.max)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  auto k = std::make_unique<XnnPoolKernel>();
  k->kind_ = kind;
  k->what_ = "node " + quote_name(n.name) + " (" + op_name(n.kind) + ")";
  const XnnPoolWindow& w = *window;
  const size_t c = w.channels;
  const uint32_t top = w.top, right = w.right, bottom = w.bottom, left = w.left, kh = w.kh,
                 kw = w.kw, sh = w.sh, sw = w.sw, dh = w.dh, dw = w.dw;
  if (kind == PoolKind::kMax) {
    k->create_ = [=](size_t stride, xnn_operator_t* op) {
      return xnn_create_max_pooling2d_nhwc_f32(top, right, bottom, left, kh, kw, sh, sw, dh, dw, c,
                                               c, stride, clamp.min, clamp.max, 0, op);
    };
  } else {
    k->create_ = [=](size_t stride, xnn_operator_t* op) {
      return xnn_create_average_pooling2d_nhwc_f32(top, right, bottom, left, kh, kw, sh, sw, c, c,
                                                   stride, clamp.min, clamp.max, 0, op);
    };
  }
  RETURN_IF_ERROR(k->create(c));
  k->desc_ = std::string("xnnpack ") + (kind == PoolKind::kMax ? "maxpool " : "avgpool ") +
             std::to_string(kh) + "x" + std::to_string(kw) + "/" + std::to_string(sh);
  return std::unique_ptr<Kernel>(std::move(k));
}

// ---- MaxPool on bf16 (a bf16 program) -----------------------------------------------------------
//
// NHWC bf16 in and out. The maximum of bf16 values is one of them: taken exactly, on the bits
// (AVX-512) or on the values widened to f32; a NaN in the window gives NaN (ops/max_pool.cc).
// Padding taps are skipped.

#if TESSERA_X86_64
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
// The maximum over `taps` pixels (`src[t]`, `c` channels each) into `dst`, 32 channels a step on
// the bf16 bits themselves: b ^ ((b >> 15) & 0x7fff) orders bf16 values as signed 16-bit
// integers (sign-magnitude to two's complement; an involution), so one vpmaxsw per tap.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void bf16_max_taps_avx512(
    const uint16_t* const* src, int taps, uint16_t* dst, int64_t c) {
  const __m512i mag = _mm512_set1_epi16(0x7fff), inf = _mm512_set1_epi16(0x7f80);
  for (int64_t ch = 0; ch < c; ch += 32) {
    const __mmask32 k = c - ch >= 32 ? __mmask32(0xffffffffu) : __mmask32((1u << (c - ch)) - 1);
    __m512i m = _mm512_set1_epi16(static_cast<int16_t>(0x8000));
    __mmask32 nan = 0;
    for (int t = 0; t < taps; ++t) {
      const __m512i v = _mm512_maskz_loadu_epi16(k, src[t] + ch);
      nan |= _mm512_cmpgt_epu16_mask(_mm512_and_si512(v, mag), inf);
      m = _mm512_max_epi16(m, _mm512_xor_si512(v, _mm512_and_si512(_mm512_srai_epi16(v, 15), mag)));
    }
    __m512i r = _mm512_xor_si512(m, _mm512_and_si512(_mm512_srai_epi16(m, 15), mag));
    r = _mm512_mask_mov_epi16(r, nan, _mm512_set1_epi16(0x7fc0));
    _mm512_mask_storeu_epi16(dst + ch, k, r);
  }
}
#pragma GCC diagnostic pop
#endif

void bf16_max_taps_scalar(const uint16_t* const* src, int taps, uint16_t* dst, int64_t c) {
  for (int64_t ch = 0; ch < c; ++ch) {
    float m = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (int t = 0; t < taps; ++t) {
      const uint32_t u = static_cast<uint32_t>(src[t][ch]) << 16;
      float v;
      std::memcpy(&v, &u, 4);
      nan = nan || v != v;
      m = std::max(m, v);
    }
    uint32_t u;
    std::memcpy(&u, &m, 4);
    dst[ch] = nan ? uint16_t{0x7fc0} : static_cast<uint16_t>(u >> 16);
  }
}

class Bf16MaxPoolKernel final : public Kernel {
 public:
  bool bf16_io() const override { return true; }
  void choose_layouts(std::span<const Layout>, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    std::fill(wanted.begin(), wanted.end(), Layout::kNHWC);
    produced[0] = Layout::kNHWC;
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    if (!in[0].bf16 || !out[0].bf16 || in[0].shape.rank() != 4)
      return internal_error(what_ + ": bound to tensors of another precision");
    x_ = static_cast<const uint16_t*>(in[0].data);
    y_ = static_cast<uint16_t*>(out[0].data);
    n_ = in[0].shape[0];
    c_ = in[0].shape[1];
    h_ = in[0].shape[2];
    w_ = in[0].shape[3];
    oh_ = out[0].shape[2];
    ow_ = out[0].shape[3];
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const XnnPoolWindow& w = win_;
    pool.parallel_for(static_cast<size_t>(n_ * oh_), 1, [&](size_t b, size_t e) {
      std::vector<const uint16_t*> taps(static_cast<size_t>(w.kh * w.kw));
      for (size_t row = b; row < e; ++row) {
        const int64_t img = static_cast<int64_t>(row) / oh_, oy = static_cast<int64_t>(row) % oh_;
        for (int64_t ox = 0; ox < ow_; ++ox) {
          int t = 0;
          for (uint32_t ky = 0; ky < w.kh; ++ky) {
            const int64_t iy = oy * w.sh - w.top + ky * w.dh;
            if (iy < 0 || iy >= h_) continue;
            for (uint32_t kx = 0; kx < w.kw; ++kx) {
              const int64_t ix = ox * w.sw - w.left + kx * w.dw;
              if (ix < 0 || ix >= w_) continue;
              taps[static_cast<size_t>(t++)] = x_ + ((img * h_ + iy) * w_ + ix) * c_;
            }
          }
          uint16_t* dst = y_ + ((img * oh_ + oy) * ow_ + ox) * c_;
#if TESSERA_X86_64
          if (avx512_) {
            bf16_max_taps_avx512(taps.data(), t, dst, c_);
            continue;
          }
#endif
          bf16_max_taps_scalar(taps.data(), t, dst, c_);
        }
      }
    });
    return Status();
  }
  std::string describe() const override {
    return "tessera bf16 maxpool " + std::to_string(win_.kh) + "x" + std::to_string(win_.kw) + "/" +
           std::to_string(win_.sh);
  }

  std::string what_;
  XnnPoolWindow win_;
  bool avx512_ = false;
  const uint16_t* x_ = nullptr;
  uint16_t* y_ = nullptr;
  int64_t n_ = 0, c_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_bf16_max_pool(const KernelRequest& req) {
  const Node& n = req.node;
  if (n.kind != OpKind::kMaxPool || req.ctx.input(0).dtype != DType::kF32) return decline();
  ASSIGN_OR_RETURN(std::optional<XnnPoolWindow> window, xnn_pool_window(req, /*average=*/false));
  if (!window) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  if (act.kind != ActivationKind::kNone) return decline();
  // Every window holds at least one input pixel (the first tap of the last window is inside).
  const Shape& xs = req.ctx.input(0).shape;
  const Shape& ys = req.graph.value(n.outputs[0]).info.shape;
  if (xs.rank() != 4 || ys.rank() != 4) return decline();
  const XnnPoolWindow& w = *window;
  if ((ys[2] - 1) * w.sh - static_cast<int64_t>(w.top) >= xs[2] ||
      (ys[3] - 1) * w.sw - static_cast<int64_t>(w.left) >= xs[3])
    return decline();
  auto k = std::make_unique<Bf16MaxPoolKernel>();
  k->what_ = "node " + quote_name(n.name) + " (MaxPool)";
  k->win_ = w;
#if TESSERA_X86_64
  k->avx512_ = has_avx512_bw_vl();
#endif
  return std::unique_ptr<Kernel>(std::move(k));
}

namespace {

Result<std::unique_ptr<Kernel>> make_max_pool(const KernelRequest& req) {
  return make_window_pool(req, PoolKind::kMax);
}
Result<std::unique_ptr<Kernel>> make_average_pool(const KernelRequest& req) {
  return make_window_pool(req, PoolKind::kAverage);
}

Result<std::unique_ptr<Kernel>> make_global_average_pool(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 4) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(req.node.attrs));
  if (!activation_is_clamp(act)) return decline();
  const ClampRange clamp = clamp_of(act);
  if (!(clamp.min < clamp.max)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  auto k = std::make_unique<XnnPoolKernel>();
  k->kind_ = PoolKind::kGlobalAverage;
  k->what_ = "node " + quote_name(req.node.name) + " (GlobalAveragePool)";
  const size_t c = static_cast<size_t>(ctx.input(0).shape[1]);
  xnn_operator_t op = nullptr;
  RETURN_IF_ERROR(xnn_check(
      xnn_create_global_average_pooling_nwc_f32(c, c, c, clamp.min, clamp.max, 0, &op), k->what_));
  k->op_.reset(op);
  k->desc_ = "xnnpack global avgpool";
  return std::unique_ptr<Kernel>(std::move(k));
}

// GlobalMaxPool over NHWC: a running max across pixels, vectorised over channels.
class GlobalMaxPoolKernel final : public NhwcIo<> {
 public:
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    x_ = in[0].f32();
    y_ = out[0].f32();
    n_ = in[0].shape[0];
    c_ = in[0].shape[1];
    hw_ = in[0].shape[2] * in[0].shape[3];
    return Status();
  }
  // Tasks are (image, block of kBlock channels), so one image is shared by the threads; small
  // inputs stay on the calling thread.
  Status run(ThreadPool& pool) override {
    constexpr int64_t kBlock = 64, kSerialElems = 16384;
    const int64_t blocks = (c_ + kBlock - 1) / kBlock;
    auto body = [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const int64_t img = static_cast<int64_t>(t) / blocks;
        const int64_t c0 = static_cast<int64_t>(t) % blocks * kBlock;
        const int64_t c1 = std::min(c_, c0 + kBlock);
        const float* x = x_ + img * hw_ * c_;
        float* y = y_ + img * c_;
        std::fill(y + c0, y + c1, -std::numeric_limits<float>::infinity());
        for (int64_t p = 0; p < hw_; ++p) {
          const float* row = x + p * c_;
          for (int64_t ch = c0; ch < c1; ++ch) {
            // NaN propagates like the reference (std::max would drop it when it comes second).
            y[ch] = (row[ch] > y[ch] || row[ch] != row[ch]) ? row[ch] : y[ch];
          }
        }
      }
    };
    const size_t tasks = static_cast<size_t>(n_ * blocks);
    if (n_ * hw_ * c_ < kSerialElems) {
      body(0, tasks);
    } else {
      pool.parallel_for(tasks, 1, body);
    }
    return Status();
  }
  std::string describe() const override { return "tessera global maxpool nhwc"; }

 private:
  const float* x_ = nullptr;
  float* y_ = nullptr;
  int64_t n_ = 0, c_ = 0, hw_ = 0;
};

Result<std::unique_ptr<Kernel>> make_global_max_pool(const KernelRequest& req) {
  if (req.ctx.input(0).dtype != DType::kF32 || req.ctx.input(0).shape.rank() != 4) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(req.node.attrs));
  if (act.kind != ActivationKind::kNone) return decline();
  return std::unique_ptr<Kernel>(new GlobalMaxPoolKernel());
}

}  // namespace

const KernelEntry kPoolKernels[] = {
    {OpKind::kMaxPool, "xnnpack_max_pooling2d_nhwc_f32", make_max_pool},
    {OpKind::kAveragePool, "xnnpack_average_pooling2d_nhwc_f32", make_average_pool},
    {OpKind::kGlobalAveragePool, "xnnpack_global_average_pooling_nwc_f32",
     make_global_average_pool},
    {OpKind::kGlobalMaxPool, "tessera_global_max_pool_nhwc_f32", make_global_max_pool},
};
const size_t kNumPoolKernels = sizeof(kPoolKernels) / sizeof(kPoolKernels[0]);

}  // namespace tessera::cpu
