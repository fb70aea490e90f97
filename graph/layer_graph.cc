#include "graph/layer_graph.h"

#include <algorithm>

namespace tessera {

Result<LayerGraph> LayerGraph::build(const Graph& g) {
  LayerGraph lg;
  lg.graph_ = &g;
  const int nl = g.num_nodes();
  const size_t nv = static_cast<size_t>(g.num_values());
  lg.produced_at_.assign(nv, -1);
  lg.last_use_.assign(nv, -1);
  lg.first_use_.assign(nv, -1);
  std::vector<bool> counted(nv, false);  // constants already in total_parameters_
  lg.layers_.reserve(static_cast<size_t>(nl));
  for (int i = 0; i < nl; ++i) {
    const Node& n = g.node(i);
    Layer l;
    l.node = i;
    l.name = n.name;
    l.kind = n.kind;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      const Value& val = g.value(v);
      if (!val.has_info)
        return invalid_argument("LayerGraph needs inferred shapes (" + quote_name(val.name) + ")");
      if (val.is_constant) {
        const uint64_t numel = static_cast<uint64_t>(val.info.shape.numel());
        l.parameter_count += numel;
        if (!counted[static_cast<size_t>(v)]) lg.total_parameters_ += numel;
        counted[static_cast<size_t>(v)] = true;
        continue;
      }
      if (std::find(l.inputs.begin(), l.inputs.end(), v) == l.inputs.end()) l.inputs.push_back(v);
      const int pa = lg.produced_at_[static_cast<size_t>(v)];
      if (pa >= i) {
        return invalid_argument("node " + quote_name(n.name) + " reads " + quote_name(val.name) +
                                " before it is produced: the graph is not in topological order");
      }
      lg.last_use_[static_cast<size_t>(v)] = i;
      if (lg.first_use_[static_cast<size_t>(v)] < 0) lg.first_use_[static_cast<size_t>(v)] = i;
    }
    for (ValueId v : n.outputs) {
      lg.produced_at_[static_cast<size_t>(v)] = i;
      l.outputs.push_back(v);
    }
    NodeContext nc(g, n);
    std::vector<TensorInfo> outs;
    for (ValueId v : n.outputs) outs.push_back(g.value(v).info);
    l.cost = node_cost(nc.ctx(), outs);
    lg.layers_.push_back(std::move(l));
  }
  for (ValueId v : g.outputs()) lg.last_use_[static_cast<size_t>(v)] = nl;

  // A value is live across cut k when produced_at < k <= last_use (graph inputs: produced at -1).
  lg.cuts_.assign(static_cast<size_t>(nl + 1), Cut{});
  for (size_t v = 0; v < nv; ++v) {
    const Value& val = g.value(static_cast<ValueId>(v));
    if (val.is_constant || lg.last_use_[v] < 0) continue;
    const int from = lg.produced_at_[v] + 1;
    const int to = lg.last_use_[v];
    for (int k = from; k <= to; ++k) {
      Cut& c = lg.cuts_[static_cast<size_t>(k)];
      c.live.push_back(static_cast<ValueId>(v));
      c.live_bytes += val.info.byte_size();
    }
  }
  return lg;
}

std::vector<ValueId> LayerGraph::slice_inputs(int first, int last) const {
  std::vector<ValueId> out;
  for (int i = first; i < last; ++i) {
    for (ValueId v : layers_[static_cast<size_t>(i)].inputs) {
      if (produced_at_[static_cast<size_t>(v)] < first &&
          std::find(out.begin(), out.end(), v) == out.end()) {
        out.push_back(v);
      }
    }
  }
  return out;
}

std::vector<ValueId> LayerGraph::slice_outputs(int first, int last) const {
  std::vector<ValueId> out;
  for (int i = first; i < last; ++i) {
    for (ValueId v : layers_[static_cast<size_t>(i)].outputs) {
      if (last_use_[static_cast<size_t>(v)] >= last) out.push_back(v);
    }
  }
  return out;
}

double LayerGraph::total_flops() const {
  double f = 0;
  for (const Layer& l : layers_) f += l.cost.flops;
  return f;
}

}  // namespace tessera
