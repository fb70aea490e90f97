// Transpose: output dimension i is input dimension perm[i]; perm defaults to the reverse order.
// Any dtype. The kernel is a gather_copy (ops/data_movement.h): dimensions that keep their
// order at the end move as whole blocks, so e.g. a channel shuffle copies H*W runs.
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Result<std::vector<int>> parse_perm(const OpContext& ctx) {
  const int rank = ctx.input(0).shape.rank();
  std::vector<int64_t> reverse(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) reverse[static_cast<size_t>(i)] = rank - 1 - i;
  Result<std::vector<int64_t>> perm = ctx.attrs().ints_or("perm", reverse);
  if (!perm.ok()) return ctx.wrap(perm.status());
  const std::string what = "perm " + ints_to_string(*perm);
  if (static_cast<int>(perm->size()) != rank) {
    return ctx.error(what + " does not have one entry per dimension of " +
                     ctx.input(0).shape.to_string());
  }
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) {
      return ctx.error(what + " is not a permutation of 0.." + std::to_string(rank - 1));
    }
    seen[static_cast<size_t>(p)] = true;
    out.push_back(static_cast<int>(p));
  }
  return out;
}

Status infer_transpose(const OpContext& ctx, int /*num_outputs*/,
                       std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(std::vector<int> perm, parse_perm(ctx));
  TensorInfo out = ctx.input(0);
  for (size_t i = 0; i < perm.size(); ++i) {
    out.shape[static_cast<int>(i)] = ctx.input(0).shape[perm[i]];
  }
  outputs->push_back(std::move(out));
  return Status();
}

Status reference_transpose(const OpContext& ctx, std::span<const Tensor> inputs,
                           std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(std::vector<int> perm, parse_perm(ctx));
  const Tensor& in = inputs[0];
  const int64_t elem = static_cast<int64_t>(dtype_size(in.dtype()));
  const std::vector<int64_t> strides = contiguous_strides(in.shape());
  GatherCopyPlan plan;
  plan.elem_bytes = static_cast<size_t>(elem);
  for (int p : perm) {
    const int64_t step = strides[static_cast<size_t>(p)] * elem;
    std::vector<int64_t> off(static_cast<size_t>(in.dim(p)));
    for (size_t o = 0; o < off.size(); ++o) off[o] = static_cast<int64_t>(o) * step;
    plan.offsets.push_back(std::move(off));
  }
  gather_copy(plan, in.raw(), outputs[0].raw(), nullptr);
  return Status();
}

}  // namespace

const OpSchema kTransposeSchema = {
    .kind = OpKind::kTranspose,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_transpose,
    .cost = nullptr,
    .reference = reference_transpose,
};

}  // namespace tessera
