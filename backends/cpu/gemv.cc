// Tessera's f32 matrix-vector product: packing and the work split (portable), the AVX-512 panel
// kernel (intrinsics in functions compiled for avx512f + fma by target attribute; only called
// after gemm_available() said yes).
#include "backends/cpu/gemv.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "backends/cpu/layout.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/simd.h"
#include "core/allocator.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {

using PanelKernel = void (*)(const float*, const float*, int64_t, float*, int64_t, const float*,
                             float, float);

#if TESSERA_X86_64
// The end of a panel: vector v's S stream accumulators summed, plus the bias, clamped to
// [lo, hi]; `m` masks the columns that exist (nr - 16v of them when fewer than 16).
template <int V, int S>
__attribute__((always_inline, target("avx512f,fma"))) inline __m512 panel_sum(
    const __m512 (&acc)[S][V], int v, int64_t nr, const float* bias, float lo, float hi,
    __mmask16* m) {
  __m512 s = acc[0][v];
#pragma GCC unroll 8
  for (int u = 1; u < S; ++u) s = _mm512_add_ps(s, acc[u][v]);
  const int64_t left = nr - 16 * v;
  *m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
  if (bias != nullptr) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(*m, bias + 16 * v));
  // (maskz forms: GCC 12 warns about the undefined source of the unmasked ones.)
  return _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, s, _mm512_set1_ps(lo)),
                             _mm512_set1_ps(hi));
}

// y[j] = clamp(sum_p x[p] * w[p * 16V + j] + bias[j]) for j < nr (nr <= 16V); `w` one packed
// panel, 64-byte aligned, rows 16V floats. The K rows are read as S streams at once (the
// panel's S consecutive parts of K / S rows, each into its own V accumulators; the K % S rows
// left over at the end go to the first): S streams keep more cache-line fills in flight than
// one, which a single core needs to approach the memory bandwidth (the hardware prefetchers
// run ahead of each stream separately), and the S x V accumulators hide the FMA latency.
template <int V, int S>
TESSERA_AVX512 void panel_kernel(const float* x, const float* w, int64_t k, float* y, int64_t nr,
                                 const float* bias, float lo, float hi) {
  constexpr int64_t kRow = 16 * V;
  __m512 acc[S][V] = {};
  const int64_t seg = k / S;
  for (int64_t p = 0; p < seg; ++p) {
#pragma GCC unroll 8
    for (int u = 0; u < S; ++u) {
      const int64_t row = u * seg + p;
      const __m512 xu = _mm512_set1_ps(x[row]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        acc[u][v] = _mm512_fmadd_ps(xu, _mm512_load_ps(w + row * kRow + 16 * v), acc[u][v]);
      }
    }
  }
  for (int64_t p = S * seg; p < k; ++p) {
    const __m512 xp = _mm512_set1_ps(x[p]);
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[0][v] = _mm512_fmadd_ps(xp, _mm512_load_ps(w + p * kRow + 16 * v), acc[0][v]);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    __mmask16 m;
    const __m512 s = panel_sum<V, S>(acc, v, nr, bias, lo, hi, &m);
    _mm512_mask_storeu_ps(y + 16 * v, m, s);
  }
}

// Streams per panel (measured on 9216 x 4096 at one thread: 4 and 6 streams ~10% slower than 8,
// one stream ~50% slower).
constexpr int kStreams = 8;

// kPanelKernelsAvx512[v - 1] handles panels of v vectors.
constexpr std::array<PanelKernel, 4> kPanelKernelsAvx512 = {
    &panel_kernel<1, kStreams>, &panel_kernel<2, kStreams>, &panel_kernel<3, kStreams>,
    &panel_kernel<4, kStreams>};
