// Mish (opset 18): y = x * tanh(softplus(x)).
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Mish);

}  // namespace tessera
