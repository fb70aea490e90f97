// Abs: y = |x|; f32, i32 and i64 (|INT_MIN| wraps to INT_MIN).
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Abs);

}  // namespace tessera
