// 1-D, 2-D and 3-D convolution, one thread per output element: for depthwise and small grouped
// convolutions, where a GEMM tile would be mostly empty, and for every 3-D convolution.
// 1-D and 2-D windows have depth 1 (and 1-D height 1).
// Spec: 0 KH, 1 KW, 2 SH, 3 SW, 4 DH, 5 DW, 6 has bias, 7-9 activation, 10 local size,
//       11 KD, 12 SD, 13 DD.
#version 450
#extension GL_GOOGLE_include_directive : require
#define ACT_ID 7
#include "common.glsl"
layout(local_size_x_id = 10) in;
layout(constant_id = 0) const uint KH = 1;
layout(constant_id = 1) const uint KW = 1;
layout(constant_id = 2) const uint SH = 1;
layout(constant_id = 3) const uint SW = 1;
layout(constant_id = 4) const uint DH = 1;
layout(constant_id = 5) const uint DW = 1;
layout(constant_id = 6) const uint HAS_BIAS = 0;
layout(constant_id = 11) const uint KD = 1;
layout(constant_id = 12) const uint SD = 1;
layout(constant_id = 13) const uint DD = 1;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer Bias { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint cg;
  uint h, w;
  uint oh, ow;
  uint mg;
  uint pad_t, pad_l;
  uint groups;
  uint total;
  uint d, od, pad_f;
} p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint ox = i % p.ow, oy = (i / p.ow) % p.oh, oz = (i / (p.ow * p.oh)) % p.od;
  const uint co = (i / (p.ow * p.oh * p.od)) % (p.mg * p.groups);
  const uint img = i / (p.ow * p.oh * p.od * p.mg * p.groups);
  const uint g = co / p.mg;
  const uint HW = p.h * p.w, DHW = p.d * HW;
  const uint xbase = (img * p.groups + g) * p.cg * DHW;
  const uint wbase = co * p.cg * KD * KH * KW;
  float acc = HAS_BIAS == 1 ? bias[co] : 0.0;
  const int z0 = int(oz * SD) - int(p.pad_f);
  const int y0 = int(oy * SH) - int(p.pad_t), x0 = int(ox * SW) - int(p.pad_l);
  for (uint ci = 0; ci < p.cg; ++ci) {
    for (uint kd = 0; kd < KD; ++kd) {
      const int iz = z0 + int(kd * DD);
      if (iz < 0 || iz >= int(p.d)) continue;
      for (uint kh = 0; kh < KH; ++kh) {
        const int iy = y0 + int(kh * DH);
        if (iy < 0 || iy >= int(p.h)) continue;
        for (uint kw = 0; kw < KW; ++kw) {
          const int ix = x0 + int(kw * DW);
          if (ix < 0 || ix >= int(p.w)) continue;
          acc += x[xbase + ci * DHW + uint(iz) * HW + uint(iy) * p.w + uint(ix)] *
                 w[wbase + ((ci * KD + kd) * KH + kh) * KW + kw];
        }
      }
    }
  }
  y[i] = activate(acc);
}
