// Parameters that an op file parses for its reference kernel and that the optimised kernels of
// the backends reuse, so that every kernel of an op reads the ONNX attributes and constant inputs
// one way (the TFLite habit of sharing `Prepare` between reference and optimised kernels).
//
// The data-movement ops (Slice, Pad, Transpose, Gather, Resize in nearest mode) are described as
// IndexMaps: one source index list per output dimension. A backend turns the maps into byte
// offsets for whatever memory layout it keeps its tensors in (see gather_plan below) and runs a
// gather copy; the reference kernels do the same with contiguous strides.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/data_movement.h"
#include "ops/op.h"

namespace tessera {

// out[o_0, ..., o_{r-1}] = in[i] where, for every output dimension d, input dimension
// source_dim[d] takes index index[d][o_d] (-1: the element is the fill value instead), and the
// input dimensions no output dimension names take the index in `fixed` (0 unless set).
struct IndexMaps {
  std::vector<int> source_dim;              // one per output dimension
  std::vector<std::vector<int64_t>> index;  // index[d].size() is output dimension d
  std::vector<int64_t> fixed;               // one per input dimension
};

// The maps of a node; errors as its shape inference reports them. When the output holds no
// elements every index list is empty (nothing is copied), however long its other dimensions.
Result<IndexMaps> slice_index_maps(const OpContext& ctx);
Result<IndexMaps> pad_index_maps(const OpContext& ctx);  // fill = constant_value (input 2)
Result<IndexMaps> transpose_index_maps(const OpContext& ctx);
// Gather with constant indices of rank 0 or 1 (Unimplemented for other index tensors).
Result<IndexMaps> gather_index_maps(const OpContext& ctx);

// Byte offsets for gather_copy: `in_strides[k]` is the byte stride of input dimension k in
// memory, `order` lists the output dimensions in memory order (outermost first). `*base`
// receives the byte offset the fixed indices contribute.
GatherCopyPlan gather_plan(const IndexMaps& maps, const std::vector<int64_t>& in_strides,
                           const std::vector<int>& order, size_t elem_bytes, int64_t* base);
// gather_plan over contiguous (row-major) tensors, run: what the reference kernels do.
void gather_index_maps_contiguous(const IndexMaps& maps, const Tensor& in, Tensor* out,
                                  const void* fill);

// Resize in linear mode, one dimension at a time: out[o] = w0[o] * in[i0[o]] + w1[o] * in[i1[o]].
struct LinearTaps {
  std::vector<int64_t> i0, i1;
  std::vector<float> w0, w1;
  bool identity = true;  // out[o] == in[o] for every o
};
// mode = nearest: `maps` is set; mode = linear: `taps` has one entry per dimension. An output
// holding no elements gets empty maps and empty identity taps.
struct ResizeKernelParams {
  bool linear = false;
  IndexMaps maps;
  std::vector<LinearTaps> taps;
};
Result<ResizeKernelParams> resize_kernel_params(const OpContext& ctx);

// ReduceMean: which input dimensions are reduced.
struct ReduceParams {
  std::vector<bool> reduced;  // per input dimension
  bool noop = false;          // noop_with_empty_axes with no axes: an identity
  bool keepdims = true;
};
Result<ReduceParams> reduce_mean_params(const OpContext& ctx);
// The shape inference of ReduceMean, ReduceSum, ReduceMax and ReduceMin: f32 input 0, the
// dimensions reduce_mean_params reduces dropped (kept as 1 with keepdims), the input's own
// shape for a no-op.
Status infer_reduction(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs);

// LRN: Y = X / (bias + alpha / size * square_sum)^beta over a window of `size` channels.
struct LrnParams {
  int64_t size = 1;
  float alpha = 1e-4f;
  float beta = 0.75f;
  float bias = 1.f;
};
Result<LrnParams> lrn_params(const OpContext& ctx);

}  // namespace tessera
