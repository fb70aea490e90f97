// Tessera's f32 matrix-vector product: packing and the work split (portable), the AVX-512 panel
// kernel (intrinsics in functions compiled for avx512f + fma by target attribute; only called
// after gemm_available() said yes).
#include "backends/cpu/gemv.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <new>
#include <utility>

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
  __m512 acc[S][V];
#pragma GCC unroll 8
  for (int u = 0; u < S; ++u) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[u][v] = _mm512_setzero_ps();
  }
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
  const __m512 vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
#pragma GCC unroll 4
  for (int v = 0; v < V; ++v) {
    __m512 s = acc[0][v];
#pragma GCC unroll 8
    for (int u = 1; u < S; ++u) s = _mm512_add_ps(s, acc[u][v]);
    const int64_t left = nr - 16 * v;
    const __mmask16 m = left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
    if (bias != nullptr) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(m, bias + 16 * v));
    // (maskz forms: GCC 12 warns about the undefined source of the unmasked ones.)
    s = _mm512_maskz_min_ps(0xFFFF, _mm512_maskz_max_ps(0xFFFF, s, vlo), vhi);
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
  // Rows of 64 at a time, so that the destination rows a source column scatters to stay in
  // cache when W arrives [N][K].
  constexpr int64_t kRows = 64;
  for (int64_t j = 0; j < panels; ++j) {
    float* dst = w.data_.get() + j * k * kGemvNR;
    const int64_t wd = w.width(j), cols = std::min(kGemvNR, n - j * kGemvNR);
    for (int64_t p0 = 0; p0 < k; p0 += kRows) {
      const int64_t p1 = std::min(k, p0 + kRows);
      for (int64_t c = 0; c < wd; ++c) {
        const int64_t col = j * kGemvNR + c;
        for (int64_t p = p0; p < p1; ++p) {
          float v = 0.f;
          if (c < cols) v = scale * (w_is_k_by_n ? src[p * n + col] : src[col * k + p]);
          dst[p * wd + c] = v;
        }
      }
    }
  }
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

void Gemv::bind(int threads, int items_per_thread) {
  const int64_t panels = w().panels();
  const int64_t items =
      std::min<int64_t>(panels, std::max(threads, 1) * std::max(items_per_thread, 1));
  // All panels but the last are equally wide: equal counts are equal bytes.
  bounds_.resize(static_cast<size_t>(items) + 1);
  for (int64_t i = 0; i <= items; ++i) {
    bounds_[static_cast<size_t>(i)] = items == 0 ? 0 : panels * i / items;
  }
}

void Gemv::run(ThreadPool& pool, const float* x, float* y, float lo, float hi) const {
  pool.parallel_items(bounds_.size() - 1, [&](int, size_t i) {
    gemv_panels(w(), x, bounds_[i], bounds_[i + 1], y, lo, hi);
  });
}

}  // namespace tessera::cpu
