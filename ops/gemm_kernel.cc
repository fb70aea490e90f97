#include "ops/gemm_kernel.h"

#include <algorithm>
#include <new>

namespace tessera {

namespace {

constexpr int64_t kMR = kGemmMR;
constexpr int64_t kNR = kGemmNR;
// Columns of B packed per block in the general path: a kGemmKC x kNC block (512 KiB) stays in L2.
constexpr int64_t kNC = 512;
// Rows of A packed per block in the general path (bounds the scratch, 256 KiB).
constexpr int64_t kMC = 256;

// One kMR x kNR tile: C[mr x nr] += A_panel * B_panel over depth k. The accumulators are a fixed
// size local array with fully unrolled loops so that they live in vector registers.
inline void micro_tile(int64_t k, const float* __restrict a, const float* __restrict b,
                       float* __restrict c, int64_t ldc, int64_t mr, int64_t nr) {
  float acc[kMR][kNR] = {};
  for (int64_t kk = 0; kk < k; ++kk) {
    const float* ak = a + kk * kMR;
    const float* bk = b + kk * kNR;
#pragma GCC unroll 16
    for (int64_t r = 0; r < kMR; ++r) {
      const float av = ak[r];
#pragma GCC unroll 16
      for (int64_t j = 0; j < kNR; ++j) acc[r][j] += av * bk[j];
    }
  }
  if (mr == kMR && nr == kNR) {
#pragma GCC unroll 16
    for (int64_t r = 0; r < kMR; ++r) {
#pragma GCC unroll 16
      for (int64_t j = 0; j < kNR; ++j) c[r * ldc + j] += acc[r][j];
    }
  } else {
    for (int64_t r = 0; r < mr; ++r) {
      for (int64_t j = 0; j < nr; ++j) c[r * ldc + j] += acc[r][j];
    }
  }
}

// x . y over k elements; contiguous operands take an 8-way split accumulation the compiler can
// vectorise (a plain float reduction cannot be reordered without -ffast-math).
float dot(const float* x, int64_t sx, const float* y, int64_t sy, int64_t k) {
  if (sx == 1 && sy == 1) {
    float acc[8] = {};
    int64_t i = 0;
    for (; i + 8 <= k; i += 8) {
#pragma GCC unroll 8
      for (int u = 0; u < 8; ++u) acc[u] += x[i + u] * y[i + u];
    }
    float s = 0;
    for (; i < k; ++i) s += x[i] * y[i];
    return s + ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  }
  float s = 0;
  for (int64_t i = 0; i < k; ++i) s += x[i * sx] * y[i * sy];
  return s;
}

// c[0..n) += a_row (1 x k) * B (k x n): the single-row case (a fully-connected layer with batch
// 1), which would waste most of a packed micro-tile. Reads B once, in its own order.
void gemm_row(int64_t n, int64_t k, const float* a, int64_t sa, MatrixView b, float* c) {
  if (b.col_stride == 1) {
    // Rows of B are contiguous: c += a[kk] * B[kk, :], four rows per pass over c.
    int64_t kk = 0;
    for (; kk + 4 <= k; kk += 4) {
      const float a0 = a[kk * sa], a1 = a[(kk + 1) * sa], a2 = a[(kk + 2) * sa],
                  a3 = a[(kk + 3) * sa];
      const float* b0 = b.data + kk * b.row_stride;
      const float* b1 = b0 + b.row_stride;
      const float* b2 = b1 + b.row_stride;
      const float* b3 = b2 + b.row_stride;
      for (int64_t j = 0; j < n; ++j) c[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
    }
    for (; kk < k; ++kk) {
      const float av = a[kk * sa];
      const float* bk = b.data + kk * b.row_stride;
      for (int64_t j = 0; j < n; ++j) c[j] += av * bk[j];
    }
    return;
  }
  // Columns of B are contiguous (a transposed weight matrix) or B is arbitrary: one dot product
  // per output.
  for (int64_t j = 0; j < n; ++j) c[j] += dot(a, sa, b.data + j * b.col_stride, b.row_stride, k);
}

}  // namespace

std::unique_ptr<float[]> alloc_floats(int64_t n) {
  if (n < 0) return nullptr;
  return std::unique_ptr<float[]>(
      new (std::nothrow) float[static_cast<size_t>(std::max<int64_t>(n, 1))]);
}

void pack_a(MatrixView a, int64_t m, int64_t k, float* out) {
  for (int64_t p = 0; p < m; p += kMR) {
    const int64_t rows = std::min(kMR, m - p);
    float* panel = out + p * k;  // (p / kMR) * kMR * k
    if (rows == kMR && a.col_stride == 1) {
      const float* r0 = a.data + p * a.row_stride;
      for (int64_t kk = 0; kk < k; ++kk) {
        for (int64_t r = 0; r < kMR; ++r) panel[kk * kMR + r] = r0[r * a.row_stride + kk];
      }
      continue;
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t r = 0; r < kMR; ++r) panel[kk * kMR + r] = r < rows ? a.at(p + r, kk) : 0.f;
    }
  }
}

void pack_b(MatrixView b, int64_t k, int64_t n, float* out) {
  for (int64_t q = 0; q < n; q += kNR) {
    const int64_t cols = std::min(kNR, n - q);
    float* panel = out + q * k;  // (q / kNR) * kNR * k
    if (cols == kNR && b.col_stride == 1) {
      for (int64_t kk = 0; kk < k; ++kk) {
        const float* src = b.data + kk * b.row_stride + q;
        for (int64_t j = 0; j < kNR; ++j) panel[kk * kNR + j] = src[j];
      }
      continue;
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      for (int64_t j = 0; j < kNR; ++j) panel[kk * kNR + j] = j < cols ? b.at(kk, q + j) : 0.f;
    }
  }
}

void gemm_packed(int64_t m, int64_t n, int64_t k, const float* ap, int64_t a_panel_stride,
                 const float* bp, int64_t b_panel_stride, float* c, int64_t ldc) {
  for (int64_t i = 0; i < m; i += kMR) {
    const float* a_panel = ap + (i / kMR) * a_panel_stride;
    const int64_t mr = std::min(kMR, m - i);
    for (int64_t j = 0; j < n; j += kNR) {
      micro_tile(k, a_panel, bp + (j / kNR) * b_panel_stride, c + i * ldc + j, ldc, mr,
                 std::min(kNR, n - j));
    }
  }
}

Status gemm_f32(int64_t m, int64_t n, int64_t k, MatrixView a, MatrixView b, float* c,
                int64_t ldc) {
  if (m == 0 || n == 0 || k == 0) return Status();
  if (m == 1) {
    gemm_row(n, k, a.data, a.col_stride, b, c);
    return Status();
  }
  if (n == 1) {
    for (int64_t i = 0; i < m; ++i) {
      c[i * ldc] += dot(a.data + i * a.row_stride, a.col_stride, b.data, b.row_stride, k);
    }
    return Status();
  }

  // General case: for each kNC-wide column block and kGemmKC-deep slice, pack the B block once,
  // then pack kMC-row blocks of A against it.
  const int64_t nc_max = std::min(round_up(n, kNR), kNC);
  const int64_t kc_max = std::min(k, kGemmKC);
  const int64_t mc_max = std::min(round_up(m, kMR), kMC);
  std::unique_ptr<float[]> bbuf = alloc_floats(kc_max * nc_max);
  std::unique_ptr<float[]> abuf = alloc_floats(mc_max * kc_max);
  if (!bbuf || !abuf) return resource_exhausted("out of memory for matrix-multiply scratch");
  for (int64_t jc = 0; jc < n; jc += kNC) {
    const int64_t nc = std::min(kNC, n - jc);
    for (int64_t pc = 0; pc < k; pc += kGemmKC) {
      const int64_t kc = std::min(kGemmKC, k - pc);
      MatrixView bblock{b.data + pc * b.row_stride + jc * b.col_stride, b.row_stride, b.col_stride};
      pack_b(bblock, kc, nc, bbuf.get());
      for (int64_t ic = 0; ic < m; ic += kMC) {
        const int64_t mc = std::min(kMC, m - ic);
        MatrixView ablock{a.data + ic * a.row_stride + pc * a.col_stride, a.row_stride,
                          a.col_stride};
        pack_a(ablock, mc, kc, abuf.get());
        gemm_packed(mc, nc, kc, abuf.get(), kc * kMR, bbuf.get(), kc * kNR, c + ic * ldc + jc, ldc);
      }
    }
  }
  return Status();
}

}  // namespace tessera
