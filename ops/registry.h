// The schemas of all operators, one defined in each ops/<op>.cc file for each line of
// ops/op_list.inc; registry.cc tables them; tests/ops/registry_test.cc checks every OpKind is
// registered.
#pragma once

#include "ops/op.h"

namespace tessera {

// kConvSchema, kReluSchema, ...: one per line of ops/op_list.inc.
#define TESSERA_OP(name) extern const OpSchema k##name##Schema;
#include "ops/op_list.inc"

}  // namespace tessera
