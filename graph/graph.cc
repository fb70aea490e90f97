#include "graph/graph.h"

#include <algorithm>
#include <queue>
#include <string_view>
#include <unordered_map>

namespace tessera {

ValueId Graph::add_value(std::string name) {
  Value v;
  v.name = std::move(name);
  values_.push_back(std::move(v));
  return static_cast<ValueId>(values_.size() - 1);
}

ValueId Graph::add_value(std::string name, TensorInfo info) {
  ValueId id = add_value(std::move(name));
  value(id).info = std::move(info);
  value(id).has_info = true;
  return id;
}

ValueId Graph::add_constant(std::string name, Tensor data) {
  ValueId id = add_value(std::move(name), TensorInfo{data.dtype(), data.shape()});
  value(id).is_constant = true;
  value(id).data = std::move(data);
  return id;
}

NodeId Graph::add_node(Node node) {
  const NodeId id = static_cast<NodeId>(nodes_.size());
  for (ValueId o : node.outputs) {
    if (o >= 0 && o < num_values()) value(o).producer = id;
  }
  nodes_.push_back(std::move(node));
  return id;
}

Result<ValueId> Graph::find_value(const std::string& name) const {
  for (int i = 0; i < num_values(); ++i) {
    if (values_[static_cast<size_t>(i)].name == name) return static_cast<ValueId>(i);
  }
  return not_found("no tensor named " + quote_name(name) + " in the graph");
}

std::vector<std::vector<NodeId>> Graph::consumers() const {
  std::vector<std::vector<NodeId>> c(values_.size());
  for (int n = 0; n < num_nodes(); ++n) {
    for (ValueId v : nodes_[static_cast<size_t>(n)].inputs) {
      if (v != kNoValue) c[static_cast<size_t>(v)].push_back(n);
    }
  }
  return c;
}

bool Graph::is_graph_output(ValueId v) const {
  return std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
}

Status Graph::validate() const {
  const int nv = num_values();
  auto in_range = [nv](ValueId v) { return v >= 0 && v < nv; };
  std::vector<int> producer_count(values_.size(), 0);
  std::vector<bool> is_input(values_.size(), false);
  for (ValueId v : inputs_) {
    if (!in_range(v))
      return invalid_argument("graph input id " + std::to_string(v) + " out of range");
    if (values_[static_cast<size_t>(v)].is_constant) {
      return invalid_argument("graph input '" + values_[static_cast<size_t>(v)].name +
                              "' is a constant");
    }
    is_input[static_cast<size_t>(v)] = true;
  }
  for (const Node& n : nodes_) {
    for (ValueId v : n.outputs) {
      if (!in_range(v)) {
        return invalid_argument("node " + quote_name(n.name) + " output id " + std::to_string(v) +
                                " out of range");
      }
      const Value& val = values_[static_cast<size_t>(v)];
      if (val.is_constant || is_input[static_cast<size_t>(v)]) {
        return invalid_argument("node " + quote_name(n.name) + " writes " + quote_name(val.name) +
                                ", which is a constant or graph input");
      }
      if (++producer_count[static_cast<size_t>(v)] > 1) {
        return invalid_argument("tensor " + quote_name(val.name) +
                                " is produced by more than one node");
      }
    }
  }
  for (const Node& n : nodes_) {
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      if (!in_range(v)) {
        return invalid_argument("node " + quote_name(n.name) + " input id " + std::to_string(v) +
                                " out of range");
      }
      const Value& val = values_[static_cast<size_t>(v)];
      if (!val.is_constant && !is_input[static_cast<size_t>(v)] &&
          producer_count[static_cast<size_t>(v)] == 0) {
        return invalid_argument("node " + quote_name(n.name) + " reads " + quote_name(val.name) +
                                ", which no node produces and is not a graph input");
      }
    }
  }
  for (ValueId v : outputs_) {
    if (!in_range(v))
      return invalid_argument("graph output id " + std::to_string(v) + " out of range");
  }
  // Tensor names address inputs and outputs (Session, .npy files, plans): two distinct tensors the
  // graph uses may not share one. Values a pass left unreferenced do not count.
  std::vector<bool> used(values_.size(), false);
  for (ValueId v : inputs_) used[static_cast<size_t>(v)] = true;
  for (ValueId v : outputs_) used[static_cast<size_t>(v)] = true;
  for (const Node& n : nodes_) {
    for (ValueId v : n.inputs)
      if (v != kNoValue) used[static_cast<size_t>(v)] = true;
    for (ValueId v : n.outputs) used[static_cast<size_t>(v)] = true;
  }
  std::unordered_map<std::string_view, ValueId> by_name;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (!used[i] || values_[i].name.empty()) continue;
    auto [it, inserted] = by_name.emplace(values_[i].name, static_cast<ValueId>(i));
    if (!inserted) {
      return invalid_argument("tensor name " + quote_name(values_[i].name) +
                              " names two different tensors");
    }
  }
  // Cycle check via a topological sort on a copy of the adjacency.
  Graph copy_of_structure;
  copy_of_structure.values_.resize(values_.size());
  copy_of_structure.nodes_.reserve(nodes_.size());
  for (const Node& n : nodes_) {
    Node s;
    s.name = n.name;
    s.inputs = n.inputs;
    s.outputs = n.outputs;
    copy_of_structure.nodes_.push_back(std::move(s));
  }
  return copy_of_structure.sort_topologically();
}