// The bf16 panel product: y[j] = bf16(clamp(sum_q dot(x pair q, w pair-row q, column j) +
// bias[j])) for j < nr (nr <= 16V); `w` one packed bf16 panel, pair-rows of 16V 32-bit pairs; x
// and y bf16. The pair-rows are read as S streams, as in panel_kernel; an odd K's last pair holds
// x[k - 1] and 0.
#define TESSERA_AVX512_BF16 __attribute__((target("avx512f,fma,avx512bw,avx512vl,avx512bf16")))
template <int V, int S>
TESSERA_AVX512_BF16 void panel_kernel_bf16(const uint16_t* x, const uint32_t* w, int64_t k,
                                           uint16_t* y, int64_t nr, const float* bias, float lo,
                                           float hi) {
  constexpr int64_t kRow = 16 * V;
  __m512 acc[S][V] = {};
  const auto pair_of = [&](int64_t q) {  // x[2q] | x[2q + 1] << 16
    int32_t xp;
    std::memcpy(&xp, x + 2 * q, sizeof xp);
    return xp;
  };
  const int64_t full = k / 2, seg = full / S;
  for (int64_t p = 0; p < seg; ++p) {
#pragma GCC unroll 8
    for (int u = 0; u < S; ++u) {
      const int64_t row = u * seg + p;
      const __m512bh xu = (__m512bh)_mm512_set1_epi32(pair_of(row));
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        acc[u][v] =
            _mm512_dpbf16_ps(acc[u][v], (__m512bh)_mm512_load_si512(w + row * kRow + 16 * v), xu);
      }
    }
  }
  for (int64_t p = S * seg; p < full; ++p) {
    const __m512bh xp = (__m512bh)_mm512_set1_epi32(pair_of(p));
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[0][v] =
          _mm512_dpbf16_ps(acc[0][v], (__m512bh)_mm512_load_si512(w + p * kRow + 16 * v), xp);
    }
  }
  if (k % 2 != 0) {  // the last row, paired with a zero
    const __m512bh xl = (__m512bh)_mm512_set1_epi32(static_cast<int>(x[k - 1]));
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[0][v] =
          _mm512_dpbf16_ps(acc[0][v], (__m512bh)_mm512_load_si512(w + full * kRow + 16 * v), xl);
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    __mmask16 m;
    const __m512 s = panel_sum<V, S>(acc, v, nr, bias, lo, hi, &m);
    _mm256_mask_storeu_epi16(y + 16 * v, m, (__m256i)_mm512_cvtneps_pbh(s));
  }
}

using PanelKernelBf16 = void (*)(const uint16_t*, const uint32_t*, int64_t, uint16_t*, int64_t,
                                 const float*, float, float);
constexpr std::array<PanelKernelBf16, 4> kPanelKernelsBf16 = {
    &panel_kernel_bf16<1, kStreams>, &panel_kernel_bf16<2, kStreams>,
    &panel_kernel_bf16<3, kStreams>, &panel_kernel_bf16<4, kStreams>};

// The int8 panel product: y[j] = clamp(float(sum_q dot(x quad q, w quad-row q, column j) -
// correction[j]) * scale[j] + bias[j]) for j < nr (nr <= 16V); `w` one packed int8 panel,
// quad-rows of 16V 32-bit words; x's bytes read four at a time and xor-ed with `flip` (0x80 per
// byte turns an s8 x into the u8 vpdpbusd multiplies; the correction takes the 128 out again).
// The quad-rows are read as S streams, as in panel_kernel; a K that is not a multiple of 4 ends
// in a quad whose missing bytes meet zero weights.
#define TESSERA_AVX512_VNNI __attribute__((target("avx512f,fma,avx512bw,avx512vl,avx512vnni")))
template <int V, int S>
TESSERA_AVX512_VNNI void panel_kernel_int8(const uint8_t* x, uint32_t flip, const uint32_t* w,
                                           int64_t k, float* y, int64_t nr,
                                           const int32_t* correction, const float* scale,
                                           const float* bias, float lo, float hi) {
  constexpr int64_t kRow = 16 * V;
  __m512i acc[S][V] = {};
  const auto quad_of = [&](int64_t q) {
    uint32_t xq;
    std::memcpy(&xq, x + 4 * q, sizeof xq);
    return static_cast<int>(xq ^ flip);
  };
  const int64_t full = k / 4, seg = full / S;
  for (int64_t p = 0; p < seg; ++p) {
#pragma GCC unroll 8
    for (int u = 0; u < S; ++u) {
      const int64_t row = u * seg + p;
      const __m512i xu = _mm512_set1_epi32(quad_of(row));
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        acc[u][v] = _mm512_dpbusd_epi32(acc[u][v], xu, _mm512_load_si512(w + row * kRow + 16 * v));
      }
    }
  }
  for (int64_t p = S * seg; p < full; ++p) {
    const __m512i xp = _mm512_set1_epi32(quad_of(p));
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[0][v] = _mm512_dpbusd_epi32(acc[0][v], xp, _mm512_load_si512(w + p * kRow + 16 * v));
    }
  }
  if (k % 4 != 0) {  // the last quad: the bytes past K meet zero weights
    uint32_t xq = 0;
    std::memcpy(&xq, x + 4 * full, static_cast<size_t>(k % 4));
    const __m512i xl = _mm512_set1_epi32(static_cast<int>(xq ^ flip));
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      acc[0][v] = _mm512_dpbusd_epi32(acc[0][v], xl, _mm512_load_si512(w + full * kRow + 16 * v));
    }
  }
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    __m512i t = acc[0][v];
#pragma GCC unroll 8
    for (int u = 1; u < S; ++u) t = _mm512_add_epi32(t, acc[u][v]);
    const int64_t left = nr - 16 * v;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    t = _mm512_sub_epi32(t, _mm512_maskz_loadu_epi32(m, correction + 16 * v));
    // (the maskz conversion: GCC 12 warns about the undefined source of the unmasked one.)
    __m512 s = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, t),
                             _mm512_maskz_loadu_ps(m, scale + 16 * v));
    if (bias != nullptr) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, bias + 16 * v));
    s = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, s, _mm512_set1_ps(lo)),
                            _mm512_set1_ps(hi));
    _mm512_mask_storeu_ps(y + 16 * v, m, s);
  }
}

