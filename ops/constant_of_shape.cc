// ConstantOfShape: a tensor of the shape held by the constant i64 input, every element the one
// value of the `value` attribute (a one-element tensor; f32 zero when absent), in that value's
// dtype.
#include <cstring>

#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Result<Tensor> fill_value(const OpContext& ctx) {
  if (!ctx.attrs().has("value")) return Tensor::scalar_f32(0.f);
  Result<Tensor> v = ctx.attrs().get_tensor("value");
  if (!v.ok()) return ctx.wrap(v.status());
  if (v->numel() != 1) {
    return ctx.error("value has " + std::to_string(v->numel()) + " elements, expected one");
  }
  return v;
}

Status infer_constant_of_shape(const OpContext& ctx, int /*num_outputs*/,
                               std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, constant_int_list(ctx, 0, "shape"));
  if (static_cast<int>(dims.size()) > kMaxRank) {
    return ctx.error("shape " + ints_to_string(dims) + " has more than " +
                     std::to_string(kMaxRank) + " dimensions");
  }
  for (int64_t d : dims) {
    if (d < 0) return ctx.error("shape " + ints_to_string(dims) + " has a negative dimension");
  }
  Shape shape(dims);
  RETURN_IF_ERROR(ctx.wrap(shape.validate()));
  ASSIGN_OR_RETURN(Tensor value, fill_value(ctx));
  outputs->push_back(TensorInfo{value.dtype(), std::move(shape)});
  return Status();
}

Status reference_constant_of_shape(const OpContext& ctx, std::span<const Tensor>,
                                   std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(Tensor value, fill_value(ctx));
  Tensor& y = outputs[0];
  const size_t es = dtype_size(value.dtype());
  auto* dst = static_cast<char*>(y.raw());
  for (int64_t i = 0; i < y.numel(); ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * es, value.raw(), es);
  }
  return Status();
}

}  // namespace

const OpSchema kConstantOfShapeSchema = {
    .kind = OpKind::kConstantOfShape,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_constant_of_shape,
    .cost = nullptr,
    .reference = reference_constant_of_shape,
};

}  // namespace tessera
