// C[b] = act(alpha * op(A[b]) * op(B[b]) + beta * bias), shared-memory tiled like
// f32_conv2d_tiled: (4 WG_M) x (4 WG_N) output tiles, WG_M x WG_N threads with 4x4 outputs each,
// K in steps of 16.
// op(A) is M x K (A stored K x M when TRANS_A), op(B) K x N (stored N x K when TRANS_B). The bias
// element of (m, n) is bias[m * bias_sm + n * bias_sn] (strides 0 where it broadcasts).
// Batches (MatMul) step A, B and C by their batch strides (0 for a shared operand).
// Spec: 0 trans A, 1 trans B, 2 has bias, 3-5 activation, 6 WG_N, 7 WG_M, 8 local size.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 3
#define WG_N_ID 6
#define WG_M_ID 7
#define LOCAL_ID 8
#include "common.glsl"
layout(local_size_x_id = LOCAL_ID) in;
layout(constant_id = 0) const uint TRANS_A = 0;
layout(constant_id = 1) const uint TRANS_B = 0;
layout(constant_id = 2) const uint HAS_BIAS = 0;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer C { float c[]; };
layout(push_constant) uniform P {
  uint m, n, k;
  uint batch_a, batch_b, batch_c;
  float alpha, beta;
  uint bias_sm, bias_sn;
} p;

// The tile: a WG_M x WG_N grid of threads, 4x4 outputs each (strided by WG_M / WG_N).
layout(constant_id = WG_N_ID) const uint WG_N = 16;
layout(constant_id = WG_M_ID) const uint WG_M = 16;
const uint THREADS = WG_N * WG_M;
const uint TM = 4 * WG_M, TN = 4 * WG_N, TK = 16;
shared float As[TK][TM];
shared float Bs[TK][TN];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint tx = tid % WG_N, ty = tid / WG_N;
  const uint n0 = gl_WorkGroupID.x * TN, m0 = gl_WorkGroupID.y * TM;
  const uint abase = gl_WorkGroupID.z * p.batch_a, bbase = gl_WorkGroupID.z * p.batch_b;
  const uint cbase = gl_WorkGroupID.z * p.batch_c;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < p.k; k0 += TK) {
    for (uint e = tid; e < TK * TM; e += THREADS) {
      // Walk the stored matrix along its contiguous dimension.
      const uint kk = TRANS_A == 1 ? e / TM : e % TK;
      const uint mm = TRANS_A == 1 ? e % TM : e / TK;
      const uint row = m0 + mm, col = k0 + kk;
      float v = 0.0;
      if (row < p.m && col < p.k) v = TRANS_A == 1 ? a[abase + col * p.m + row] : a[abase + row * p.k + col];
      As[kk][mm] = v;
    }
    for (uint e = tid; e < TK * TN; e += THREADS) {
      const uint kk = TRANS_B == 1 ? e % TK : e / TN;
      const uint nn = TRANS_B == 1 ? e / TK : e % TN;
      const uint row = k0 + kk, col = n0 + nn;
      float v = 0.0;
      if (row < p.k && col < p.n) v = TRANS_B == 1 ? b[bbase + col * p.k + row] : b[bbase + row * p.n + col];
      Bs[kk][nn] = v;
    }
    barrier();
    for (uint kk = 0; kk < TK; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + WG_M * i];
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + WG_N * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  for (int i = 0; i < 4; ++i) {
    const uint row = m0 + ty + WG_M * i;
    if (row >= p.m) continue;
    for (int j = 0; j < 4; ++j) {
      const uint col = n0 + tx + WG_N * j;
      if (col >= p.n) continue;
      float v = p.alpha * acc[i][j];
      if (HAS_BIAS == 1) v += p.beta * bias[row * p.bias_sm + col * p.bias_sn];
      c[cbase + row * p.n + col] = activate(v);
    }
  }
}