using PanelKernelInt8 = void (*)(const uint8_t*, uint32_t, const uint32_t*, int64_t, float*,
                                 int64_t, const int32_t*, const float*, const float*, float, float);
constexpr std::array<PanelKernelInt8, 4> kPanelKernelsInt8 = {
    &panel_kernel_int8<1, kStreams>, &panel_kernel_int8<2, kStreams>,
    &panel_kernel_int8<3, kStreams>, &panel_kernel_int8<4, kStreams>};
#endif  // TESSERA_X86_64

// The same panel product in portable C++: where the AVX-512 kernel is not built (other
// architectures) or the CPU lacks AVX-512F. The kernel table offers the GEMV variant only with
// AVX-512; this keeps PackedGemv / Gemv correct everywhere.
template <int V>
void panel_kernel_portable(const float* x, const float* w, int64_t k, float* y, int64_t nr,
                           const float* bias, float lo, float hi) {
  constexpr int64_t kRow = 16 * V;
  float acc[kRow] = {};
  for (int64_t p = 0; p < k; ++p) {
    const float xp = x[p];
    const float* wp = w + p * kRow;
    for (int64_t j = 0; j < kRow; ++j) acc[j] += xp * wp[j];
  }
  for (int64_t j = 0; j < nr; ++j) {
    const float v = acc[j] + (bias != nullptr ? bias[j] : 0.f);
    y[j] = std::min(std::max(v, lo), hi);
  }
}
constexpr std::array<PanelKernel, 4> kPanelKernelsPortable = {
    &panel_kernel_portable<1>, &panel_kernel_portable<2>, &panel_kernel_portable<3>,
    &panel_kernel_portable<4>};

const std::array<PanelKernel, 4>& panel_kernels() {
#if TESSERA_X86_64
  if (has_avx512()) return kPanelKernelsAvx512;
#endif
  return kPanelKernelsPortable;
}

// Fills the column panels of a packed W (panel j at data + j * rows * kGemvNR: `rows` rows of
// its width, kGemvNR or the last panel's column count rounded up to 16) with value(row, column)
// and zeros in the padding; `block` rows at a time, so that the destination rows a source column
// scatters to stay in cache when W arrives [N][K].
template <typename T, typename Value>
void fill_panels(T* data, int64_t rows, int64_t n, int64_t block, Value value) {
  for (int64_t j = 0; j * kGemvNR < n; ++j) {
    T* dst = data + j * rows * kGemvNR;
    const int64_t cols = std::min(kGemvNR, n - j * kGemvNR), wd = (cols + 15) / 16 * 16;
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t r1 = std::min(rows, r0 + block);
      for (int64_t c = 0; c < wd; ++c) {
        const int64_t col = j * kGemvNR + c;
        for (int64_t r = r0; r < r1; ++r) dst[r * wd + c] = c < cols ? value(r, col) : T(0);
      }
    }
  }
}

}  // namespace

void PackedGemv::Free::operator()(float* p) const {
  std::free(p);
}

int64_t PackedGemv::width(int64_t j) const {
  const int64_t cols = std::min(kGemvNR, n_ - j * kGemvNR);
  return (cols + 15) / 16 * 16;
}

PackedGemv PackedGemv::pack(const float* src, int64_t k, int64_t n, bool w_is_k_by_n, float scale,
                            const float* bias) {
  PackedGemv w;
  w.k_ = k;
  w.n_ = n;
  if (bias != nullptr) w.bias_.assign(bias, bias + n);
  const int64_t panels = w.panels();
  w.size_ = panels == 0 ? 0 : ((panels - 1) * kGemvNR + w.width(panels - 1)) * k;
  if (w.size_ == 0) return w;
  // Large weights on 2 MB pages (allocate_aligned): streamed once per run, 4 KB pages would
  // cost a page walk every 4 KB.
  w.data_.reset(
      static_cast<float*>(allocate_aligned(static_cast<size_t>(w.size_) * sizeof(float), 64)));
  if (!w.data_) throw std::bad_alloc();
  fill_panels(w.data_.get(), k, n, 64, [&](int64_t p, int64_t col) {
    return scale * (w_is_k_by_n ? src[p * n + col] : src[col * k + p]);
  });
  return w;
}

