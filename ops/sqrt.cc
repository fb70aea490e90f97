// Sqrt: y = sqrt(x) (NaN for x < 0).
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Sqrt);

}  // namespace tessera
