// Squeeze: removes dimensions of size 1. The axes come from the `axes` attribute (opset 11) or
// the constant `axes` input (opset 13), may be negative, and must name dimensions of size 1;
// without axes (or with an empty list, as ONNX Runtime) every size-1 dimension goes. Any dtype; the
// kernel copies bytes.
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_squeeze(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& in = ctx.input(0);
  const int rank = in.shape.rank();
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, axes_from_attribute_or_input(ctx, 1));
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  if (axes && !axes->empty()) {
    ASSIGN_OR_RETURN(std::vector<int> norm, normalize_axes(ctx, *axes, rank));
    for (int a : norm) {
      if (in.shape[a] != 1) {
        return ctx.error("cannot squeeze axis " + std::to_string(a) + " of shape " +
                         in.shape.to_string() + ": its size is " + std::to_string(in.shape[a]) +
                         ", not 1");
      }
      drop[static_cast<size_t>(a)] = true;
    }
  } else {
    for (int d = 0; d < rank; ++d) drop[static_cast<size_t>(d)] = in.shape[d] == 1;
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < rank; ++d) {
    if (!drop[static_cast<size_t>(d)]) dims.push_back(in.shape[d]);
  }
  outputs->push_back(TensorInfo{in.dtype, Shape(std::move(dims))});
  return Status();
}

Status reference_squeeze(const OpContext&, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  copy_tensor_bytes(inputs[0], &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kSqueezeSchema = {
    .kind = OpKind::kSqueeze,
    .min_inputs = 1,
    .max_inputs = 2,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_squeeze,
    .cost = nullptr,
    .reference = reference_squeeze,
};

}  // namespace tessera
