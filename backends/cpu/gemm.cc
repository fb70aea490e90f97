// Tessera's f32 GEMM: packing, blocking, threading (portable) and the AVX-512 microkernel
// (intrinsics in functions compiled for avx512f + fma by target attribute; only called after
// gemm_available() said yes, so the rest of the build keeps its portable flags).
#include "backends/cpu/gemm.h"

#include <cpuinfo.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backends/cpu/simd.h"
#include "core/allocator.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {

// ---- The microkernel ------------------------------------------------------------------------

using MicroTile = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t,
                           const float*, int64_t, const float*, bool, float, float);

#if TESSERA_X86_64

// The full 14-row tile's k loop in assembly: GCC does not keep 28 accumulators, two B vectors
// and the fourteen A rows in registers (it derives one pointer per row, whose increments then
// compete with the FMAs, and spills). Here row i of A is addressed as base + stride * {0, 1, 2}
// from five base pointers (rows 0, 3, 6, 9, 12), the loop is unrolled 8 times, and each A row is
// prefetched two cache lines ahead once per 8 k. zmm0..27 accumulate (row i: zmm 2i, 2i + 1),
// zmm28/29 hold the B vectors, zmm30/31 the broadcasts; the sums are stored to `t` [14][32].
// clang-format off
#define TESSERA_GEMM_ROW(addr, bc, c0, c1)               \
  "vbroadcastss " addr ", %%zmm" bc "\n\t"               \
  "vfmadd231ps %%zmm28, %%zmm" bc ", %%zmm" c0 "\n\t"    \
  "vfmadd231ps %%zmm29, %%zmm" bc ", %%zmm" c1 "\n\t"
