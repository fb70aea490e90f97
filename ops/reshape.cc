// Reshape: gives the data the shape held by the constant `shape` input (i64). An entry 0 copies
// the input's dimension at the same index (unless allowzero = 1, opset 14, where 0 means an empty
// dimension); one entry may be -1, inferred from the element count. Any dtype; copies bytes.
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_reshape(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& in = ctx.input(0);
  ASSIGN_OR_RETURN(std::vector<int64_t> target, constant_int_list(ctx, 1, "shape"));
  Result<int64_t> allowzero = ctx.attrs().int_or("allowzero", 0);
  if (!allowzero.ok()) return ctx.wrap(allowzero.status());
  const std::string what = "shape " + ints_to_string(target);
  if (static_cast<int>(target.size()) > kMaxRank) {
    return ctx.error(what + " has more than " + std::to_string(kMaxRank) + " dimensions");
  }

  int inferred = -1;  // index of the -1 entry
  bool has_zero = false;
  uint64_t known = 1;  // product of the other dimensions
  std::vector<int64_t> dims = target;
  for (size_t i = 0; i < dims.size(); ++i) {
    int64_t& d = dims[i];
    if (d == -1) {
      if (inferred >= 0) return ctx.error(what + " has more than one -1");
      inferred = static_cast<int>(i);
      continue;
    }
    if (d < -1) return ctx.error(what + " has a negative dimension " + std::to_string(d));
    if (d == 0 && *allowzero == 0) {
      if (static_cast<int>(i) >= in.shape.rank()) {
        return ctx.error(what + ": entry " + std::to_string(i) +
                         " is 0 (copy the input dimension) but the input " + in.shape.to_string() +
                         " has no dimension " + std::to_string(i));
      }
      d = in.shape[static_cast<int>(i)];
    }
    if (d == 0) has_zero = true;
    if (d > kMaxDim || !checked_mul(known, static_cast<uint64_t>(d), &known) ||
        known > static_cast<uint64_t>(kMaxElements)) {
      return ctx.error(what + " is too large");
    }
  }
  const uint64_t numel = static_cast<uint64_t>(in.shape.numel());
  if (inferred >= 0) {
    if (has_zero && *allowzero != 0) {
      return ctx.error(what + " has both 0 and -1, which allowzero = 1 forbids");
    }
    if (known == 0) {
      return ctx.error(what + ": -1 cannot be inferred next to a 0 dimension");
    }
    if (numel % known != 0) {
      return ctx.error("cannot reshape " + in.shape.to_string() + " (" + std::to_string(numel) +
                       " elements) to " + what);
    }
    dims[static_cast<size_t>(inferred)] = static_cast<int64_t>(numel / known);
  } else if (known != numel) {
    return ctx.error("cannot reshape " + in.shape.to_string() + " (" + std::to_string(numel) +
                     " elements) to " + what + " (" + std::to_string(known) + " elements)");
  }
  outputs->push_back(TensorInfo{in.dtype, Shape(std::move(dims))});
  return Status();
}

Status reference_reshape(const OpContext&, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  copy_tensor_bytes(inputs[0], &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kReshapeSchema = {
    .kind = OpKind::kReshape,
    .min_inputs = 2,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_reshape,
    .cost = nullptr,
    .reference = reference_reshape,
};

}  // namespace tessera
