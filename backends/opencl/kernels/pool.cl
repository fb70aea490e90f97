// Pooling family, NCHW / NCDHW over a 3-D window (leading extent 1 for 2-D pools).
//
// Window geometry `geo` (ints): [0..2] in, [3..5] out, [6..8] kernel, [9..11] strides,
// [12..14] dilations, [15..17] pads_begin, [18..20] pads_end.
// pool_f32_max / pool_f32_average: one work-item per output element.
// global_pool_f32_{average,max}: one 64-wide work-group per (n, c) plane, reduced in local
//   memory.

// Taps t in [0, k) with start + t * d in [lo, hi) (ops/conv_pool_util.h window_tap_range).
inline int2 tap_range(int start, int k, int d, int lo, int hi) {
  int first = start >= lo ? 0 : (lo - start + d - 1) / d;
  int last = hi - start <= 0 ? 0 : (hi - start - 1) / d + 1;
  if (last > k) last = k;
  if (first > last) first = last;
  return (int2)(first, last);
}

__kernel void pool_f32_max(__global const float* X, __global float* Y, __global const int* geo,
                           const int total) {
  const int idx = get_global_id(0);
  if (idx >= total) return;
  const int in_d = geo[0], in_h = geo[1], in_w = geo[2];
  const int out_d = geo[3], out_h = geo[4], out_w = geo[5];
  int r = idx;
  const int ox = r % out_w; r /= out_w;
  const int oy = r % out_h; r /= out_h;
  const int oz = r % out_d; r /= out_d;  // r is now n * C + c
  const int sz = oz * geo[9] - geo[15], sy = oy * geo[10] - geo[16], sx = ox * geo[11] - geo[17];
  const int2 rz = tap_range(sz, geo[6], geo[12], 0, in_d);
  const int2 ry = tap_range(sy, geo[7], geo[13], 0, in_h);
  const int2 rx = tap_range(sx, geo[8], geo[14], 0, in_w);
  __global const float* x = X + r * in_d * in_h * in_w;
  float m = -INFINITY;
  for (int kz = rz.x; kz < rz.y; ++kz) {
    const int iz = sz + kz * geo[12];
    for (int ky = ry.x; ky < ry.y; ++ky) {
      __global const float* row = x + (iz * in_h + sy + ky * geo[13]) * in_w;
      for (int kx = rx.x; kx < rx.y; ++kx) {
        const float v = row[sx + kx * geo[14]];
        if (v > m || isnan(v)) m = v;
        if (isnan(m)) break;
      }
    }
  }
  Y[idx] = m;
}

__kernel void pool_f32_average(__global const float* X, __global float* Y,
                               __global const int* geo, const int total,
                               const int count_include_pad) {
  const int idx = get_global_id(0);
  if (idx >= total) return;
  const int in_d = geo[0], in_h = geo[1], in_w = geo[2];
  const int out_d = geo[3], out_h = geo[4], out_w = geo[5];
  int r = idx;
  const int ox = r % out_w; r /= out_w;
  const int oy = r % out_h; r /= out_h;
  const int oz = r % out_d; r /= out_d;
  const int sz = oz * geo[9] - geo[15], sy = oy * geo[10] - geo[16], sx = ox * geo[11] - geo[17];
  const int2 rz = tap_range(sz, geo[6], geo[12], 0, in_d);
  const int2 ry = tap_range(sy, geo[7], geo[13], 0, in_h);
  const int2 rx = tap_range(sx, geo[8], geo[14], 0, in_w);
  __global const float* x = X + r * in_d * in_h * in_w;
  float s = 0.f;
  for (int kz = rz.x; kz < rz.y; ++kz) {
    const int iz = sz + kz * geo[12];
    for (int ky = ry.x; ky < ry.y; ++ky) {
      __global const float* row = x + (iz * in_h + sy + ky * geo[13]) * in_w;
      for (int kx = rx.x; kx < rx.y; ++kx) s += row[sx + kx * geo[14]];
    }
  }
  float divisor;
  if (count_include_pad) {
    const int2 pz = tap_range(sz, geo[6], geo[12], -geo[15], in_d + geo[18]);
    const int2 py = tap_range(sy, geo[7], geo[13], -geo[16], in_h + geo[19]);
    const int2 px = tap_range(sx, geo[8], geo[14], -geo[17], in_w + geo[20]);
    divisor = (float)((pz.y - pz.x) * (py.y - py.x) * (px.y - px.x));
  } else {
    divisor = (float)((rz.y - rz.x) * (ry.y - ry.x) * (rx.y - rx.x));
  }
  Y[idx] = s / divisor;
}

// global: (64 * N * C), local 64. mode 0 = average, 1 = max.
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void global_pool_f32(__global const float* X, __global float* Y, const int plane,
                     const int mode) {
  __local float partial[64];
  const int t = get_local_id(0), nc = get_group_id(0);
  __global const float* x = X + nc * plane;
  float acc = mode ? -INFINITY : 0.f;
  for (int i = t; i < plane; i += 64) {
    const float v = x[i];
    if (mode) {
      if (v > acc || isnan(v)) acc = isnan(acc) ? acc : v;
    } else {
      acc += v;
    }
  }
  partial[t] = acc;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = 32; w > 0; w >>= 1) {
    if (t < w) {
      const float a = partial[t], b = partial[t + w];
      partial[t] = mode ? ((b > a || isnan(b)) && !isnan(a) ? b : a) : a + b;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) Y[nc] = mode ? partial[0] : partial[0] / (float)plane;
}
