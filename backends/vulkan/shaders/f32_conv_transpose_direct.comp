// ConvTranspose over 1 to 3 spatial dims, one thread per output element, in gather form: output
// position o receives input position i through tap t when o = i * stride + t * dilation -
// pad_begin (ops/conv_transpose.cc), so each thread walks its taps and keeps those whose
// (o + pad_begin - t * dilation) is a non-negative multiple of the stride inside the input.
// 1-D and 2-D windows have depth 1 (and 1-D height 1).
// Spec: 0-2 KD KH KW, 3-5 SD SH SW, 6-8 DD DH DW, 9 has bias, 10-12 activation, 13 local size.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 10
#include "common.glsl"
layout(local_size_x_id = 13) in;
layout(constant_id = 0) const uint KD = 1;
layout(constant_id = 1) const uint KH = 1;
layout(constant_id = 2) const uint KW = 1;
layout(constant_id = 3) const int SD = 1;
layout(constant_id = 4) const int SH = 1;
layout(constant_id = 5) const int SW = 1;
layout(constant_id = 6) const int DD = 1;
layout(constant_id = 7) const int DH = 1;
layout(constant_id = 8) const int DW = 1;
layout(constant_id = 9) const uint HAS_BIAS = 0;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint cg, mg, groups;
  uint d, h, w;
  uint od, oh, ow;
  uint pad_f, pad_t, pad_l;
  uint total;
} p;

// The input coordinate tap `t` of output coordinate `o` reads, or -1.
int source(uint o, uint pad, uint t, int s, int dil, uint len) {
  const int num = int(o + pad) - int(t) * dil;
  if (num < 0 || num % s != 0) return -1;
  const int i = num / s;
  return i < int(len) ? i : -1;
}

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint ox = i % p.ow, oy = (i / p.ow) % p.oh, oz = (i / (p.ow * p.oh)) % p.od;
  const uint m = (i / (p.ow * p.oh * p.od)) % (p.mg * p.groups);
  const uint img = i / (p.ow * p.oh * p.od * p.mg * p.groups);
  const uint g = m / p.mg, mm = m % p.mg;
  const uint HW = p.h * p.w, DHW = p.d * HW;
  const uint KVOL = KD * KH * KW;
  float acc = HAS_BIAS == 1 ? bias[m] : 0.0;
  for (uint kd = 0; kd < KD; ++kd) {
    const int iz = source(oz, p.pad_f, kd, SD, DD, p.d);
    if (iz < 0) continue;
    for (uint kh = 0; kh < KH; ++kh) {
      const int iy = source(oy, p.pad_t, kh, SH, DH, p.h);
      if (iy < 0) continue;
      for (uint kw = 0; kw < KW; ++kw) {
        const int ix = source(ox, p.pad_l, kw, SW, DW, p.w);
        if (ix < 0) continue;
        const uint xoff = uint(iz) * HW + uint(iy) * p.w + uint(ix);
        const uint tap = (kd * KH + kh) * KW + kw;
        for (uint ci = 0; ci < p.cg; ++ci) {
          const uint c = g * p.cg + ci;
          acc += x[(img * p.groups * p.cg + c) * DHW + xoff] * w[(c * p.mg + mm) * KVOL + tap];
        }
      }
    }
  }
  y[i] = activate(acc);
}
