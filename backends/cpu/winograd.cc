// Winograd convolution F(m x m, 3 x 3) for stride-1, undilated, dense 3x3 convolutions in NHWC
// (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
//
// Each output tile of m x m pixels is computed from an (m+2) x (m+2) input tile d as
//   Y = A^T [ (G g G^T) (.) (B^T d B) ] A
// where (.) is the element-wise product of alpha x alpha = (m+2)^2 matrices. Over all tiles and
// channels the element-wise products become alpha^2 independent GEMMs:
//   M[e] (tiles x K) = V[e] (tiles x C) * U[e] (C x K),   e = 0 .. alpha^2 - 1,
// which run on Tessera's GEMM (gemm.h) with each U[e] packed once into its panels, or, for
// fewer than 32 input channels, on OpenBLAS sgemm; U = G g G^T is computed once at build time
// (in double).
//
// Phases of one run, per work item (a block of tiles x a range of output channels):
//   1. input transform: for every tile, B^T d B with channel vectors as the SIMD dimension
//      (NHWC keeps the channels of a pixel contiguous); pixels outside the image read a zero
//      row, so padding costs nothing;
//   2. alpha^2 GEMMs on the block;
//   3. output transform A^T M A, a fused residual Add, bias and fused activation, written
//      straight into Y.
// Blocks are sized so that V and M of one block stay in the per-core L2 cache; work items are
// handed to the pool's threads one at a time, and when there are too few tile blocks to keep
// every thread busy (small feature maps), the output channels are split instead.
//
// F(2x2): 2.25x fewer multiplications than direct convolution, transforms with +-1 only (exact).
// F(4x4): 4x fewer, but constants up to 8 and 1/24 that lose about 1-2 more decimal digits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/openblas.h"
#include "backends/cpu/simd.h"

namespace tessera::cpu {

#if TESSERA_X86_64  // AVX-512 code throughout (kernel_table.h: Isa::kAvx512f)

namespace {

// The 1-D transforms of F(2x2, 3x3): alpha = 4.
struct F2 {
  static constexpr int kM = 2;
  static constexpr int kAlpha = 4;
  static constexpr double kG[kAlpha][3] = {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}};

  // o = B^T d
  template <typename V>
  TESSERA_AVX512_INLINE static void input(const V* d, V* o) {
    o[0] = d[0] - d[2];
    o[1] = d[1] + d[2];
    o[2] = d[2] - d[1];
    o[3] = d[1] - d[3];
  }
  // o = A^T m
  template <typename V>
  TESSERA_AVX512_INLINE static void output(const V* m, V* o) {
    o[0] = m[0] + m[1] + m[2];
    o[1] = m[1] - m[2] - m[3];
  }
};

// The 1-D transforms of F(4x4, 3x3): alpha = 6.
struct F4 {
  static constexpr int kM = 4;
  static constexpr int kAlpha = 6;
  static constexpr double kG[kAlpha][3] = {{1. / 4, 0, 0},
                                           {-1. / 6, -1. / 6, -1. / 6},
                                           {-1. / 6, 1. / 6, -1. / 6},
                                           {1. / 24, 1. / 12, 1. / 6},
                                           {1. / 24, -1. / 12, 1. / 6},
                                           {0, 0, 1}};

