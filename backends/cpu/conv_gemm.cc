// Dense convolution as a GEMM in NHWC: Y[pixels x K] = X'[pixels x (kh*kw*C)] * W', where X' is
// X itself for a 1x1, stride-1, unpadded convolution (no copy at all) and the im2col rows
// otherwise, and W' = the weights as [(ky, kx, c) x K], prepared once at build time. Two
// variants share the geometry and the im2col gather:
//
//   tessera_gemm_conv   Tessera's AVX-512 GEMM (gemm.h): W' packed once into its panels, the
//                       im2col rows gathered block by block straight into the A block the
//                       microkernel reads, bias, a fused residual Add and relu/clip applied in
//                       registers;
//   openblas_gemm_conv  OpenBLAS sgemm on whole im2col row blocks, then the epilogue. Work items
//                       are blocks of output pixels (their im2col rows fit in the L2 cache); when
//                       there are fewer pixel blocks than threads (small feature maps), the
//                       output channels are split instead.
#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/openblas.h"

namespace tessera::cpu {

namespace {

// Bytes of im2col rows one OpenBLAS work item gathers.
constexpr int64_t kIm2colBudgetBytes = 1 << 20;

// What both variants share: the geometry, W' and the im2col gather.
class ConvAsGemm : public NhwcIo<> {
 public:
  explicit ConvAsGemm(const ConvSetup& s) : s_(s) {
    c_ = s.cin;
    k_ = s.cout;
    depth_ = s.kh * s.kw * c_;
    direct_ = s.kh == 1 && s.kw == 1 && s.stride1_undilated() && s.geo.pads_begin[0] == 0 &&
              s.geo.pads_begin[1] == 0 && s.geo.pads_end[0] == 0 && s.geo.pads_end[1] == 0;
    if (s.bias != nullptr) bias_.assign(s.bias->data<float>(), s.bias->data<float>() + k_);
  }

  // The Add's activation replaces the convolution's (none), applied after the residual.
  bool fuse_residual(const Activation& act) override {
    if (s_.act.kind != ActivationKind::kNone) return false;
    s_.act = act;
    s_.clamp = clamp_of(act);
    residual_ = true;
    epilogue_changed();
    return true;
  }

 protected:
  // Called when fuse_residual changed the epilogue.
  virtual void epilogue_changed() {}

  // W' = OIHW -> [(ky, kx, c) x K].
  std::vector<float> weight_matrix() const {
    std::vector<float> wm(static_cast<size_t>(depth_ * k_));
    const float* w = s_.weight->data<float>();
    for (int64_t k = 0; k < k_; ++k) {
      for (int64_t c = 0; c < c_; ++c) {
        for (int64_t yx = 0; yx < s_.kh * s_.kw; ++yx) {
          wm[static_cast<size_t>((yx * c_ + c) * k_ + k)] = w[(k * c_ + c) * s_.kh * s_.kw + yx];
        }
      }
    }
    return wm;
  }

  void bind_geometry(std::span<const Operand> in, std::span<const Operand> out) {
    x_ = in[0].f32();
    y_ = out[0].f32();
    h_ = in[0].shape[2];
    w_in_ = in[0].shape[3];
    oh_ = out[0].shape[2];
    ow_ = out[0].shape[3];
    rows_ = in[0].shape[0] * oh_ * ow_;
    // The fused residual: the extra input after the node's, NHWC like Y.
    r_ = residual_ ? in.back().f32() : nullptr;
  }

  // Columns [k0, k0 + kc) of the im2col rows [r0, r0 + nr) into a (rows lda apart). A column
  // d is input channel d % C of kernel tap d / C; taps outside the image read zeros.
  void im2col(int64_t r0, int64_t nr, int64_t k0, int64_t kc, float* a, int64_t lda) const {
    const WindowGeometry& g = s_.geo;
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t p = r0 + r;
      const int64_t n = p / (oh_ * ow_), oy = p / ow_ % oh_, ox = p % ow_;
      float* row = a + r * lda - k0;
      for (int64_t d = k0; d < k0 + kc;) {
        const int64_t yx = d / c_, c0 = d % c_, len = std::min(c_ - c0, k0 + kc - d);
        const int64_t iy = oy * g.strides[0] - g.pads_begin[0] + yx / s_.kw * g.dilations[0];
        const int64_t ix = ox * g.strides[1] - g.pads_begin[1] + yx % s_.kw * g.dilations[1];
        if (iy < 0 || iy >= h_ || ix < 0 || ix >= w_in_) {
          std::fill_n(row + d, len, 0.f);
        } else {
          std::memcpy(row + d, x_ + ((n * h_ + iy) * w_in_ + ix) * c_ + c0,
                      static_cast<size_t>(len) * sizeof(float));
        }
        d += len;
      }
    }
  }

