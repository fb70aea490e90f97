// Sigmoid: y = 1 / (1 + exp(-x)).
// Element-wise; the math is shared with fused activations (ops/activation.cc).
#include "ops/registry.h"
#include "ops/unary_activation.h"

namespace tessera {

const OpSchema kSigmoidSchema = {
    .kind = OpKind::kSigmoid,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_unary_activation,
    .cost = cost_unary_activation,
    .reference = reference_unary_activation,
};

}  // namespace tessera