  template <typename V>
  TESSERA_AVX512_INLINE static void input(const V* d, V* o) {
    const V t0 = d[4] - 4.f * d[2];
    const V t1 = d[3] - 4.f * d[1];
    const V t2 = d[4] - d[2];
    const V t3 = 2.f * (d[3] - d[1]);
    o[0] = 4.f * d[0] - 5.f * d[2] + d[4];
    o[1] = t0 + t1;
    o[2] = t0 - t1;
    o[3] = t2 + t3;
    o[4] = t2 - t3;
    o[5] = 4.f * d[1] - 5.f * d[3] + d[5];
  }
  template <typename V>
  TESSERA_AVX512_INLINE static void output(const V* m, V* o) {
    const V s12 = m[1] + m[2], d12 = m[1] - m[2];
    const V s34 = m[3] + m[4], d34 = m[3] - m[4];
    o[0] = m[0] + s12 + s34;
    o[1] = d12 + 2.f * d34;
    o[2] = s12 + 4.f * s34;
    o[3] = d12 + 8.f * d34 + m[5];
  }
};

// V[(i * alpha + j) * ldv + c] = (B^T d B)[i][j] for channels [0, n): d[k * alpha + l] points at
// the input pixel (row k, column l) of the tile (or at zeros).
template <typename F>
TESSERA_AVX512 void input_tile(const float* const* d, float* v, int64_t ldv, int64_t n) {
  constexpr int A = F::kAlpha;
  int64_t c = 0;
  for (; c + kF32x16Lanes <= n; c += kF32x16Lanes) {
    F32x16 t[A][A];  // t = B^T d, column by column
    for (int l = 0; l < A; ++l) {
      F32x16 col[A], out[A];
      for (int k = 0; k < A; ++k) col[k] = load16(d[k * A + l] + c);
      F::input(col, out);
      for (int i = 0; i < A; ++i) t[i][l] = out[i];
    }
    for (int i = 0; i < A; ++i) {
      F32x16 out[A];
      F::input(t[i], out);
      for (int j = 0; j < A; ++j) store16(v + (i * A + j) * ldv + c, out[j]);
    }
  }
  for (; c < n; ++c) {
    float t[A][A];
    for (int l = 0; l < A; ++l) {
      float col[A], out[A];
      for (int k = 0; k < A; ++k) col[k] = d[k * A + l][c];
      F::input(col, out);
      for (int i = 0; i < A; ++i) t[i][l] = out[i];
    }
    for (int i = 0; i < A; ++i) {
      float out[A];
      F::input(t[i], out);
      for (int j = 0; j < A; ++j) v[(i * A + j) * ldv + c] = out[j];
    }
  }
}

// y[i * m + j][c] = (A^T M A)[i][j] for channels [0, n), M[e] at m + e * ldm.
template <typename F>
TESSERA_AVX512 void output_tile(const float* m, int64_t ldm, float* const* y, int64_t n) {
  constexpr int A = F::kAlpha, M = F::kM;
  int64_t c = 0;
  for (; c + kF32x16Lanes <= n; c += kF32x16Lanes) {
    F32x16 t[M][A];  // t = A^T M, column by column
    for (int l = 0; l < A; ++l) {
      F32x16 col[A], out[M];
      for (int k = 0; k < A; ++k) col[k] = load16(m + (k * A + l) * ldm + c);
      F::output(col, out);
      for (int i = 0; i < M; ++i) t[i][l] = out[i];
    }
    for (int i = 0; i < M; ++i) {
      F32x16 out[M];
      F::output(t[i], out);
      for (int j = 0; j < M; ++j) store16(y[i * M + j] + c, out[j]);
    }
  }
  for (; c < n; ++c) {
    float t[M][A];
    for (int l = 0; l < A; ++l) {
      float col[A], out[M];
      for (int k = 0; k < A; ++k) col[k] = m[(k * A + l) * ldm + c];
      F::output(col, out);
      for (int i = 0; i < M; ++i) t[i][l] = out[i];
    }
    for (int i = 0; i < M; ++i) {
      float out[M];
      F::output(t[i], out);
      for (int j = 0; j < M; ++j) y[i * M + j][c] = out[j];
    }
  }
}

// y[c] += r[c] for channels [0, n): a fused residual Add, on an output pixel still in cache.
TESSERA_AVX512 void add_residual(const float* r, float* y, int64_t n) {
  int64_t c = 0;
  for (; c + kF32x16Lanes <= n; c += kF32x16Lanes) store16(y + c, load16(y + c) + load16(r + c));
  for (; c < n; ++c) y[c] += r[c];
}

// Bytes of L2 cache one work item's transformed input and products should fit in.
constexpr int64_t kBlockBudgetBytes = 1 << 20;
constexpr int64_t kMinBlockTiles = 96;

// The kE transformed weight matrices U[e] (C x K), packed for Tessera's GEMM.
struct PackedU {
  std::vector<PackedB> e;
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const PackedB& p : e) b += p.bytes();
    return b;
  }
};

template <typename F>
class WinogradConvKernel final : public NhwcIo<> {
  static constexpr int A = F::kAlpha, M = F::kM, kE = A * A;

 public:
  WinogradConvKernel(const ConvSetup& s, std::string name, bool use_gemm, PackCache* packs,
                     ValueId weight)
      : s_(s), name_(std::move(name)), use_gemm_(use_gemm) {
    c_ = s.cin;
    k_ = s.cout;
    if (s.bias != nullptr) bias_.assign(s.bias->data<float>(), s.bias->data<float>() + k_);
    zeros_.assign(static_cast<size_t>(c_), 0.f);
    if (use_gemm_) {
      // U[e] packed once into the GEMM's panels (shared by the nodes of the program that
      // convolve with the same weights); the row-major U is then not kept.
      const std::string how = "winograd " + name_ + " tessera gemm c=" + std::to_string(c_) +
                              " k=" + std::to_string(k_);
      packed_u_ = share_packing<PackedU>(packs, weight, how, [&] {
        const std::vector<float> u = transform();
        PackedU p;
        for (int e = 0; e < kE; ++e)
          p.e.push_back(PackedB::pack(u.data() + e * c_ * k_, c_, k_, k_));
        return p;
      });
    } else {
      u_ = transform();
    }
  }

