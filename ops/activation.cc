#include "ops/activation.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {

const char* activation_name(ActivationKind k) {
  switch (k) {
    case ActivationKind::kNone:
      return "none";
    case ActivationKind::kRelu:
      return "relu";
    case ActivationKind::kLeakyRelu:
      return "leaky_relu";
    case ActivationKind::kClip:
      return "clip";
    case ActivationKind::kSigmoid:
      return "sigmoid";
    case ActivationKind::kHardSigmoid:
      return "hard_sigmoid";
    case ActivationKind::kHardSwish:
      return "hard_swish";
    case ActivationKind::kTanh:
      return "tanh";
  }
  return "?";
}

Result<Activation> parse_fused_activation(const Attributes& attrs) {
  Activation a;
  if (!attrs.has("activation")) return a;
  ASSIGN_OR_RETURN(std::string name, attrs.get_string("activation"));
  bool found = false;
  for (int k = 1; k <= static_cast<int>(ActivationKind::kTanh); ++k) {
    if (name == activation_name(static_cast<ActivationKind>(k))) {
      a.kind = static_cast<ActivationKind>(k);
      found = true;
    }
  }
  if (!found) return invalid_argument("unknown fused activation " + quote_name(name));
  ASSIGN_OR_RETURN(a.alpha, attrs.float_or("activation_alpha", 0.f));
  ASSIGN_OR_RETURN(a.beta, attrs.float_or("activation_beta", 0.f));
  return a;
}

void set_fused_activation(Attributes* attrs, const Activation& a) {
  if (a.kind == ActivationKind::kNone) {
    attrs->erase("activation");
    attrs->erase("activation_alpha");
    attrs->erase("activation_beta");
    return;
  }
  attrs->set("activation", std::string(activation_name(a.kind)));
  attrs->set("activation_alpha", a.alpha);
  attrs->set("activation_beta", a.beta);
}

namespace {

Result<float> clip_bound(const OpContext& ctx, int input, const char* attr, float def) {
  if (ctx.has_input(input)) {  // opset >= 11: min/max are optional scalar inputs
    const Tensor* t = ctx.constant(input);
    if (t == nullptr) return ctx.unsupported(std::string(attr) + " must be a constant");
    if (t->numel() != 1) return ctx.error(std::string(attr) + " must be a scalar");
    return t->float_at(0);
  }
  return ctx.attrs().float_or(attr, def);  // opset 6 attributes
}

}  // namespace

Result<std::optional<Activation>> activation_of_node(const OpContext& ctx) {
  Activation a;
  const OpKind k = ctx.kind();
  if (k == OpKind::kRelu) {
    a.kind = ActivationKind::kRelu;
  } else if (k == OpKind::kLeakyRelu) {
    a.kind = ActivationKind::kLeakyRelu;
    ASSIGN_OR_RETURN(a.alpha, ctx.attrs().float_or("alpha", 0.01f));
  } else if (k == OpKind::kClip) {
    a.kind = ActivationKind::kClip;
    ASSIGN_OR_RETURN(a.alpha, clip_bound(ctx, 1, "min", -std::numeric_limits<float>::infinity()));
    ASSIGN_OR_RETURN(a.beta, clip_bound(ctx, 2, "max", std::numeric_limits<float>::infinity()));
  } else if (k == OpKind::kSigmoid) {
    a.kind = ActivationKind::kSigmoid;
  } else if (k == OpKind::kHardSigmoid) {
    a.kind = ActivationKind::kHardSigmoid;
    ASSIGN_OR_RETURN(a.alpha, ctx.attrs().float_or("alpha", 0.2f));
    ASSIGN_OR_RETURN(a.beta, ctx.attrs().float_or("beta", 0.5f));
  } else if (k == OpKind::kHardSwish) {
    a.kind = ActivationKind::kHardSwish;
  } else if (k == OpKind::kTanh) {
    a.kind = ActivationKind::kTanh;
  } else {
    return std::optional<Activation>();
  }
  return std::optional<Activation>(a);
}

float activate(const Activation& a, float x) {
  switch (a.kind) {
    case ActivationKind::kNone:
      return x;
    case ActivationKind::kRelu:
      return x < 0.f ? 0.f : x;  // NaN propagates
    case ActivationKind::kLeakyRelu:
      return x >= 0.f ? x : a.alpha * x;
    case ActivationKind::kClip:
      return std::min(std::max(x, a.alpha), a.beta);
    case ActivationKind::kSigmoid:
      return 1.f / (1.f + std::exp(-x));
    case ActivationKind::kHardSigmoid:
      return std::max(0.f, std::min(1.f, a.alpha * x + a.beta));
    case ActivationKind::kHardSwish:
      return x * std::max(0.f, std::min(1.f, x / 6.f + 0.5f));
    case ActivationKind::kTanh:
      return std::tanh(x);
  }
  return x;
}

void apply_activation(const Activation& a, float* data, int64_t n) {
  switch (a.kind) {
    case ActivationKind::kNone:
      return;
    case ActivationKind::kRelu:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] < 0.f ? 0.f : data[i];
      return;
    case ActivationKind::kClip:
      for (int64_t i = 0; i < n; ++i) data[i] = std::min(std::max(data[i], a.alpha), a.beta);
      return;
    // The formulas of activate(), written out per kind so that the loops vectorise (a call
    // per element ran MobileNetV3's hard-sigmoids at a few ns per value).
    case ActivationKind::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i) data[i] = data[i] >= 0.f ? data[i] : a.alpha * data[i];
      return;
    case ActivationKind::kHardSigmoid:
      for (int64_t i = 0; i < n; ++i)
        data[i] = std::max(0.f, std::min(1.f, a.alpha * data[i] + a.beta));
      return;
    case ActivationKind::kHardSwish:
      for (int64_t i = 0; i < n; ++i)
        data[i] = data[i] * std::max(0.f, std::min(1.f, data[i] / 6.f + 0.5f));
      return;
    default:
      for (int64_t i = 0; i < n; ++i) data[i] = activate(a, data[i]);
  }
}

}  // namespace tessera
