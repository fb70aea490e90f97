// y = act(x * scale[c] + shift[c]) over [N, C, inner]: BatchNormalization with its statistics
// folded on the host. Spec: 0 local size, 1-3 activation.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 1
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer S { float st[]; };  // scale[C], then shift[C]
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint c, inner, total; } p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint ch = (i / p.inner) % p.c;
  y[i] = activate(x[i] * st[ch] + st[p.c + ch]);
}
