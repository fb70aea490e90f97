// QLinearConv (opset 10): a convolution of quantised tensors,
//   inputs  x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B (opt.)
// with Conv's attributes. Tessera runs it in float: y = quantise(Conv(dequantise(x),
// dequantise(w), B * x_scale * w_scale), y_scale, y_zero_point). x and y are quantised per
// tensor, w per tensor or per output channel (axis 0); B is i32 with scale x_scale * w_scale and
// zero point 0. The result matches an integer kernel except
// where the float sum lands within rounding error of a half step (then it may differ by one).
#include "ops/attr_util.h"
#include "ops/quantize.h"
#include "ops/registry.h"

namespace tessera {

namespace {

constexpr int kX = 0, kXScale = 1, kXZp = 2, kW = 3, kWScale = 4, kWZp = 5, kYScale = 6, kYZp = 7,
              kB = 8;

// Checks the quantisation inputs and returns the output dtype (y_zero_point's, u8 by default).
Result<DType> check_qlinear_conv(const OpContext& ctx) {
  for (int i : {kX, kW}) {
    const DType t = ctx.input(i).dtype;
    if (t != DType::kU8 && t != DType::kI8) {
      return ctx.unsupported("input " + std::to_string(i) + " must be u8 or i8, is " +
                             dtype_name(t));
    }
  }
  DType zp = DType::kU8, wzp = DType::kU8, yzp = DType::kU8;
  RETURN_IF_ERROR(check_quant_params(ctx, ctx.input(kX).shape, kXScale, kXZp, 1, &zp));
  if (ctx.input(kXScale).shape.numel() != 1) {
    return ctx.unsupported("x_scale must be per tensor (one value)");
  }
  RETURN_IF_ERROR(check_quant_params(ctx, ctx.input(kW).shape, kWScale, kWZp, 0, &wzp));
  RETURN_IF_ERROR(check_quant_params(ctx, Shape{1}, kYScale, kYZp, 0, &yzp));
  if (ctx.input(kYScale).shape.numel() != 1) {
    return ctx.unsupported("y_scale must be per tensor (one value)");
  }
  if (ctx.has_input(kB) && ctx.input(kB).dtype != DType::kI32) {
    return ctx.error(std::string("input 8 (B) must be i32, is ") + dtype_name(ctx.input(kB).dtype));
  }
  if (yzp != DType::kU8 && yzp != DType::kI8) {
    return ctx.unsupported(std::string("y_zero_point must be u8 or i8, is ") + dtype_name(yzp));
  }
  return yzp;
}

// Runs `f` with an f32 Conv context over X, W (and B), holding `constants` (null: none).
template <typename F>
Status with_float_conv(const OpContext& ctx, std::span<const Tensor> constants, F&& f) {
  const size_t n = ctx.has_input(kB) ? 3 : 2;
  const TensorInfo infos[] = {TensorInfo{DType::kF32, ctx.input(kX).shape},
                              TensorInfo{DType::kF32, ctx.input(kW).shape},
                              TensorInfo{DType::kF32, n == 3 ? ctx.input(kB).shape : Shape{}}};
  const Tensor* values[3] = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < constants.size() && i < n; ++i) values[i] = &constants[i];
  const bool present[] = {true, true, true};
  const OpContext conv(
      ctx.node_name(), OpKind::kConv, ctx.attrs(), std::span<const TensorInfo>(infos, n),
      std::span<const Tensor* const>(values, n), std::span<const bool>(present, n));
  return f(conv);
}

Status infer_qlinear_conv(const OpContext& ctx, int, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(DType out, check_qlinear_conv(ctx));
  std::vector<TensorInfo> conv_out;
  RETURN_IF_ERROR(with_float_conv(ctx, {}, [&](const OpContext& conv) {
    return op_schema(OpKind::kConv).infer(conv, 1, &conv_out);
  }));
  outputs->push_back(TensorInfo{out, conv_out[0].shape});
  return Status();
}

OpCost cost_qlinear_conv(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  const Shape& w = ctx.input(kW).shape;
  double macs = 1;
  for (int i = 1; i < w.rank(); ++i) macs *= static_cast<double>(w[i]);
  c.flops = 2.0 * static_cast<double>(outputs[0].shape.numel()) * macs;
  return c;
}

Status reference_qlinear_conv(const OpContext& ctx, std::span<const Tensor> inputs,
                              std::span<Tensor> outputs) {
  const Tensor none;
  auto zp = [&](int i) -> const Tensor& { return ctx.has_input(i) ? inputs[i] : none; };
  const QuantParams xq = read_quant_params(inputs[kX].shape(), inputs[kXScale], zp(kXZp), 1);
  const QuantParams wq = read_quant_params(inputs[kW].shape(), inputs[kWScale], zp(kWZp), 0);
  const QuantParams yq = read_quant_params(Shape{1}, inputs[kYScale], zp(kYZp), 0);
  // Phase 1: dequantise the operands.
  std::vector<Tensor> fin;
  ASSIGN_OR_RETURN(Tensor x, Tensor::create(DType::kF32, inputs[kX].shape()));
  dequantize_tensor(inputs[kX], xq, &x);
  ASSIGN_OR_RETURN(Tensor w, Tensor::create(DType::kF32, inputs[kW].shape()));
  dequantize_tensor(inputs[kW], wq, &w);
  fin.push_back(x);
  fin.push_back(w);
  if (ctx.has_input(kB)) {
    QuantParams bq;
    const int64_t m = inputs[kB].numel();
    for (int64_t i = 0; i < m; ++i) {
      const float ws = wq.scale[wq.per_axis() ? static_cast<size_t>(i) : 0];
      bq.scale.push_back(xq.scale[0] * ws);
      bq.zero_point.push_back(0);
    }
    bq.axis = m > 1 ? 0 : -1;
    if (m == 1) bq.scale.resize(1);
    ASSIGN_OR_RETURN(Tensor b, Tensor::create(DType::kF32, inputs[kB].shape()));
    dequantize_tensor(inputs[kB], bq, &b);
    fin.push_back(b);
  }
  // Phase 2: the float convolution, by Conv's own reference kernel.
  ASSIGN_OR_RETURN(Tensor y, Tensor::create(DType::kF32, outputs[0].shape()));
  Tensor ys[] = {y};
  RETURN_IF_ERROR(with_float_conv(ctx, fin, [&](const OpContext& conv) {
    return op_schema(OpKind::kConv).reference(conv, fin, std::span<Tensor>(ys));
  }));
  // Phase 3: requantise.
  quantize_tensor(y, yq, &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kQLinearConvSchema = {
    .kind = OpKind::kQLinearConv,
    .min_inputs = 8,
    .max_inputs = 9,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_qlinear_conv,
    .cost = cost_qlinear_conv,
    .reference = reference_qlinear_conv,
};

}  // namespace tessera
