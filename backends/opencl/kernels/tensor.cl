// Tensor family: data movement for Concat, Split, Slice, Transpose, Pad, Gather and nearest
// Resize. Elements are moved as 32-bit words (f32, i32; i64 as two words) or as bytes (u8, i8,
// bool), never interpreted.
//
// copy_rows_*: rows of `row_len` units from src (row stride src_stride) to dst (dst_stride):
//   Concat copies each input into its band of the output, Split each band out of the input.
//   global: (row_len, rows)
// gather_*: out[o_0, ..., o_{r-1}] = src[sum_d table[start_d + o_d]], or `fill` when any table
//   entry is negative. Per-dimension source offsets (in units) express Transpose, Slice (with
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

__kernel void gather_u32(__global const uint* src, __global uint* dst, __global const int* meta,
                         __global const int* table, const int rank, const int inner,
                         const int outer, const uint fill) {
  const int i = get_global_id(0), row = get_global_id(1);
  if (i >= inner || row >= outer) return;
  int off = table[meta[2 * rank - 1] + i];
  int r = row;
  for (int d = rank - 2; d >= 0; --d) {
    const int t = table[meta[rank + d] + r % meta[d]];
    r /= meta[d];
    off = (off < 0 || t < 0) ? -1 : off + t;
  }
  dst[row * inner + i] = off < 0 ? fill : src[off];
}

__kernel void gather_u8(__global const uchar* src, __global uchar* dst, __global const int* meta,
                        __global const int* table, const int rank, const int inner,
                        const int outer, const uint fill) {
  const int i = get_global_id(0), row = get_global_id(1);
  if (i >= inner || row >= outer) return;
  int off = table[meta[2 * rank - 1] + i];
  int r = row;
  for (int d = rank - 2; d >= 0; --d) {
    const int t = table[meta[rank + d] + r % meta[d]];
    r /= meta[d];
    off = (off < 0 || t < 0) ? -1 : off + t;
  }
  dst[row * inner + i] = off < 0 ? (uchar)fill : src[off];
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
