// Fused activations.
//
// The activation-fusion pass folds an activation node into the layer before it (Conv, Gemm,
// Add...) by setting these attributes on the layer:
//   "activation"        string: relu | leaky_relu | clip | sigmoid | hard_sigmoid | hard_swish |
//                       tanh
//   "activation_alpha"  float: LeakyRelu alpha, Clip min, HardSigmoid alpha
//   "activation_beta"   float: Clip max, HardSigmoid beta
// Backends read them through parse_fused_activation; the reference applies them after the op.
#pragma once

#include <cstdint>
#include <optional>

#include "core/status.h"
#include "ops/attributes.h"
#include "ops/op.h"

namespace tessera {

enum class ActivationKind : uint8_t {
  kNone,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
};

struct Activation {
  ActivationKind kind = ActivationKind::kNone;
  float alpha = 0;
  float beta = 0;
};

// The activation op kinds that can be fused, and how to describe one as an Activation.
// Returns nullopt for op kinds that are not activations. Clip needs its min/max as constants.
Result<std::optional<Activation>> activation_of_node(const OpContext& ctx);

const char* activation_name(ActivationKind k);

// Reads the fused activation attributes (kNone when absent).
Result<Activation> parse_fused_activation(const Attributes& attrs);
// Writes them (removes them for kNone).
void set_fused_activation(Attributes* attrs, const Activation& a);

// Applies `a` in place to n floats.
void apply_activation(const Activation& a, float* data, int64_t n);
// One value.
float activate(const Activation& a, float x);

}  // namespace tessera
