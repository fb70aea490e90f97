// Unsqueeze: inserts dimensions of size 1 at `axes`, given by the attribute (opset 11) or the
// constant input (opset 13). Axes index the output (rank + len(axes)) and may be negative.
// Any dtype; the kernel copies bytes.
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_unsqueeze(const OpContext& ctx, int /*num_outputs*/,
                       std::vector<TensorInfo>* outputs) {
  const TensorInfo& in = ctx.input(0);
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, axes_from_attribute_or_input(ctx, 1));
  if (!axes) return ctx.error("axes are required (attribute or input 1)");
  const int out_rank = in.shape.rank() + static_cast<int>(axes->size());
  if (out_rank > kMaxRank) {
    return ctx.error("output rank " + std::to_string(out_rank) + " exceeds the limit of " +
                     std::to_string(kMaxRank));
  }
  ASSIGN_OR_RETURN(std::vector<int> norm, normalize_axes(ctx, *axes, out_rank));
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int a : norm) inserted[static_cast<size_t>(a)] = true;
  std::vector<int64_t> dims;
  int next = 0;  // next input dimension
  for (int d = 0; d < out_rank; ++d) {
    dims.push_back(inserted[static_cast<size_t>(d)] ? 1 : in.shape[next++]);
  }
  outputs->push_back(TensorInfo{in.dtype, Shape(std::move(dims))});
  return Status();
}

Status reference_unsqueeze(const OpContext&, std::span<const Tensor> inputs,
                           std::span<Tensor> outputs) {
  copy_tensor_bytes(inputs[0], &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kUnsqueezeSchema = {
    .kind = OpKind::kUnsqueeze,
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_unsqueeze,
    .cost = nullptr,
    .reference = reference_unsqueeze,
};

}  // namespace tessera
