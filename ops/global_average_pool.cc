// GlobalAveragePool: the mean over all spatial dims (ONNX GlobalAveragePool-1).
//
//   X [N, C, D1..Dk] (k >= 1) -> Y [N, C, 1, ..., 1]
// The spatial extent must not be empty. Sums accumulate in double.
// FLOPs: one add per input element.
#include <algorithm>
#include <string>

#include "ops/conv_pool_util.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status reference_global_average_pool(const OpContext& /*ctx*/, std::span<const Tensor> inputs,
                                     std::span<Tensor> outputs) {
  const int64_t planes = outputs[0].numel();
  const int64_t plane = planes == 0 ? 0 : inputs[0].numel() / planes;
  const float* x = inputs[0].data<float>();
  float* y = outputs[0].data<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * plane;
    double sum = 0;
    for (int64_t i = 0; i < plane; ++i) sum += xp[i];
    y[p] = static_cast<float>(sum / static_cast<double>(plane));
  }
  return Status();
}

}  // namespace

const OpSchema kGlobalAveragePoolSchema = {
    .kind = OpKind::kGlobalAveragePool,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_global_pool,
    .cost = cost_global_pool,
    .reference = reference_global_average_pool,
};

}  // namespace tessera
