// Shared implementation of the element-wise activation ops (Relu, LeakyRelu, Clip, Sigmoid,
// HardSigmoid, HardSwish, Tanh). Each op file defines its schema from these; the math lives in
// ops/activation.cc so that fused and standalone activations are the same code.
#pragma once

#include "ops/op.h"

namespace tessera {

Status infer_unary_activation(const OpContext& ctx, int num_outputs,
                              std::vector<TensorInfo>* outputs);
OpCost cost_unary_activation(const OpContext& ctx, std::span<const TensorInfo> outputs);
Status reference_unary_activation(const OpContext& ctx, std::span<const Tensor> inputs,
                                  std::span<Tensor> outputs);

}  // namespace tessera
