// Identity: the output is the input. Any dtype; the kernel copies bytes.
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_identity(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  outputs->push_back(ctx.input(0));
  return Status();
}

Status reference_identity(const OpContext&, std::span<const Tensor> inputs,
                          std::span<Tensor> outputs) {
  copy_tensor_bytes(inputs[0], &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kIdentitySchema = {
    .kind = OpKind::kIdentity,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_identity,
    .cost = nullptr,
    .reference = reference_identity,
};

}  // namespace tessera
