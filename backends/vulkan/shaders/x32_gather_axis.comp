// Gather with run-time indices: dst[o, j, r] = src[o, indices[j], r] over 32-bit words (an
// element of W words counts as W words of `inner`). Indices are i32 or i64 (IDX64, read as
// lo/hi word pairs); negative ones count from the end of the axis. An index outside
// [-axis_len, axis_len) writes 0 and reports itself through the fault buffer: the first
// offender stores (code, element, lo, hi), which the program turns into an error Status.
// Spec: 0 local size, 1 IDX64.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint IDX64 = 1;
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) readonly buffer I { uint idx[]; };
layout(std430, binding = 2) writeonly buffer D { uint dst[]; };
layout(std430, binding = 3) buffer F { uint fault[4]; };
layout(push_constant) uniform P { uint total, inner, num_idx, axis_len, code; } p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint r = i % p.inner, j = (i / p.inner) % p.num_idx, o = i / (p.inner * p.num_idx);
  const uint lo = IDX64 == 1 ? idx[2 * j] : idx[j];
  // The sign extension of lo: an i64 index fits in 32 bits only when hi repeats lo's sign.
  const uint hi = IDX64 == 1 ? idx[2 * j + 1] : ((lo >> 31) == 1 ? 0xffffffffu : 0u);
  int v = int(lo);
  const bool fits = hi == ((lo >> 31) == 1 ? 0xffffffffu : 0u);
  if (v < 0) v += int(p.axis_len);
  if (!fits || v < 0 || v >= int(p.axis_len)) {
    if (atomicCompSwap(fault[0], 0u, p.code) == 0u) {
      fault[1] = j;
      fault[2] = lo;
      fault[3] = hi;
    }
    dst[i] = 0u;
    return;
  }
  dst[i] = src[(o * p.axis_len + uint(v)) * p.inner + r];
}
