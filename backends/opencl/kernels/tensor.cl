// Tensor family: data movement for Concat, Split, Slice, Transpose, Pad, Gather and nearest
// Resize. Elements are moved as 32-bit words (f32, i32; i64 as two words) or as bytes (u8, i8,
// bool), never interpreted; Cast is the one kernel that converts values.
//
// copy_rows_*: rows of `row_len` units from src (row stride src_stride) to dst (dst_stride):
//   Concat copies each input into its band of the output, Split each band out of the input.
//   global: (row_len, rows)
// gather_*: out[o_0, ..., o_{r-1}] = src[sum_d table[start_d + o_d]], or the fill element when
//   any table entry is negative (`fill` holds one element of `fill_units` units; an element of
//   several units is gathered with its units as the innermost dim, so unit i % fill_units). Per-dimension source offsets (in units) express Transpose, Slice (with
//   steps), Pad (constant, reflect, edge), Gather with constant indices and nearest Resize.
//   meta = [dims(rank), table_start(rank)]; global: (inner, outer), inner = dims[rank - 1].

__kernel void copy_rows_u32(__global const uint* src, const int src_off, const int src_stride,
                            __global uint* dst, const int dst_off, const int dst_stride,
                            const int row_len, const int rows) {
  const int i = get_global_id(0), r = get_global_id(1);
  if (i < row_len && r < rows) dst[dst_off + r * dst_stride + i] = src[src_off + r * src_stride + i];
}

__kernel void copy_rows_u8(__global const uchar* src, const int src_off, const int src_stride,
                           __global uchar* dst, const int dst_off, const int dst_stride,
                           const int row_len, const int rows) {
  const int i = get_global_id(0), r = get_global_id(1);
  if (i < row_len && r < rows) dst[dst_off + r * dst_stride + i] = src[src_off + r * src_stride + i];
}

// NAME is the whole kernel name, T the unit type.
#define GATHER_KERNEL(NAME, T)                                                          \
  __kernel void NAME(__global const T* src, __global T* dst, __global const int* meta,  \
                     __global const int* table, const int rank, const int inner,        \
                     const int outer, __global const T* fill, const int fill_units) {   \
    const int i = get_global_id(0), row = get_global_id(1);                             \
    if (i >= inner || row >= outer) return;                                             \
    int off = table[meta[2 * rank - 1] + i];                                            \
    int r = row;                                                                        \
    for (int d = rank - 2; d >= 0; --d) {                                               \
      const int t = table[meta[rank + d] + r % meta[d]];                                \
      r /= meta[d];                                                                     \
      off = (off < 0 || t < 0) ? -1 : off + t;                                          \
    }                                                                                   \
    dst[row * inner + i] = off < 0 ? fill[i % fill_units] : src[off];                   \
  }

GATHER_KERNEL(gather_u32, uint)
GATHER_KERNEL(gather_u8, uchar)

// Gather with indices that arrive at run time (i32, or i64 read as two words when idx64):
// out[o, j, i] = src[o, idx[j], i] in units, [outer, len, inner] -> [outer, count, inner]. An
// index outside [-len, len) writes 0 and records element j + 1 in *bad (the first one seen),
// which fails the run: never an out-of-bounds read. global: (inner, count, outer)
inline long index_at(__global const int* idx, const int j, const int idx64) {
  if (!idx64) return idx[j];
  return ((long)idx[2 * j + 1] << 32) | (long)as_uint(idx[2 * j]);  // little-endian words
}

// NAME is the whole kernel name, T the unit type.
#define GATHER_INDICES_KERNEL(NAME, T)                                                          \
  __kernel void NAME(__global const T* src, __global const int* idx, __global T* dst,           \
                     __global int* bad, const int idx64, const int len, const int count,        \
                     const int inner, const int outer) {                                        \
    const int i = get_global_id(0), j = get_global_id(1), o = get_global_id(2);                 \
    if (i >= inner || j >= count || o >= outer) return;                                         \
    long v = index_at(idx, j, idx64);                                                           \
    T out = 0;                                                                                  \
    if (v < -len || v >= len) {                                                                 \
      atomic_cmpxchg(bad, 0, j + 1);                                                            \
    } else {                                                                                    \
      if (v < 0) v += len;                                                                      \
      out = src[(o * len + (int)v) * inner + i];                                                \
    }                                                                                           \
    dst[(o * count + j) * inner + i] = out;                                                     \
  }