Status Graph::sort_topologically() {
  const size_t n = nodes_.size();
  std::vector<NodeId> producer(values_.size(), kNoNode);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId v : nodes_[i].outputs) producer[static_cast<size_t>(v)] = static_cast<NodeId>(i);
  }
  std::vector<int> pending(n, 0);
  std::vector<std::vector<NodeId>> users(n);
  for (size_t i = 0; i < n; ++i) {
    for (ValueId v : nodes_[i].inputs) {
      if (v == kNoValue) continue;
      const NodeId p = producer[static_cast<size_t>(v)];
      if (p != kNoNode) {
        ++pending[i];
        users[static_cast<size_t>(p)].push_back(static_cast<NodeId>(i));
      }
    }
  }
  // Kahn's algorithm with a min-heap on the original index keeps the order stable.
  std::priority_queue<NodeId, std::vector<NodeId>, std::greater<NodeId>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(static_cast<NodeId>(i));
  }
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    const NodeId i = ready.top();
    ready.pop();
    order.push_back(i);
    for (NodeId u : users[static_cast<size_t>(i)]) {
      if (--pending[static_cast<size_t>(u)] == 0) ready.push(u);
    }
  }
  if (order.size() != n) {
    for (size_t i = 0; i < n; ++i) {
      if (pending[i] > 0) {
        return invalid_argument("the graph has a cycle through node " + quote_name(nodes_[i].name));
      }
    }
  }
  std::vector<Node> sorted;
  sorted.reserve(n);
  for (NodeId i : order) sorted.push_back(std::move(nodes_[static_cast<size_t>(i)]));
  nodes_ = std::move(sorted);
  for (Value& v : values_) v.producer = kNoNode;
  for (size_t i = 0; i < n; ++i) {
    for (ValueId v : nodes_[i].outputs)
      values_[static_cast<size_t>(v)].producer = static_cast<NodeId>(i);
  }
  return Status();
}

Status Graph::infer_shapes() {
  for (ValueId v : inputs_) {
    if (!value(v).has_info) {
      return invalid_argument("graph input " + quote_name(value(v).name) +
                              " has no type and shape");
    }
  }
  std::vector<TensorInfo> outs;
  for (const Node& n : nodes_) {
    for (ValueId v : n.inputs) {
      if (v != kNoValue && !value(v).has_info) {
        return invalid_argument("node " + quote_name(n.name) + " reads " +
                                quote_name(value(v).name) + " before it is defined");
      }
    }
    NodeContext nc(*this, n);
    RETURN_IF_ERROR(infer_node(nc.ctx(), static_cast<int>(n.outputs.size()), &outs));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value& out = value(n.outputs[i]);
      out.info = outs[i];
      out.has_info = true;
    }
  }
  for (ValueId v : outputs_) {
    if (!value(v).has_info) {
      return invalid_argument("graph output " + quote_name(value(v).name) + " is never computed");
    }
  }
  return Status();
}

