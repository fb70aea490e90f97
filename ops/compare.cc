#include "ops/compare.h"

#include "ops/broadcast.h"
#include "ops/broadcast_map.h"

namespace tessera {

Status infer_compare(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& a = ctx.input(0);
  const TensorInfo& b = ctx.input(1);
  if (a.dtype != b.dtype) {
    return ctx.error(std::string("inputs have different dtypes: ") + dtype_name(a.dtype) + " and " +
                     dtype_name(b.dtype));
  }
  const bool bool_ok = ctx.kind() == OpKind::kEqual;
  if (a.dtype != DType::kF32 && a.dtype != DType::kI32 && a.dtype != DType::kI64 &&
      !(bool_ok && a.dtype == DType::kBool)) {
    return ctx.unsupported(std::string("dtype ") + dtype_name(a.dtype) + " is not supported (" +
                           (bool_ok ? "f32, i32, i64, bool are)" : "f32, i32, i64 are)"));
  }
  Result<Shape> shape = broadcast_shapes(a.shape, b.shape);
  if (!shape.ok()) return ctx.wrap(shape.status());
  outputs->push_back(TensorInfo{DType::kBool, std::move(shape).value()});
  return Status();
}

OpCost cost_compare(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(outputs[0].shape.numel());
  return c;
}

namespace {

template <typename T>
void run(OpKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  switch (kind) {
    case OpKind::kLess:
      broadcast_map2<T, T, uint8_t>(a, b, y, [](T x, T z) { return uint8_t{x < z}; });
      return;
    case OpKind::kGreater:
      broadcast_map2<T, T, uint8_t>(a, b, y, [](T x, T z) { return uint8_t{x > z}; });
      return;
    default:
      broadcast_map2<T, T, uint8_t>(a, b, y, [](T x, T z) { return uint8_t{x == z}; });
      return;
  }
}

}  // namespace

Status reference_compare(const OpContext& ctx, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  const Tensor& a = inputs[0];
  const Tensor& b = inputs[1];
  switch (a.dtype()) {
    case DType::kF32:
      run<float>(ctx.kind(), a, b, outputs[0]);
      return Status();
    case DType::kI32:
      run<int32_t>(ctx.kind(), a, b, outputs[0]);
      return Status();
    case DType::kI64:
      run<int64_t>(ctx.kind(), a, b, outputs[0]);
      return Status();
    case DType::kBool:
      // Any nonzero byte is true.
      broadcast_map2<uint8_t, uint8_t, uint8_t>(
          a, b, outputs[0], [](uint8_t x, uint8_t z) { return uint8_t{(x != 0) == (z != 0)}; });
      return Status();
    default:
      return ctx.unsupported(std::string("dtype ") + dtype_name(a.dtype()));
  }
}

}  // namespace tessera
