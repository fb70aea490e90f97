// QuantizeLinear (opsets 10-21): y = saturate(round_half_even(x / y_scale) + y_zero_point), see
// ops/quantize.h. x is f32; y_scale is per tensor or per axis (attribute axis, default 1);
// y has the dtype of y_zero_point, or u8 when it is absent (opset 21's output_dtype may name u8
// or i8 instead). Blocked quantisation (block_size, opset 21) and float8 outputs are
// Unimplemented; `saturate` only concerns float8 and is ignored.
#include "ops/attr_util.h"
#include "ops/quantize.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Result<DType> output_dtype(const OpContext& ctx) {
  DType zp = DType::kU8;
  ASSIGN_OR_RETURN(int64_t axis, int_attr(ctx, "axis", 1));
  RETURN_IF_ERROR(check_quant_params(ctx, ctx.input(0).shape, 1, 2, axis, &zp));
  ASSIGN_OR_RETURN(int64_t block, int_attr(ctx, "block_size", 0));
  if (block != 0) return ctx.unsupported("blocked quantisation (block_size != 0)");
  ASSIGN_OR_RETURN(int64_t out, int_attr(ctx, "output_dtype", 0));
  DType want = zp;
  if (out == 2) {
    want = DType::kU8;
  } else if (out == 3) {
    want = DType::kI8;
  } else if (out != 0) {
    return ctx.unsupported("output_dtype " + std::to_string(out) +
                           " (only UINT8 = 2 and INT8 = 3 are supported)");
  }
  if (ctx.has_input(2) && want != zp) {
    return ctx.error(std::string("output_dtype names ") + dtype_name(want) +
                     " but the zero point is " + dtype_name(zp));
  }
  if (want != DType::kU8 && want != DType::kI8) {
    return ctx.unsupported(std::string("quantising to ") + dtype_name(want) +
                           " (only u8 and i8 are supported)");
  }
  return want;
}

Status infer_quantize(const OpContext& ctx, int, std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  ASSIGN_OR_RETURN(DType t, output_dtype(ctx));
  outputs->push_back(TensorInfo{t, ctx.input(0).shape});
  return Status();
}

OpCost cost_quantize(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = 3.0 * static_cast<double>(ctx.input(0).shape.numel());
  return c;
}

Status reference_quantize(const OpContext& ctx, std::span<const Tensor> inputs,
                          std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(int64_t axis, int_attr(ctx, "axis", 1));
  const Tensor none;
  const QuantParams p =
      read_quant_params(inputs[0].shape(), inputs[1], ctx.has_input(2) ? inputs[2] : none, axis);
  quantize_tensor(inputs[0], p, &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kQuantizeLinearSchema = {
    .kind = OpKind::kQuantizeLinear,
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_quantize,
    .cost = cost_quantize,
    .reference = reference_quantize,
};

}  // namespace tessera
