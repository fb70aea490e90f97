#include "graph/split.h"

#include <string>

namespace tessera {

namespace {

std::string with_prefix_of(const Node& n) {
  return "node " + quote_name(n.name) + " (" + op_name(n.kind) + "): ";
}

}  // namespace

Result<SplitLayer> split_layer(const Graph& g, NodeId node, SplitMethod method,
                               std::span<const double> ratios) {
  if (node < 0 || node >= g.num_nodes()) {
    return invalid_argument("split of node " + std::to_string(node) + ": no such node");
  }
  const Node& n = g.node(node);
  if (n.outputs.size() != 1) {
    return unimplemented(with_prefix_of(n) + "only single-output nodes can be split");
  }
  NodeContext nc(g, n);
  SplitLayer sl;
  sl.node = node;
  sl.output = n.outputs[0];
  ASSIGN_OR_RETURN(sl.rule, split_node(nc.ctx(), method, ratios));
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const ValueId v = n.inputs[i];
    if (v == kNoValue || g.value(v).is_constant) continue;
    sl.input_slots.push_back(static_cast<int>(i));
    sl.inputs.push_back(v);
  }

  // One graph per piece: its inputs (sliced activations), its constants (sliced weights), the
  // piece node and its output.
  for (size_t p = 0; p < sl.rule.pieces.size(); ++p) {
    const SplitPiece& piece = sl.rule.pieces[p];
    SplitLayer::Piece out;
    Graph& pg = out.graph;
    Node pn;
    pn.name = n.name + "/piece" + std::to_string(p);
    pn.kind = n.kind;
    pn.attrs = piece.attrs;
    pn.inputs.assign(n.inputs.size(), kNoValue);
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId v = n.inputs[i];
      if (v == kNoValue || !piece.present[i]) continue;
      const Value& val = g.value(v);
      if (val.is_constant) {
        ASSIGN_OR_RETURN(Tensor slice, slice_region(val.data, piece.inputs[i]));
        pn.inputs[i] = pg.add_constant(val.name, std::move(slice));
      } else {
        const ValueId in = pg.add_value(val.name + "/piece" + std::to_string(p),
                                        TensorInfo{val.info.dtype, piece.inputs[i].shape()});
        pg.inputs().push_back(in);
        pn.inputs[i] = in;
      }
    }
    const ValueId y = pg.add_value(g.value(sl.output).name + "/piece" + std::to_string(p));
    pn.outputs = {y};
    out.node = pg.add_node(std::move(pn));
    pg.outputs().push_back(y);
    Status s = pg.infer_shapes();
    if (!s.ok())
      return s.with_context("piece " + std::to_string(p) + " of a " + split_method_name(method) +
                            " split");
    if (pg.value(y).info.shape != piece.output.shape()) {
      return internal_error(with_prefix_of(n) + "piece " + std::to_string(p) + " computes " +
                            pg.value(y).info.shape.to_string() + " but its region is " +
                            piece.output.shape().to_string());
    }
    sl.pieces.push_back(std::move(out));
  }
  return sl;
}

}  // namespace tessera