  bool fuse_residual(const Activation& act) override {
    if (!s_.take_residual_activation(act)) return false;
    residual_ = true;
    return true;
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    x_ = in[0].f32();
    y_ = out[0].f32();
    ldy_ = out[0].pixel_stride_or_dense();
    r_ = residual_ ? in.back().f32() : nullptr;  // the extra input after the node's, NHWC
    n_ = in[0].shape[0];
    h_ = in[0].shape[2];
    w_ = in[0].shape[3];
    oh_ = out[0].shape[2];
    ow_ = out[0].shape[3];
    tiles_y_ = (oh_ + M - 1) / M;
    tiles_x_ = (ow_ + M - 1) / M;
    const int64_t tiles = n_ * tiles_y_ * tiles_x_;
    blocks_ = 0;
    if (tiles == 0) return Status();  // an empty batch: nothing to run
    // Tile blocks that keep V (tiles x C) and M (tiles x K) of all kE products in L2.
    const int64_t per_tile = kE * (c_ + k_) * static_cast<int64_t>(sizeof(float));
    // At least kMinBlockTiles rows per GEMM: every block streams all of U (16 x C x K floats,
    // re-packed per call by OpenBLAS, packed once but still larger than L2 for deep layers on
    // Tessera's GEMM), which only pays off over enough tiles (V then spills to L3, which costs
    // less).
    int64_t tb = std::clamp<int64_t>(kBlockBudgetBytes / per_tile, kMinBlockTiles, 256);
    blocks_ = (tiles + tb - 1) / tb;
    // Two or more threads: as many equal blocks per thread, unless blocks would get smaller
    // than 16 tiles; with too few tiles for that, split the output channels instead (the input
    // transform of a block is then repeated per channel range, cheap next to its GEMMs).
    const int threads = pool.num_threads();
    splits_ = 1;
    if (threads > 1 && blocks_ % threads != 0) {
      const int64_t balanced = (blocks_ + threads - 1) / threads * threads;
      if (tiles / balanced >= 16) {
        blocks_ = balanced;
      } else if (blocks_ < threads) {
        splits_ = std::clamp<int64_t>(k_ / 32, 1, threads / blocks_);
      }
    }
    tb_ = (tiles + blocks_ - 1) / blocks_;
    kc_ = (k_ + splits_ - 1) / splits_;
    kc_ = std::min(k_, (kc_ + kGemmNR - 1) / kGemmNR * kGemmNR);  // whole GEMM panels
    splits_ = (k_ + kc_ - 1) / kc_;
    scratch_.resize(static_cast<size_t>(threads));
    for (std::vector<float>& s : scratch_) {
      s.assign(static_cast<size_t>(kE * tb_ * (c_ + kc_) + M * M * kc_), 0.f);
    }
    return Status();
  }

  Status run(ThreadPool& pool) override {
    run_blocks(
        pool, blocks_, splits_, scratch_,
        [this](float* scratch, int64_t block, int64_t split) { run_item(scratch, block, split); });
    return Status();
  }

  // Output tiles are stored pixel by pixel, ldy_ floats apart: any pixel stride works.
  bool writes_strided_output() const override { return true; }

  std::string describe() const override {
    return "winograd " + name_ + " 3x3/1 (" + (use_gemm_ ? "tessera gemm" : "openblas sgemm") +
           ")" + (residual_ ? " +residual" : "") + activation_suffix(s_.act);
  }
  uint64_t owned_bytes() const override {
    uint64_t b = (u_.size() + bias_.size() + zeros_.size()) * sizeof(float);
    b += packed_u_.owned_bytes();
    return b + scratch_bytes(scratch_);
  }

