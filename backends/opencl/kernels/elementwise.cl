// Element-wise family: activations, broadcasting arithmetic, per-channel affine (inference
// BatchNormalization folded to y = x * scale + shift). Every kernel applies a fused activation.
//
// Work-items handle 4 consecutive elements (vload4/vstore4 when the whole vector is in range).

#define OP_ADD 0
#define OP_SUB 1
#define OP_MUL 2
#define OP_DIV 3

inline float binary_op(float a, float b, int op) {
  switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    default: return a / b;
  }
}

inline float4 activate4(float4 v, int act, float a, float b) {
  return (float4)(activate(v.x, act, a, b), activate(v.y, act, a, b), activate(v.z, act, a, b),
                  activate(v.w, act, a, b));
}

// global: ceil(n / 4)
__kernel void unary_f32_x4(__global const float* X, __global float* Y, const int n,
                           const int act, const float act_a, const float act_b) {
  const int i = get_global_id(0) * 4;
  if (i + 4 <= n) {
    vstore4(activate4(vload4(0, X + i), act, act_a, act_b), 0, Y + i);
  } else {
    for (int j = i; j < n; ++j) Y[j] = activate(X[j], act, act_a, act_b);
  }
}

// Both inputs have the output's shape. global: ceil(n / 4)
__kernel void binary_f32_same_x4(__global const float* A, __global const float* B,
                                 __global float* Y, const int n, const int op, const int act,
                                 const float act_a, const float act_b) {
  const int i = get_global_id(0) * 4;
  if (i + 4 <= n) {
    const float4 a = vload4(0, A + i), b = vload4(0, B + i);
    float4 y;
    switch (op) {
      case OP_ADD: y = a + b; break;
      case OP_SUB: y = a - b; break;
      case OP_MUL: y = a * b; break;
      default: y = a / b; break;
    }
    vstore4(activate4(y, act, act_a, act_b), 0, Y + i);
  } else {
    for (int j = i; j < n; ++j) Y[j] = activate(binary_op(A[j], B[j], op), act, act_a, act_b);
  }
}

// Numpy broadcasting over a merged shape. meta: [dims(rank), a_strides(rank), b_strides(rank)],
// innermost last; a stride of 0 broadcasts. global: (inner, outer) with inner = dims[rank - 1].
// The element offsets into A and B of output element (row, i).
inline int2 broadcast_offsets(__global const int* meta, const int rank, const int row,
                              const int i) {
  int a_off = 0, b_off = 0, r = row;
  for (int d = rank - 2; d >= 0; --d) {
    const int c = r % meta[d];
    r /= meta[d];
    a_off += c * meta[rank + d];
    b_off += c * meta[2 * rank + d];
  }
  return (int2)(a_off + i * meta[2 * rank - 1], b_off + i * meta[3 * rank - 1]);
}

__kernel void binary_f32_broadcast(__global const float* A, __global const float* B,
                                   __global float* Y, __global const int* meta, const int rank,
                                   const int inner, const int outer, const int op, const int act,
                                   const float act_a, const float act_b) {
  const int i = get_global_id(0), row = get_global_id(1);
  if (i >= inner || row >= outer) return;
  const int2 off = broadcast_offsets(meta, rank, row, i);
  Y[row * inner + i] = activate(binary_op(A[off.x], B[off.y], op), act, act_a, act_b);
}

// Integer Add/Sub/Mul/Div (shape arithmetic) with the broadcasting of binary_f32_broadcast, as
// ops/div.cc and ops/add.cc: arithmetic wraps (done on unsigned bits), division truncates toward
// zero, MIN / -1 wraps to MIN, and a zero divisor writes 0 and records element + 1 of the output
// in *bad (the first one seen), which fails the run. One body for both widths: NAME is the whole
// kernel name, T the signed type, U its unsigned twin.
#define BINARY_INTEGER_BROADCAST_KERNEL(NAME, T, U)                                            \
  __kernel void NAME(__global const T* A, __global const T* B, __global T* Y,                   \
                     __global const int* meta, __global int* bad, const int rank,               \
                     const int inner, const int outer, const int op) {                          \
    const int i = get_global_id(0), row = get_global_id(1);                                     \
    if (i >= inner || row >= outer) return;                                                     \
    const int2 off = broadcast_offsets(meta, rank, row, i);                                     \
    const U a = (U)A[off.x], b = (U)B[off.y];                                                   \
    U y;                                                                                        \
    switch (op) {                                                                               \
      case OP_ADD: y = a + b; break;                                                            \
      case OP_SUB: y = a - b; break;                                                            \
      case OP_MUL: y = a * b; break;                                                            \
      default:                                                                                  \
        if (b == 0) {                                                                           \
          atomic_cmpxchg(bad, 0, row * inner + i + 1);                                          \
          y = 0;                                                                                \
        } else {                                                                                \
          y = (T)b == -1 ? (U)0 - a : (U)((T)a / (T)b);                                         \
        }                                                                                       \
        break;                                                                                  \
    }                                                                                           \
    Y[row * inner + i] = (T)y;                                                                  \
  }

BINARY_INTEGER_BROADCAST_KERNEL(binary_i32_broadcast, int, uint)
BINARY_INTEGER_BROADCAST_KERNEL(binary_i64_broadcast, long, ulong)

// BatchNormalization over [N, C, inner]: y = act((x - mean[c]) * a[c] + bias[c]), the mean
// subtracted first as the reference does (the folded x * a + (bias - mean * a) loses precision
// when |mean| is large next to the spread of x). global: (ceil(inner / 4), N * C)
__kernel void batch_norm_f32_x4(__global const float* X, __global float* Y,
                                __global const float* a, __global const float* mean,
                                __global const float* bias, const int channels, const int inner,
                                const int act, const float act_a, const float act_b) {
  const int i = get_global_id(0) * 4, nc = get_global_id(1);
  if (i >= inner) return;
  const int c = nc % channels;
  const float s = a[c], m = mean[c], t = bias[c];
  const int base = nc * inner;
  for (int j = i; j < i + 4 && j < inner; ++j)
    Y[base + j] = activate(fma(X[base + j] - m, s, t), act, act_a, act_b);
}

// a[c] = scale[c] / sqrt(var[c] + eps), for BatchNormalization parameters that arrive at run
// time (constant ones are folded on the host in double). global: channels
__kernel void batch_norm_coefficients_f32(__global const float* scale, __global const float* var,
                                          __global float* a, const float eps, const int channels) {
  const int c = get_global_id(0);
  if (c < channels) a[c] = scale[c] / sqrt(var[c] + eps);
}
