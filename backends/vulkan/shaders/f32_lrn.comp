// Local response normalisation across channels (ops/lrn.cc), one thread per element:
//   y = x / (bias + alpha / size * sum of x^2 over channels [c - lo, c + hi])^beta
// Spec: 0 local size.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint c, inner, total, lo, hi;
  float alpha_over_size, beta, bias;
} p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint ch = (i / p.inner) % p.c;
  const uint base = i - ch * p.inner;
  const uint first = ch >= p.lo ? ch - p.lo : 0;
  const uint last = min(ch + p.hi, p.c - 1);
  float sq = 0.0;
  for (uint k = first; k <= last; ++k) {
    const float v = x[base + k * p.inner];
    sq += v * v;
  }
  y[i] = x[i] / pow(p.bias + p.alpha_over_size * sq, p.beta);
}