  std::string name(const char* engine) const {
    return std::string(engine) + (direct_ ? " gemm" : " im2col+gemm") + " conv " +
           std::to_string(s_.kh) + "x" + std::to_string(s_.kw) + "/" +
           std::to_string(s_.geo.strides[0]) + (residual_ ? " +residual" : "") +
           activation_suffix(s_.act);
  }

  ConvSetup s_;
  int64_t c_ = 0, k_ = 0, depth_ = 0;
  bool direct_ = false;
  bool residual_ = false;  // a residual Add is fused (fuse_residual)
  std::vector<float> bias_;
  // Bound.
  const float* x_ = nullptr;
  const float* r_ = nullptr;  // the residual (NHWC, k_ channels per pixel) or null
  float* y_ = nullptr;
  int64_t h_ = 0, w_in_ = 0, oh_ = 0, ow_ = 0, rows_ = 0;
};

class TesseraGemmConvKernel final : public ConvAsGemm {
 public:
  explicit TesseraGemmConvKernel(const ConvSetup& s)
      : ConvAsGemm(s), gemm_([&] {
          const std::vector<float> wm = weight_matrix();
          return PackedB::pack(wm.data(), depth_, k_, k_);
        }()) {
    // Set once here, not per run.
    if (!direct_) {
      a_.gather = [this](int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* dst, int64_t ldd) {
        im2col(m0, mc, k0, kc, dst, ldd);
      };
    }
    epilogue_changed();
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    bind_geometry(in, out);
    if (direct_) {
      a_.data = x_;
      a_.ld = c_;
    }
    ep_.residual = r_;
    ep_.ldr = k_;
    gemm_.bind(rows_, pool.num_threads(), !direct_);
    return Status();
  }

  Status run(ThreadPool& pool) override {
    gemm_.run(pool, a_, y_, k_, ep_, after_);
    return Status();
  }

  std::string describe() const override { return name("tessera"); }
  uint64_t owned_bytes() const override {
    return gemm_.owned_bytes() + bias_.size() * sizeof(float);
  }

 private:
  // Bias and relu/clip in the GEMM's registers (after the residual, bound in bind()).
  void epilogue_changed() override {
    ep_.bias = bias_.empty() ? nullptr : bias_.data();
    ep_.clamp = activation_is_clamp(s_.act) && s_.act.kind != ActivationKind::kNone;
    ep_.lo = s_.clamp.min;
    ep_.hi = s_.clamp.max;
    after_ = nullptr;
    if (!ep_.clamp && s_.act.kind != ActivationKind::kNone) {
      // An activation the clamp cannot express: on each finished item, still in cache.
      after_ = [this](int64_t m0, int64_t mc, int64_t n0, int64_t nc) {
        for (int64_t r = m0; r < m0 + mc; ++r) apply_activation(s_.act, y_ + r * k_ + n0, nc);
      };
    }
  }

  Gemm gemm_;
  GemmA a_;
  GemmEpilogue ep_;
  std::function<void(int64_t, int64_t, int64_t, int64_t)> after_;
};

class OpenBlasConvKernel final : public ConvAsGemm {
 public:
  explicit OpenBlasConvKernel(const ConvSetup& s) : ConvAsGemm(s), w_(weight_matrix()) {}

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    bind_geometry(in, out);
    blocks_ = 0;
    if (rows_ == 0) return Status();  // an empty batch: nothing to run
    const int threads = pool.num_threads();
    if (direct_) {
      // One block per thread; few rows: one block, the threads split the channels (each then
      // packs only its part of the weights).
      rb_ = rows_ >= 64 * threads ? (rows_ + threads - 1) / threads : rows_;
    } else {
      rb_ = std::clamp<int64_t>(kIm2colBudgetBytes / (depth_ * 4), 16, 512);
    }
    rb_ = std::min(rb_, rows_);
    blocks_ = (rows_ + rb_ - 1) / rb_;
    rb_ = (rows_ + blocks_ - 1) / blocks_;
    splits_ = 1;
    if (blocks_ < threads) splits_ = std::clamp<int64_t>(k_ / 64, 1, threads / blocks_);
    kc_ = std::min(k_, ((k_ + splits_ - 1) / splits_ + 15) / 16 * 16);
    splits_ = (k_ + kc_ - 1) / kc_;
    scratch_.assign(static_cast<size_t>(threads), {});
    if (!direct_) {
      for (std::vector<float>& s : scratch_) s.assign(static_cast<size_t>(rb_ * depth_), 0.f);
    }
    return Status();
  }

