// Helpers shared by the tensor-manipulation ops (Slice, Pad, Transpose, Resize, Reshape...).
//
// These ops move elements without looking at their values, so their kernels work on bytes and
// serve every dtype at once. Most of them are one instance of the *gather copy*: each output
// coordinate along each dimension reads from a fixed source offset, e.g.
//
//   Transpose  offsets[d][o] = o * in_stride[perm[d]]
//   Slice      offsets[d][o] = (start[d] + o * step[d]) * in_stride[d]
//   Pad        offsets[d][o] = reflected/clamped source index * in_stride[d], or -1 (constant)
//   Resize     offsets[d][o] = nearest source index * in_stride[d]
//
// gather_copy runs such a plan efficiently: trailing dimensions that are copied whole become one
// larger element, contiguous runs are memcpy'd, and per-row work needs no division.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ops/op.h"

namespace tessera {

// out[o_0, ..., o_{r-1}] = the elem_bytes at src + sum_d offsets[d][o_d], or the fill pattern
// (elem_bytes long) where any offsets[d][o_d] is negative. offsets[d].size() is output dim d.
struct GatherCopyPlan {
  size_t elem_bytes = 0;
  std::vector<std::vector<int64_t>> offsets;  // byte offsets into the source
};

// Runs `plan`. `fill` may be null when no offset is negative.
void gather_copy(const GatherCopyPlan& plan, const void* src, void* dst, const void* fill);

// Row-major element strides of `shape`.
std::vector<int64_t> contiguous_strides(const Shape& shape);

// Product of dims [begin, end) of `shape`.
int64_t dims_product(const Shape& shape, int begin, int end);

// Copies the bytes of `in` into `out` (same element count and dtype: Reshape, Identity...).
void copy_tensor_bytes(const Tensor& in, Tensor* out);

// The integer list held by constant input `i` (i32 or i64, rank 0 or 1), for inputs such as
// Reshape's shape or Slice's starts. `what` names the input in messages. Fails if the input
// is not a constant: shapes in Tessera are static.
Result<std::vector<int64_t>> constant_int_list(const OpContext& ctx, int i, const char* what);

// "[1, 2, 3]"
std::string ints_to_string(const std::vector<int64_t>& v);

// Reads axes from the attribute "axes" or from constant input `input` (the opset-13 form; the
// two must not both be given). Returns nullopt when neither is present.
Result<std::optional<std::vector<int64_t>>> axes_from_attribute_or_input(const OpContext& ctx,
                                                                         int input);

// Normalises `axes` (possibly negative) against `rank`, rejecting out-of-range and repeated
// axes. The result is in the given order.
Result<std::vector<int>> normalize_axes(const OpContext& ctx, const std::vector<int64_t>& axes,
                                        int rank);

}  // namespace tessera
