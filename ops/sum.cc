// Sum: the element-wise sum of one or more inputs (numpy broadcasting; integers wrap).
// f32, i32, i64. Shared machinery: ops/variadic_elementwise.h.
#include "ops/registry.h"
#include "ops/variadic_elementwise.h"

namespace tessera {

TESSERA_VARIADIC_SCHEMA(Sum);

}  // namespace tessera
