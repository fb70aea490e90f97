// Clip: y = min(max(x, min), max), so min > max makes every value max (as Clip-13 specifies);
// min/max are optional scalar inputs (opset 11+) or attributes (opset 6). Element-wise; the
// math is shared with fused activations (ops/activation.cc).
#include "ops/registry.h"
#include "ops/unary_activation.h"

namespace tessera {

const OpSchema kClipSchema = {
    .kind = OpKind::kClip,
    .min_inputs = 1,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_unary_activation,
    .cost = cost_unary_activation,
    .reference = reference_unary_activation,
};

}  // namespace tessera
