// Shared implementation of the element-wise math ops: Sqrt, Exp, Log, Erf, Abs, Neg, Reciprocal,
// Softplus, Mish and Gelu. Each op file defines its schema from these; the element function is
// here, inline, so that the cpu device's kernels compute exactly what the reference does.
//
// f32 for all of them; Abs and Neg also take i32 and i64 (Neg wraps: -INT_MIN is INT_MIN).
// NaN propagates through every function; infinities follow IEEE arithmetic (Log(0) = -inf,
// Sqrt(-1) = NaN, Reciprocal(0) = inf).
#pragma once

#include <cmath>

#include "ops/op.h"

namespace tessera {

// The function a node applies: its op, and for Gelu whether it is the tanh approximation.
struct UnaryMath {
  OpKind kind = OpKind::kAbs;
  bool gelu_tanh = false;
};

// Softplus(x) = ln(1 + e^x), without overflow for large x.
inline float softplus(float x) {
  return x > 0.f ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x));
}

inline float apply_unary_math(const UnaryMath& m, float x) {
  switch (m.kind) {
    case OpKind::kSqrt:
      return std::sqrt(x);
    case OpKind::kExp:
      return std::exp(x);
    case OpKind::kLog:
      return std::log(x);
    case OpKind::kErf:
      return std::erf(x);
    case OpKind::kAbs:
      return std::fabs(x);
    case OpKind::kNeg:
      return -x;
    case OpKind::kReciprocal:
      return 1.f / x;
    case OpKind::kSoftplus:
      return softplus(x);
    case OpKind::kMish:
      return x * std::tanh(softplus(x));
    case OpKind::kGelu:
      if (m.gelu_tanh) {
        // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        constexpr float kSqrt2OverPi = 0.7978845608028654f;
        return 0.5f * x * (1.f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
      }
      return 0.5f * x * (1.f + std::erf(x * 0.7071067811865476f));
    default:
      return x;
  }
}

// The function of the node in `ctx` (checks Gelu's `approximate`: "none" or "tanh").
Result<UnaryMath> unary_math_of_node(const OpContext& ctx);

Status infer_unary_math(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs);
OpCost cost_unary_math(const OpContext& ctx, std::span<const TensorInfo> outputs);
Status reference_unary_math(const OpContext& ctx, std::span<const Tensor> inputs,
                            std::span<Tensor> outputs);

// The schema fields every unary math op shares.
#define TESSERA_UNARY_MATH_SCHEMA(Name)  \
  const OpSchema k##Name##Schema = {     \
      .kind = OpKind::k##Name,           \
      .min_inputs = 1,                   \
      .max_inputs = 1,                   \
      .min_outputs = 1,                  \
      .max_outputs = 1,                  \
      .accepts_fused_activation = false, \
      .infer = infer_unary_math,         \
      .cost = cost_unary_math,           \
      .reference = reference_unary_math, \
  }

}  // namespace tessera
