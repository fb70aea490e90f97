// Split: cuts the input along `axis` (default 0, may be negative) into the node's outputs.
// Part sizes come from the constant `split` input (opset 13), the `split` attribute (opset 11),
// or else an equal split (the dimension must divide evenly). Any dtype (the kernel copies bytes).
#include <cstring>

#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct SplitParams {
  int axis = 0;
  std::vector<int64_t> sizes;  // one per output
};

Result<SplitParams> parse_split(const OpContext& ctx, int num_outputs) {
  SplitParams p;
  const Shape& shape = ctx.input(0).shape;
  if (shape.rank() == 0) return ctx.error("cannot split a scalar");
  Result<int64_t> axis = ctx.attrs().int_or("axis", 0);
  if (!axis.ok()) return ctx.wrap(axis.status());
  Result<int> a = normalize_axis(*axis, shape.rank(), "axis");
  if (!a.ok()) return ctx.wrap(a.status());
  p.axis = *a;
  const int64_t dim = shape[p.axis];

  Result<int64_t> num = ctx.attrs().int_or("num_outputs", num_outputs);
  if (!num.ok()) return ctx.wrap(num.status());
  if (*num != num_outputs) {
    return ctx.error("attribute num_outputs is " + std::to_string(*num) + " but the node has " +
                     std::to_string(num_outputs) + " outputs");
  }

  if (ctx.has_input(1) && ctx.attrs().has("split")) {
    return ctx.error("split sizes are given both as an attribute and as an input");
  }
  if (ctx.has_input(1)) {
    ASSIGN_OR_RETURN(p.sizes, constant_int_list(ctx, 1, "split"));
  } else if (ctx.attrs().has("split")) {
    Result<std::vector<int64_t>> s = ctx.attrs().get_ints("split");
    if (!s.ok()) return ctx.wrap(s.status());
    p.sizes = std::move(s).value();
  } else {
    if (dim % num_outputs != 0) {
      return ctx.error("dimension " + std::to_string(dim) + " of axis " + std::to_string(p.axis) +
                       " does not split evenly into " + std::to_string(num_outputs) + " outputs");
    }
    p.sizes.assign(static_cast<size_t>(num_outputs), dim / num_outputs);
    return p;
  }

  if (static_cast<int>(p.sizes.size()) != num_outputs) {
    return ctx.error("split " + ints_to_string(p.sizes) + " has " + std::to_string(p.sizes.size()) +
                     " entries but the node has " + std::to_string(num_outputs) + " outputs");
  }
  int64_t sum = 0;
  for (int64_t s : p.sizes) {
    if (s < 0 || s > dim) return ctx.error("split " + ints_to_string(p.sizes) + " has a bad size");
    sum += s;
  }
  if (sum != dim) {
    return ctx.error("split " + ints_to_string(p.sizes) + " sums to " + std::to_string(sum) +
                     ", not to dimension " + std::to_string(dim) + " of axis " +
                     std::to_string(p.axis));
  }
  return p;
}

Status infer_split(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(SplitParams p, parse_split(ctx, num_outputs));
  for (int64_t s : p.sizes) {
    TensorInfo t = ctx.input(0);
    t.shape[p.axis] = s;
    outputs->push_back(std::move(t));
  }
  return Status();
}

Status reference_split(const OpContext& ctx, std::span<const Tensor> inputs,
                       std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(SplitParams p, parse_split(ctx, static_cast<int>(outputs.size())));
  const Tensor& in = inputs[0];
  const size_t elem = dtype_size(in.dtype());
  const int64_t outer = dims_product(in.shape(), 0, p.axis);
  const size_t inner_bytes =
      static_cast<size_t>(dims_product(in.shape(), p.axis + 1, in.rank())) * elem;
  const size_t in_row = static_cast<size_t>(in.dim(p.axis)) * inner_bytes;
  size_t column = 0;  // byte offset of this output's part within an input row
  for (size_t k = 0; k < outputs.size(); ++k) {
    const size_t out_row = static_cast<size_t>(p.sizes[k]) * inner_bytes;
    const uint8_t* src = static_cast<const uint8_t*>(in.raw()) + column;
    uint8_t* dst = static_cast<uint8_t*>(outputs[k].raw());
    if (out_row > 0) {
      for (int64_t o = 0; o < outer; ++o) {
        std::memcpy(dst + static_cast<size_t>(o) * out_row, src + static_cast<size_t>(o) * in_row,
                    out_row);
      }
    }
    column += out_row;
  }
  return Status();
}

}  // namespace

const OpSchema kSplitSchema = {
    .kind = OpKind::kSplit,
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1 << 16,
    .accepts_fused_activation = false,
    .infer = infer_split,
    .cost = nullptr,
    .reference = reference_split,
};

}  // namespace tessera