// Rows base, base + stride, base + 2 * stride (accumulators c0..c5) at k offset q.
#define TESSERA_GEMM_ROWS2(q, base, c0, c1, c2, c3)            \
  TESSERA_GEMM_ROW(#q "*4(%[" base "])", "30", c0, c1)         \
  TESSERA_GEMM_ROW(#q "*4(%[" base "],%[l],1)", "31", c2, c3)
#define TESSERA_GEMM_ROWS3(q, base, c0, c1, c2, c3, c4, c5)    \
  TESSERA_GEMM_ROWS2(q, base, c0, c1, c2, c3)                  \
  TESSERA_GEMM_ROW(#q "*4(%[" base "],%[l],2)", "30", c4, c5)
#define TESSERA_GEMM_STEP(q)                                        \
  "vmovaps " #q "*128(%[b]), %%zmm28\n\t"                           \
  "vmovaps " #q "*128+64(%[b]), %%zmm29\n\t"                        \
  TESSERA_GEMM_ROWS3(q, "a0", "0", "1", "2", "3", "4", "5")         \
  TESSERA_GEMM_ROWS3(q, "a3", "6", "7", "8", "9", "10", "11")       \
  TESSERA_GEMM_ROWS3(q, "a6", "12", "13", "14", "15", "16", "17")   \
  TESSERA_GEMM_ROWS3(q, "a9", "18", "19", "20", "21", "22", "23")   \
  TESSERA_GEMM_ROWS2(q, "a12", "24", "25", "26", "27")
#define TESSERA_GEMM_STORE(i0, i1, i2, i3)         \
  "vmovaps %%zmm" #i0 ", " #i0 "*64(%[t])\n\t"     \
  "vmovaps %%zmm" #i1 ", " #i1 "*64(%[t])\n\t"     \
  "vmovaps %%zmm" #i2 ", " #i2 "*64(%[t])\n\t"     \
  "vmovaps %%zmm" #i3 ", " #i3 "*64(%[t])\n\t"

TESSERA_AVX512 void k_loop_14x32(const float* a, int64_t lda, const float* b, int64_t kc,
                                 float* t) {
  const float* a0 = a;
  const float* a3 = a + 3 * lda;
  const float* a6 = a + 6 * lda;
  const float* a9 = a + 9 * lda;
  const float* a12 = a + 12 * lda;
  const int64_t l = lda * static_cast<int64_t>(sizeof(float));
  asm volatile(
      "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
      "vmovaps %%zmm0, %%zmm1\n\t"  "vmovaps %%zmm0, %%zmm2\n\t"  "vmovaps %%zmm0, %%zmm3\n\t"
      "vmovaps %%zmm0, %%zmm4\n\t"  "vmovaps %%zmm0, %%zmm5\n\t"  "vmovaps %%zmm0, %%zmm6\n\t"
      "vmovaps %%zmm0, %%zmm7\n\t"  "vmovaps %%zmm0, %%zmm8\n\t"  "vmovaps %%zmm0, %%zmm9\n\t"
      "vmovaps %%zmm0, %%zmm10\n\t" "vmovaps %%zmm0, %%zmm11\n\t" "vmovaps %%zmm0, %%zmm12\n\t"
      "vmovaps %%zmm0, %%zmm13\n\t" "vmovaps %%zmm0, %%zmm14\n\t" "vmovaps %%zmm0, %%zmm15\n\t"
      "vmovaps %%zmm0, %%zmm16\n\t" "vmovaps %%zmm0, %%zmm17\n\t" "vmovaps %%zmm0, %%zmm18\n\t"
      "vmovaps %%zmm0, %%zmm19\n\t" "vmovaps %%zmm0, %%zmm20\n\t" "vmovaps %%zmm0, %%zmm21\n\t"
      "vmovaps %%zmm0, %%zmm22\n\t" "vmovaps %%zmm0, %%zmm23\n\t" "vmovaps %%zmm0, %%zmm24\n\t"
      "vmovaps %%zmm0, %%zmm25\n\t" "vmovaps %%zmm0, %%zmm26\n\t" "vmovaps %%zmm0, %%zmm27\n\t"
      "cmp $8, %[k]\n\t"
      "jl 2f\n\t"
      "1:\n\t"  // 8 k per iteration
      TESSERA_GEMM_STEP(0)
      "prefetcht0 128(%[a0])\n\t"          "prefetcht0 128(%[a0],%[l],1)\n\t"
      TESSERA_GEMM_STEP(1)
      "prefetcht0 128(%[a0],%[l],2)\n\t"   "prefetcht0 128(%[a3])\n\t"
      TESSERA_GEMM_STEP(2)
      "prefetcht0 128(%[a3],%[l],1)\n\t"   "prefetcht0 128(%[a3],%[l],2)\n\t"
      TESSERA_GEMM_STEP(3)
      "prefetcht0 128(%[a6])\n\t"          "prefetcht0 128(%[a6],%[l],1)\n\t"
      TESSERA_GEMM_STEP(4)
      "prefetcht0 128(%[a6],%[l],2)\n\t"   "prefetcht0 128(%[a9])\n\t"
      TESSERA_GEMM_STEP(5)
      "prefetcht0 128(%[a9],%[l],1)\n\t"   "prefetcht0 128(%[a9],%[l],2)\n\t"
      TESSERA_GEMM_STEP(6)
      "prefetcht0 128(%[a12])\n\t"
      TESSERA_GEMM_STEP(7)
      "prefetcht0 128(%[a12],%[l],1)\n\t"
      "add $32, %[a0]\n\t" "add $32, %[a3]\n\t" "add $32, %[a6]\n\t" "add $32, %[a9]\n\t"
      "add $32, %[a12]\n\t"
      "add $1024, %[b]\n\t"
      "sub $8, %[k]\n\t"
      "cmp $8, %[k]\n\t"
      "jge 1b\n\t"
      "2:\n\t"  // the remaining k one at a time
      "test %[k], %[k]\n\t"
      "jz 4f\n\t"
      "3:\n\t"
      TESSERA_GEMM_STEP(0)
      "add $4, %[a0]\n\t" "add $4, %[a3]\n\t" "add $4, %[a6]\n\t" "add $4, %[a9]\n\t"
      "add $4, %[a12]\n\t"
      "add $128, %[b]\n\t"
      "dec %[k]\n\t"
      "jnz 3b\n\t"
      "4:\n\t"
      TESSERA_GEMM_STORE(0, 1, 2, 3)     TESSERA_GEMM_STORE(4, 5, 6, 7)
      TESSERA_GEMM_STORE(8, 9, 10, 11)   TESSERA_GEMM_STORE(12, 13, 14, 15)
      TESSERA_GEMM_STORE(16, 17, 18, 19) TESSERA_GEMM_STORE(20, 21, 22, 23)
      TESSERA_GEMM_STORE(24, 25, 26, 27)
      : [a0] "+r"(a0), [a3] "+r"(a3), [a6] "+r"(a6), [a9] "+r"(a9), [a12] "+r"(a12),
        [b] "+r"(b), [k] "+r"(kc)
      : [l] "r"(l), [t] "r"(t)
      : "cc", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8",
        "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18",
        "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28",
        "xmm29", "xmm30", "xmm31");
}
#undef TESSERA_GEMM_ROW
#undef TESSERA_GEMM_ROWS2
#undef TESSERA_GEMM_ROWS3
#undef TESSERA_GEMM_STEP
#undef TESSERA_GEMM_STORE
// clang-format on

// One MR x 32 tile: c[i * ldc + j] = sum_p a[i * lda + p] * b[p * 32 + j] (+ prev[i * ldp + j])
// for j < nr, then (last K block) + bias[j] and the clamp. `prev` is C itself after the first K
// block (the partial sum), a fused residual on the first one, or null. `b` is a packed panel
// (64-byte aligned, zero-padded).
template <int MR>
TESSERA_AVX512 void micro_tile(const float* a, int64_t lda, const float* b, int64_t kc, float* c,
                               int64_t ldc, int64_t nr, const float* prev, int64_t ldp,
                               const float* bias, bool clamp, float lo, float hi) {
  __m512 acc0[MR], acc1[MR];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    // The C rows are written at the end: fetch them while the FMAs run.
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + i * ldc + 16), _MM_HINT_T0);
  }
  if (prev != nullptr && prev != c) {
    // A fused residual: its rows are read at the end too, from memory no one touched lately.
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      _mm_prefetch(reinterpret_cast<const char*>(prev + i * ldp), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(prev + i * ldp + 16), _MM_HINT_T0);
    }
  }
  if constexpr (MR == kGemmMR) {
    alignas(64) float t[kGemmMR * kGemmNR];
    k_loop_14x32(a, lda, b, kc, t);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      acc0[i] = _mm512_load_ps(t + i * kGemmNR);
      acc1[i] = _mm512_load_ps(t + i * kGemmNR + 16);
    }
  } else {
    // Edge tiles (fewer rows): the same loop in intrinsics.
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      acc0[i] = _mm512_setzero_ps();
      acc1[i] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < kc; ++p) {
      const __m512 b0 = _mm512_load_ps(b + p * kGemmNR);
      const __m512 b1 = _mm512_load_ps(b + p * kGemmNR + 16);
#pragma GCC unroll 16
      for (int i = 0; i < MR; ++i) {
        const __m512 ai = _mm512_set1_ps(a[i * lda + p]);
        acc0[i] = _mm512_fmadd_ps(ai, b0, acc0[i]);
        acc1[i] = _mm512_fmadd_ps(ai, b1, acc1[i]);
      }
    }
  }
  // Epilogue, masked for a partial panel.
  const __mmask16 k0 = nr >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << nr) - 1);
  const __mmask16 k1 = nr >= 32   ? __mmask16(0xFFFF)
                       : nr <= 16 ? __mmask16(0)
                                  : __mmask16((1u << (nr - 16)) - 1);
  __m512 bias0 = _mm512_setzero_ps(), bias1 = _mm512_setzero_ps();
  if (bias != nullptr) {
    bias0 = _mm512_maskz_loadu_ps(k0, bias);
    bias1 = _mm512_maskz_loadu_ps(k1, bias + 16);
  }
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
    float* row = c + i * ldc;
    __m512 v0 = acc0[i], v1 = acc1[i];
    if (prev != nullptr) {
      v0 = _mm512_add_ps(v0, _mm512_maskz_loadu_ps(k0, prev + i * ldp));
      v1 = _mm512_add_ps(v1, _mm512_maskz_loadu_ps(k1, prev + i * ldp + 16));
    }
    if (bias != nullptr) {
      v0 = _mm512_add_ps(v0, bias0);
      v1 = _mm512_add_ps(v1, bias1);
    }
    if (clamp) {
      // (maskz forms: GCC 12 warns about the undefined source of the unmasked ones.)
      v0 = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, v0, vlo), vhi);
      v1 = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, v1, vlo), vhi);
    }
    _mm512_mask_storeu_ps(row, k0, v0);
    _mm512_mask_storeu_ps(row + 16, k1, v1);
  }
}

