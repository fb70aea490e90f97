// tessera_direct_conv: dense, undilated convolutions with few input channels (the RGB stems;
// SqueezeNet's 16-channel expand3x3s) computed straight from the NHWC input, with no im2col
// buffer.
//
// In NHWC, kernel row ky of an output pixel is ONE run of kw * C contiguous floats of input row
// iy = oy * stride - pad_top + ky, starting at pixel ix0 = ox * stride - pad_left. The
// microkernel holds a tile of MR consecutive output pixels of one output row x up to 64 output
// channels (NV vectors of 16) in NV * MR zmm accumulators (7 x 64: 28, GCC keeping one of them
// in memory; 8 x 48, 12 x 32, 16 x 16: 24) and walks K = kh * kw * C: per k it loads the NV weight
// vectors of row k of the packed weights ([K][NV * 16], zero-padded channels) and broadcasts each
// pixel's input value (pixel p's run starts p * stride * C floats after pixel 0's), so every
// broadcast feeds NV FMAs and every weight load MR of them; the weight rows kPrefetchRows ahead are
// prefetched (with 16 input channels a 64-channel chunk's weights, 36 KB, do not stay in L1 next to
// the input). The bias is the accumulators' start value; relu/clip are applied in registers before
// the stores (a partial tile, short of pixels or channels, is stored through a local copy); any
// other fused activation runs over the finished tile while it is in cache.
//
// Padding: an input row above or below the image reads a row of zeros; a tile whose runs cross
// the left or right edge of the image (or the last, partial tile of an output row) reads a
// small per-thread patch: its kh input row segments copied with zeros where the padding is.
// Output channels beyond 64 are cut into chunks of up to 64, each with its own packed weights.
//
// Threads split the output rows (all images' rows, in blocks of whole rows). AVX-512F only: on
// other CPUs the factory declines and the other variants keep these layers.
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/simd.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

#if TESSERA_X86_64  // AVX-512 code throughout (kernel_table.h: Isa::kAvx512f)

namespace {

// The widest output channel chunk (4 zmm per pixel).
constexpr int64_t kMaxChunk = 64;
// Weight rows prefetched ahead of the one the microkernel loads (the packed weights carry as
// many rows of padding, so that the addresses stay inside them).
constexpr int64_t kPrefetchRows = 8;
// The most kernel rows (the row pointers live on the stack).
constexpr int64_t kMaxKernelRows = 16;

// One output tile's operands.
struct DirectTile {
  const float* const* rows;     // kh pointers: pixel 0's run of kernel row ky starts at rows[ky]
  int64_t kh = 0, run = 0;      // kernel rows; floats per kernel row (kw * C)
  int64_t pstride = 0;          // floats between consecutive pixels' runs (stride * C)
  const float* w = nullptr;     // [kh * run][NV * 16]
  const float* bias = nullptr;  // [NV * 16] (zeros when the node has none)
  float* y = nullptr;           // pixel p, channel c at y[p * ldy + c]
  int64_t ldy = 0;
  int64_t pixels = 0;    // pixels to store (<= MR)
  int64_t channels = 0;  // channels to store (<= NV * 16)
  bool clamp = false;
  float lo = 0.f, hi = 0.f;
};

// The microkernel: MR pixels x NV * 16 channels.
template <int NV, int MR>
TESSERA_AVX512 void direct_tile(const DirectTile& t) {
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int p = 0; p < MR; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[p][v] = _mm512_loadu_ps(t.bias + 16 * v);
  }
  const float* w = t.w;
  const int64_t ps = t.pstride;
  // (kh, run >= 1: do-while loops keep GCC from spilling the accumulators around them.)
  int64_t ky = 0;
  do {
    const float* r = t.rows[ky];
    int64_t j = 0;
    do {
      __m512 wv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        wv[v] = _mm512_loadu_ps(w + 16 * v);
        _mm_prefetch(reinterpret_cast<const char*>(w + (kPrefetchRows * NV + v) * 16), _MM_HINT_T0);
      }
#pragma GCC unroll 16
      for (int p = 0; p < MR; ++p) {
        const __m512 x = _mm512_set1_ps(r[p * ps + j]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) acc[p][v] = _mm512_fmadd_ps(x, wv[v], acc[p][v]);
      }
      w += NV * 16;
    } while (++j < t.run);
  } while (++ky < t.kh);
  if (t.clamp) {
    const __m512 lo = _mm512_set1_ps(t.lo), hi = _mm512_set1_ps(t.hi);
#pragma GCC unroll 16
    for (int p = 0; p < MR; ++p) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[p][v] = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, acc[p][v], lo), hi);
    }
  }
  if (t.pixels == MR && t.channels == NV * 16) {
#pragma GCC unroll 16
    for (int p = 0; p < MR; ++p) {
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) _mm512_storeu_ps(t.y + p * t.ldy + 16 * v, acc[p][v]);
    }
    return;
  }
  // A partial tile: through a local copy (runtime bounds on the accumulators would keep them in
  // memory).
  float part[MR][NV * 16];
