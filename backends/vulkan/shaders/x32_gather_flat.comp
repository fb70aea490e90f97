// dst[i] = src[table[i]], or `fill` where table[i] < 0, on 32-bit words. The host derives the
// table once per node by running the op's reference kernel on the element indices (Transpose,
// Slice, Pad, nearest Resize, Gather with constant indices), so every index rule is the
// reference's. Spec: 0 local size.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) readonly buffer T { int table[]; };
layout(std430, binding = 2) writeonly buffer D { uint dst[]; };
layout(push_constant) uniform P { uint total, fill; } p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const int t = table[i];
  dst[i] = t < 0 ? p.fill : src[t];
}
