// Small-M GEMM with B stored N x K (fully-connected layers at small batch): one 64-thread
// workgroup per output column n reads row n of B once, contiguously, for every row of A, and
// reduces in shared memory. C[m, n] = act(alpha * sum_k A[m, k] B[n, k] + beta * bias).
// A weight larger than one storage buffer is bound in chunks of rows: a dispatch covers columns
// [n_offset, n_offset + n) of C, whose rows are n_total long.
// Spec: 0 trans A, 1 has bias, 2-4 activation, 5 M (rows of A, <= 8: unrolled, in registers).
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 2
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint TRANS_A = 0;
layout(constant_id = 1) const uint HAS_BIAS = 0;
layout(constant_id = 5) const uint ROWS = 1;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer C { float c[]; };
layout(push_constant) uniform P {
  uint m, n, k;
  float alpha, beta;
  uint bias_sm, bias_sn;
  uint n_offset, n_total;
} p;

shared float partial[ROWS][64];

void main() {
  const uint col = linear_group();
  if (col >= p.n) return;  // uniform across the workgroup
  const uint t = gl_LocalInvocationID.x;
  float acc[ROWS];
  for (uint r = 0; r < ROWS; ++r) acc[r] = 0.0;
  const uint wrow = col * p.k;
  for (uint kk = t; kk < p.k; kk += 64) {
    const float bv = b[wrow + kk];
    for (uint r = 0; r < ROWS; ++r) acc[r] += bv * (TRANS_A == 1 ? a[kk * ROWS + r] : a[r * p.k + kk]);
  }
  for (uint r = 0; r < ROWS; ++r) partial[r][t] = acc[r];
  barrier();
  for (uint s = 32; s > 0; s >>= 1) {
    if (t < s) {
      for (uint r = 0; r < ROWS; ++r) partial[r][t] += partial[r][t + s];
    }
    barrier();
  }
  if (t < ROWS) {
    float v = p.alpha * partial[t][0];
    const uint out_col = p.n_offset + col;
    if (HAS_BIAS == 1) v += p.beta * bias[t * p.bias_sm + out_col * p.bias_sn];
    c[t * p.n_total + out_col] = activate(v);
  }
}