void Graph::remove_nodes(const std::vector<bool>& remove) {
  std::vector<Node> kept;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (i >= remove.size() || !remove[i]) kept.push_back(std::move(nodes_[i]));
  }
  nodes_ = std::move(kept);
  // Renumber values still referenced.
  std::vector<bool> used(values_.size(), false);
  for (ValueId v : inputs_) used[static_cast<size_t>(v)] = true;
  for (ValueId v : outputs_) used[static_cast<size_t>(v)] = true;
  for (const Node& n : nodes_) {
    for (ValueId v : n.inputs) {
      if (v != kNoValue) used[static_cast<size_t>(v)] = true;
    }
    for (ValueId v : n.outputs) used[static_cast<size_t>(v)] = true;
  }
  std::vector<ValueId> remap(values_.size(), kNoValue);
  std::vector<Value> kept_values;
  for (size_t i = 0; i < values_.size(); ++i) {
    if (!used[i]) continue;
    remap[i] = static_cast<ValueId>(kept_values.size());
    kept_values.push_back(std::move(values_[i]));
  }
  values_ = std::move(kept_values);
  auto re = [&remap](ValueId v) {
    return v == kNoValue ? kNoValue : remap[static_cast<size_t>(v)];
  };
  for (ValueId& v : inputs_) v = re(v);
  for (ValueId& v : outputs_) v = re(v);
  for (Value& v : values_) v.producer = kNoNode;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    for (ValueId& v : nodes_[i].inputs) v = re(v);
    for (ValueId& v : nodes_[i].outputs) {
      v = re(v);
      values_[static_cast<size_t>(v)].producer = static_cast<NodeId>(i);
    }
  }
}

void Graph::replace_uses(ValueId from, ValueId to) {
  for (Node& n : nodes_) {
    for (ValueId& v : n.inputs) {
      if (v == from) v = to;
    }
  }
  for (ValueId& v : outputs_) {
    if (v == from) v = to;
  }
}

uint64_t Graph::parameter_count() const {
  uint64_t n = 0;
  for (const Value& v : values_) {
    if (v.is_constant) n += static_cast<uint64_t>(v.info.shape.numel());
  }
  return n;
}

uint64_t Graph::parameter_bytes() const {
  uint64_t n = 0;
  for (const Value& v : values_) {
    if (v.is_constant) n += v.info.byte_size();
  }
  return n;
}

NodeContext::NodeContext(const Graph& g, const Node& n)
    : infos_(n.inputs.size()),
      constants_(n.inputs.size(), nullptr),
      present_(new bool[n.inputs.size() + 1]),
      ctx_(n.name, n.kind, n.attrs, infos_, constants_,
           std::span<const bool>(present_.get(), n.inputs.size())) {
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    present_[i] = v != kNoValue;
    if (v == kNoValue) continue;
    const Value& val = g.value(v);
    infos_[i] = val.info;
    if (val.is_constant) constants_[i] = &val.data;
  }
}

NodeContext::NodeContext(const Node& n, std::span<const Tensor> inputs)
    : infos_(inputs.size()),
      constants_(inputs.size(), nullptr),
      present_(new bool[inputs.size() + 1]),
      ctx_(n.name, n.kind, n.attrs, infos_, constants_,
           std::span<const bool>(present_.get(), inputs.size())) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    present_[i] = i < n.inputs.size() && n.inputs[i] != kNoValue;
    if (!present_[i]) continue;
    infos_[i] = TensorInfo{inputs[i].dtype(), inputs[i].shape()};
    constants_[i] = &inputs[i];
  }
}

}  // namespace tessera
