#include <gtest/gtest.h>

#include <set>

#include "ops/registry.h"

namespace tessera {
namespace {

TEST(OpRegistry, EveryKindHasItsOwnSchema) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    ASSERT_TRUE(op_is_registered(kind)) << op_name(kind) << " is not registered";
    const OpSchema& s = op_schema(kind);
    EXPECT_EQ(s.kind, kind) << op_name(kind);
    EXPECT_NE(s.infer, nullptr) << op_name(kind);
    EXPECT_NE(s.reference, nullptr) << op_name(kind);
    EXPECT_LE(s.min_inputs, s.max_inputs) << op_name(kind);
    EXPECT_LE(s.min_outputs, s.max_outputs) << op_name(kind);
  }
}

TEST(OpRegistry, NamesRoundTrip) {
  std::set<std::string> names;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    EXPECT_EQ(op_from_name(op_name(kind)), kind);
    EXPECT_TRUE(names.insert(op_name(kind)).second) << "duplicate name " << op_name(kind);
  }
  EXPECT_FALSE(op_from_name("NonMaxSuppression").has_value());
}

}  // namespace
}  // namespace tessera
