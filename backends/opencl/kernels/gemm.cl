// GEMM family: C = act(alpha * op(A) * op(B) + beta * bias), batched, with arbitrary element
// strides for A and B (a transpose is just swapped strides) and a broadcastable bias.
//
//   A(m, k) = A[a_off + b * a_bs + m * a_rs + k * a_cs]      (b = get_global_id(2), the batch)
//   B(k, n) = B[b_off + b * b_bs + k * b_rs + n * b_cs]
//   bias(m, n) = bias[bias_off + b * bias_bs + m * bias_rs + n * bias_cs]   (when has_bias)
//   C[c_off + b * c_bs + m * c_rs + n]
//
// gemm_f32_tile64x64: 64x64 output tiles per work-group of 16x16 work-items, each holding a
//   4x4 register block (rows ty + 16 i, columns tx + 16 j, so stores are coalesced), with
//   16-deep slices of A and B staged in local memory.
// gemm_f32_small_m_dot: for few rows (fully connected layers at batch 1) when B's k is
//   contiguous: one 64-wide work-group per output reduces the dot product in local memory.
// gemm_f32_small_m_dot_x4: the same with A's k contiguous too: float4 loads, and B's row read
//   once for all (up to 4) rows of A.
// gemm_f32_small_m_col: for few rows when B's n is contiguous: one work-item per output,
//   neighbouring work-items read neighbouring columns.

// Every gemm kernel takes the same arguments (opencl_gemm.cc binds them once for all).
#define GEMM_PARAMS                                                                           \
  const int M, const int N, const int K,                                                      \
  __global const float* A, const int a_off, const int a_rs, const int a_cs, const int a_bs,   \
  __global const float* B, const int b_off, const int b_rs, const int b_cs, const int b_bs,   \
  __global float* C, const int c_off, const int c_rs, const int c_bs, const float alpha,      \
  __global const float* bias, const int has_bias, const int bias_off, const int bias_rs,      \
  const int bias_cs, const int bias_bs, const float beta, const int act, const float act_a,   \
  const float act_b

#define GEMM_TM 64
#define GEMM_TN 64
#define GEMM_TK 16

__kernel __attribute__((reqd_work_group_size(16, 16, 1)))
void gemm_f32_tile64x64(GEMM_PARAMS) {
  __local float As[GEMM_TK][GEMM_TM];
  __local float Bs[GEMM_TK][GEMM_TN];
  const int tx = get_local_id(0), ty = get_local_id(1);
  const int lid = ty * 16 + tx;
  const int n0 = get_group_id(0) * GEMM_TN, m0 = get_group_id(1) * GEMM_TM;
  const int batch = get_global_id(2);
  __global const float* a = A + a_off + batch * a_bs;
  __global const float* b = B + b_off + batch * b_bs;

  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.f;

  // Each work-item stages 4 elements of each tile per k-slice: A at (m = lid / 16 + 16 l,
  // k = lid % 16), B at (k = lid / 64 + 4 l, n = lid % 64).
  const int a_k = lid % GEMM_TK, a_m = lid / GEMM_TK;
  const int b_n = lid % GEMM_TN, b_k = lid / GEMM_TN;
  for (int k0 = 0; k0 < K; k0 += GEMM_TK) {
    for (int l = 0; l < 4; ++l) {
      const int m = m0 + a_m + 16 * l, k = k0 + a_k;
      As[a_k][a_m + 16 * l] = (m < M && k < K) ? a[m * a_rs + k * a_cs] : 0.f;
    }
    for (int l = 0; l < 4; ++l) {
      const int k = k0 + b_k + 4 * l, n = n0 + b_n;
      Bs[b_k + 4 * l][b_n] = (k < K && n < N) ? b[k * b_rs + n * b_cs] : 0.f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < GEMM_TK; ++kk) {
      float av[4], bv[4];
      for (int i = 0; i < 4; ++i) av[i] = As[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) bv[j] = Bs[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }

  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= M) continue;
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx + 16 * j;
      if (n >= N) continue;
      float v = alpha * acc[i][j];
      if (has_bias) v += beta * bias[bias_off + batch * bias_bs + m * bias_rs + n * bias_cs];
      C[c_off + batch * c_bs + m * c_rs + n] = activate(v, act, act_a, act_b);
    }
  }
}

