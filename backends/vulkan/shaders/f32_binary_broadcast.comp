// y = activation(a OP b) with numpy broadcasting. The host merges dimensions that broadcast
// alike (ops/broadcast.h) and passes, per merged dim (outermost first), the extent and each
// input's element stride (0 where broadcast).
// Spec: 0 local size, 1 op (0 add, 1 sub, 2 mul, 3 div), 2-4 activation.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 2
#include "common.glsl"
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint OP = 0;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) readonly buffer B { float b[]; };
layout(std430, binding = 2) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint n;
  uint rank;
  uint dims[6];
  uint sa[6];
  uint sb[6];
} p;

void main() {
  const uint i = linear_index();
  if (i >= p.n) return;
  uint rest = i, oa = 0, ob = 0;
  for (int d = int(p.rank) - 1; d >= 0; --d) {
    const uint c = rest % p.dims[d];
    rest /= p.dims[d];
    oa += c * p.sa[d];
    ob += c * p.sb[d];
  }
  const float x = a[oa], z = b[ob];
  float r;
  if (OP == 0) r = x + z;
  else if (OP == 1) r = x - z;
  else if (OP == 2) r = x * z;
  else r = x / z;
  y[i] = activate(r);
}
