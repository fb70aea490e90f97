// Convolution family, NCHW (and NCDHW: every kernel works on a 3-D window whose leading extent is
// 1 for 2-D convolutions, as tessera::Window3 in ops/conv_pool_util.h).
//
// conv_f32_implicit_gemm_64x64: the general convolution as a GEMM per (image, group)
//   Y[m, p] = sum_k W[m, k] * im2col(X)[k, p],  k = (c, kz, ky, kx), p = (oz, oy, ox),
//   without materialising im2col: B-tile elements are gathered from X on the fly. `ktab` holds,
//   per k, the input channel offset and the window tap offsets (c * in_vol, kz * dz - pz,
//   ky * dy - py, kx * dx - px). Tiles and work-item blocking as gemm_f32_tile64x64; each
//   work-item always stages the same output column p, so its (oz, oy, ox) is decoded once.
//   (The 1x1 stride-1 unpadded case runs gemm_f32_tile64x64 directly on X.)
// conv2d_f32_depthwise_x4: groups of one input channel (depthwise, channel multipliers): one
//   work-item computes 4 neighbouring output columns of one output row.
// conv_transpose_f32_direct: ConvTranspose gathered per output element: for each tap, the input
//   position (o + pad - t * dilation) / stride when it divides exactly.

#define CONV_TM 64
#define CONV_TN 64
#define CONV_TK 16

__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void conv_f32_implicit_gemm_64x64(const int M, const int P, const int Kc, const int groups,
                                  __global const float* X, const int x_bs, const int x_gs,
                                  __global const float* W, const int w_gs,
                                  __global const int4* ktab,
                                  const int in_d, const int in_h, const int in_w,
                                  const int out_h, const int out_w,
                                  const int s_d, const int s_h, const int s_w,
                                  __global float* Y, const int y_bs, const int y_gs,
                                  __global const float* bias, const int has_bias,
                                  const int act, const float act_a, const float act_b) {
  __local float As[CONV_TK][CONV_TM];
  __local float Bs[CONV_TK][CONV_TN];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int lid = ty * 16 + tx;
  const int p0 = get_group_id(0) * CONV_TN, m0 = get_group_id(1) * CONV_TM;
  const int batch = get_group_id(2) / groups, g = get_group_id(2) % groups;
  __global const float* x = X + batch * x_bs + g * x_gs;
  __global const float* w = W + g * w_gs;

  const int a_k = lid % CONV_TK, a_m = lid / CONV_TK;
  const int b_p = lid % CONV_TN, b_k = lid / CONV_TN;
  // The output position this work-item stages B for, decoded once.
  const int p = p0 + b_p;
  const int plane = out_h * out_w;
  const int oz = p / plane;
  const int oy = (p - oz * plane) / out_w;
  const int ox = p - oz * plane - oy * out_w;
  const int bz = oz * s_d, by = oy * s_h, bx = ox * s_w;
  const bool p_ok = p < P;

  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

  for (int k0 = 0; k0 < Kc; k0 += CONV_TK) {
    for (int l = 0; l < 4; ++l) {
      const int m = m0 + a_m + 16 * l, k = k0 + a_k;
      As[a_k][a_m + 16 * l] = (m < M && k < Kc) ? w[m * Kc + k] : 0.f;
    }
    for (int l = 0; l < 4; ++l) {
      const int k = k0 + b_k + 4 * l;
      float v = 0.f;
      if (p_ok && k < Kc) {
        const int4 t = ktab[k];
        const int iz = bz + t.y, iy = by + t.z, ix = bx + t.w;
        if (iz >= 0 && iz < in_d && iy >= 0 && iy < in_h && ix >= 0 && ix < in_w)
          v = x[t.x + (iz * in_h + iy) * in_w + ix];
      }
      Bs[b_k + 4 * l][b_p] = v;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < CONV_TK; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  __global float* y = Y + batch * y_bs + g * y_gs;
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= M) continue;
    const float b = has_bias ? bias[g * M + m] : 0.f;
    for (int j = 0; j < 4; ++j) {
      const int pp = p0 + tx + 16 * j;
      if (pp < P) y[m * P + pp] = activate(acc[i][j] + b, act, act_a, act_b);
    }
  }
}