// kMicroTilesAvx512[mr] handles mr rows (1 .. kGemmMR).
template <size_t... I>
constexpr auto micro_table(std::index_sequence<I...>) {
  return std::array<MicroTile, sizeof...(I)>{
      {I == 0 ? static_cast<MicroTile>(nullptr) : &micro_tile<(I == 0 ? 1 : int(I))>...}};
}
constexpr auto kMicroTilesAvx512 = micro_table(std::make_index_sequence<kGemmMR + 1>());
#endif  // TESSERA_X86_64

// The same tile in portable C++ (the compiler vectorises the j loops for the target): what
// gemm_block runs where the AVX-512 tile is not built (other architectures) or the CPU lacks
// AVX-512F. The kernel table offers Tessera's GEMM variants only with AVX-512 (gemm_available);
// this keeps PackedB / Gemm correct everywhere.
template <int MR>
void micro_tile_portable(const float* a, int64_t lda, const float* b, int64_t kc, float* c,
                         int64_t ldc, int64_t nr, const float* prev, int64_t ldp, const float* bias,
                         bool clamp, float lo, float hi) {
  float acc[MR][kGemmNR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b + p * kGemmNR;
    for (int i = 0; i < MR; ++i) {
      const float ai = a[i * lda + p];
      for (int64_t j = 0; j < kGemmNR; ++j) acc[i][j] += ai * bp[j];
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int64_t j = 0; j < nr; ++j) {
      float v = acc[i][j];
      if (prev != nullptr) v += prev[i * ldp + j];
      if (bias != nullptr) v += bias[j];
      if (clamp) v = std::min(std::max(v, lo), hi);
      c[i * ldc + j] = v;
    }
  }
}
template <size_t... I>
constexpr auto portable_table(std::index_sequence<I...>) {
  return std::array<MicroTile, sizeof...(I)>{
      {I == 0 ? static_cast<MicroTile>(nullptr) : &micro_tile_portable<(I == 0 ? 1 : int(I))>...}};
}
constexpr auto kMicroTilesPortable = portable_table(std::make_index_sequence<kGemmMR + 1>());

