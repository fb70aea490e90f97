// Softplus: y = ln(1 + e^x), computed without overflow.
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Softplus);

}  // namespace tessera
