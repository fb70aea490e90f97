// tessera_depthwise_conv: depthwise convolutions (group == C_in == C_out), undilated, straight
// from the NHWC input with a sliding window over each input row.
//
// A tile is kPixels consecutive output pixels of one output row x 16 channels (one zmm per
// pixel). For each kernel row ky whose input row lies inside the image, the tile's input pixels
// of that row ((kPixels - 1) * stride + kw of them) are loaded once each, and each loaded pixel
// is multiplied by the kw weights of the row into the accumulators of the outputs that read it:
// one load per kw FMAs at stride 1 (XNNPACK's kernels of this generation load every tap of every
// output through an indirection buffer: kh * kw loads per kh * kw FMAs, which makes them
// load-bound). Kernel widths 3, 5 and 7 at strides 1 and 2 are compiled as their own loops; other
// shapes run the same loop with the width and stride as variables.
//
// Weights are packed once as [kh * kw][C rounded up to 16] (the bias as one more row); the tail
// channel block uses masked loads and stores. Rows above or below the image are skipped (their
// taps add nothing); output pixels whose taps cross the left or right edge, and those left over
// after the last whole tile, are computed one at a time with their taps clipped to the image. relu
// / clip are applied in registers; other fused activations run over the stored tile. Threads take
// blocks of output rows. AVX-512F only.
#include <algorithm>
#include <memory>

#include "backends/cpu/conv.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/simd.h"
#include "core/allocator.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

#if TESSERA_X86_64  // AVX-512 code throughout (kernel_table.h: Isa::kAvx512f)

namespace {

constexpr int64_t kPixels = 8;  // output pixels per tile
constexpr int64_t kMaxKernel = 16;

struct DwTile {
  const float* const* rows;  // per kernel row: input column 0 of the tile's first pixel (null:
                             // the row is outside the image)
  int64_t xstride = 0;       // floats between consecutive input pixels
  const float* w = nullptr;  // [kh * kw][ldw], this channel block's column
  int64_t ldw = 0;
  const float* bias = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  __mmask16 mask = 0xffff;
  bool clamp = false;
  float lo = 0, hi = 0;
};

// Whole 16-channel blocks load without a mask.
template <bool kFull>
TESSERA_AVX512_INLINE __m512 dw_load(__mmask16 mask, const float* p) {
  if constexpr (kFull) {
    return _mm512_loadu_ps(p);
  } else {
    return _mm512_maskz_loadu_ps(mask, p);
  }
}

// kPixels output pixels whose input columns all lie inside the image. KH, KW, S fixed (> 0), or
// taken from kh / kw / s (0).
template <int KH, int KW, int S, bool kFull>
TESSERA_AVX512 void dw_tile(const DwTile& t, int64_t kh_rt, int64_t kw_rt, int64_t s_rt) {
  const int64_t kh = KH > 0 ? KH : kh_rt;
  const int64_t kw = KW > 0 ? KW : kw_rt;
  const int64_t s = S > 0 ? S : s_rt;
  __m512 acc[kPixels];
  const __m512 b = dw_load<kFull>(t.mask, t.bias);
#pragma GCC unroll 8
  for (int64_t p = 0; p < kPixels; ++p) acc[p] = b;
  const int64_t cols = (kPixels - 1) * s + kw;
#pragma GCC unroll 7
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* row = t.rows[ky];
    if (row == nullptr) continue;
    const float* wrow = t.w + ky * kw * t.ldw;
    __m512 wv[KW > 0 ? KW : kMaxKernel];
#pragma GCC unroll 7
    for (int64_t kx = 0; kx < kw; ++kx) wv[kx] = dw_load<kFull>(t.mask, wrow + kx * t.ldw);
#pragma GCC unroll 32
    for (int64_t j = 0; j < cols; ++j) {
      const __m512 v = dw_load<kFull>(t.mask, row + j * t.xstride);
      // Input column j feeds output p through tap kx = j - p * s.
#pragma GCC unroll 8
      for (int64_t p = 0; p < kPixels; ++p) {
        const int64_t kx = j - p * s;
        if (kx >= 0 && kx < kw) acc[p] = _mm512_fmadd_ps(v, wv[kx], acc[p]);
      }
    }
  }
  if (t.clamp) {
    const __m512 lo = _mm512_set1_ps(t.lo), hi = _mm512_set1_ps(t.hi);
    // maskz forms: GCC 12 warns about the undefined pass-through of the plain ones.
#pragma GCC unroll 8
    for (int64_t p = 0; p < kPixels; ++p)
      acc[p] = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, acc[p], lo), hi);
  }