 private:
  // U[e][c][k] = (G g G^T)[e] for the weights g = W[k][c] (3x3), row-major per e.
  std::vector<float> transform() const {
    std::vector<float> u(static_cast<size_t>(kE * c_ * k_), 0.f);
    const float* w = s_.weight->data<float>();
    for (int64_t k = 0; k < k_; ++k) {
      for (int64_t c = 0; c < c_; ++c) {
        const float* g = w + (k * c_ + c) * 9;
        double gg[A][3];  // G g
        for (int i = 0; i < A; ++i) {
          for (int q = 0; q < 3; ++q) {
            gg[i][q] = F::kG[i][0] * g[q] + F::kG[i][1] * g[3 + q] + F::kG[i][2] * g[6 + q];
          }
        }
        for (int i = 0; i < A; ++i) {
          for (int j = 0; j < A; ++j) {
            const double v =
                gg[i][0] * F::kG[j][0] + gg[i][1] * F::kG[j][1] + gg[i][2] * F::kG[j][2];
            u[static_cast<size_t>(((i * A + j) * c_ + c) * k_ + k)] = static_cast<float>(v);
          }
        }
      }
    }
    return u;
  }

  // Tile t -> image, first output row and column.
  void tile_origin(int64_t t, int64_t* n, int64_t* oy, int64_t* ox) const {
    *n = t / (tiles_y_ * tiles_x_);
    const int64_t r = t % (tiles_y_ * tiles_x_);
    *oy = r / tiles_x_ * M;
    *ox = r % tiles_x_ * M;
  }

  void run_item(float* scratch, int64_t block, int64_t split) const {
    const int64_t t0 = block * tb_;
    const int64_t nt = std::min(tb_, n_ * tiles_y_ * tiles_x_ - t0);
    const int64_t k0 = split * kc_;
    const int64_t kc = std::min(kc_, k_ - k0);
    float* v = scratch;                // [kE][nt][C]
    float* m = v + kE * tb_ * c_;      // [kE][nt][kc]
    float* edge = m + kE * tb_ * kc_;  // one partial output tile [M*M][kc]
    const int64_t pt = s_.geo.pads_begin[0], pl = s_.geo.pads_begin[1];

    // 1. Input transform.
    for (int64_t t = 0; t < nt; ++t) {
      int64_t n, oy, ox;
      tile_origin(t0 + t, &n, &oy, &ox);
      const float* d[kE];
      for (int k = 0; k < A; ++k) {
        const int64_t iy = oy - pt + k;
        for (int l = 0; l < A; ++l) {
          const int64_t ix = ox - pl + l;
          const bool inside = iy >= 0 && iy < h_ && ix >= 0 && ix < w_;
          d[k * A + l] = inside ? x_ + ((n * h_ + iy) * w_ + ix) * c_ : zeros_.data();
        }
      }
      input_tile<F>(d, v + t * c_, nt * c_, c_);
    }
    // 2. The kE products.
    for (int e = 0; use_gemm_ && e < kE; ++e) {
      const GemmA a{v + e * nt * c_, c_, {}};
      gemm_block(packed_u_.packed->e[static_cast<size_t>(e)], a, 0, nt, k0, kc, m + e * nt * kc, kc,
                 GemmEpilogue{}, nullptr);
    }
    const OpenBlas& blas = openblas();
    for (int e = 0; !use_gemm_ && e < kE; ++e) {
      blas.sgemm(kRowMajor, kNoTrans, kNoTrans, static_cast<int>(nt), static_cast<int>(kc),
                 static_cast<int>(c_), 1.f, v + e * nt * c_, static_cast<int>(c_),
                 u_.data() + e * c_ * k_ + k0, static_cast<int>(k_), 0.f, m + e * nt * kc,
                 static_cast<int>(kc));
    }
    // 3. Output transform, residual, bias and activation.
    const float* bias = bias_.empty() ? nullptr : bias_.data() + k0;
    for (int64_t t = 0; t < nt; ++t) {
      int64_t n, oy, ox;
      if (r_ != nullptr && t + 1 < nt) {
        // The next tile's residual pixels, from memory no one touched lately: fetched while this
        // tile is transformed.
        tile_origin(t0 + t + 1, &n, &oy, &ox);
        for (int64_t i = 0; i < M && oy + i < oh_; ++i) {
          for (int64_t j = 0; j < M && ox + j < ow_; ++j) {
            const float* r = r_ + ((n * oh_ + oy + i) * ow_ + ox + j) * k_ + k0;
            for (int64_t c = 0; c < kc; c += 16) __builtin_prefetch(r + c);
          }
        }
      }
      tile_origin(t0 + t, &n, &oy, &ox);
      const bool full = oy + M <= oh_ && ox + M <= ow_;
      float* y[M * M];
      for (int i = 0; i < M; ++i) {
        for (int j = 0; j < M; ++j) {
          y[i * M + j] =
              full ? y_ + ((n * oh_ + oy + i) * ow_ + ox + j) * ldy_ + k0 : edge + (i * M + j) * kc;
        }
      }
      output_tile<F>(m + t * kc, nt * kc, y, kc);
      for (int i = 0; i < M && oy + i < oh_; ++i) {
        for (int j = 0; j < M && ox + j < ow_; ++j) {
          const int64_t pixel = (n * oh_ + oy + i) * ow_ + ox + j;
          float* dst = y_ + pixel * ldy_ + k0;
          if (!full) std::copy_n(edge + (i * M + j) * kc, kc, dst);
          if (r_ != nullptr) add_residual(r_ + pixel * k_ + k0, dst, kc);
          conv_epilogue(s_, bias, dst, 1, kc, 0);
        }
      }
    }
  }

