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
#include "backends/cpu/simd.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {

// Bytes of im2col rows one OpenBLAS work item gathers.
constexpr int64_t kIm2colBudgetBytes = 1 << 20;

#if TESSERA_X86_64
// n floats from src to dst, and n zeros to dst: one (masked) vector move per 16 floats.
TESSERA_AVX512_INLINE void copy_floats(float* dst, const float* src, int64_t n) {
  for (; n >= 16; n -= 16, dst += 16, src += 16) _mm512_storeu_ps(dst, _mm512_loadu_ps(src));
  if (n > 0) {
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    _mm512_mask_storeu_ps(dst, m, _mm512_maskz_loadu_ps(m, src));
  }
}
TESSERA_AVX512_INLINE void zero_floats(float* dst, int64_t n) {
  for (; n >= 16; n -= 16, dst += 16) _mm512_storeu_ps(dst, _mm512_setzero_ps());
  if (n > 0) _mm512_mask_storeu_ps(dst, static_cast<__mmask16>((1u << n) - 1), _mm512_setzero_ps());
}
#endif  // TESSERA_X86_64

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

  bool fuse_residual(const Activation& act) override {
    if (!s_.take_residual_activation(act)) return false;
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
    ldy_ = out[0].pixel_stride_or_dense();
    // The fused residual: the extra input after the node's, NHWC like Y.
    r_ = residual_ ? in.back().f32() : nullptr;
  }

  // Columns [k0, k0 + kc) of the im2col rows [r0, r0 + nr) into a (rows lda apart). A column
  // d is input channel d % C of kernel tap d / C; taps outside the image read zeros.
  void im2col(int64_t r0, int64_t nr, int64_t k0, int64_t kc, float* a, int64_t lda) const {
#if TESSERA_X86_64
    if (s_.geo.dilations[0] == 1 && s_.geo.dilations[1] == 1 && has_avx512()) {
      return im2col_rows(r0, nr, k0, kc, a, lda);
    }
#endif
    im2col_taps(r0, nr, k0, kc, a, lda);
  }

#if TESSERA_X86_64
  // Undilated: the kw taps of one kernel row are kw consecutive input pixels, so in NHWC the
  // kernel row ky of an output pixel is ONE run of kw * C floats of input row iy, starting at
  // pixel ix0 = ox * stride - pad_left; only its pixels left of 0 or right of the image (the
  // padding) read zeros. One copy per kernel row instead of one per tap (C floats), with
  // (masked) vector moves instead of memcpy calls: what makes the RGB stems (C = 3: runs of 9
  // floats for 3x3, 21 for 7x7, 33 for 11x11) worth gathering. The output pixel advances by
  // counting, not dividing, and a pixel whose runs all lie inside the image (most of them) skips
  // the clipping. AVX-512 only (im2col() checks).
  TESSERA_AVX512 void im2col_rows(int64_t r0, int64_t nr, int64_t k0, int64_t kc, float* a,
                                  int64_t lda) const {
    const WindowGeometry& g = s_.geo;
    const int64_t run = s_.kw * c_, end = k0 + kc;
    const int64_t ky0 = k0 / run, ky1 = (end - 1) / run;  // the kernel rows the columns touch
    // The block holds whole kernel rows: pixels whose runs all lie inside the image take the
    // short loop (one copy per kernel row, nothing to clip).
    const bool whole_rows = k0 % run == 0 && end % run == 0;
    const int64_t row_floats = w_in_ * c_;
    int64_t n = r0 / (oh_ * ow_), oy = r0 / ow_ % oh_, ox = r0 % ow_;
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t ix0 = ox * g.strides[1] - g.pads_begin[1];
      const int64_t iy0 = oy * g.strides[0] - g.pads_begin[0];
      float* row = a + r * lda - k0;
      if (whole_rows && ix0 >= 0 && ix0 + s_.kw <= w_in_ && iy0 + ky0 >= 0 && iy0 + ky1 < h_) {
        const float* src = x_ + ((n * h_ + iy0 + ky0) * w_in_ + ix0) * c_;
        for (int64_t ky = ky0; ky <= ky1; ++ky, src += row_floats) {
          copy_floats(row + ky * run, src, run);
        }
      } else {
        im2col_row_clipped(row, n, iy0, ix0, k0, end, ky0, ky1);
      }
      if (++ox == ow_) {
        ox = 0;
        if (++oy == oh_) {
          oy = 0;
          ++n;
        }
      }
    }
  }

  // One im2col row of im2col_rows (columns [k0, end), kernel rows ky0..ky1) for an output pixel
  // whose runs start at input pixel (iy0 + ky, ix0) and may cross the padding.
  TESSERA_AVX512 void im2col_row_clipped(float* row, int64_t n, int64_t iy0, int64_t ix0,
                                         int64_t k0, int64_t end, int64_t ky0, int64_t ky1) const {
    const int64_t run = s_.kw * c_;
    // The run's floats inside the image: [in_lo, in_hi) (empty when it lies in the padding).
    const int64_t in_lo = std::max<int64_t>(0, -ix0) * c_;
    const int64_t in_hi = std::max(in_lo, std::min(s_.kw, w_in_ - ix0) * c_);
    for (int64_t ky = ky0; ky <= ky1; ++ky) {
      const int64_t d0 = std::max(k0, ky * run), d1 = std::min(end, (ky + 1) * run);
      const int64_t o0 = d0 - ky * run, o1 = d1 - ky * run;  // this block's part of the run
      const int64_t iy = iy0 + ky;
      float* dst = row + ky * run;
      if (iy < 0 || iy >= h_) {
        zero_floats(dst + o0, o1 - o0);
        continue;
      }
      const int64_t lo = std::clamp(in_lo, o0, o1), hi = std::clamp(in_hi, lo, o1);
      zero_floats(dst + o0, lo - o0);
      if (hi > lo) copy_floats(dst + lo, x_ + ((n * h_ + iy) * w_in_ + ix0) * c_ + lo, hi - lo);
      zero_floats(dst + hi, o1 - hi);
    }
  }
