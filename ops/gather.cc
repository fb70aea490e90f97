// Gather: picks entries of `data` along `axis` (default 0, may be negative) at `indices`
// (i32 or i64, any shape, negative values count from the end). Output shape:
// data.shape[:axis] + indices.shape + data.shape[axis+1:]. Any data dtype (copies bytes).
// An index outside [-dim, dim) is an error (at shape inference when the indices are constant,
// otherwise when the kernel runs), never an out-of-bounds read.
#include <cstring>

#include "ops/data_movement.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Result<int> gather_axis(const OpContext& ctx) {
  Result<int64_t> axis = ctx.attrs().int_or("axis", 0);
  if (!axis.ok()) return ctx.wrap(axis.status());
  Result<int> a = normalize_axis(*axis, ctx.input(0).shape.rank(), "axis");
  if (!a.ok()) return ctx.wrap(a.status());
  return *a;
}

// The indices with negative values resolved, or an error naming the first bad one.
Result<std::vector<int64_t>> resolve_indices(const OpContext& ctx, const Tensor& indices,
                                             int64_t dim) {
  std::vector<int64_t> idx = tensor_to_int64s(indices);
  for (size_t i = 0; i < idx.size(); ++i) {
    int64_t& v = idx[i];
    if (v < -dim || v >= dim) {
      return ctx.error("index " + std::to_string(v) + " (element " + std::to_string(i) +
                       " of indices) is out of range for a dimension of size " +
                       std::to_string(dim));
    }
    if (v < 0) v += dim;
  }
  return idx;
}

Status infer_gather(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& data = ctx.input(0);
  const TensorInfo& indices = ctx.input(1);
  if (data.shape.rank() == 0) return ctx.error("data must have rank >= 1");
  if (indices.dtype != DType::kI64 && indices.dtype != DType::kI32) {
    return ctx.error(std::string("indices must be i64 or i32, not ") + dtype_name(indices.dtype));
  }
  ASSIGN_OR_RETURN(int axis, gather_axis(ctx));
  if (const Tensor* c = ctx.constant(1)) {
    RETURN_IF_ERROR(resolve_indices(ctx, *c, data.shape[axis]).status());
  }
  const int out_rank = data.shape.rank() - 1 + indices.shape.rank();
  if (out_rank > kMaxRank) {
    return ctx.error("output rank " + std::to_string(out_rank) + " exceeds the limit of " +
                     std::to_string(kMaxRank));
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < axis; ++d) dims.push_back(data.shape[d]);
  for (int64_t d : indices.shape.dims()) dims.push_back(d);
  for (int d = axis + 1; d < data.shape.rank(); ++d) dims.push_back(data.shape[d]);
  outputs->push_back(TensorInfo{data.dtype, Shape(std::move(dims))});
  return Status();
}

Status reference_gather(const OpContext& ctx, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(int axis, gather_axis(ctx));
  const Tensor& data = inputs[0];
  const int64_t dim = data.dim(axis);
  ASSIGN_OR_RETURN(std::vector<int64_t> idx, resolve_indices(ctx, inputs[1], dim));
  const size_t elem = dtype_size(data.dtype());
  const int64_t outer = dims_product(data.shape(), 0, axis);
  const size_t block =
      static_cast<size_t>(dims_product(data.shape(), axis + 1, data.rank())) * elem;
  const uint8_t* src = static_cast<const uint8_t*>(data.raw());
  uint8_t* dst = static_cast<uint8_t*>(outputs[0].raw());
  if (block == 0) return Status();
  for (int64_t o = 0; o < outer; ++o) {
    const uint8_t* s = src + static_cast<size_t>(o * dim) * block;
    for (int64_t i : idx) {
      std::memcpy(dst, s + static_cast<size_t>(i) * block, block);
      dst += block;
    }
  }
  return Status();
}

}  // namespace

Result<IndexMaps> gather_index_maps(const OpContext& ctx) {
  ASSIGN_OR_RETURN(int axis, gather_axis(ctx));
  const Tensor* indices = ctx.constant(1);
  if (indices == nullptr || indices->rank() > 1) {
    return ctx.unsupported("index maps need constant indices of rank 0 or 1");
  }
  const Shape& data = ctx.input(0).shape;
  ASSIGN_OR_RETURN(std::vector<int64_t> idx, resolve_indices(ctx, *indices, data[axis]));
  IndexMaps maps;
  maps.fixed.assign(static_cast<size_t>(data.rank()), 0);
  // An empty output needs no maps; sized by its other dimensions they could be 2^31 long each.
  bool empty = idx.empty();
  for (int d = 0; d < data.rank(); ++d) empty = empty || (d != axis && data[d] == 0);
  for (int d = 0; d < data.rank(); ++d) {
    if (d == axis && indices->rank() == 0) {
      maps.fixed[static_cast<size_t>(d)] = empty ? 0 : idx[0];
      continue;
    }
    std::vector<int64_t> map = empty       ? std::vector<int64_t>()
                               : d == axis ? idx
                                           : std::vector<int64_t>(static_cast<size_t>(data[d]));
    if (d != axis) {
      for (size_t o = 0; o < map.size(); ++o) map[o] = static_cast<int64_t>(o);
    }
    maps.source_dim.push_back(d);
    maps.index.push_back(std::move(map));
  }
  return maps;
}

const OpSchema kGatherSchema = {
    .kind = OpKind::kGather,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_gather,
    .cost = nullptr,
    .reference = reference_gather,
};

}  // namespace tessera