  ConvSetup s_;
  std::string name_;
  bool use_gemm_ = false;  // Tessera's GEMM on packed_u_, else OpenBLAS on u_
  bool residual_ = false;  // a residual Add is fused (fuse_residual)
  int64_t c_ = 0, k_ = 0;
  std::vector<float> u_, bias_, zeros_;
  SharedPacking<PackedU> packed_u_;
  // Bound.
  const float* x_ = nullptr;
  const float* r_ = nullptr;  // the fused residual (NHWC, k_ channels per pixel) or null
  float* y_ = nullptr;
  int64_t ldy_ = 0;  // floats between output pixels (k_ unless a Concat's slice)
  int64_t n_ = 0, h_ = 0, w_ = 0, oh_ = 0, ow_ = 0, tiles_y_ = 0, tiles_x_ = 0;
  int64_t tb_ = 0, blocks_ = 0, splits_ = 1, kc_ = 0;
  std::vector<std::vector<float>> scratch_;  // per thread
};

// Whether the products run on Tessera's GEMM (packed once) rather than OpenBLAS (which re-packs
// U in every call). Measured (BM_ConvVariant): the GEMM is 1.2-2x faster from 32 input channels
// up; with 16 (SqueezeNet's fire2/3 expand) its 16-deep tiles are mostly epilogue, and OpenBLAS
// is faster.
bool winograd_gemm(const ConvSetup& s) {
  return gemm_available() && (s.cin >= 32 || !openblas().available());
}

// Whether the node is a convolution Winograd F(m x m, 3x3) runs.
Result<std::optional<ConvSetup>> winograd_setup(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> s, conv_setup(req));
  if (!s || !s->dense() || s->kh != 3 || s->kw != 3 || !s->stride1_undilated() || !has_avx512() ||
      (!winograd_gemm(*s) && !openblas().avx512_kernels && !req.any_config)) {
    return std::optional<ConvSetup>();
  }
  return s;
}

}  // namespace

// F(4x4): its transforms lose about 1.5 more decimal digits than F(2x2) on the exported models'
// value ranges (see docs/performance.md), so it is not chosen by default.
Result<std::unique_ptr<Kernel>> make_winograd_f4_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> s, winograd_setup(req));
  if (!s || !req.any_config) return decline();
  return std::unique_ptr<Kernel>(std::make_unique<WinogradConvKernel<F4>>(
      *s, "F(4x4,3x3)", winograd_gemm(*s), req.packs, req.node.inputs[1]));
}

// Measured (BM_ConvVariant, docs/performance.md): F(2x2) beats XNNPACK's direct convolution
// 1.5-2x on feature maps of 14x14 and more; on 7x7 maps there are too few tiles (16) for the
// sgemm calls to amortise packing the transformed weights, and XNNPACK wins; so it does with
// fewer than 16 input channels (VGG's first layer), too shallow for the sgemm and transforms.
constexpr int64_t kMinWinogradF2Tiles = 48;

Result<std::unique_ptr<Kernel>> make_winograd_f2_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> s, winograd_setup(req));
  if (!s) return decline();
  const int64_t tiles = ((s->geo.output[0] + 1) / 2) * ((s->geo.output[1] + 1) / 2);
  if (!req.any_config && (tiles < kMinWinogradF2Tiles || s->cin < 16)) return decline();
  return std::unique_ptr<Kernel>(std::make_unique<WinogradConvKernel<F2>>(
      *s, "F(2x2,3x3)", winograd_gemm(*s), req.packs, req.node.inputs[1]));
}

#else

Result<std::unique_ptr<Kernel>> make_winograd_f4_conv(const KernelRequest& /*req*/) {
  return isa_unavailable(Isa::kAvx512f);
}

Result<std::unique_ptr<Kernel>> make_winograd_f2_conv(const KernelRequest& /*req*/) {
  return isa_unavailable(Isa::kAvx512f);
}

#endif  // TESSERA_X86_64

}  // namespace tessera::cpu
