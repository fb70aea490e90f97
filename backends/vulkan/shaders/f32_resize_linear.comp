// Bilinear Resize of the two innermost dims of [planes, H, W] -> [planes, OH, OW]; the host
// computes per output row/column the two source indices and the weight of the second
// (ops/resize.cc linear_taps). Spec: 0 local size.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer I { int idx[]; };    // y0[OH] y1[OH] x0[OW] x1[OW]
layout(std430, binding = 2) readonly buffer Wt { float wt[]; };  // wy[OH] wx[OW]
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint h, w, oh, ow, total; } p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint ox = i % p.ow, oy = (i / p.ow) % p.oh, plane = i / (p.ow * p.oh);
  const uint base = plane * p.h * p.w;
  const int y0 = idx[oy], y1 = idx[p.oh + oy];
  const int x0 = idx[2 * p.oh + ox], x1 = idx[2 * p.oh + p.ow + ox];
  const float wy = wt[oy], wx = wt[p.oh + ox];
  // The reference resizes one dimension at a time, H first: r0/r1 are that pass's values at
  // columns x0/x1, then the W pass blends them.
  const float r0 = (1.0 - wy) * x[base + uint(y0) * p.w + uint(x0)] + wy * x[base + uint(y1) * p.w + uint(x0)];
  const float r1 = (1.0 - wy) * x[base + uint(y0) * p.w + uint(x1)] + wy * x[base + uint(y1) * p.w + uint(x1)];
  y[i] = (1.0 - wx) * r0 + wx * r1;
}
