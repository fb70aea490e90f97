#include "backends/npu/npu_graph.h"

#include <type_traits>

namespace tessera {

bool hal_dtype(DType t, tnpu_dtype* out) {
  switch (t) {
    case DType::kF32:
      return *out = TNPU_DTYPE_F32, true;
    case DType::kF16:
      return *out = TNPU_DTYPE_F16, true;
    case DType::kI8:
      return *out = TNPU_DTYPE_I8, true;
    case DType::kU8:
      return *out = TNPU_DTYPE_U8, true;
    case DType::kI32:
      return *out = TNPU_DTYPE_I32, true;
    case DType::kI64:
      return *out = TNPU_DTYPE_I64, true;
    case DType::kBool:
      return false;
  }
  return false;
}

int HalSubgraph::index_of(ValueId v) const {
  if (v < 0 || static_cast<size_t>(v) >= index_.size()) return -1;
  return index_[static_cast<size_t>(v)];
}

Result<std::unique_ptr<HalSubgraph>> HalSubgraph::build(const Graph& g,
                                                        std::span<const NodeId> layers,
                                                        std::span<const ValueId> inputs,
                                                        std::span<const ValueId> outputs) {
  std::unique_ptr<HalSubgraph> s(new HalSubgraph());
  s->index_.assign(static_cast<size_t>(g.num_values()), -1);

  // Phase 1: tensors, in first-use order.
  auto add_value = [&](ValueId v) -> Status {
    if (s->index_[static_cast<size_t>(v)] >= 0) return Status();
    const Value& val = g.value(v);
    if (!val.has_info && !val.is_constant) {
      return failed_precondition("value " + quote_name(val.name) + " has no inferred shape");
    }
    const TensorInfo& info =
        val.is_constant ? TensorInfo{val.data.dtype(), val.data.shape()} : val.info;
    tnpu_tensor_desc d{};
    s->strings_.push_back(val.name);
    d.name = s->strings_.back().c_str();
    if (!hal_dtype(info.dtype, &d.dtype)) {
      return unimplemented("value " + quote_name(val.name) + ": dtype " + dtype_name(info.dtype) +
                           " has no HAL equivalent");
    }
    if (info.shape.rank() > TNPU_MAX_RANK) {
      return unimplemented("value " + quote_name(val.name) + ": rank above " +
                           std::to_string(TNPU_MAX_RANK));
    }
    d.rank = static_cast<uint32_t>(info.shape.rank());
    for (int k = 0; k < info.shape.rank(); ++k) d.dims[k] = info.shape[k];
    if (val.is_constant) {
      d.data = val.data.raw();
      d.data_bytes = val.data.byte_size();
    }
    s->index_[static_cast<size_t>(v)] = static_cast<int>(s->tensors_.size());
    s->values_.push_back(v);
    s->tensors_.push_back(d);
    return Status();
  };
  for (ValueId v : inputs) RETURN_IF_ERROR(add_value(v));
  for (NodeId n : layers) {
    const Node& node = g.node(n);
    for (ValueId v : node.inputs) {
      if (v != kNoValue) RETURN_IF_ERROR(add_value(v));
    }
    for (ValueId v : node.outputs) RETURN_IF_ERROR(add_value(v));
  }

  // Phase 2: nodes and attributes (lists copied: ints/floats live in deques).
  for (NodeId n : layers) {
    const Node& node = g.node(n);
    std::vector<uint32_t> ins, outs;
    for (ValueId v : node.inputs) {
      ins.push_back(v == kNoValue ? TNPU_NO_TENSOR
                                  : static_cast<uint32_t>(s->index_[static_cast<size_t>(v)]));
    }
    for (ValueId v : node.outputs)
      outs.push_back(static_cast<uint32_t>(s->index_[static_cast<size_t>(v)]));
    std::vector<tnpu_attribute> attrs;
    for (const auto& [name, value] : node.attrs.all()) {
      tnpu_attribute a{};
      s->strings_.push_back(name);
      a.name = s->strings_.back().c_str();
      bool known = true;
      std::visit(
          [&](const auto& x) {
            using X = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<X, int64_t>) {
              a.type = TNPU_ATTR_INT, a.i = x;
            } else if constexpr (std::is_same_v<X, float>) {
              a.type = TNPU_ATTR_FLOAT, a.f = x;
            } else if constexpr (std::is_same_v<X, std::string>) {
              s->strings_.push_back(x);
              a.type = TNPU_ATTR_STRING, a.s = s->strings_.back().c_str();
            } else if constexpr (std::is_same_v<X, std::vector<int64_t>>) {
              s->ints_.push_back(x);
              a.type = TNPU_ATTR_INTS, a.ints = s->ints_.back().data();
              a.count = static_cast<uint32_t>(x.size());
            } else if constexpr (std::is_same_v<X, std::vector<float>>) {
              s->floats_.push_back(x);
              a.type = TNPU_ATTR_FLOATS, a.floats = s->floats_.back().data();
              a.count = static_cast<uint32_t>(x.size());
            } else {
              known = false;  // tensor-valued attributes are not part of the HAL
            }
          },
          value);
      if (known) attrs.push_back(a);
    }
    s->node_inputs_.push_back(std::move(ins));
    s->node_outputs_.push_back(std::move(outs));
    s->node_attrs_.push_back(std::move(attrs));
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    const Node& node = g.node(layers[i]);
    tnpu_node hn{};
    s->strings_.push_back(node.name);
    hn.name = s->strings_.back().c_str();
    hn.op_type = op_name(node.kind);
    hn.inputs = s->node_inputs_[i].data();
    hn.num_inputs = static_cast<uint32_t>(s->node_inputs_[i].size());
    hn.outputs = s->node_outputs_[i].data();
    hn.num_outputs = static_cast<uint32_t>(s->node_outputs_[i].size());
    hn.attrs = s->node_attrs_[i].data();
    hn.num_attrs = static_cast<uint32_t>(s->node_attrs_[i].size());
    s->nodes_.push_back(hn);
  }
  for (ValueId v : inputs) s->inputs_.push_back(static_cast<uint32_t>(s->index_of(v)));
  for (ValueId v : outputs) s->outputs_.push_back(static_cast<uint32_t>(s->index_of(v)));

  tnpu_graph& hg = s->graph_;
  hg.struct_size = sizeof(tnpu_graph);
  hg.tensors = s->tensors_.data();
  hg.num_tensors = static_cast<uint32_t>(s->tensors_.size());
  hg.nodes = s->nodes_.data();
  hg.num_nodes = static_cast<uint32_t>(s->nodes_.size());
  hg.inputs = s->inputs_.data();
  hg.num_inputs = static_cast<uint32_t>(s->inputs_.size());
  hg.outputs = s->outputs_.data();
  hg.num_outputs = static_cast<uint32_t>(s->outputs_.size());
  return s;
}

}  // namespace tessera
