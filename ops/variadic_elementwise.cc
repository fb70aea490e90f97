#include "ops/variadic_elementwise.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/binary_elementwise.h"
#include "ops/broadcast.h"
#include "ops/broadcast_map.h"

namespace tessera {

Status infer_variadic_elementwise(const OpContext& ctx, int /*num_outputs*/,
                                  std::vector<TensorInfo>* outputs) {
  const DType t = ctx.input(0).dtype;
  if (t != DType::kF32 && t != DType::kI32 && t != DType::kI64) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(t) +
                           " is not supported (f32, i32, i64 are)");
  }
  Shape shape = ctx.input(0).shape;
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("input " + std::to_string(i) + " is missing");
    if (ctx.input(i).dtype != t) {
      return ctx.error("input " + std::to_string(i) + " has dtype " +
                       dtype_name(ctx.input(i).dtype) + ", input 0 " + dtype_name(t));
    }
    Result<Shape> s = broadcast_shapes(shape, ctx.input(i).shape);
    if (!s.ok()) return ctx.wrap(s.status());
    shape = std::move(s).value();
  }
  outputs->push_back(TensorInfo{t, std::move(shape)});
  return Status();
}

OpCost cost_variadic_elementwise(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(outputs[0].shape.numel()) * std::max(1, ctx.num_inputs() - 1);
  return c;
}

namespace {

template <typename T>
T combine(OpKind kind, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (kind != OpKind::kSum && (std::isnan(a) || std::isnan(b))) {
      return std::numeric_limits<T>::quiet_NaN();
    }
  }
  switch (kind) {
    case OpKind::kMin:
      return b < a ? b : a;
    case OpKind::kMax:
      return b > a ? b : a;
    default:
      if constexpr (std::is_floating_point_v<T>) {
        return a + b;
      } else {
        return wrapping_add(a, b);
      }
  }
}

template <typename T>
void run(OpKind kind, std::span<const Tensor> inputs, Tensor& y) {
  if (inputs.size() == 1) {
    // One input: itself, broadcast to the output (which has its shape).
    std::memcpy(y.raw(), inputs[0].raw(), y.byte_size());
    return;
  }
  auto fn = [kind](T a, T b) { return combine(kind, a, b); };
  broadcast_map2<T, T, T>(inputs[0], inputs[1], y, fn);
  for (size_t i = 2; i < inputs.size(); ++i) broadcast_map2<T, T, T>(y, inputs[i], y, fn);
}

}  // namespace

Status reference_variadic_elementwise(const OpContext& ctx, std::span<const Tensor> inputs,
                                      std::span<Tensor> outputs) {
  switch (outputs[0].dtype()) {
    case DType::kF32:
      run<float>(ctx.kind(), inputs, outputs[0]);
      return Status();
    case DType::kI32:
      run<int32_t>(ctx.kind(), inputs, outputs[0]);
      return Status();
    case DType::kI64:
      run<int64_t>(ctx.kind(), inputs, outputs[0]);
      return Status();
    default:
      return ctx.unsupported(std::string("dtype ") + dtype_name(outputs[0].dtype()));
  }
}

}  // namespace tessera
