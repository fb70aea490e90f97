#include "ops/registry.h"

#include <array>
#include <iterator>
#include <string>

namespace tessera {

namespace {

// Every operator's schema, in OpKind order (both come from ops/op_list.inc).
const OpSchema* const kAllSchemas[] = {
#define TESSERA_OP(name) &k##name##Schema,
#include "ops/op_list.inc"
};
static_assert(static_cast<int>(std::size(kAllSchemas)) == kNumOpKinds);

Status infer_missing(const OpContext& ctx, int, std::vector<TensorInfo>*) {
  return ctx.unsupported("operator has no implementation in this build");
}
Status reference_missing(const OpContext& ctx, std::span<const Tensor>, std::span<Tensor>) {
  return ctx.unsupported("operator has no reference kernel in this build");
}

const std::array<const OpSchema*, kNumOpKinds>& schema_table() {
  static const std::array<const OpSchema*, kNumOpKinds> table = [] {
    std::array<const OpSchema*, kNumOpKinds> t{};
    for (const OpSchema* s : kAllSchemas) t[static_cast<size_t>(s->kind)] = s;
    return t;
  }();
  return table;
}

}  // namespace

bool op_is_registered(OpKind kind) {
  return schema_table()[static_cast<size_t>(kind)] != nullptr;
}

const OpSchema& op_schema(OpKind kind) {
  const OpSchema* s = schema_table()[static_cast<size_t>(kind)];
  if (s != nullptr) return *s;
  static const OpSchema kMissing = {
      .kind = OpKind::kCount,
      .min_inputs = 0,
      .max_inputs = 1 << 20,
      .min_outputs = 0,
      .max_outputs = 1 << 20,
      .accepts_fused_activation = false,
      .infer = infer_missing,
      .cost = nullptr,
      .reference = reference_missing,
  };
  return kMissing;
}

}  // namespace tessera