GATHER_INDICES_KERNEL(gather_indices_u32, uint)
GATHER_INDICES_KERNEL(gather_indices_u8, uchar)

// Cast between Tessera dtypes, numbered as core/dtype.h: 0 f32, 1 f16, 2 i8, 3 u8, 4 i32,
// 5 i64, 6 bool. Semantics of ops/cast.cc: float -> integer truncates toward zero and saturates
// (NaN gives 0: the _sat_rtz conversions), integer -> integer wraps, anything -> bool is != 0,
// f16 goes through f32 rounding to nearest even (vload_half / vstore_half_rte need no
// cl_khr_fp16). global: n
__kernel void cast_f32_f16_i8_u8_i32_i64_bool(__global const uchar* src, __global uchar* dst,
                                              const int n, const int from, const int to) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const int is_float = from <= 1;
  float f = 0.f;
  long v = 0;
  switch (from) {
    case 0: f = ((__global const float*)src)[i]; break;
    case 1: f = vload_half(i, (__global const half*)src); break;
    case 2: v = ((__global const char*)src)[i]; break;
    case 3: v = src[i]; break;
    case 4: v = ((__global const int*)src)[i]; break;
    case 5: v = ((__global const long*)src)[i]; break;
    default: v = src[i] != 0; break;
  }
  switch (to) {
    case 0: ((__global float*)dst)[i] = is_float ? f : convert_float_rte(v); break;
    case 1: vstore_half_rte(is_float ? f : convert_float_rte(v), i, (__global half*)dst); break;
    case 2:
      ((__global char*)dst)[i] = is_float ? convert_char_sat_rtz(f) : as_char((uchar)v);
      break;
    case 3: dst[i] = is_float ? convert_uchar_sat_rtz(f) : (uchar)v; break;
    case 4:
      ((__global int*)dst)[i] = is_float ? convert_int_sat_rtz(f) : as_int((uint)v);
      break;
    case 5: ((__global long*)dst)[i] = is_float ? convert_long_sat_rtz(f) : v; break;
    default: dst[i] = is_float ? (f != 0.f) : (v != 0); break;
  }
}

// Multilinear Resize: per output dim d, source offsets i0/i1 (units) and weight w1 of the upper
// neighbour; dims whose table is trivial carry i0 == i1 and w1 == 0 and are not interpolated.
// meta = [dims(rank), table_start(rank), interpolated(rank)]. global: (inner, outer).
__kernel void resize_linear_f32(__global const float* src, __global float* dst,
                                __global const int* meta, __global const int* i0,
                                __global const int* i1, __global const float* w1, const int rank,
                                const int inner, const int outer) {
  const int i = get_global_id(0), row = get_global_id(1);
  if (i >= inner || row >= outer) return;
  int base = 0;
  int lo[8], hi[8];
  float wt[8];
  int n = 0, r = row;
  for (int d = rank - 1; d >= 0; --d) {
    int o;
    if (d == rank - 1) {
      o = i;
    } else {
      o = r % meta[d];
      r /= meta[d];
    }
    const int t = meta[rank + d] + o;
    if (meta[2 * rank + d]) {
      lo[n] = i0[t];
      hi[n] = i1[t];
      wt[n] = w1[t];
      ++n;
    } else {
      base += i0[t];
    }
  }
  float acc = 0.f;
  for (int corner = 0; corner < (1 << n); ++corner) {
    int off = base;
    float w = 1.f;
    for (int k = 0; k < n; ++k) {
      const int up = (corner >> k) & 1;
      off += up ? hi[k] : lo[k];
      w *= up ? wt[k] : 1.f - wt[k];
    }
    acc = fma(w, src[off], acc);
  }
  dst[row * inner + i] = acc;
}