void gemv_panels(const PackedGemv& w, const float* x, int64_t j0, int64_t j1, float* y, float lo,
                 float hi) {
  const std::array<PanelKernel, 4>& kernels = panel_kernels();
  for (int64_t j = j0; j < j1; ++j) {
    const int64_t n0 = j * kGemvNR;
    const int64_t nr = std::min(kGemvNR, w.n() - n0);
    const float* bias = w.bias() != nullptr ? w.bias() + n0 : nullptr;
    kernels[static_cast<size_t>(w.width(j) / 16 - 1)](x, w.panel(j), w.k(), y + n0, nr, bias, lo,
                                                      hi);
  }
}

std::vector<int64_t> split_panels(int64_t panels, int threads, int items_per_thread) {
  const int64_t items =
      std::min<int64_t>(panels, std::max(threads, 1) * std::max(items_per_thread, 1));
  // All panels but the last are equally wide: equal counts are equal bytes.
  std::vector<int64_t> bounds(static_cast<size_t>(items) + 1);
  for (int64_t i = 0; i <= items; ++i) {
    bounds[static_cast<size_t>(i)] = items == 0 ? 0 : panels * i / items;
  }
  return bounds;
}

void Gemv::bind(int threads, int items_per_thread) {
  bounds_ = split_panels(w().panels(), threads, items_per_thread);
}

void Gemv::run(ThreadPool& pool, const float* x, float* y, float lo, float hi) const {
  pool.parallel_items(bounds_.size() - 1, [&](int, size_t i) {
    gemv_panels(w(), x, bounds_[i], bounds_[i + 1], y, lo, hi);
  });
}

void PackedGemvBf16::Free::operator()(uint32_t* p) const {
  std::free(p);
}

int64_t PackedGemvBf16::width(int64_t j) const {
  const int64_t cols = std::min(kGemvNR, n_ - j * kGemvNR);
  return (cols + 15) / 16 * 16;
}

PackedGemvBf16 PackedGemvBf16::pack(const float* src, int64_t k, int64_t n, bool w_is_k_by_n,
                                    const float* bias) {
  PackedGemvBf16 w;
  w.k_ = k;
  w.n_ = n;
  if (bias != nullptr) w.bias_.assign(bias, bias + n);
  const int64_t panels = w.panels(), pairs = w.pairs();
  w.size_ = panels == 0 ? 0 : ((panels - 1) * kGemvNR + w.width(panels - 1)) * pairs;
  if (w.size_ == 0) return w;
  w.data_.reset(static_cast<uint32_t*>(
      allocate_aligned(static_cast<size_t>(w.size_) * sizeof(uint32_t), 64)));
  if (!w.data_) throw std::bad_alloc();
  const auto at = [&](int64_t p, int64_t col) -> uint32_t {
    if (p >= k) return 0;
    return f32_to_bf16(w_is_k_by_n ? src[p * n + col] : src[col * k + p]);
  };
  fill_panels(w.data_.get(), pairs, n, 32,
              [&](int64_t q, int64_t col) { return at(2 * q, col) | (at(2 * q + 1, col) << 16); });
  return w;
}

void GemvBf16::bind(int threads, int items_per_thread) {
  bounds_ = split_panels(w().panels(), threads, items_per_thread);
}

Status GemvBf16::run(ThreadPool& pool, const uint16_t* x, uint16_t* y, float lo, float hi) const {
#if TESSERA_X86_64
  if (!has_avx512_bf16()) return unimplemented("bf16 gemv: this CPU has no AVX512_BF16");
  const PackedGemvBf16& w = this->w();
  pool.parallel_items(bounds_.size() - 1, [&](int, size_t i) {
    for (int64_t j = bounds_[i]; j < bounds_[i + 1]; ++j) {
      const int64_t n0 = j * kGemvNR;
      const int64_t nr = std::min(kGemvNR, w.n() - n0);
      const float* bias = w.bias() != nullptr ? w.bias() + n0 : nullptr;
      kPanelKernelsBf16[static_cast<size_t>(w.width(j) / 16 - 1)](x, w.panel(j), w.k(), y + n0, nr,
                                                                  bias, lo, hi);
    }
  });
  return Status();
#else
  (void)pool, (void)x, (void)y, (void)lo, (void)hi;
  return unimplemented("bf16 gemv: not built for this architecture");
#endif
}