const std::array<MicroTile, kGemmMR + 1>& micro_tiles() {
#if TESSERA_X86_64
  if (has_avx512()) return kMicroTilesAvx512;
#endif
  return kMicroTilesPortable;
}

// C = epilogue(0) for an empty K (no B rows): bias, residual and clamp only.
void empty_k(int64_t m0, int64_t mc, int64_t n0, int64_t nc, float* c, int64_t ldc,
             const GemmEpilogue& ep) {
  for (int64_t i = 0; i < mc; ++i) {
    for (int64_t j = 0; j < nc; ++j) {
      float v = ep.bias != nullptr ? ep.bias[n0 + j] : 0.f;
      if (ep.residual != nullptr) v += ep.residual[(m0 + i) * ep.ldr + n0 + j];
      if (ep.clamp) v = std::min(std::max(v, ep.lo), ep.hi);
      c[i * ldc + j] = v;
    }
  }
}

}  // namespace

bool gemm_available() {
  return has_avx512();
}

const GemmBlocking& gemm_blocking() {
  static const GemmBlocking blocking = [] {
    GemmBlocking b;
    if (!cpuinfo_initialize()) return b;
    const cpuinfo_cache* l1 = cpuinfo_get_l1d_cache(0);
    const cpuinfo_cache* l2 = cpuinfo_get_l2_cache(0);
    // Half of L1 for the B panel being swept (the rest: A rows, C tile, stack).
    if (l1 != nullptr && l1->size > 0) {
      b.kc = std::clamp<int64_t>(l1->size / 2 / (kGemmNR * sizeof(float)) / 8 * 8, 64, 512);
    }
    // Half of L2 for the A chunk.
    if (l2 != nullptr && l2->size > 0) {
      const int64_t rows = static_cast<int64_t>(l2->size / 2 / (b.kc * sizeof(float)));
      b.mc = std::clamp<int64_t>(rows / kGemmMR * kGemmMR, 4 * kGemmMR, 4096);
    }
    return b;
  }();
  return blocking;
}

void PackedB::Free::operator()(float* p) const {
  std::free(p);
}