__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void gemm_f32_small_m_dot(GEMM_PARAMS) {
  __local float partial[64];
  const int t = get_local_id(0);
  const int n = get_group_id(0), m = get_group_id(1), batch = get_group_id(2);
  __global const float* a = A + a_off + batch * a_bs + m * a_rs;
  __global const float* b = B + b_off + batch * b_bs + n * b_cs;
  float s = 0.f;
  for (int k = t; k < K; k += 64) s = fma(a[k * a_cs], b[k * b_rs], s);
  partial[t] = s;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = 32; w > 0; w >>= 1) {
    if (t < w) partial[t] += partial[t + w];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t == 0) {
    float v = alpha * partial[0];
    if (has_bias) v += beta * bias[bias_off + batch * bias_bs + m * bias_rs + n * bias_cs];
    C[c_off + batch * c_bs + m * c_rs + n] = activate(v, act, act_a, act_b);
  }
}

// M <= 4 rows with A's and B's k contiguous (fully connected at batch 1 with transB = 1): one
// 64-wide work-group per (n, batch) reads B's row n once for every row of A, as float4 loads
// (consecutive work-items take consecutive 16-byte chunks, coalesced on a GPU, contiguous per
// work-item on a CPU), and reduces the M partial sums in local memory.
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void gemm_f32_small_m_dot_x4(GEMM_PARAMS) {
  __local float partial[4][64];
  const int t = get_local_id(0);
  const int n = get_group_id(0), batch = get_group_id(2);
  __global const float* a = A + a_off + batch * a_bs;
  __global const float* b = B + b_off + batch * b_bs + n * b_cs;
  float4 s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;
  const int k4 = K / 4;
  for (int k = t; k < k4; k += 64) {
    const float4 bv = vload4(k, b);
    s0 = fma(vload4(k, a), bv, s0);
    if (M > 1) s1 = fma(vload4(k, a + a_rs), bv, s1);
    if (M > 2) s2 = fma(vload4(k, a + 2 * a_rs), bv, s2);
    if (M > 3) s3 = fma(vload4(k, a + 3 * a_rs), bv, s3);
  }
  float r[4] = {s0.x + s0.y + s0.z + s0.w, s1.x + s1.y + s1.z + s1.w,
                s2.x + s2.y + s2.z + s2.w, s3.x + s3.y + s3.z + s3.w};
  for (int k = 4 * k4 + t; k < K; k += 64) {
    for (int m = 0; m < M; ++m) r[m] = fma(a[m * a_rs + k], b[k], r[m]);
  }
  for (int m = 0; m < 4; ++m) partial[m][t] = r[m];
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int w = 32; w > 0; w >>= 1) {
    if (t < w) {
      for (int m = 0; m < 4; ++m) partial[m][t] += partial[m][t + w];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t < M) {
    const int m = t;
    float v = alpha * partial[m][0];
    if (has_bias) v += beta * bias[bias_off + batch * bias_bs + m * bias_rs + n * bias_cs];
    C[c_off + batch * c_bs + m * c_rs + n] = activate(v, act, act_a, act_b);
  }
}

__kernel void gemm_f32_small_m_col(GEMM_PARAMS) {
  const int n = get_global_id(0), m = get_global_id(1), batch = get_global_id(2);
  if (n >= N || m >= M) return;
  __global const float* a = A + a_off + batch * a_bs + m * a_rs;
  __global const float* b = B + b_off + batch * b_bs + n * b_cs;
  float s = 0.f;
  for (int k = 0; k < K; ++k) s = fma(a[k * a_cs], b[k * b_rs], s);
  float v = alpha * s;
  if (has_bias) v += beta * bias[bias_off + batch * bias_bs + m * bias_rs + n * bias_cs];
  C[c_off + batch * c_bs + m * c_rs + n] = activate(v, act, act_a, act_b);
}
