// y = activation(x), element-wise. Spec: 0 local size, 1-3 activation.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 1
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P { uint n; } p;

void main() {
  const uint i = linear_index();
  if (i >= p.n) return;
  y[i] = activate(x[i]);
}
