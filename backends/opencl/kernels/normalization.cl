// Normalisation and reduction family: Softmax, LRN, ReduceMean.
//
// softmax_f32: one 128-wide work-group per row of `len` elements spaced `inner` apart (the row
//   of [outer, len, inner] at (o, i)); max and sum are reduced in local memory.
// lrn_f32: one work-item per element of [N, C, inner], the square sum over its channel window.
// reduce_mean_f32: one work-item per output; meta = [out_rank, out_dims, out_strides (input
//   element strides of the kept dims), red_rank, red_dims, red_strides].

#define SOFTMAX_WG 128

__kernel __attribute__((reqd_work_group_size(SOFTMAX_WG, 1, 1)))
void softmax_f32(__global const float* X, __global float* Y, const int len, const int inner) {
  __local float partial[SOFTMAX_WG];
  const int t = get_local_id(0), row = get_group_id(0);
  const int o = row / inner, in = row % inner;
  const int base = o * len * inner + in;
  float m = -INFINITY;
  for (int i = t; i < len; i += SOFTMAX_WG) m = fmax(m, X[base + i * inner]);
  partial[t] = m;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = SOFTMAX_WG / 2; w > 0; w >>= 1) {
    if (t < w) partial[t] = fmax(partial[t], partial[t + w]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  m = partial[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  float s = 0.f;
  for (int i = t; i < len; i += SOFTMAX_WG) {
    const float e = exp(X[base + i * inner] - m);
    Y[base + i * inner] = e;
    s += e;
  }
  partial[t] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = SOFTMAX_WG / 2; w > 0; w >>= 1) {
    if (t < w) partial[t] += partial[t + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float inv = 1.f / partial[0];
  for (int i = t; i < len; i += SOFTMAX_WG) Y[base + i * inner] *= inv;
}

// global: (inner, N * C)
__kernel void lrn_f32(__global const float* X, __global float* Y, const int channels,
                      const int inner, const int before, const int after, const float alpha_over_size,
                      const float beta, const float bias) {
  const int i = get_global_id(0), nc = get_global_id(1);
  if (i >= inner) return;
  const int c = nc % channels, n = nc / channels;
  const int lo = max(c - before, 0), hi = min(c + after, channels - 1);
  __global const float* x = X + n * channels * inner + i;
  float s = 0.f;
  for (int cc = lo; cc <= hi; ++cc) {
    const float v = x[cc * inner];
    s = fma(v, v, s);
  }
  const float v = x[c * inner];
  Y[nc * inner + i] = v / pow(bias + alpha_over_size * s, beta);
}

__kernel void reduce_mean_f32(__global const float* X, __global float* Y,
                              __global const int* meta, const int total, const int count,
                              const float inv_count) {
  const int idx = get_global_id(0);
  if (idx >= total) return;
  const int out_rank = meta[0];
  __global const int* out_dims = meta + 1;
  __global const int* out_strides = meta + 1 + out_rank;
  const int red_rank = meta[1 + 2 * out_rank];
  __global const int* red_dims = meta + 2 + 2 * out_rank;
  __global const int* red_strides = red_dims + red_rank;
  int base = 0, r = idx;
  for (int d = out_rank - 1; d >= 0; --d) {
    base += (r % out_dims[d]) * out_strides[d];
    r /= out_dims[d];
  }
  // The innermost reduced dim is walked directly; the outer ones through a counter.
  const int inner_len = red_dims[red_rank - 1], inner_stride = red_strides[red_rank - 1];
  float s = 0.f;
  for (int j = 0; j < count; j += inner_len) {
    int off = base, q = j / inner_len;
    for (int d = red_rank - 2; d >= 0; --d) {
      off += (q % red_dims[d]) * red_strides[d];
      q /= red_dims[d];
    }
    float row = 0.f;
    for (int k = 0; k < inner_len; ++k) row += X[off + k * inner_stride];
    s += row;
  }
  Y[idx] = s * inv_count;
}
