// Copies `rows` runs of `len` 32-bit words: dst[dst_off + r * dst_stride + j] =
// src[src_off + r * src_stride + j]. Concat and Split are one such copy per input/output.
// Spec: 0 local size.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer S { uint src[]; };
layout(std430, binding = 1) writeonly buffer D { uint dst[]; };
layout(push_constant) uniform P {
  uint total, len, src_stride, src_off, dst_stride, dst_off;
} p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint r = i / p.len, j = i % p.len;
  dst[p.dst_off + r * p.dst_stride + j] = src[p.src_off + r * p.src_stride + j];
}
