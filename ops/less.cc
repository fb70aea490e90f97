// Less: a < b element-wise (numpy broadcasting), as bool; f32, i32, i64.
// Shared machinery: ops/compare.h.
#include "ops/compare.h"
#include "ops/registry.h"

namespace tessera {

TESSERA_COMPARE_SCHEMA(Less);

}  // namespace tessera
