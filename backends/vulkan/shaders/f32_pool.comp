// MaxPool / AveragePool over 1-D, 2-D and 3-D windows, one thread per output element (1-D and
// 2-D windows have depth 1). Windows follow ops/conv_pool_util.h; the average divisor counts the
// taps inside the input, or with COUNT_PAD inside the padded input [-pad_begin, in + pad_end)
// (ops/average_pool.cc).
// Spec: 0 is max, 1 KH, 2 KW, 3 SH, 4 SW, 5 DH, 6 DW, 7 count pad, 8 local size, 9 KD, 10 SD,
//       11 DD.
#version 450
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
layout(local_size_x_id = 8) in;
layout(constant_id = 0) const uint IS_MAX = 1;
layout(constant_id = 1) const uint KH = 1;
layout(constant_id = 2) const uint KW = 1;
layout(constant_id = 3) const uint SH = 1;
layout(constant_id = 4) const uint SW = 1;
layout(constant_id = 5) const uint DH = 1;
layout(constant_id = 6) const uint DW = 1;
layout(constant_id = 7) const uint COUNT_PAD = 0;
layout(constant_id = 9) const uint KD = 1;
layout(constant_id = 10) const uint SD = 1;
layout(constant_id = 11) const uint DD = 1;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform P {
  uint h, w, oh, ow;
  uint pad_t, pad_l, pad_b, pad_r;
  uint total;
  uint d, od, pad_f, pad_k;
} p;

void main() {
  const uint i = linear_index();
  if (i >= p.total) return;
  const uint ox = i % p.ow, oy = (i / p.ow) % p.oh, oz = (i / (p.ow * p.oh)) % p.od;
  const uint plane = i / (p.ow * p.oh * p.od);
  const uint xbase = plane * p.d * p.h * p.w;
  const int z0 = int(oz * SD) - int(p.pad_f);
  const int y0 = int(oy * SH) - int(p.pad_t), x0 = int(ox * SW) - int(p.pad_l);
  float best = -1.0 / 0.0, sum = 0.0;
  uint inside = 0, padded = 0;
  for (uint kd = 0; kd < KD; ++kd) {
    const int iz = z0 + int(kd * DD);
    const bool slab_in = iz >= 0 && iz < int(p.d);
    const bool slab_pad = iz >= -int(p.pad_f) && iz < int(p.d + p.pad_k);
    for (uint kh = 0; kh < KH; ++kh) {
      const int iy = y0 + int(kh * DH);
      const bool row_in = slab_in && iy >= 0 && iy < int(p.h);
      const bool row_pad = slab_pad && iy >= -int(p.pad_t) && iy < int(p.h + p.pad_b);
      for (uint kw = 0; kw < KW; ++kw) {
        const int ix = x0 + int(kw * DW);
        if (row_pad && ix >= -int(p.pad_l) && ix < int(p.w + p.pad_r)) ++padded;
        if (!row_in || ix < 0 || ix >= int(p.w)) continue;
        const float v = x[xbase + (uint(iz) * p.h + uint(iy)) * p.w + uint(ix)];
        ++inside;
        if (IS_MAX == 1) {
          best = (v > best || isnan(v)) ? v : best;
        } else {
          sum += v;
        }
      }
    }
  }
  if (IS_MAX == 1) {
    y[i] = best;
  } else {
    y[i] = sum / float(COUNT_PAD == 1 ? padded : inside);
  }
}