#endif  // TESSERA_X86_64

  // Any dilation: one copy per tap (C floats).
  void im2col_taps(int64_t r0, int64_t nr, int64_t k0, int64_t kc, float* a, int64_t lda) const {
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

  // C's rows are output pixels ldy_ floats apart, so any pixel stride works.
  bool writes_strided_output() const override {
    return true;
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
  int64_t ldy_ = 0;  // floats between output pixels (k_ unless a Concat's slice)
};

class TesseraGemmConvKernel final : public ConvAsGemm {
 public:
  // The packed weight matrix is shared through `packs` (when not null) with the other nodes
  // of the program that convolve with the same weights, whatever their strides and padding.
  TesseraGemmConvKernel(const ConvSetup& s, PackCache* packs, ValueId weight)
      : ConvAsGemm(s),
        gemm_(share_packing<PackedB>(packs, weight,
                                     "gemm conv " + std::to_string(s.kh) + "x" +
                                         std::to_string(s.kw) + " depth=" + std::to_string(depth_) +
                                         " k=" + std::to_string(k_),
                                     [&] {
                                       const std::vector<float> wm = weight_matrix();
                                       return PackedB::pack(wm.data(), depth_, k_, k_);
                                     })) {
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
    gemm_.run(pool, a_, y_, ldy_, ep_, after_);
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
    ep_.clamp = s_.clamps();
    ep_.lo = s_.clamp.min;
    ep_.hi = s_.clamp.max;
    after_ = nullptr;
    if (!ep_.clamp && s_.act.kind != ActivationKind::kNone) {
      // An activation the clamp cannot express: on each finished item, still in cache.
      after_ = [this](int64_t m0, int64_t mc, int64_t n0, int64_t nc) {
        for (int64_t r = m0; r < m0 + mc; ++r) apply_activation(s_.act, y_ + r * ldy_ + n0, nc);
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
    float* y = y_ + r0 * ldy_ + k0;
    // The fused residual enters as sgemm's C (beta 1) when there is one.
    if (r_ != nullptr) {
      for (int64_t r = 0; r < nr; ++r) std::copy_n(r_ + (r0 + r) * k_ + k0, kc, y + r * ldy_);
    }
    openblas().sgemm(kRowMajor, kNoTrans, kNoTrans, static_cast<int>(nr), static_cast<int>(kc),
                     static_cast<int>(depth_), 1.f, a, static_cast<int>(depth_), w_.data() + k0,
                     static_cast<int>(k_), r_ != nullptr ? 1.f : 0.f, y, static_cast<int>(ldy_));
    conv_epilogue(s_, bias_.empty() ? nullptr : bias_.data() + k0, y, nr, kc, ldy_);
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
  // on 14x14 and 7x7 maps, where XNNPACK's 3x3 path is weakest); below that (16/24 channel 1x1)
  // the 16-deep tiles lose to XNNPACK's direct kernels by up to 4x. The RGB stems (<= 4
  // channels) are the direct kernel's (conv_direct.cc, tried first): the GEMM with one kernel
  // row gathered per copy (im2col_rows) took 1.2-2.2x its time on them. Stride-1 3x3 layers
  // with >= 16 channels on maps of 14x14 and up are Winograd's (tried first).
  if (!req.any_config && s->cin < 32) return decline();
  return std::unique_ptr<Kernel>(
      std::make_unique<TesseraGemmConvKernel>(*s, req.packs, req.node.inputs[1]));
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