#pragma GCC unroll 8
  for (int64_t p = 0; p < kPixels; ++p) {
    if (kFull) {
      _mm512_storeu_ps(t.y + p * t.ldy, acc[p]);
    } else {
      _mm512_mask_storeu_ps(t.y + p * t.ldy, t.mask, acc[p]);
    }
  }
}

// One output pixel whose taps may fall outside the image: input columns [kx0, kx1) of each row.
TESSERA_AVX512 void dw_pixel(const DwTile& t, int64_t kh, int64_t kw, int64_t kx0, int64_t kx1) {
  __m512 acc = _mm512_maskz_loadu_ps(t.mask, t.bias);
  for (int64_t ky = 0; ky < kh; ++ky) {
    const float* row = t.rows[ky];
    if (row == nullptr) continue;
    const float* wrow = t.w + ky * kw * t.ldw;
    for (int64_t kx = kx0; kx < kx1; ++kx) {
      acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(t.mask, row + kx * t.xstride),
                            _mm512_maskz_loadu_ps(t.mask, wrow + kx * t.ldw), acc);
    }
  }
  if (t.clamp) {
    acc = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, acc, _mm512_set1_ps(t.lo)),
                              _mm512_set1_ps(t.hi));
  }
  _mm512_mask_storeu_ps(t.y, t.mask, acc);
}

using DwTileFn = void (*)(const DwTile&, int64_t, int64_t, int64_t);

template <bool kFull>
DwTileFn dw_tile_fn(int64_t kh, int64_t kw, int64_t s) {
  if (kh == kw && s == 1) {
    if (kw == 3) return dw_tile<3, 3, 1, kFull>;
    if (kw == 5) return dw_tile<5, 5, 1, kFull>;
    if (kw == 7) return dw_tile<7, 7, 1, kFull>;
  }
  if (kh == kw && s == 2) {
    if (kw == 3) return dw_tile<3, 3, 2, kFull>;
    if (kw == 5) return dw_tile<5, 5, 2, kFull>;
    if (kw == 7) return dw_tile<7, 7, 2, kFull>;
  }
  return dw_tile<0, 0, 0, kFull>;
}

class DepthwiseConvKernel final : public NhwcIo<> {
 public:
  // The bias row, then the tap rows, in `storage` (allocate_host: aligned, zero-filled) of
  // (kh * kw + 1) * ldw floats.
  DepthwiseConvKernel(const ConvSetup& s, int64_t ldw, std::shared_ptr<uint8_t> storage)
      : s_(s), c_(s.cout), ldw_(ldw), storage_(std::move(storage)) {
    const int64_t taps = s.kh * s.kw;
    float* bias = packed();
    float* w = bias + ldw_;
    const float* src = s.weight->data<float>();
    for (int64_t c = 0; c < c_; ++c) {
      for (int64_t k = 0; k < taps; ++k) w[k * ldw_ + c] = src[c * taps + k];
      if (s.bias != nullptr) bias[c] = s.bias->data<float>()[c];
    }
    fn_full_ = dw_tile_fn<true>(s.kh, s.kw, s.geo.strides[1]);
    fn_masked_ = dw_tile_fn<false>(s.kh, s.kw, s.geo.strides[1]);
  }

