// The operator contract: what every op in ops/ provides.
//
// One file per operator (ops/conv.cc, ops/add.cc, ...) defines one OpSchema holding
//   - arity (inputs/outputs, with optional trailing inputs),
//   - `infer`: attribute validation and shape/dtype inference,
//   - `cost`: FLOP and byte counts for the cost models,
//   - `reference`: a portable reference kernel, always built, the oracle every backend is tested
//     against.
// Semantics are ONNX's (opsets 11-17); the graph is NCHW.
//
// Ops see a node through OpContext: its name (for messages), attributes, the type and shape of
// each input and, where an input is a constant, its value (shape subgraphs, Reshape targets,
// Slice starts...). Shapes in Tessera are static: an op whose output shape depends on an input
// value requires that input to be constant when the graph is built.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/shape.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/attributes.h"

namespace tessera {

// One value per line of ops/op_list.inc, in its order.
enum class OpKind : uint16_t {
#define TESSERA_OP(name) k##name,
#include "ops/op_list.inc"
  kCount,  // number of kinds; not an op
};

inline constexpr int kNumOpKinds = static_cast<int>(OpKind::kCount);

// The ONNX op_type, e.g. "Conv".
const char* op_name(OpKind kind);
std::optional<OpKind> op_from_name(std::string_view name);

// What shape inference knows about one tensor.
struct TensorInfo {
  DType dtype = DType::kF32;
  Shape shape;

  uint64_t byte_size() const { return static_cast<uint64_t>(shape.numel()) * dtype_size(dtype); }
  bool operator==(const TensorInfo& o) const { return dtype == o.dtype && shape == o.shape; }
};

// The view of one node an op works from.
class OpContext {
 public:
  // `inputs[i]` describes input i; `constants[i]` is its value or null. Omitted optional
  // inputs have `present[i] == false`.
  OpContext(std::string_view node_name, OpKind kind, const Attributes& attrs,
            std::span<const TensorInfo> inputs, std::span<const Tensor* const> constants,
            std::span<const bool> present)
      : node_name_(node_name),
        kind_(kind),
        attrs_(attrs),
        inputs_(inputs),
        constants_(constants),
        present_(present) {}

  std::string_view node_name() const { return node_name_; }
  OpKind kind() const { return kind_; }
  const Attributes& attrs() const { return attrs_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  // True if input i was given (not omitted and within range).
  bool has_input(int i) const { return i < num_inputs() && present_[static_cast<size_t>(i)]; }
  const TensorInfo& input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  // The value of input i if it is known (a constant, or any input inside a reference kernel).
  const Tensor* constant(int i) const {
    return has_input(i) ? constants_[static_cast<size_t>(i)] : nullptr;
  }

  // An InvalidArgument Status naming the node and op: "node 'conv1' (Conv): <msg>".
  Status error(const std::string& msg) const;
  Status unsupported(const std::string& msg) const;  // Unimplemented, same prefix
  // Prefixes an existing error (e.g. from an attribute getter) with the node and op.
  Status wrap(const Status& s) const;

 private:
  std::string_view node_name_;
  OpKind kind_;
  const Attributes& attrs_;
  std::span<const TensorInfo> inputs_;
  std::span<const Tensor* const> constants_;
  std::span<const bool> present_;
};

// FLOP and byte counts of one node. A multiply-add counts as 2 FLOPs.
struct OpCost {
  double flops = 0;
  uint64_t input_bytes = 0;   // activations read (non-constant inputs)
  uint64_t weight_bytes = 0;  // constant inputs (weights, biases)
  uint64_t output_bytes = 0;  // activations written
};

struct OpSchema {
  OpKind kind;
  int min_inputs;
  int max_inputs;
  int min_outputs;
  int max_outputs;
  // Whether the op honours a fused activation (see ops/activation.h) after its main computation.
  bool accepts_fused_activation;
  // Validates attributes and inputs and fills one TensorInfo per output (`num_outputs` of them,
  // as the node declares).
  Status (*infer)(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs);
  // Cost of the node given its inferred outputs. May be null: then the default (bytes only,
  // no FLOPs) applies.
  OpCost (*cost)(const OpContext& ctx, std::span<const TensorInfo> outputs);
  // Reference kernel. `inputs[i]` holds input i (undefined Tensor for omitted inputs); `outputs`
  // are allocated with the inferred shapes and dtypes. Computes in f32 for float data.
  Status (*reference)(const OpContext& ctx, std::span<const Tensor> inputs,
                      std::span<Tensor> outputs);
};

// The schema of `kind`; every OpKind has one (a test checks). An unregistered kind gets a schema
// whose functions return Unimplemented.
const OpSchema& op_schema(OpKind kind);
bool op_is_registered(OpKind kind);

// Checks arity, then runs schema.infer. The entry point graph/ uses.
Status infer_node(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs);
// Cost with the default filled in for ops without a cost function.
OpCost node_cost(const OpContext& ctx, std::span<const TensorInfo> outputs);
// Runs the reference kernel of ctx.kind(), then any fused activation.
Status run_reference(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs);

// Helpers shared by op files.
// Byte counts of all inputs split by constness, and of the outputs.
OpCost default_cost(const OpContext& ctx, std::span<const TensorInfo> outputs);
// Requires input i to be f32; names the input otherwise.
Status require_f32(const OpContext& ctx, int i);

}  // namespace tessera
