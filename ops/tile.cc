// Tile: repeats the input `repeats[d]` times along each dimension d; `repeats` is a constant i64
// input with one non-negative entry per input dimension. Any dtype; moves bytes (one gather copy,
// ops/data_movement.h).
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_tile(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const Shape& in = ctx.input(0).shape;
  ASSIGN_OR_RETURN(std::vector<int64_t> repeats, constant_int_list(ctx, 1, "repeats"));
  if (static_cast<int>(repeats.size()) != in.rank()) {
    return ctx.error("repeats " + ints_to_string(repeats) + " has " +
                     std::to_string(repeats.size()) + " entries; the input " + in.to_string() +
                     " has rank " + std::to_string(in.rank()));
  }
  std::vector<int64_t> dims(repeats.size());
  uint64_t numel = 1;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0) {
      return ctx.error("repeats " + ints_to_string(repeats) + " has a negative entry");
    }
    uint64_t dim = 0;
    if (!checked_mul(static_cast<uint64_t>(in[static_cast<int>(d)]),
                     static_cast<uint64_t>(repeats[d]), &dim) ||
        dim > static_cast<uint64_t>(kMaxDim) || !checked_mul(numel, dim, &numel) ||
        numel > static_cast<uint64_t>(kMaxElements)) {
      return ctx.error("tiling " + in.to_string() + " by " + ints_to_string(repeats) +
                       " is too large");
    }
    dims[d] = static_cast<int64_t>(dim);
  }
  outputs->push_back(TensorInfo{ctx.input(0).dtype, Shape(std::move(dims))});
  return Status();
}

Status reference_tile(const OpContext&, std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  const Tensor& x = inputs[0];
  Tensor& y = outputs[0];
  if (y.numel() == 0) return Status();
  const std::vector<int64_t> strides = contiguous_strides(x.shape());
  GatherCopyPlan plan;
  plan.elem_bytes = dtype_size(x.dtype());
  for (int d = 0; d < y.rank(); ++d) {
    std::vector<int64_t> off(static_cast<size_t>(y.shape()[d]));
    for (int64_t o = 0; o < y.shape()[d]; ++o) {
      off[static_cast<size_t>(o)] = (o % x.shape()[d]) * strides[static_cast<size_t>(d)] *
                                    static_cast<int64_t>(plan.elem_bytes);
    }
    plan.offsets.push_back(std::move(off));
  }
  gather_copy(plan, x.raw(), y.raw(), nullptr);
  return Status();
}

}  // namespace

const OpSchema kTileSchema = {
    .kind = OpKind::kTile,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_tile,
    .cost = nullptr,
    .reference = reference_tile,
};

}  // namespace tessera
