#include "graph/qdq.h"

#include <cmath>
#include <unordered_map>
#include <unordered_set>

namespace tessera {

namespace {

// A constant one-element f32 scale (finite, > 0).
std::optional<float> scalar_scale(const Graph& g, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const Value& val = g.value(v);
  if (!val.is_constant || val.data.dtype() != DType::kF32 || val.data.numel() != 1)
    return std::nullopt;
  const float s = val.data.data<float>()[0];
  if (!(s > 0) || !std::isfinite(s)) return std::nullopt;
  return s;
}

// A constant one-element u8 / i8 zero point; an absent one is u8 0 (ONNX's default).
std::optional<std::pair<int32_t, bool>> scalar_zero_point(const Graph& g, const Node& n) {
  if (n.inputs.size() < 3 || n.inputs[2] == kNoValue) return std::make_pair(0, true);
  const Value& val = g.value(n.inputs[2]);
  if (!val.is_constant || val.data.numel() != 1) return std::nullopt;
  if (val.data.dtype() == DType::kU8)
    return std::make_pair(static_cast<int32_t>(val.data.data<uint8_t>()[0]), true);
  if (val.data.dtype() == DType::kI8)
    return std::make_pair(static_cast<int32_t>(val.data.data<int8_t>()[0]), false);
  return std::nullopt;
}

// The per-tensor quantisation of a QuantizeLinear or DequantizeLinear node.
std::optional<QdqQuantisation> node_quantisation(const Graph& g, const Node& n) {
  if (n.inputs.size() < 2) return std::nullopt;
  const std::optional<float> s = scalar_scale(g, n.inputs[1]);
  const auto zp = scalar_zero_point(g, n);
  if (!s || !zp) return std::nullopt;
  return QdqQuantisation{*s, zp->first, zp->second};
}

bool same(const QdqQuantisation& a, const QdqQuantisation& b) {
  return a.scale == b.scale && a.zero_point == b.zero_point && a.is_unsigned == b.is_unsigned;
}

// The pairs of `layers` that fold (see fold_qdq_pairs): each QuantizeLinear input's
// quantisation, the DequantizeLinear outputs to redirect to it, and the folded nodes.
struct FoundPairs {
  std::vector<std::pair<ValueId, QdqQuantisation>> quant;
  std::vector<std::pair<ValueId, ValueId>> redirect;  // DequantizeLinear output -> Q's input
  std::unordered_set<NodeId> folded;
  std::vector<std::vector<NodeId>> readers;
};

FoundPairs find_pairs(const Graph& g, std::span<const NodeId> layers) {
  FoundPairs f;
  const std::unordered_set<NodeId> in_slice(layers.begin(), layers.end());
  f.readers = g.consumers();
  const std::vector<std::vector<NodeId>>& readers = f.readers;
  std::unordered_set<ValueId> graph_outputs(g.outputs().begin(), g.outputs().end());
  // Whether every reader of v is a node of the slice (and v no graph output).
  auto read_inside = [&](ValueId v) {
    if (graph_outputs.count(v) != 0) return false;
    for (NodeId r : readers[static_cast<size_t>(v)]) {
      if (in_slice.count(r) == 0) return false;
    }
    return true;
  };
  std::vector<std::pair<ValueId, QdqQuantisation>>& quant = f.quant;
  std::vector<std::pair<ValueId, ValueId>>& redirect = f.redirect;
  std::unordered_set<NodeId>& folded = f.folded;
  std::unordered_map<ValueId, QdqQuantisation> first_quant;  // each folded x's quantisation
  for (NodeId id : layers) {
    const Node& q = g.node(id);
    if (q.kind != OpKind::kQuantizeLinear || q.inputs.empty() || q.outputs.size() != 1) continue;
    const ValueId x = q.inputs[0];
    if (x == kNoValue) continue;
    const Value& xv = g.value(x);
    if (xv.is_constant || !xv.has_info || xv.info.dtype != DType::kF32 || !read_inside(x)) continue;
    // x read back from a folded pair (a requantisation chain): its readers are redirected
    // already, so this pair keeps its nodes (they run in f32 on the folded value).
    if (xv.producer != kNoNode && folded.count(xv.producer) != 0) continue;
    const std::optional<QdqQuantisation> p = node_quantisation(g, q);
    if (!p) continue;
    const ValueId qv = q.outputs[0];
    if (!read_inside(qv) || readers[static_cast<size_t>(qv)].empty()) continue;
    bool ok = true;
    for (NodeId r : readers[static_cast<size_t>(qv)]) {
      const Node& dq = g.node(r);
      const std::optional<QdqQuantisation> d =
          dq.kind == OpKind::kDequantizeLinear ? node_quantisation(g, dq) : std::nullopt;
      ok = ok && d && same(*d, *p) && dq.inputs[0] == qv && dq.outputs.size() == 1 &&
           read_inside(dq.outputs[0]);
    }
    if (!ok) continue;
    // A value quantised twice: the later pair replaces the earlier one's parameters only if they
    // agree; otherwise it is not folded.
    const auto known = first_quant.find(x);
    if (known != first_quant.end() && !same(known->second, *p)) continue;
    first_quant.emplace(x, *p);
    quant.emplace_back(x, *p);
    folded.insert(id);
    for (NodeId r : readers[static_cast<size_t>(qv)]) {
      folded.insert(r);
      redirect.emplace_back(g.node(r).outputs[0], x);
    }
  }
  return f;
}

}  // namespace

std::optional<QdqFolding> fold_qdq_pairs(const Graph& g, std::span<const NodeId> layers) {
  FoundPairs found = find_pairs(g, layers);
  const std::vector<std::vector<NodeId>>& readers = found.readers;
  std::unordered_set<NodeId>& folded = found.folded;
  std::vector<std::pair<ValueId, ValueId>>& redirect = found.redirect;
  std::vector<std::pair<ValueId, QdqQuantisation>>& quant = found.quant;
  if (folded.empty()) return std::nullopt;

  QdqFolding f;
  f.graph = g;
  for (NodeId id : layers) {
    if (folded.count(id) == 0) f.layers.push_back(id);
  }
  for (const auto& [from, to] : redirect) {
    for (NodeId r : readers[static_cast<size_t>(from)]) {
      for (ValueId& in : f.graph.node(r).inputs) {
        if (in == from) in = to;
      }
    }
  }
  // The folded nodes read nothing any more: they are no value's consumers (a convolution whose
  // only other reader was a folded QuantizeLinear can take a residual Add).
  for (NodeId id : folded) f.graph.node(id).inputs.clear();
  f.quant = std::move(quant);
  for (NodeId id : layers)
    f.pairs += g.node(id).kind == OpKind::kQuantizeLinear && folded.count(id);
  return f;
}

std::vector<std::pair<ValueId, QdqQuantisation>> qdq_quantisation(const Graph& g) {
  std::vector<std::pair<ValueId, QdqQuantisation>> out;
  bool any = false;
  for (const Node& n : g.nodes()) any = any || n.kind == OpKind::kQuantizeLinear;
  if (!any) return out;
  std::vector<NodeId> all(static_cast<size_t>(g.num_nodes()));
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<NodeId>(i);
  FoundPairs found = find_pairs(g, all);
  out = found.quant;
  // A DequantizeLinear output holds values on its pair's grid: the same quantisation (each x's
  // pairs agree, find_pairs folds no other).
  std::unordered_map<ValueId, QdqQuantisation> of_x;
  for (const auto& [v, q] : found.quant) of_x.emplace(v, q);
  for (const auto& [dq_out, x] : found.redirect) {
    const auto it = of_x.find(x);
    if (it != of_x.end()) out.emplace_back(dq_out, it->second);
  }
  return out;
}

bool has_qdq_pairs(const Graph& g) {
  return !qdq_quantisation(g).empty();
}

}  // namespace tessera