PackedB PackedB::pack(const float* src, int64_t k, int64_t n, int64_t ld, int64_t kc) {
  PackedB b;
  b.k_ = k;
  b.n_ = n;
  if (kc <= 0) kc = gemm_blocking().kc;
  // Balance the blocks: K = 300 with kc 256 gives two blocks of 150, not 256 + 44.
  const int64_t blocks = std::max<int64_t>(1, (k + kc - 1) / kc);
  b.kc_ = std::max<int64_t>(1, (k + blocks - 1) / blocks);
  b.size_ = k * b.panels() * kGemmNR;
  if (b.size_ == 0) return b;
  const size_t bytes = (static_cast<size_t>(b.size_) * sizeof(float) + 63) / 64 * 64;
  b.data_.reset(static_cast<float*>(allocate_aligned(bytes, 64)));
  for (int64_t kb = 0; kb < b.k_blocks(); ++kb) {
    const int64_t rows = b.block_rows(kb);
    for (int64_t j = 0; j < b.panels(); ++j) {
      float* dst = const_cast<float*>(b.panel(kb, j));
      for (int64_t p = 0; p < rows; ++p) {
        const float* row = src + (kb * b.kc_ + p) * ld;
        for (int64_t q = 0; q < kGemmNR; ++q) {
          const int64_t col = j * kGemmNR + q;
          dst[p * kGemmNR + q] = col < n ? row[col] : 0.f;
        }
      }
    }
  }
  return b;
}

int64_t gemm_scratch_floats(const PackedB& b) {
  return gemm_blocking().mc * b.kc();
}

void gemm_block(const PackedB& b, const GemmA& a, int64_t m0, int64_t mc, int64_t n0, int64_t nc,
                float* c, int64_t ldc, const GemmEpilogue& ep, float* scratch) {
  if (mc <= 0 || nc <= 0) return;
  if (b.k() == 0) return empty_k(m0, mc, n0, nc, c, ldc, ep);
  const int64_t chunk = gemm_blocking().mc;
  const int64_t n_end = n0 + nc, last = b.k_blocks() - 1;
  const int64_t j0 = n0 / kGemmNR, j1 = (n_end + kGemmNR - 1) / kGemmNR;
  const std::array<MicroTile, kGemmMR + 1>& tiles = micro_tiles();
  for (int64_t r0 = m0; r0 < m0 + mc; r0 += chunk) {
    const int64_t rows = std::min(chunk, m0 + mc - r0);
    for (int64_t kb = 0; kb <= last; ++kb) {
      const int64_t k0 = kb * b.kc(), kc = b.block_rows(kb);
      const float* ap;
      int64_t lda;
      if (a.data != nullptr) {
        ap = a.data + r0 * a.ld + k0;
        lda = a.ld;
      } else {
        lda = b.kc();
        a.gather(r0, rows, k0, kc, scratch, lda);
        ap = scratch;
      }
      const bool is_last = kb == last;
      for (int64_t j = j0; j < j1; ++j) {
        const float* panel = b.panel(kb, j);
        const int64_t nr = std::min(kGemmNR, n_end - j * kGemmNR);
        const float* bias = is_last && ep.bias != nullptr ? ep.bias + j * kGemmNR : nullptr;
        // The residual enters with the first K block, in place of the partial sum the later
        // blocks add (so a GEMM without one runs exactly the epilogue it had before).
        const float* res =
            ep.residual != nullptr ? ep.residual + r0 * ep.ldr + j * kGemmNR : nullptr;
        for (int64_t i = 0; i < rows; i += kGemmMR) {
          const int64_t mr = std::min(kGemmMR, rows - i);
          float* tile = c + (r0 - m0 + i) * ldc + j * kGemmNR - n0;
          const float* prev = kb > 0 ? tile : res != nullptr ? res + i * ep.ldr : nullptr;
          tiles[static_cast<size_t>(mr)](ap + i * lda, lda, panel, kc, tile, ldc, nr, prev,
                                         kb > 0 ? ldc : ep.ldr, bias, is_last && ep.clamp, ep.lo,
                                         ep.hi);
        }
      }
    }
  }
}