  bool writes_strided_output() const override { return true; }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    b_ = WindowBinding(s_, in[0], out[0], pool.num_threads());
    return Status();
  }

  Status run(ThreadPool& pool) override {
    if (c_ == 0) return Status();
    b_.for_each_row(pool, [this](int, int64_t n, int64_t oy) { output_row(n, oy); });
    return Status();
  }

  std::string describe() const override {
    return "tessera depthwise conv " + std::to_string(s_.kh) + "x" + std::to_string(s_.kw) + "/" +
           std::to_string(s_.geo.strides[0]) + activation_suffix(s_.act);
  }

  uint64_t owned_bytes() const override {
    return static_cast<uint64_t>((s_.kh * s_.kw + 1) * ldw_) * sizeof(float);
  }

 private:
  float* packed() const { return reinterpret_cast<float*>(storage_.get()); }

  void output_row(int64_t n, int64_t oy) const {
    const int64_t kh = s_.kh, kw = s_.kw, sx = s_.geo.strides[1], pl = s_.geo.pads_begin[1];
    const float* rows[kMaxKernel];  // input row ky's column 0, or null outside the image
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * s_.geo.strides[0] - s_.geo.pads_begin[0] + ky;
      rows[ky] = iy >= 0 && iy < b_.h ? b_.x + ((n * b_.h + iy) * b_.w) * b_.ldx : nullptr;
    }
    const float* trows[kMaxKernel];
    float* yrow = b_.y + ((n * b_.oh + oy) * b_.ow) * b_.ldy;
    DwTile t;
    t.rows = trows;
    t.xstride = b_.ldx;
    t.ldw = ldw_;
    t.ldy = b_.ldy;
    t.clamp = s_.clamps();
    t.lo = s_.clamp.min;
    t.hi = s_.clamp.max;
    // Pixels [fx0, fx1) read only columns inside the image: tiles of kPixels from fx0, the last
    // one ending at fx1 (it may overlap the one before: those pixels are computed twice,
    // with the same result); the pixels outside one at a time, their taps clipped to the image.
    // Channel blocks innermost, so that a tile's input columns are read whole cache lines at a
    // time.
    auto block = [&](int64_t c0) {
      const int64_t nc = std::min<int64_t>(16, c_ - c0);
      t.mask = static_cast<__mmask16>((1u << nc) - 1u);
      t.bias = packed() + c0;
      t.w = packed() + ldw_ + c0;
      return nc;
    };
    auto point_rows = [&](int64_t ix0, int64_t c0) {
      for (int64_t ky = 0; ky < kh; ++ky)
        trows[ky] = rows[ky] != nullptr ? rows[ky] + ix0 * b_.ldx + c0 : nullptr;
    };
    const bool tiles = b_.fx1 - b_.fx0 >= kPixels;
    if (tiles) {
      for (int64_t ox = b_.fx0;; ox += kPixels) {
        ox = std::min(ox, b_.fx1 - kPixels);
        for (int64_t c0 = 0; c0 < c_; c0 += 16) {
          const int64_t nc = block(c0);
          point_rows(ox * sx - pl, c0);
          t.y = yrow + ox * b_.ldy + c0;
          (nc == 16 ? fn_full_ : fn_masked_)(t, kh, kw, sx);
        }
        if (ox + kPixels >= b_.fx1) break;
      }
    }
    for (int64_t ox = 0; ox < b_.ow; ++ox) {
      if (tiles && ox == b_.fx0) ox = b_.fx1;  // the tiles did these
      if (ox >= b_.ow) break;
      const int64_t ix0 = ox * sx - pl;
      const int64_t kx0 = std::clamp<int64_t>(-ix0, 0, kw),
                    kx1 = std::clamp<int64_t>(b_.w - ix0, 0, kw);
      for (int64_t c0 = 0; c0 < c_; c0 += 16) {
        block(c0);
        point_rows(ix0, c0);
        t.y = yrow + ox * b_.ldy + c0;
        dw_pixel(t, kh, kw, kx0, kx1);
      }
    }
    if (s_.activates_after_store()) {
      for (int64_t ox = 0; ox < b_.ow; ++ox) apply_activation(s_.act, yrow + ox * b_.ldy, c_);
    }
  }

  ConvSetup s_;
  int64_t c_ = 0, ldw_ = 0;
  std::shared_ptr<uint8_t> storage_;
  DwTileFn fn_full_ = nullptr, fn_masked_ = nullptr;
  // Bound.
  WindowBinding b_;
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_depthwise_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> s, conv_setup(req));
  if (!s || !has_avx512() || s->group != s->cin || s->cout != s->cin || s->cin_g != 1 ||
      s->geo.dilations[0] != 1 || s->geo.dilations[1] != 1 || s->kh > kMaxKernel ||
      s->kw > kMaxKernel) {
    return decline();
  }
  // Not a rule of its own yet: measured kernel choice (kernel_choice.h) times it against XNNPACK
  // per layer; with the rules alone XNNPACK keeps the depthwise layers.
  if (!req.any_config) return decline();
  const int64_t ldw = (s->cout + 15) / 16 * 16;
  ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> storage,
                   allocate_host(static_cast<size_t>((s->kh * s->kw + 1) * ldw) * sizeof(float)));
  return std::unique_ptr<Kernel>(
      std::make_unique<DepthwiseConvKernel>(*s, ldw, std::move(storage)));
}

#else

Result<std::unique_ptr<Kernel>> make_depthwise_conv(const KernelRequest& /*req*/) {
  return isa_unavailable(Isa::kAvx512f);
}

#endif  // TESSERA_X86_64

}  // namespace tessera::cpu
