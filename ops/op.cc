#include "ops/op.h"

#include <iterator>
#include <string>

#include "ops/activation.h"
#include "ops/registry.h"

namespace tessera {

const char* op_name(OpKind kind) {
  static constexpr const char* kNames[] = {
#define TESSERA_OP(name) #name,
#include "ops/op_list.inc"
  };
  static_assert(static_cast<int>(std::size(kNames)) == kNumOpKinds);
  const auto i = static_cast<size_t>(kind);
  return i < std::size(kNames) ? kNames[i] : "?";
}

std::optional<OpKind> op_from_name(std::string_view name) {
  for (int i = 0; i < kNumOpKinds; ++i) {
    if (name == op_name(static_cast<OpKind>(i))) return static_cast<OpKind>(i);
  }
  return std::nullopt;
}

Status OpContext::error(const std::string& msg) const {
  return invalid_argument("node " + quote_name(std::string(node_name_)) + " (" + op_name(kind_) +
                          "): " + msg);
}

Status OpContext::unsupported(const std::string& msg) const {
  return unimplemented("node " + quote_name(std::string(node_name_)) + " (" + op_name(kind_) +
                       "): " + msg);
}

Status OpContext::wrap(const Status& s) const {
  if (s.ok()) return s;
  return s.with_context("node " + quote_name(std::string(node_name_)) + " (" + op_name(kind_) +
                        ")");
}

OpCost default_cost(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (ctx.constant(i) != nullptr) {
      c.weight_bytes += ctx.input(i).byte_size();
    } else {
      c.input_bytes += ctx.input(i).byte_size();
    }
  }
  for (const TensorInfo& o : outputs) c.output_bytes += o.byte_size();
  return c;
}

Status require_f32(const OpContext& ctx, int i) {
  if (ctx.input(i).dtype != DType::kF32) {
    return ctx.unsupported("input " + std::to_string(i) + " has dtype " +
                           dtype_name(ctx.input(i).dtype) + ", only f32 is supported");
  }
  return Status();
}

Status infer_node(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  const OpSchema& s = op_schema(ctx.kind());
  if (ctx.num_inputs() < s.min_inputs || ctx.num_inputs() > s.max_inputs) {
    return ctx.error("has " + std::to_string(ctx.num_inputs()) + " inputs, expected " +
                     std::to_string(s.min_inputs) + ".." + std::to_string(s.max_inputs));
  }
  for (int i = 0; i < s.min_inputs; ++i) {
    if (!ctx.has_input(i)) return ctx.error("required input " + std::to_string(i) + " is missing");
  }
  if (num_outputs < s.min_outputs || num_outputs > s.max_outputs) {
    return ctx.error("has " + std::to_string(num_outputs) + " outputs, expected " +
                     std::to_string(s.min_outputs) + ".." + std::to_string(s.max_outputs));
  }
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) RETURN_IF_ERROR(ctx.wrap(ctx.input(i).shape.validate()));
  }
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(ctx.attrs()));
  if (act.kind != ActivationKind::kNone && !s.accepts_fused_activation) {
    return ctx.error("does not accept a fused activation");
  }
  outputs->clear();
  RETURN_IF_ERROR(s.infer(ctx, num_outputs, outputs));
  if (static_cast<int>(outputs->size()) != num_outputs) {
    return internal_error("shape inference of " + std::string(op_name(ctx.kind())) +
                          " produced the wrong number of outputs");
  }
  for (const TensorInfo& o : *outputs) RETURN_IF_ERROR(ctx.wrap(o.shape.validate()));
  return Status();
}

OpCost node_cost(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  const OpSchema& s = op_schema(ctx.kind());
  if (s.cost != nullptr) return s.cost(ctx, outputs);
  return default_cost(ctx, outputs);
}

Status run_reference(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs) {
  const OpSchema& s = op_schema(ctx.kind());
  RETURN_IF_ERROR(s.reference(ctx, inputs, outputs));
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(ctx.attrs()));
  if (act.kind != ActivationKind::kNone) {
    for (Tensor& o : outputs) {
      if (o.dtype() == DType::kF32) apply_activation(act, o.data<float>(), o.numel());
    }
  }
  return Status();
}

}  // namespace tessera