#pragma GCC unroll 16
  for (int p = 0; p < MR; ++p) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(&part[p][16 * v], acc[p][v]);
  }
  for (int64_t p = 0; p < t.pixels; ++p) {
    std::memcpy(t.y + p * t.ldy, part[p], static_cast<size_t>(t.channels) * sizeof(float));
  }
}

using TileFn = void (*)(const DirectTile&);

// The microkernel for NV vectors per pixel and its tile width.
struct TileKernel {
  TileFn fn;
  int64_t mr;
};
TileKernel tile_kernel(int64_t nv) {
  switch (nv) {
    case 1:
      return {direct_tile<1, 16>, 16};
    case 2:
      return {direct_tile<2, 12>, 12};
    case 3:
      return {direct_tile<3, 8>, 8};
    default:
      // 7 pixels measured 0.93x the time of 6 on SqueezeNet's 55-wide fire2 expand3x3 (55 =
      // 7 * 7 + 6 instead of 9 * 6 + 1) and 0.98x on its 111-wide stem.
      return {direct_tile<4, 7>, 7};
  }
}

class DirectConvKernel final : public NhwcIo<> {
 public:
  explicit DirectConvKernel(const ConvSetup& s) : s_(s) {
    run_ = s.kw * s.cin;
    const int64_t depth = s.kh * run_;
    const float* w = s.weight->data<float>();
    const float* bias = s.bias != nullptr ? s.bias->data<float>() : nullptr;
    // Chunks of up to 64 output channels; the weights of each as [(ky, kx, c)][NV * 16].
    for (int64_t k0 = 0; k0 < s.cout; k0 += kMaxChunk) {
      Chunk ch;
      ch.k0 = k0;
      ch.channels = std::min(kMaxChunk, s.cout - k0);
      const int64_t nv = (ch.channels + 15) / 16;
      const TileKernel tk = tile_kernel(nv);
      ch.fn = tk.fn;
      ch.mr = tk.mr;
      const int64_t width = nv * 16;
      // Bias first, then the weights and the prefetch padding, 64-byte aligned (whole cache
      // lines per vector load).
      ch.storage.assign(static_cast<size_t>((1 + depth + kPrefetchRows) * width + 16), 0.f);
      float* bias_dst = ch.bias();
      float* w_dst = ch.w();
      for (int64_t k = 0; k < ch.channels; ++k) {
        const int64_t o = k0 + k;
        for (int64_t c = 0; c < s.cin; ++c) {
          for (int64_t yx = 0; yx < s.kh * s.kw; ++yx) {
            w_dst[(yx * s.cin + c) * width + k] = w[(o * s.cin + c) * s.kh * s.kw + yx];
          }
        }
        if (bias != nullptr) bias_dst[k] = bias[o];
      }
      chunks_.push_back(std::move(ch));
    }
  }

