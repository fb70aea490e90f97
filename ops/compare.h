// Shared implementation of the comparisons Equal, Less and Greater: two inputs of one dtype
// (f32, i32, i64; Equal also bool), numpy-broadcast, giving bool (one byte, 0 or 1). NaN compares
// false with everything, itself included.
#pragma once

#include "ops/op.h"

namespace tessera {

Status infer_compare(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs);
OpCost cost_compare(const OpContext& ctx, std::span<const TensorInfo> outputs);
Status reference_compare(const OpContext& ctx, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs);

#define TESSERA_COMPARE_SCHEMA(Name)     \
  const OpSchema k##Name##Schema = {     \
      .kind = OpKind::k##Name,           \
      .min_inputs = 2,                   \
      .max_inputs = 2,                   \
      .min_outputs = 1,                  \
      .max_outputs = 1,                  \
      .accepts_fused_activation = false, \
      .infer = infer_compare,            \
      .cost = cost_compare,              \
      .reference = reference_compare,    \
  }

}  // namespace tessera
