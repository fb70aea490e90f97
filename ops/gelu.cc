// Gelu (opset 20): y = 0.5 x (1 + erf(x / sqrt 2)), or with approximate = "tanh"
// 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))). graph/passes.cc fuses the Erf- and
// Tanh-spelled subgraphs of older exports into this op.
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Gelu);

}  // namespace tessera
