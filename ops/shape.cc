// Shape: the dimensions of the input as a 1-D i64 tensor. Opset 15's `start` and `end`
// attributes select a range of them, clamped like Slice (negative values count from the end).
// The input's values are never read.
#include <algorithm>

#include "ops/registry.h"

namespace tessera {

namespace {

struct ShapeRange {
  int begin = 0, end = 0;
};

Result<ShapeRange> parse_range(const OpContext& ctx) {
  const int rank = ctx.input(0).shape.rank();
  Result<int64_t> start = ctx.attrs().int_or("start", 0);
  if (!start.ok()) return ctx.wrap(start.status());
  Result<int64_t> end = ctx.attrs().int_or("end", rank);
  if (!end.ok()) return ctx.wrap(end.status());
  auto clamp = [rank](int64_t v) {
    if (v < 0) v += rank;
    return static_cast<int>(std::clamp<int64_t>(v, 0, rank));
  };
  ShapeRange r{clamp(*start), clamp(*end)};
  r.end = std::max(r.begin, r.end);
  return r;
}

Status infer_shape_op(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(ShapeRange r, parse_range(ctx));
  outputs->push_back(TensorInfo{DType::kI64, Shape{r.end - r.begin}});
  return Status();
}

OpCost cost_shape_op(const OpContext&, std::span<const TensorInfo> outputs) {
  OpCost c;  // reads no data
  c.output_bytes = outputs[0].byte_size();
  return c;
}

Status reference_shape_op(const OpContext& ctx, std::span<const Tensor> inputs,
                          std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(ShapeRange r, parse_range(ctx));
  int64_t* y = outputs[0].data<int64_t>();
  for (int d = r.begin; d < r.end; ++d) *y++ = inputs[0].dim(d);
  return Status();
}

}  // namespace

const OpSchema kShapeSchema = {
    .kind = OpKind::kShape,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_shape_op,
    .cost = cost_shape_op,
    .reference = reference_shape_op,
};

}  // namespace tessera
