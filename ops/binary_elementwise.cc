#include "ops/binary_elementwise.h"

#include "ops/activation.h"

namespace tessera {

Status infer_binary_elementwise(const OpContext& ctx, int /*num_outputs*/,
                                std::vector<TensorInfo>* outputs) {
  const TensorInfo& a = ctx.input(0);
  const TensorInfo& b = ctx.input(1);
  if (a.dtype != b.dtype) {
    return ctx.error(std::string("inputs have different dtypes: ") + dtype_name(a.dtype) + " and " +
                     dtype_name(b.dtype));
  }
  if (a.dtype != DType::kF32 && a.dtype != DType::kI32 && a.dtype != DType::kI64) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(a.dtype) +
                           " is not supported (f32, i32, i64 are)");
  }
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(ctx.attrs()));
  if (act.kind != ActivationKind::kNone && a.dtype != DType::kF32) {
    return ctx.error(std::string("a fused activation needs f32 data, not ") + dtype_name(a.dtype));
  }
  Result<Shape> shape = broadcast_shapes(a.shape, b.shape);
  if (!shape.ok()) return ctx.wrap(shape.status());
  outputs->push_back(TensorInfo{a.dtype, std::move(shape).value()});
  return Status();
}

OpCost cost_binary_elementwise(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(outputs[0].shape.numel());
  return c;
}

}  // namespace tessera
