// Erf: y = erf(x), the Gauss error function.
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Erf);

}  // namespace tessera
