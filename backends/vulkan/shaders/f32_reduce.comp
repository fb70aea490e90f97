// Reduces the middle dimension of [outer, len, inner]: one 64-thread workgroup per
// (outer, inner) pair, a shared-memory tree. GlobalAveragePool / GlobalMaxPool (inner = 1) and
// ReduceMean over consecutive axes.
// Spec: 0 is max (else mean).
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint IS_MAX = 0;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint len, inner, count; } p;

shared float part[64];

void main() {
  const uint r = linear_group();
  if (r >= p.count) return;
  const uint t = gl_LocalInvocationID.x;
  const uint o = r / p.inner, in_ = r % p.inner;
  const uint base = o * p.len * p.inner + in_;
  float acc = IS_MAX == 1 ? -1.0 / 0.0 : 0.0;
  for (uint j = t; j < p.len; j += 64) {
    const float v = x[base + j * p.inner];
    if (IS_MAX == 1) acc = (v > acc || isnan(v)) ? v : acc;
    else acc += v;
  }
  part[t] = acc;
  barrier();
  for (uint s = 32; s > 0; s >>= 1) {
    if (t < s) {
      const float u = part[t + s];
      if (IS_MAX == 1) part[t] = (u > part[t] || isnan(u)) ? u : part[t];
      else part[t] += u;
    }
    barrier();
  }
  if (t == 0) y[r] = IS_MAX == 1 ? part[0] : part[0] / float(p.len);
}