  Status run(ThreadPool& pool) override {
    run_blocks(
        pool, blocks_, splits_, scratch_,
        [this](float* scratch, int64_t block, int64_t split) { run_item(scratch, block, split); });
    return Status();
  }

  std::string describe() const override { return name("openblas"); }
  uint64_t owned_bytes() const override {
    return (w_.size() + bias_.size()) * sizeof(float) + scratch_bytes(scratch_);
  }

 private:
  void run_item(float* scratch, int64_t block, int64_t split) const {
    const int64_t r0 = block * rb_, nr = std::min(rb_, rows_ - r0);
    const int64_t k0 = split * kc_, kc = std::min(kc_, k_ - k0);
    const float* a = x_ + r0 * c_;
    if (!direct_) {
      im2col(r0, nr, 0, depth_, scratch, depth_);
      a = scratch;
    }
    float* y = y_ + r0 * k_ + k0;
    // The fused residual enters as sgemm's C (beta 1) when there is one.
    if (r_ != nullptr) {
      for (int64_t r = 0; r < nr; ++r) std::copy_n(r_ + (r0 + r) * k_ + k0, kc, y + r * k_);
    }
    openblas().sgemm(kRowMajor, kNoTrans, kNoTrans, static_cast<int>(nr), static_cast<int>(kc),
                     static_cast<int>(depth_), 1.f, a, static_cast<int>(depth_), w_.data() + k0,
                     static_cast<int>(k_), r_ != nullptr ? 1.f : 0.f, y, static_cast<int>(k_));
    conv_epilogue(s_, bias_.empty() ? nullptr : bias_.data() + k0, y, nr, kc, k_);
  }

  std::vector<float> w_;
  int64_t rb_ = 0, blocks_ = 0, splits_ = 1, kc_ = 0;
  std::vector<std::vector<float>> scratch_;  // per thread (im2col rows)
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_tessera_gemm_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> s, conv_setup(req));
  if (!s || !s->dense() || !gemm_available()) return decline();
  // Measured (BM_ConvVariant, docs/performance.md): from 32 input channels up the packed GEMM
  // is as fast as XNNPACK or faster on every 1x1 and im2col layer of the benchmark set (1.1-3x
  // on 14x14 and 7x7 maps, where XNNPACK's 3x3 path is weakest); below that (RGB stems, 16/24
  // channel 1x1) the im2col gathers and 16-deep tiles lose to XNNPACK's direct kernels by up
  // to 4x. Stride-1 3x3 layers on maps of 14x14 and up are Winograd's (tried first).
  if (!req.any_config && s->cin < 32) return decline();
  return std::unique_ptr<Kernel>(std::make_unique<TesseraGemmConvKernel>(*s));
}

Result<std::unique_ptr<Kernel>> make_gemm_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> s, conv_setup(req));
  if (!s || !s->dense() || !openblas().available()) return decline();
  if (!req.any_config) {
    if (!openblas().avx512_kernels) return decline();
    // Measured (BM_ConvVariant, docs/performance.md): OpenBLAS beats XNNPACK's 1x1 path by
    // 1.5-2.5x on channel-reducing 1x1 convolutions (C >= 2K, the bottleneck "reduce" layers)
    // with at least 14x14 output pixels; elsewhere (expanding 1x1, 7x7 maps, im2col for
    // strided and larger kernels) XNNPACK is as fast or faster.
    const bool pointwise = s->kh == 1 && s->kw == 1 && s->stride1_undilated();
    const int64_t pixels = s->geo.output[0] * s->geo.output[1];
    if (!pointwise || s->cin < 2 * s->cout || pixels < 196) return decline();
  }
  return std::unique_ptr<Kernel>(std::make_unique<OpenBlasConvKernel>(*s));
}

}  // namespace tessera::cpu
