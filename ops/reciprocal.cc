// Reciprocal: y = 1 / x (inf at 0).
// Element-wise; shared machinery: ops/unary_math.h.
#include "ops/registry.h"
#include "ops/unary_math.h"

namespace tessera {

TESSERA_UNARY_MATH_SCHEMA(Reciprocal);

}  // namespace tessera
