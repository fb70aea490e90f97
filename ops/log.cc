// Log: y = ln(x) (-inf at 0, NaN below).
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Log);

}  // namespace tessera
