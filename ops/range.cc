// Range: the sequence start, start + delta, ... up to (not including) limit, of
// max(ceil((limit - start) / delta), 0) elements; output[i] = start + i * delta (the ONNX
// definition). start, limit and delta are scalars of one dtype (f32, i32, i64) and must be
// constants: the output's length depends on their values, and shapes in Tessera are static
// (anchor-grid subgraphs fold to constants at import).
#include <cmath>
#include <type_traits>

#include "ops/registry.h"

namespace tessera {

namespace {

// The three scalars as doubles (exact for i32; i64 beyond 2^53 is refused by the size check).
struct RangeArgs {
  double start = 0, limit = 0, delta = 0;
};

Result<double> scalar_of(const OpContext& ctx, int i, const char* what) {
  const Tensor* t = ctx.constant(i);
  if (t == nullptr) {
    return ctx.unsupported(std::string(what) +
                           " must be a constant: the output's length depends on it");
  }
  if (t->numel() != 1 || t->rank() > 1) {
    return ctx.error(std::string(what) + " must be a scalar, not " + t->shape().to_string());
  }
  switch (t->dtype()) {
    case DType::kF32:
      return static_cast<double>(t->data<float>()[0]);
    case DType::kI32:
      return static_cast<double>(t->data<int32_t>()[0]);
    case DType::kI64:
      return static_cast<double>(t->data<int64_t>()[0]);
    default:
      return ctx.unsupported(std::string(what) + " has dtype " + dtype_name(t->dtype()) +
                             " (f32, i32, i64 are supported)");
  }
}

Result<int64_t> range_length(const OpContext& ctx) {
  const DType t = ctx.input(0).dtype;
  for (int i = 1; i < 3; ++i) {
    if (ctx.input(i).dtype != t) {
      return ctx.error(std::string("start, limit and delta have different dtypes: ") +
                       dtype_name(t) + " and " + dtype_name(ctx.input(i).dtype));
    }
  }
  ASSIGN_OR_RETURN(double start, scalar_of(ctx, 0, "start"));
  ASSIGN_OR_RETURN(double limit, scalar_of(ctx, 1, "limit"));
  ASSIGN_OR_RETURN(double delta, scalar_of(ctx, 2, "delta"));
  if (delta == 0) return ctx.error("delta is 0");
  if (!std::isfinite(start) || !std::isfinite(limit) || !std::isfinite(delta)) {
    return ctx.error("start, limit and delta must be finite");
  }
  const double n = std::ceil((limit - start) / delta);
  if (n > static_cast<double>(kMaxDim)) {
    return ctx.error("the range has " + std::to_string(n) + " elements, more than " +
                     std::to_string(kMaxDim));
  }
  return n > 0 ? static_cast<int64_t>(n) : int64_t{0};
}

Status infer_range(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(int64_t n, range_length(ctx));
  outputs->push_back(TensorInfo{ctx.input(0).dtype, Shape{n}});
  return Status();
}

template <typename T>
void fill(const Tensor& start, const Tensor& delta, Tensor& y) {
  const T s = start.data<T>()[0], d = delta.data<T>()[0];
  T* out = y.data<T>();
  for (int64_t i = 0; i < y.numel(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      out[i] = s + static_cast<T>(i) * d;
    } else {
      // In the unsigned type: i * delta may pass the signed range before start brings it back.
      using U = std::make_unsigned_t<T>;
      out[i] = static_cast<T>(static_cast<U>(
          static_cast<U>(s) + static_cast<U>(static_cast<U>(i) * static_cast<U>(d))));
    }
  }
}

Status reference_range(const OpContext& ctx, std::span<const Tensor> inputs,
                       std::span<Tensor> outputs) {
  switch (inputs[0].dtype()) {
    case DType::kF32:
      fill<float>(inputs[0], inputs[2], outputs[0]);
      return Status();
    case DType::kI32:
      fill<int32_t>(inputs[0], inputs[2], outputs[0]);
      return Status();
    case DType::kI64:
      fill<int64_t>(inputs[0], inputs[2], outputs[0]);
      return Status();
    default:
      return ctx.unsupported(std::string("dtype ") + dtype_name(inputs[0].dtype()));
  }
}

}  // namespace

const OpSchema kRangeSchema = {
    .kind = OpKind::kRange,
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_range,
    .cost = nullptr,
    .reference = reference_range,
};

}  // namespace tessera
