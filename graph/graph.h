// The graph IR: Values (tensors) produced and consumed by Nodes (ops).
//
// A Graph owns its values and nodes in two vectors addressed by ValueId/NodeId. Constants
// (weights, folded shape tensors) are Values carrying a Tensor. Graph inputs/outputs are lists of
// ValueIds. Node order is kept topological by the importer and every pass (`sort_topologically`
// restores it after edits). Shapes are static: `infer_shapes` fills every value's TensorInfo.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/attributes.h"
#include "ops/op.h"

namespace tessera {

using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;  // an omitted optional input
inline constexpr NodeId kNoNode = -1;

struct Value {
  std::string name;
  TensorInfo info;
  bool has_info = false;  // false until shape inference reaches it
  bool is_constant = false;
  Tensor data;  // the value when is_constant
  NodeId producer = kNoNode;
};

struct Node {
  std::string name;
  OpKind kind = OpKind::kIdentity;
  Attributes attrs;
  std::vector<ValueId> inputs;  // kNoValue for omitted optional inputs
  std::vector<ValueId> outputs;
};

class Graph {
 public:
  // Adds a value without a known type/shape (filled by shape inference).
  ValueId add_value(std::string name);
  ValueId add_value(std::string name, TensorInfo info);
  ValueId add_constant(std::string name, Tensor data);
  // Adds a node and records it as the producer of its outputs.
  NodeId add_node(Node node);

  std::vector<Value>& values() { return values_; }
  const std::vector<Value>& values() const { return values_; }
  std::vector<Node>& nodes() { return nodes_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  Value& value(ValueId id) { return values_[static_cast<size_t>(id)]; }
  const Value& value(ValueId id) const { return values_[static_cast<size_t>(id)]; }
  Node& node(NodeId id) { return nodes_[static_cast<size_t>(id)]; }
  const Node& node(NodeId id) const { return nodes_[static_cast<size_t>(id)]; }
  int num_values() const { return static_cast<int>(values_.size()); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }

  std::vector<ValueId>& inputs() { return inputs_; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  std::vector<ValueId>& outputs() { return outputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }

  // The value named `name`, or NotFound.
  Result<ValueId> find_value(const std::string& name) const;
  // For every value, the nodes reading it (a node reading a value twice appears twice).
  std::vector<std::vector<NodeId>> consumers() const;
  bool is_graph_output(ValueId v) const;

  // Structural checks: ids in range, each value produced at most once, constants not produced,
  // graph inputs not produced, every non-constant node input produced or a graph input, no
  // cycles. Messages name the node or value.
  Status validate() const;
  // Reorders nodes topologically (stable: keeps the current order where it is valid) and
  // refreshes producers. Fails on a cycle.
  Status sort_topologically();
  // Infers the TensorInfo of every node output in order. Graph inputs and constants must
  // already have infos.
  Status infer_shapes();
  // Removes the nodes with `remove[id] == true` and every value no longer referenced, renumbering
  // ids. Graph inputs and outputs are kept.
  void remove_nodes(const std::vector<bool>& remove);
  // Replaces every use of `from` (node inputs, graph outputs) by `to`.
  void replace_uses(ValueId from, ValueId to);

  // Totals over constants.
  uint64_t parameter_count() const;
  uint64_t parameter_bytes() const;

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
};

// Owns what an OpContext points at, for one node of a graph.
class NodeContext {
 public:
  NodeContext(const Graph& g, const Node& n);
  // A context whose inputs are the given tensors (for running kernels).
  NodeContext(const Node& n, std::span<const Tensor> inputs);
  NodeContext(const NodeContext&) = delete;
  NodeContext& operator=(const NodeContext&) = delete;
  const OpContext& ctx() const { return ctx_; }

 private:
  std::vector<TensorInfo> infos_;
  std::vector<const Tensor*> constants_;
  std::unique_ptr<bool[]> present_;
  OpContext ctx_;
};

}  // namespace tessera
