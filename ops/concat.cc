// Concat: joins its inputs along `axis` (required, may be negative). Inputs share dtype and rank
// and agree on every other dimension; any dtype (the kernel copies bytes).
#include <cstring>

#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Result<int> concat_axis(const OpContext& ctx) {
  Result<int64_t> axis = ctx.attrs().get_int("axis");
  if (!axis.ok()) return ctx.wrap(axis.status());
  Result<int> a = normalize_axis(*axis, ctx.input(0).shape.rank(), "axis");
  if (!a.ok()) return ctx.wrap(a.status());
  return *a;
}

Status infer_concat(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& first = ctx.input(0);
  if (first.shape.rank() == 0) return ctx.error("cannot concatenate scalars");
  ASSIGN_OR_RETURN(int axis, concat_axis(ctx));
  TensorInfo out = first;
  out.shape[axis] = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
    const TensorInfo& t = ctx.input(i);
    if (t.dtype != first.dtype) {
      return ctx.error("input " + std::to_string(i) + " has dtype " + dtype_name(t.dtype) +
                       ", input 0 has " + dtype_name(first.dtype));
    }
    if (t.shape.rank() != first.shape.rank()) {
      return ctx.error("input " + std::to_string(i) + " has shape " + t.shape.to_string() +
                       ", whose rank differs from input 0's " + first.shape.to_string());
    }
    for (int d = 0; d < t.shape.rank(); ++d) {
      if (d != axis && t.shape[d] != first.shape[d]) {
        return ctx.error("input " + std::to_string(i) + " has shape " + t.shape.to_string() +
                         ", which differs from input 0's " + first.shape.to_string() +
                         " outside axis " + std::to_string(axis));
      }
    }
    out.shape[axis] += t.shape[axis];
    if (out.shape[axis] > kMaxDim) return ctx.error("concatenated dimension is too large");
  }
  outputs->push_back(std::move(out));
  return Status();
}

Status reference_concat(const OpContext& ctx, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(int axis, concat_axis(ctx));
  Tensor& out = outputs[0];
  const size_t elem = dtype_size(out.dtype());
  const int64_t outer = dims_product(out.shape(), 0, axis);
  const size_t inner_bytes =
      static_cast<size_t>(dims_product(out.shape(), axis + 1, out.rank())) * elem;
  const size_t out_row = static_cast<size_t>(out.dim(axis)) * inner_bytes;
  // For each input, copy its slab of every outer row into place.
  size_t column = 0;  // byte offset of this input's part within an output row
  for (const Tensor& in : inputs) {
    const size_t in_row = static_cast<size_t>(in.dim(axis)) * inner_bytes;
    const uint8_t* src = static_cast<const uint8_t*>(in.raw());
    uint8_t* dst = static_cast<uint8_t*>(out.raw()) + column;
    if (in_row > 0) {
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(dst + static_cast<size_t>(o) * out_row, src + static_cast<size_t>(o) * in_row,
                    in_row);
      }
    }
    column += in_row;
  }
  return Status();
}

}  // namespace

const OpSchema kConcatSchema = {
    .kind = OpKind::kConcat,
    .min_inputs = 1,
    .max_inputs = 1 << 16,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_concat,
    .cost = nullptr,
    .reference = reference_concat,
};

}  // namespace tessera
