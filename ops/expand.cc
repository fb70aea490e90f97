// Expand: broadcasts the input to the shape held by the constant `shape` input (i64), numpy
// style in both directions (the output is the broadcast of the two shapes, so a 1 in `shape`
// keeps the input's dimension). Any dtype; moves bytes.
#include <cstring>

#include "ops/broadcast.h"
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_expand(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, constant_int_list(ctx, 1, "shape"));
  if (static_cast<int>(dims.size()) > kMaxRank) {
    return ctx.error("shape " + ints_to_string(dims) + " has more than " +
                     std::to_string(kMaxRank) + " dimensions");
  }
  for (int64_t d : dims) {
    if (d < 0) return ctx.error("shape " + ints_to_string(dims) + " has a negative dimension");
  }
  const Shape target(dims);
  RETURN_IF_ERROR(ctx.wrap(target.validate()));
  Result<Shape> shape = broadcast_shapes(ctx.input(0).shape, target);
  if (!shape.ok()) return ctx.wrap(shape.status());
  outputs->push_back(TensorInfo{ctx.input(0).dtype, std::move(shape).value()});
  return Status();
}

Status reference_expand(const OpContext&, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs) {
  const Tensor& x = inputs[0];
  Tensor& y = outputs[0];
  const Shape shapes[] = {x.shape()};
  const BroadcastPlan plan = plan_broadcast(y.shape(), shapes);
  const size_t es = dtype_size(x.dtype());
  const auto* src = static_cast<const char*>(x.raw());
  auto* dst = static_cast<char*>(y.raw());
  const bool moves = plan.inner_stride(0) == 1;
  for_each_broadcast_row(plan, [&](int64_t yo, const int64_t* xo, int64_t n) {
    char* out = dst + static_cast<size_t>(yo) * es;
    const char* in = src + static_cast<size_t>(xo[0]) * es;
    if (moves) {
      std::memcpy(out, in, static_cast<size_t>(n) * es);
    } else {
      for (int64_t i = 0; i < n; ++i) std::memcpy(out + static_cast<size_t>(i) * es, in, es);
    }
  });
  return Status();
}

}  // namespace

const OpSchema kExpandSchema = {
    .kind = OpKind::kExpand,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_expand,
    .cost = nullptr,
    .reference = reference_expand,
};

}  // namespace tessera
