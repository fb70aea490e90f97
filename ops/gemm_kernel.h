// The f32 matrix-multiply engine behind the reference kernels of Conv, ConvTranspose, Gemm and
// MatMul.
//
// Portable C++ with no intrinsics: operands are packed into panels so that a register-blocked
// micro-kernel (a kGemmMR x kGemmNR tile of C held in local accumulators) reads both of them
// contiguously, and the compiler vectorises it with whatever SIMD the build targets. Blocking
// follows the usual BLIS scheme: a kGemmKC-deep slice of a packed A panel stays in L1 while it
// sweeps a packed block of B held in L2.
//
// Packed layouts (shared with Conv's im2col, which writes B panels directly):
//   A (m x k): ceil(m / MR) panels; panel p holds rows [p*MR, p*MR + MR) k-major, i.e. element
//              (p*MR + r, kk) at panel[kk * MR + r]. Rows past m are zero.
//   B (k x n): ceil(n / NR) panels; panel q holds columns [q*NR, q*NR + NR) k-major: element
//              (kk, q*NR + j) at panel[kk * NR + j]. Columns past n are zero.
#pragma once

#include <cstdint>
#include <memory>

#include "core/status.h"

namespace tessera {

inline constexpr int64_t kGemmMR = 4;    // rows of a micro-tile / packed A panel
inline constexpr int64_t kGemmNR = 8;    // columns of a micro-tile / packed B panel
inline constexpr int64_t kGemmKC = 256;  // depth of one packed block

// A strided read-only matrix: element (i, j) at data[i * row_stride + j * col_stride]. A
// transposed operand is the same memory with the strides swapped.
struct MatrixView {
  const float* data = nullptr;
  int64_t row_stride = 0;
  int64_t col_stride = 0;

  float at(int64_t i, int64_t j) const { return data[i * row_stride + j * col_stride]; }
};

inline int64_t round_up(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// Floats needed to pack an m x k A operand / a k x n B operand.
inline int64_t packed_a_floats(int64_t m, int64_t k) {
  return round_up(m, kGemmMR) * k;
}
inline int64_t packed_b_floats(int64_t k, int64_t n) {
  return round_up(n, kGemmNR) * k;
}

// Packs the m x k matrix `a` (resp. k x n matrix `b`) into the layouts above.
void pack_a(MatrixView a, int64_t m, int64_t k, float* out);
void pack_b(MatrixView b, int64_t k, int64_t n, float* out);

// C[m x n] (row stride ldc) += A * B over a depth of k, with A and B packed. Panel p of A starts
// at `ap + p * a_panel_stride` and panel q of B at `bp + q * b_panel_stride` (k * MR and k * NR
// for operands packed with exactly this k; larger when the caller slices a deeper packing).
void gemm_packed(int64_t m, int64_t n, int64_t k, const float* ap, int64_t a_panel_stride,
                 const float* bp, int64_t b_panel_stride, float* c, int64_t ldc);

// C[m x n] (row stride ldc) += A[m x k] * B[k x n] for arbitrary strided A and B. Small shapes
// (a single row or column) take a direct vector path; everything else is blocked and packed.
// Fails only when scratch memory cannot be allocated.
Status gemm_f32(int64_t m, int64_t n, int64_t k, MatrixView a, MatrixView b, float* c, int64_t ldc);

// Uninitialised scratch floats for kernels; null when the allocation fails (the caller turns
// that into a Status naming its node).
std::unique_ptr<float[]> alloc_floats(int64_t n);

}  // namespace tessera
