// Shared implementation of the variadic element-wise ops Min, Max and Sum: one or more inputs of
// one dtype (f32, i32, i64), numpy-broadcast together. Min and Max propagate NaN (as numpy's
// minimum/maximum and PyTorch do); Sum of integers wraps.
#pragma once

#include "ops/op.h"

namespace tessera {

// The most inputs a Min, Max or Sum node may have.
inline constexpr int kMaxVariadicInputs = 64;

Status infer_variadic_elementwise(const OpContext& ctx, int num_outputs,
                                  std::vector<TensorInfo>* outputs);
OpCost cost_variadic_elementwise(const OpContext& ctx, std::span<const TensorInfo> outputs);
Status reference_variadic_elementwise(const OpContext& ctx, std::span<const Tensor> inputs,
                                      std::span<Tensor> outputs);

#define TESSERA_VARIADIC_SCHEMA(Name)              \
  const OpSchema k##Name##Schema = {               \
      .kind = OpKind::k##Name,                     \
      .min_inputs = 1,                             \
      .max_inputs = kMaxVariadicInputs,            \
      .min_outputs = 1,                            \
      .max_outputs = 1,                            \
      .accepts_fused_activation = false,           \
      .infer = infer_variadic_elementwise,         \
      .cost = cost_variadic_elementwise,           \
      .reference = reference_variadic_elementwise, \
  }

}  // namespace tessera
