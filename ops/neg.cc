// Neg: y = -x; f32, i32 and i64 (integers wrap).
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Neg);

}  // namespace tessera
