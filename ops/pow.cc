// Pow: y = base ^ exponent element-wise (numpy broadcasting). The base is f32, i32 or i64 and
// gives the output's dtype; the exponent is any of the three (Pow-12 and later). f32 bases use
// std::pow in f32 (so x ^ 2 and x ^ 0.5 are exact where the C library's are); integer bases are
// computed in double and truncated, as onnxruntime does.
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/broadcast.h"
#include "ops/broadcast_map.h"
#include "ops/registry.h"

namespace tessera {

namespace {

bool numeric(DType t) {
  return t == DType::kF32 || t == DType::kI32 || t == DType::kI64;
}

Status infer_pow(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& base = ctx.input(0);
  const TensorInfo& exponent = ctx.input(1);
  if (!numeric(base.dtype) || !numeric(exponent.dtype)) {
    return ctx.unsupported(std::string("dtypes ") + dtype_name(base.dtype) + " ^ " +
                           dtype_name(exponent.dtype) + " are not supported (f32, i32, i64 are)");
  }
  Result<Shape> shape = broadcast_shapes(base.shape, exponent.shape);
  if (!shape.ok()) return ctx.wrap(shape.status());
  outputs->push_back(TensorInfo{base.dtype, std::move(shape).value()});
  return Status();
}

OpCost cost_pow(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(outputs[0].shape.numel()) * 10.0;
  return c;
}

template <typename TB, typename TE>
void run(const Tensor& b, const Tensor& e, Tensor& y) {
  if constexpr (std::is_same_v<TB, float>) {
    broadcast_map2<TB, TE, TB>(b, e, y,
                               [](float x, TE p) { return std::pow(x, static_cast<float>(p)); });
  } else {
    broadcast_map2<TB, TE, TB>(b, e, y, [](TB x, TE p) {
      const double v = std::pow(static_cast<double>(x), static_cast<double>(p));
      // Out of the integer range (or NaN, from 0 ^ -1): the type's minimum, as a cast on x86
      // gives, without the undefined conversion.
      if (!(v >= static_cast<double>(std::numeric_limits<TB>::min()) &&
            v < -static_cast<double>(std::numeric_limits<TB>::min()))) {
        return std::numeric_limits<TB>::min();
      }
      return static_cast<TB>(v);
    });
  }
}

template <typename TB>
Status run_base(const OpContext& ctx, const Tensor& b, const Tensor& e, Tensor& y) {
  switch (e.dtype()) {
    case DType::kF32:
      run<TB, float>(b, e, y);
      return Status();
    case DType::kI32:
      run<TB, int32_t>(b, e, y);
      return Status();
    case DType::kI64:
      run<TB, int64_t>(b, e, y);
      return Status();
    default:
      return ctx.unsupported(std::string("exponent dtype ") + dtype_name(e.dtype()));
  }
}

Status reference_pow(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs) {
  switch (inputs[0].dtype()) {
    case DType::kF32:
      return run_base<float>(ctx, inputs[0], inputs[1], outputs[0]);
    case DType::kI32:
      return run_base<int32_t>(ctx, inputs[0], inputs[1], outputs[0]);
    case DType::kI64:
      return run_base<int64_t>(ctx, inputs[0], inputs[1], outputs[0]);
    default:
      return ctx.unsupported(std::string("base dtype ") + dtype_name(inputs[0].dtype()));
  }
}

}  // namespace

const OpSchema kPowSchema = {
    .kind = OpKind::kPow,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_pow,
    .cost = cost_pow,
    .reference = reference_pow,
};

}  // namespace tessera
