// Softmax along the middle dimension of [outer, len, inner]: one 64-thread workgroup per
// (outer, inner) pair; max, then sum of exp(x - max), reduced in shared memory.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint len, inner, count; } p;

shared float part[64];

void main() {
  const uint r = linear_group();
  if (r >= p.count) return;
  const uint t = gl_LocalInvocationID.x;
  const uint base = (r / p.inner) * p.len * p.inner + r % p.inner;
  float m = -1.0 / 0.0;
  for (uint j = t; j < p.len; j += 64) m = max(m, x[base + j * p.inner]);
  part[t] = m;
  barrier();
  for (uint s = 32; s > 0; s >>= 1) {
    if (t < s) part[t] = max(part[t], part[t + s]);
    barrier();
  }
  m = part[0];
  barrier();
  float sum = 0.0;
  for (uint j = t; j < p.len; j += 64) sum += exp(x[base + j * p.inner] - m);
  part[t] = sum;
  barrier();
  for (uint s = 32; s > 0; s >>= 1) {
    if (t < s) part[t] += part[t + s];
    barrier();
  }
  const float inv = 1.0 / part[0];
  for (uint j = t; j < p.len; j += 64) y[base + j * p.inner] = exp(x[base + j * p.inner] - m) * inv;
}