  bool writes_strided_output() const override { return true; }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    b_ = WindowBinding(s_, in[0], out[0], pool.num_threads());
    zeros_.assign(static_cast<size_t>(b_.w * s_.cin + 16), 0.f);
    int64_t mr = 0;
    for (const Chunk& ch : chunks_) mr = std::max(mr, ch.mr);
    patch_floats_ = ((mr - 1) * s_.geo.strides[1] + s_.kw) * s_.cin;
    scratch_.assign(static_cast<size_t>(pool.num_threads()),
                    std::vector<float>(static_cast<size_t>(s_.kh * patch_floats_), 0.f));
    return Status();
  }

  Status run(ThreadPool& pool) override {
    b_.for_each_row(pool, [this](int worker, int64_t n, int64_t oy) {
      output_row(n, oy, scratch_[static_cast<size_t>(worker)].data());
    });
    return Status();
  }

  std::string describe() const override {
    return "tessera direct conv " + std::to_string(s_.kh) + "x" + std::to_string(s_.kw) + "/" +
           std::to_string(s_.geo.strides[0]) + activation_suffix(s_.act);
  }

  uint64_t owned_bytes() const override {
    uint64_t bytes = 0;
    for (const Chunk& ch : chunks_) bytes += ch.storage.size() * sizeof(float);
    for (const std::vector<float>& s : scratch_) bytes += s.size() * sizeof(float);
    return bytes + zeros_.size() * sizeof(float);
  }

 private:
  struct Chunk {
    int64_t k0 = 0, channels = 0, mr = 0;
    TileFn fn = nullptr;
    std::vector<float> storage;  // the bias [NV * 16] and the weights [K][NV * 16], aligned
    float* bias() {
      return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(storage.data()) + 63) &
                                      ~uintptr_t{63});
    }
    const float* bias() const { return const_cast<Chunk*>(this)->bias(); }
    float* w() { return bias() + (channels + 15) / 16 * 16; }
    const float* w() const { return const_cast<Chunk*>(this)->w(); }
  };

  // Output row oy of image n, every chunk.
  void output_row(int64_t n, int64_t oy, float* patch) const {
    const int64_t kh = s_.kh, c = s_.cin, sx = s_.geo.strides[1], pl = s_.geo.pads_begin[1];
    // Kernel row ky reads input row iy, or zeros.
    const float* rows[kMaxKernelRows];
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * s_.geo.strides[0] - s_.geo.pads_begin[0] + ky;
      rows[ky] = iy >= 0 && iy < b_.h ? b_.x + ((n * b_.h + iy) * b_.w) * c : zeros_.data();
    }
    const float* trows[kMaxKernelRows];
    float* yrow = b_.y + ((n * b_.oh + oy) * b_.ow) * b_.ldy;
    for (const Chunk& ch : chunks_) {
      DirectTile t;
      t.rows = trows;
      t.kh = kh;
      t.run = run_;
      t.pstride = sx * c;
      t.w = ch.w();
      t.bias = ch.bias();
      t.ldy = b_.ldy;
      t.channels = ch.channels;
      t.clamp = s_.clamps();
      t.lo = s_.clamp.min;
      t.hi = s_.clamp.max;
      for (int64_t ox = 0; ox < b_.ow; ox += ch.mr) {
        const int64_t np = std::min(ch.mr, b_.ow - ox);
        const int64_t ix0 = ox * sx - pl;
        if (ox >= b_.fx0 && ox + ch.mr <= b_.fx1) {
          for (int64_t ky = 0; ky < kh; ++ky) trows[ky] = rows[ky] + ix0 * c;
        } else {
          fill_patch(rows, ix0, ch.mr, patch, trows);
        }
        t.y = yrow + ox * b_.ldy + ch.k0;
        t.pixels = np;
        ch.fn(t);
        if (s_.activates_after_store()) {
          for (int64_t p = 0; p < np; ++p) apply_activation(s_.act, t.y + p * b_.ldy, ch.channels);
        }
      }
    }
  }

  // The kh run segments of a tile of `mr` pixels starting at input column ix0, with zeros
  // where they cross the image edge, into `patch`; trows[ky] points at each.
  void fill_patch(const float* const* rows, int64_t ix0, int64_t mr, float* patch,
                  const float** trows) const {
    const int64_t c = s_.cin;
    const int64_t cols = (mr - 1) * s_.geo.strides[1] + s_.kw;
    const int64_t lo = std::clamp<int64_t>(-ix0, 0, cols);
    const int64_t hi = std::clamp<int64_t>(b_.w - ix0, lo, cols);
    for (int64_t ky = 0; ky < s_.kh; ++ky) {
      float* dst = patch + ky * patch_floats_;
      std::fill(dst, dst + lo * c, 0.f);
      if (hi > lo) {
        std::memcpy(dst + lo * c, rows[ky] + (ix0 + lo) * c,
                    static_cast<size_t>((hi - lo) * c) * sizeof(float));
      }
      std::fill(dst + hi * c, dst + cols * c, 0.f);
      trows[ky] = dst;
    }
  }

  ConvSetup s_;
  int64_t run_ = 0;
  std::vector<Chunk> chunks_;
  // Bound.
  WindowBinding b_;
  int64_t patch_floats_ = 0;                 // floats per kernel row of a patch
  std::vector<float> zeros_;                 // one input row of zeros (+ slack)
  std::vector<std::vector<float>> scratch_;  // per thread: a tile's patch
};

}  // namespace

Result<std::unique_ptr<Kernel>> make_direct_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> s, conv_setup(req));
  if (!s || !s->dense() || !has_avx512() || s->geo.dilations[0] != 1 || s->geo.dilations[1] != 1 ||
      s->cin > 16 || s->kh > kMaxKernelRows) {
    return decline();
  }
  // Measured (BM_ConvVariant, docs/performance.md), 1 thread: on every RGB stem of the model
  // set the direct kernel takes 0.52-0.83x the time of the best other variant (3x3/2 with 64, 32
  // and 24 output channels, ResNet's 7x7/2, AlexNet's 11x11/4, VGG's stride-1 3x3) and ties
  // XNNPACK on MobileNetV3's 16-channel 3x3/2; with 5-16 input channels it wins only where the
  // tiles are full and many: SqueezeNet's 55x55 16->64 expand3x3 (Winograd and the GEMM are
  // faster on GoogLeNet's 28x28 16->32 3x3, XNNPACK on the 16-channel 1x1s).
  if (!req.any_config && s->kh * s->kw == 1) return decline();  // 1x1: not measured faster
  if (!req.any_config && s->cin > 4) {
    const bool full_tiles = s->cout % kMaxChunk == 0 && s->geo.output[1] >= 48;
    if (!(s->kh == 3 && s->kw == 3 && s->stride1_undilated() && full_tiles)) return decline();
  }
  return std::unique_ptr<Kernel>(std::make_unique<DirectConvKernel>(*s));
}

#else

Result<std::unique_ptr<Kernel>> make_direct_conv(const KernelRequest& /*req*/) {
  return isa_unavailable(Isa::kAvx512f);
}

#endif  // TESSERA_X86_64

}  // namespace tessera::cpu
