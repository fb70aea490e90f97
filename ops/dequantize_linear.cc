// DequantizeLinear (opsets 10-21): y = (x - x_zero_point) * x_scale in f32, see ops/quantize.h.
// x is u8, i8 or i32 (i32 only without a zero point, or a zero point of 0, as ONNX requires);
// x_scale is per tensor or per axis (attribute axis, default 1). Blocked quantisation
// (block_size, opset 21) is Unimplemented. With a constant x (a quantised weight) the node folds
// into an f32 constant when the graph is built.
#include "ops/attr_util.h"
#include "ops/quantize.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_dequantize(const OpContext& ctx, int, std::vector<TensorInfo>* outputs) {
  const DType t = ctx.input(0).dtype;
  if (t != DType::kU8 && t != DType::kI8 && t != DType::kI32) {
    return ctx.unsupported(std::string("input 0 must be u8, i8 or i32, is ") + dtype_name(t));
  }
  ASSIGN_OR_RETURN(int64_t axis, int_attr(ctx, "axis", 1));
  DType zp = DType::kU8;
  RETURN_IF_ERROR(check_quant_params(ctx, ctx.input(0).shape, 1, 2, axis, &zp));
  if (ctx.has_input(2) && zp != t) {
    return ctx.error(std::string("the zero point is ") + dtype_name(zp) + " but input 0 is " +
                     dtype_name(t) + "; they must match");
  }
  ASSIGN_OR_RETURN(int64_t block, int_attr(ctx, "block_size", 0));
  if (block != 0) return ctx.unsupported("blocked quantisation (block_size != 0)");
  outputs->push_back(TensorInfo{DType::kF32, ctx.input(0).shape});
  return Status();
}

OpCost cost_dequantize(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = 2.0 * static_cast<double>(ctx.input(0).shape.numel());
  return c;
}

Status reference_dequantize(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(int64_t axis, int_attr(ctx, "axis", 1));
  const Tensor none;
  const QuantParams p =
      read_quant_params(inputs[0].shape(), inputs[1], ctx.has_input(2) ? inputs[2] : none, axis);
  dequantize_tensor(inputs[0], p, &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kDequantizeLinearSchema = {
    .kind = OpKind::kDequantizeLinear,
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_dequantize,
    .cost = cost_dequantize,
    .reference = reference_dequantize,
};

}  // namespace tessera