namespace {

// The work split of a small-M GEMM: `mb` rows per row block (whole tiles), `np` panels per
// column range; the items are the row blocks times the column ranges.
struct SmallMSplit {
  int64_t mb = 0, np = 0;
};

// Relative costs in multiply-adds (one FMA lane): streaming one float of B into an item (from L3
// or memory; every row block streams its column range of B once), reading one float of A into
// an item (every column range reads its rows of A once; from L2 or L3, or gathered), and the
// fixed cost of an item (hand-out, panel and tile edges).
constexpr double kBFloatCost = 8;
constexpr double kAFloatCost = 2;
constexpr double kAGatheredFloatCost = 4;
constexpr double kItemCost = 2e4;

// Chooses the split of M rows x `panels` panels (K deep) over `threads` threads whose makespan
// (items handed out in order to the least loaded thread, as ThreadPool::parallel_items does)
// is shortest in the cost model above, among the splits with at least 4 items per thread where
// there are any (so that a thread slowed by the rest of the machine is made up for by the
// others). Small M: the row blocks alone balance badly (13 tiles on 2 threads: 7 + 6) and each
// one streams all of B; column ranges with all rows read B once in total.
SmallMSplit plan_small_m(int64_t m, int64_t panels, int64_t k, int threads, bool gathered) {
  const int64_t tiles = (m + kGemmMR - 1) / kGemmMR;
  const double a_cost = gathered ? kAGatheredFloatCost : kAFloatCost;
  const int64_t max_items = 8 * static_cast<int64_t>(threads);
  SmallMSplit best{m, panels};
  double best_span = INFINITY;
  bool best_many = false;
  std::vector<double> load(static_cast<size_t>(threads));
  for (int64_t r = 1; r <= std::min(tiles, max_items); ++r) {
    const int64_t mb = (tiles + r - 1) / r * kGemmMR;
    const int64_t blocks = (m + mb - 1) / mb;
    if (blocks != r) continue;  // the same split as a smaller r
    for (int64_t sp = 1; sp <= std::min(panels, max_items / r); ++sp) {
      const int64_t np = (panels + sp - 1) / sp;
      const int64_t splits = (panels + np - 1) / np;
      if (splits != sp) continue;
      std::fill(load.begin(), load.end(), 0.0);
      for (int64_t i = 0; i < blocks * splits; ++i) {
        const double rows = static_cast<double>(std::min(mb, m - i / splits * mb));
        const double cols = static_cast<double>(std::min(np, panels - i % splits * np) * kGemmNR);
        const double cost =
            static_cast<double>(k) * (rows * cols + a_cost * rows + kBFloatCost * cols) + kItemCost;
        *std::min_element(load.begin(), load.end()) += cost;
      }
      const double span = *std::max_element(load.begin(), load.end());
      const bool many = blocks * splits >= 4 * threads;
      if ((many && !best_many) || (many == best_many && span < best_span)) {
        best = {mb, np};
        best_span = span;
        best_many = many;
      }
    }
  }
  return best;
}

}  // namespace

void Gemm::bind(int64_t m, int threads, bool gathered) {
  m_ = m;
  const int64_t panels = b().panels();
  const int64_t tiles = (m + kGemmMR - 1) / kGemmMR;
  blocks_ = m == 0 ? 0 : 1;
  splits_ = 1;
  mb_ = m;
  np_ = panels;
  if (threads > 1 && m > 0 && panels > 0) {
    if (tiles >= 16 * threads) {
      // Row blocks, 4 per thread (items are handed out dynamically), whole tiles each.
      const int64_t items = 4 * threads;
      mb_ = (tiles + items - 1) / items * kGemmMR;
    } else {
      const SmallMSplit split = plan_small_m(m, panels, b().k(), threads, gathered);
      mb_ = split.mb;
      np_ = split.np;
    }
    blocks_ = (m + mb_ - 1) / mb_;
  }
  np_ = std::max<int64_t>(np_, 1);
  splits_ = panels == 0 ? 1 : (panels + np_ - 1) / np_;
  scratch_.assign(static_cast<size_t>(std::max(threads, 1)), {});
  if (gathered) {
    for (std::vector<float>& s : scratch_) {
      s.assign(
          static_cast<size_t>(std::min(gemm_blocking().mc, std::max<int64_t>(mb_, 1)) * b().kc()),
          0.f);
    }
  }
}

void Gemm::run(ThreadPool& pool, const GemmA& a, float* c, int64_t ldc, const GemmEpilogue& ep,
               const std::function<void(int64_t, int64_t, int64_t, int64_t)>& after) {
  run_blocks(pool, blocks_, splits_, scratch_, [&](float* scratch, int64_t block, int64_t split) {
    const int64_t m0 = block * mb_, mc = std::min(mb_, m_ - m0);
    const int64_t n0 = split * np_ * kGemmNR, nc = std::min(np_ * kGemmNR, b().n() - n0);
    gemm_block(b(), a, m0, mc, n0, nc, c + m0 * ldc + n0, ldc, ep, scratch);
    if (after) after(m0, mc, n0, nc);
  });
}

uint64_t Gemm::owned_bytes() const {
  return b_.owned_bytes() + scratch_bytes(scratch_);
}

}  // namespace tessera::cpu