void PackedGemvInt8::Free::operator()(uint32_t* p) const {
  std::free(p);
}

int64_t PackedGemvInt8::width(int64_t j) const {
  const int64_t cols = std::min(kGemvNR, n_ - j * kGemvNR);
  return (cols + 15) / 16 * 16;
}

PackedGemvInt8 PackedGemvInt8::pack(const float* src, int64_t k, int64_t n, bool w_is_k_by_n,
                                    const float* bias) {
  PackedGemvInt8 w;
  w.k_ = k;
  w.n_ = n;
  if (bias != nullptr) w.bias_.assign(bias, bias + n);
  // The columns as rows [n][k], quantised per column as oneDNN's int8 matmul's weights are.
  std::vector<float> rows(static_cast<size_t>(n * k));
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t p = 0; p < k; ++p) {
      rows[static_cast<size_t>(j * k + p)] = w_is_k_by_n ? src[p * n + j] : src[j * k + p];
    }
  }
  std::vector<int8_t> q;
  quantize_weights_per_channel(rows.data(), n, k, &q, &w.scales_);
  rows = {};
  w.column_sums_.assign(static_cast<size_t>(n), 0);
  for (int64_t j = 0; j < n; ++j) {
    int32_t sum = 0;
    for (int64_t p = 0; p < k; ++p) sum += q[static_cast<size_t>(j * k + p)];
    w.column_sums_[static_cast<size_t>(j)] = sum;
  }
  const int64_t panels = w.panels(), quads = w.quads();
  w.size_ = panels == 0 ? 0 : ((panels - 1) * kGemvNR + w.width(panels - 1)) * quads;
  if (w.size_ == 0) return w;
  w.data_.reset(static_cast<uint32_t*>(
      allocate_aligned(static_cast<size_t>(w.size_) * sizeof(uint32_t), 64)));
  if (!w.data_) throw std::bad_alloc();
  fill_panels(w.data_.get(), quads, n, 16, [&](int64_t r, int64_t col) {
    uint32_t word = 0;
    for (int64_t b = 0; b < 4 && 4 * r + b < k; ++b) {
      word |=
          static_cast<uint32_t>(static_cast<uint8_t>(q[static_cast<size_t>(col * k + 4 * r + b)]))
          << (8 * b);
    }
    return word;
  });
  return w;
}

GemvInt8::GemvInt8(SharedPacking<PackedGemvInt8> w, float x_scale, int32_t x_zero_point,
                   bool x_unsigned)
    : w_(std::move(w)), flip_(x_unsigned ? 0u : 0x80808080u) {
  const PackedGemvInt8& pw = this->w();
  const int64_t c = static_cast<int64_t>(x_zero_point) + (x_unsigned ? 0 : 128);
  scale_.resize(static_cast<size_t>(pw.n()));
  correction_.resize(static_cast<size_t>(pw.n()));
  for (size_t j = 0; j < scale_.size(); ++j) {
    scale_[j] = x_scale * pw.scales()[j];
    // Modulo 2^32: acc - correction is the true sum, which fits (|sum| <= K * 255 * 127).
    correction_[j] = static_cast<int32_t>(static_cast<uint32_t>(
        static_cast<uint64_t>(c * static_cast<int64_t>(pw.column_sums()[j]))));
  }
}

void GemvInt8::bind(int threads, int items_per_thread) {
  bounds_ = split_panels(w().panels(), threads, items_per_thread);
}

Status GemvInt8::run(ThreadPool& pool, const uint8_t* x, float* y, float lo, float hi) const {
#if TESSERA_X86_64
  if (!has_avx512_vnni()) return unimplemented("int8 gemv: this CPU has no AVX512_VNNI");
  const PackedGemvInt8& w = this->w();
  pool.parallel_items(bounds_.size() - 1, [&](int, size_t i) {
    for (int64_t j = bounds_[i]; j < bounds_[i + 1]; ++j) {
      const int64_t n0 = j * kGemvNR;
      const int64_t nr = std::min(kGemvNR, w.n() - n0);
      const float* bias = w.bias() != nullptr ? w.bias() + n0 : nullptr;
      kPanelKernelsInt8[static_cast<size_t>(w.width(j) / 16 - 1)](
          x, flip_, w.panel(j), w.k(), y + n0, nr, correction_.data() + n0, scale_.data() + n0,
          bias, lo, hi);
    }
  });
  return Status();
#else
  (void)pool, (void)x, (void)y, (void)lo, (void)hi;
  return unimplemented("int8 gemv: not built for this architecture");
#endif
}

}  // namespace tessera::cpu
