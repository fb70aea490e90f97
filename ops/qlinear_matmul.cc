// QLinearMatMul (opsets 10 and 21): a MatMul of quantised tensors,
//   inputs  a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
// Tessera runs it in float: y = quantise(MatMul(dequantise(a), dequantise(b)), y_scale,
// y_zero_point). a and y are quantised per tensor; b per tensor or per column (a 1-D scale with
// one value per index of b's last dimension). The result
// matches an integer kernel except where the float sum lands within rounding error of a half
// step (then it may differ by one).
#include <memory>

#include "ops/attr_util.h"
#include "ops/quantize.h"
#include "ops/registry.h"

namespace tessera {

namespace {

constexpr int kA = 0, kAScale = 1, kAZp = 2, kB = 3, kBScale = 4, kBZp = 5, kYScale = 6, kYZp = 7;

Result<DType> check_qlinear_matmul(const OpContext& ctx) {
  for (int i : {kA, kB}) {
    const DType t = ctx.input(i).dtype;
    if (t != DType::kU8 && t != DType::kI8) {
      return ctx.unsupported("input " + std::to_string(i) + " must be u8 or i8, is " +
                             dtype_name(t));
    }
  }
  for (int s : {kAScale, kYScale}) {
    if (ctx.input(s).shape.numel() != 1) {
      return ctx.unsupported("input " + std::to_string(s) +
                             " (scale) must be per tensor (one value), has shape " +
                             ctx.input(s).shape.to_string());
    }
  }
  if (ctx.input(kB).shape.rank() < 1) return ctx.error("input 3 (b) must have rank >= 1");
  DType azp = DType::kU8, bzp = DType::kU8, yzp = DType::kU8;
  RETURN_IF_ERROR(check_quant_params(ctx, ctx.input(kA).shape, kAScale, kAZp, 0, &azp));
  RETURN_IF_ERROR(check_quant_params(ctx, ctx.input(kB).shape, kBScale, kBZp, -1, &bzp));
  RETURN_IF_ERROR(check_quant_params(ctx, Shape{1}, kYScale, kYZp, 0, &yzp));
  if (yzp != DType::kU8 && yzp != DType::kI8) {
    return ctx.unsupported(std::string("y_zero_point must be u8 or i8, is ") + dtype_name(yzp));
  }
  return yzp;
}

// Runs `f` with an f32 MatMul context over a and b's shapes, holding `constants` (or none).
template <typename F>
Status with_float_matmul(const OpContext& ctx, const Tensor* a, const Tensor* b, F&& f) {
  const TensorInfo infos[] = {TensorInfo{DType::kF32, ctx.input(kA).shape},
                              TensorInfo{DType::kF32, ctx.input(kB).shape}};
  const Tensor* constants[] = {a, b};
  const bool present[] = {true, true};
  static const Attributes kNoAttributes;
  const OpContext mm(ctx.node_name(), OpKind::kMatMul, kNoAttributes, infos, constants, present);
  return f(mm);
}

Status infer_qlinear_matmul(const OpContext& ctx, int, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(DType out, check_qlinear_matmul(ctx));
  std::vector<TensorInfo> mm_out;
  RETURN_IF_ERROR(with_float_matmul(ctx, nullptr, nullptr, [&](const OpContext& mm) {
    return op_schema(OpKind::kMatMul).infer(mm, 1, &mm_out);
  }));
  outputs->push_back(TensorInfo{out, mm_out[0].shape});
  return Status();
}

OpCost cost_qlinear_matmul(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  const Shape& a = ctx.input(kA).shape;
  c.flops = 2.0 * static_cast<double>(outputs[0].shape.numel()) *
            static_cast<double>(a.rank() > 0 ? a[a.rank() - 1] : 1);
  return c;
}

Status reference_qlinear_matmul(const OpContext& ctx, std::span<const Tensor> inputs,
                                std::span<Tensor> outputs) {
  const Tensor none;
  auto zp = [&](int i) -> const Tensor& { return ctx.has_input(i) ? inputs[i] : none; };
  const int b_last = inputs[kB].shape().rank() - 1;
  const QuantParams aq = read_quant_params(inputs[kA].shape(), inputs[kAScale], zp(kAZp), 0);
  const QuantParams bq = read_quant_params(inputs[kB].shape(), inputs[kBScale], zp(kBZp), b_last);
  const QuantParams yq = read_quant_params(Shape{1}, inputs[kYScale], zp(kYZp), 0);
  ASSIGN_OR_RETURN(Tensor a, Tensor::create(DType::kF32, inputs[kA].shape()));
  dequantize_tensor(inputs[kA], aq, &a);
  ASSIGN_OR_RETURN(Tensor b, Tensor::create(DType::kF32, inputs[kB].shape()));
  dequantize_tensor(inputs[kB], bq, &b);
  ASSIGN_OR_RETURN(Tensor y, Tensor::create(DType::kF32, outputs[0].shape()));
  const Tensor fin[] = {a, b};
  Tensor ys[] = {y};
  RETURN_IF_ERROR(with_float_matmul(ctx, &a, &b, [&](const OpContext& mm) {
    return op_schema(OpKind::kMatMul)
        .reference(mm, std::span<const Tensor>(fin), std::span<Tensor>(ys));
  }));
  quantize_tensor(y, yq, &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kQLinearMatMulSchema = {
    .kind = OpKind::kQLinearMatMul,
    .min_inputs = 8,
    .max_inputs = 8,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_qlinear_matmul,
    .cost = cost_qlinear_matmul,
    .reference = reference_qlinear_matmul,
};

}  // namespace tessera
