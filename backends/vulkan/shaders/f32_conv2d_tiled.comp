// 2-D convolution as an implicit GEMM with shared-memory tiles, per (image, group):
//   Y[m, n] = act(sum_k W[m, k] * im2col(X)[k, n] + bias[m])
//   m: output channel of the group (Mg), n: output pixel (OH*OW), k: (ci, kh, kw) (Cg*KH*KW).
// A workgroup of WG_M x WG_N threads computes a (4 WG_M) x (4 WG_N) tile of Y, each thread 4x4
// outputs, with K in steps of 16 through shared memory; the host picks the tile per layer shape
// (pick_gemm_tile). POINTWISE (1x1, stride 1, no padding) reads X as a plain matrix.
// Spec: 0 KH, 1 KW, 2 SH, 3 SW, 4 DH, 5 DW, 6 has bias, 7-9 activation, 10 pointwise,
//       11 WG_N, 12 WG_M, 13 local size (WG_N * WG_M).
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 7
#define WG_N_ID 11
#define WG_M_ID 12
#define LOCAL_ID 13
#include "common.glsl"
layout(local_size_x_id = LOCAL_ID) in;
layout(constant_id = 0) const uint KH = 1;
layout(constant_id = 1) const uint KW = 1;
layout(constant_id = 2) const uint SH = 1;
layout(constant_id = 3) const uint SW = 1;
layout(constant_id = 4) const uint DH = 1;
layout(constant_id = 5) const uint DW = 1;
layout(constant_id = 6) const uint HAS_BIAS = 0;
layout(constant_id = 10) const uint POINTWISE = 0;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint cg;  // input channels per group
  uint h, w;
  uint oh, ow;
  uint mg;  // output channels per group
  uint pad_t, pad_l;
  uint groups;
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
  const uint g = gl_WorkGroupID.z % p.groups, img = gl_WorkGroupID.z / p.groups;
  const uint K = p.cg * KH * KW, NPIX = p.oh * p.ow, HW = p.h * p.w;
  const uint xbase = (img * p.groups + g) * p.cg * HW;
  const uint wbase = g * p.mg * K;
  const uint ybase = (img * p.groups + g) * p.mg * NPIX;

  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (uint k0 = 0; k0 < K; k0 += TK) {
    for (uint e = tid; e < TK * TM; e += THREADS) {
      const uint kk = e % TK, mm = e / TK;
      const uint m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < p.mg && k < K) ? w[wbase + m * K + k] : 0.0;
    }
    for (uint e = tid; e < TK * TN; e += THREADS) {
      const uint nn = e % TN, kk = e / TN;
      const uint n = n0 + nn, k = k0 + kk;
      float v = 0.0;
      if (n < NPIX && k < K) {
        if (POINTWISE == 1) {
          v = x[xbase + k * HW + n];
        } else {
          const uint ci = k / (KH * KW), r = k % (KH * KW);
          const uint kh = r / KW, kw = r % KW;
          const uint oy = n / p.ow, ox = n % p.ow;
          const int iy = int(oy * SH + kh * DH) - int(p.pad_t);
          const int ix = int(ox * SW + kw * DW) - int(p.pad_l);
          if (iy >= 0 && iy < int(p.h) && ix >= 0 && ix < int(p.w)) {
            v = x[xbase + ci * HW + uint(iy) * p.w + uint(ix)];
          }
        }
      }
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
    const uint m = m0 + ty + WG_M * i;
    if (m >= p.mg) continue;
    const float b = HAS_BIAS == 1 ? bias[g * p.mg + m] : 0.0;
    for (int j = 0; j < 4; ++j) {
      const uint n = n0 + tx + WG_N * j;
      if (n < NPIX) y[ybase + m * NPIX + n] = activate(acc[i][j] + b);
    }
  }
}