// global: (ceil(out_w / 4), out_h, N * C_out)
__kernel void conv2d_f32_depthwise_x4(__global const float* X, __global const float* W,
                                      __global const float* bias, const int has_bias,
                                      __global float* Y, const int c_in, const int c_out,
                                      const int mult, const int in_h, const int in_w,
                                      const int out_h, const int out_w, const int k_h,
                                      const int k_w, const int s_h, const int s_w,
                                      const int d_h, const int d_w, const int p_h, const int p_w,
                                      const int act, const float act_a, const float act_b) {
  const int ox0 = get_global_id(0) * 4, oy = get_global_id(1);
  const int nc = get_global_id(2);
  if (ox0 >= out_w || oy >= out_h) return;
  const int n = nc / c_out, co = nc % c_out;
  const int ci = co / mult;
  __global const float* x = X + (n * c_in + ci) * in_h * in_w;
  __global const float* w = W + co * k_h * k_w;
  const float b = has_bias ? bias[co] : 0.f;
  float acc[4] = {b, b, b, b};
  for (int ky = 0; ky < k_h; ++ky) {
    const int iy = oy * s_h + ky * d_h - p_h;
    if (iy < 0 || iy >= in_h) continue;
    __global const float* xr = x + iy * in_w;
    for (int kx = 0; kx < k_w; ++kx) {
      const float wv = w[ky * k_w + kx];
      for (int j = 0; j < 4; ++j) {
        const int ix = (ox0 + j) * s_w + kx * d_w - p_w;
        if (ix >= 0 && ix < in_w) acc[j] = fma(wv, xr[ix], acc[j]);
      }
    }
  }
  __global float* y = Y + (nc * out_h + oy) * out_w;
  for (int j = 0; j < 4; ++j) {
    if (ox0 + j < out_w) y[ox0 + j] = activate(acc[j], act, act_a, act_b);
  }
}

// One work-item per output element; geometry in `geo`:
//   [0..2] in (d, h, w), [3..5] out, [6..8] kernel, [9..11] strides, [12..14] dilations,
//   [15..17] pads_begin, [18] C_in, [19] C_out, [20] groups.
__kernel void conv_transpose_f32_direct(__global const float* X, __global const float* W,
                                        __global const float* bias, const int has_bias,
                                        __global float* Y, __global const int* geo,
                                        const int total, const int act, const float act_a,
                                        const float act_b) {
  const int idx = get_global_id(0);
  if (idx >= total) return;
  const int in_d = geo[0], in_h = geo[1], in_w = geo[2];
  const int out_d = geo[3], out_h = geo[4], out_w = geo[5];
  const int k_d = geo[6], k_h = geo[7], k_w = geo[8];
  const int c_in = geo[18], c_out = geo[19], groups = geo[20];
  const int cin_g = c_in / groups, cout_g = c_out / groups;
  int r = idx;
  const int ox = r % out_w; r /= out_w;
  const int oy = r % out_h; r /= out_h;
  const int oz = r % out_d; r /= out_d;
  const int m = r % c_out;
  const int n = r / c_out;
  const int g = m / cout_g, mg = m - g * cout_g;
  const int in_vol = in_d * in_h * in_w, k_vol = k_d * k_h * k_w;
  float acc = has_bias ? bias[m] : 0.f;
  for (int kz = 0; kz < k_d; ++kz) {
    const int tz = oz + geo[15] - kz * geo[12];
    if (tz < 0 || tz % geo[9] != 0 || tz / geo[9] >= in_d) continue;
    const int iz = tz / geo[9];
    for (int ky = 0; ky < k_h; ++ky) {
      const int ty = oy + geo[16] - ky * geo[13];
      if (ty < 0 || ty % geo[10] != 0 || ty / geo[10] >= in_h) continue;
      const int iy = ty / geo[10];
      for (int kx = 0; kx < k_w; ++kx) {
        const int tx = ox + geo[17] - kx * geo[14];
        if (tx < 0 || tx % geo[11] != 0 || tx / geo[11] >= in_w) continue;
        const int ix = tx / geo[11];
        const int tap = (kz * k_h + ky) * k_w + kx;
        const int in_pos = (iz * in_h + iy) * in_w + ix;
        for (int c = 0; c < cin_g; ++c) {
          const int ci = g * cin_g + c;
          acc = fma(X[(n * c_in + ci) * in_vol + in_pos], W[(ci * cout_g + mg) * k_vol + tap], acc);
        }
      }
    }
  }
  Y[idx] = activate(acc, act, act_a, act_b);
}
