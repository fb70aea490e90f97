// Dropout, for inference: the output is the input and the optional mask output (bool) is all
// true. The `ratio` input (opset 12+) or attribute is ignored. Training behaviour (random
// zeroing and 1/(1-ratio) scaling) is not implemented, so `training_mode` must be omitted or a
// constant false: a constant true, or a training_mode fed at run time (which could be true), is
// Unimplemented and names the node. Any dtype; the kernel copies bytes.
#include <cstring>

#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_dropout(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  if (const Tensor* training = ctx.constant(2)) {
    if (training->numel() != 1) return ctx.error("training_mode must be a scalar");
    if (training->float_at(0) != 0.f) {
      return ctx.unsupported("training_mode = true is not supported (inference only)");
    }
  } else if (ctx.has_input(2)) {
    // Taking a run-time training_mode to be false would silently return the input unchanged
    // when it is fed true.
    return ctx.unsupported(
        "training_mode is not a constant (fed at run time); only inference (training_mode "
        "omitted or a constant false) is supported");
  }
  outputs->push_back(ctx.input(0));
  if (num_outputs == 2) outputs->push_back(TensorInfo{DType::kBool, ctx.input(0).shape});
  return Status();
}

Status reference_dropout(const OpContext&, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  copy_tensor_bytes(inputs[0], &outputs[0]);
  if (outputs.size() == 2 && outputs[1].numel() > 0) {
    std::memset(outputs[1].raw(), 1, outputs[1].byte_size());
  }
  return Status();
}

}  // namespace

const OpSchema kDropoutSchema = {
    .kind = OpKind::kDropout,
    .min_inputs = 1,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 2,
    .accepts_fused_activation = false,
    .infer = infer_dropout,
    .cost = nullptr,
    .reference = reference_dropout,
};

}  // namespace tessera
