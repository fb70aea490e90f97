#include "graph/passes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <optional>

#include "core/budget.h"
#include "ops/activation.h"
#include "ops/conv_pool_util.h"

namespace tessera {

std::string PassStats::to_string() const {
  return "folded " + std::to_string(folded_nodes) + " constant nodes, removed " +
         std::to_string(removed_identities) + " identities, folded " +
         std::to_string(folded_batchnorms) + " batch norms, fused " +
         std::to_string(fused_hard_swishes) + " hard-swishes, " + std::to_string(fused_gelus) +
         " GELUs and " + std::to_string(fused_activations) + " activations, pruned " +
         std::to_string(pruned_conv_taps) + " convolutions' padding taps, removed " +
         std::to_string(dead_nodes) + " dead nodes";
}

namespace {

// Number of node inputs reading each value, plus one if it is a graph output.
std::vector<int> use_counts(const Graph& g) {
  std::vector<int> uses(static_cast<size_t>(g.num_values()), 0);
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.inputs) {
      if (v != kNoValue) ++uses[static_cast<size_t>(v)];
    }
  }
  for (ValueId v : g.outputs()) ++uses[static_cast<size_t>(v)];
  return uses;
}

bool is_graph_input(const Graph& g, ValueId v) {
  for (ValueId i : g.inputs()) {
    if (i == v) return true;
  }
  return false;
}

// Evaluates node `n` on its constant inputs with the reference kernels.
Result<std::vector<Tensor>> evaluate_node(const Graph& g, const Node& n) {
  std::vector<TensorInfo> infos;
  NodeContext nc(g, n);
  RETURN_IF_ERROR(infer_node(nc.ctx(), static_cast<int>(n.outputs.size()), &infos));
  std::vector<Tensor> inputs;
  for (ValueId v : n.inputs) {
    if (v == kNoValue) {
      inputs.emplace_back();
    } else if (g.value(v).is_constant) {
      inputs.push_back(g.value(v).data);
    } else {
      // Only Shape reaches here: it reads the shape, never the data.
      inputs.push_back(
          Tensor::view(g.value(v).info.dtype, g.value(v).info.shape, nullptr, nullptr));
    }
  }
  std::vector<Tensor> outputs;
  for (const TensorInfo& info : infos) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
    outputs.push_back(std::move(t));
  }
  NodeContext rc(n, inputs);
  RETURN_IF_ERROR(run_reference(rc.ctx(), inputs, outputs));
  return outputs;
}

}  // namespace

Status fold_constants(Graph& g, PassStats* stats, uint64_t memory_budget) {
  const uint64_t budget = resolve_memory_budget(memory_budget);
  uint64_t folded_bytes = 0;
  // Shapes are inferred node by node, interleaved with folding, so that a Reshape whose target
  // comes from a Shape->Gather->Concat chain sees a constant target when it is reached.
  for (ValueId v : g.inputs()) {
    if (!g.value(v).has_info) {
      return invalid_argument("graph input " + quote_name(g.value(v).name) +
                              " has no type and shape");
    }
  }
  std::vector<bool> remove(static_cast<size_t>(g.num_nodes()), false);
  std::vector<TensorInfo> infos;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    bool foldable = true;
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      if (!g.value(v).has_info) {
        return invalid_argument("node " + quote_name(n.name) + " reads " +
                                quote_name(g.value(v).name) + " before it is defined");
      }
      if (!g.value(v).is_constant) foldable = false;
    }
    if (n.kind == OpKind::kShape) foldable = true;  // needs only the static shape
    {
      NodeContext nc(g, n);
      RETURN_IF_ERROR(infer_node(nc.ctx(), static_cast<int>(n.outputs.size()), &infos));
    }
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      g.value(n.outputs[o]).info = infos[o];
      g.value(n.outputs[o]).has_info = true;
    }
    if (!foldable) continue;
    // The budget is checked before the kernel allocates its outputs.
    for (const TensorInfo& info : infos) {
      ASSIGN_OR_RETURN(uint64_t bytes, checked_byte_size(info.shape, info.dtype));
      if (!checked_add(folded_bytes, bytes, &folded_bytes)) folded_bytes = UINT64_MAX;
      RETURN_IF_ERROR(check_memory_budget(
          folded_bytes, budget,
          "constant folding: node " + quote_name(n.name) + " (" + op_name(n.kind) + ") makes " +
              dtype_name(info.dtype) + info.shape.to_string() + " (" + format_bytes(bytes) + "), " +
              format_bytes(folded_bytes) + " folded in all"));
    }
    ASSIGN_OR_RETURN(std::vector<Tensor> outs, evaluate_node(g, n));
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      Value& out = g.value(n.outputs[o]);
      out.is_constant = true;
      out.data = std::move(outs[o]);
      out.producer = kNoNode;
    }
    remove[static_cast<size_t>(i)] = true;
    if (stats) ++stats->folded_nodes;
  }
  g.remove_nodes(remove);
  return Status();
}

Status remove_identities(Graph& g, PassStats* stats) {
  std::vector<bool> remove(static_cast<size_t>(g.num_nodes()), false);
  const std::vector<int> uses = use_counts(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node& n = g.node(i);
    if (n.kind != OpKind::kIdentity && n.kind != OpKind::kDropout) continue;
    // Dropout's optional mask output must be unused, and its training_mode known to be false
    // (ops/dropout.cc refuses a non-constant one; a constant true never gets this far).
    if (n.outputs.size() > 1 && uses[static_cast<size_t>(n.outputs[1])] > 0) continue;
    if (n.kind == OpKind::kDropout && n.inputs.size() > 2 && n.inputs[2] != kNoValue &&
        !g.value(n.inputs[2]).is_constant)
      continue;
    const ValueId in = n.inputs[0];
    const ValueId out = n.outputs[0];
    if (g.is_graph_output(out)) {
      // Keep the output's name: make the producer of `in` write `out` directly. Impossible
      // when `in` has no producer or must itself stay visible.
      const NodeId p = g.value(in).producer;
      if (p == kNoNode || g.is_graph_output(in) || is_graph_input(g, in)) continue;
      for (ValueId& o : g.node(p).outputs) {
        if (o == in) o = out;
      }
      g.value(out).producer = p;
      g.replace_uses(in, out);
    } else {
      g.replace_uses(out, in);
    }
    remove[static_cast<size_t>(i)] = true;
    if (stats) ++stats->removed_identities;
  }
  g.remove_nodes(remove);
  return g.sort_topologically();
}

namespace {

// The per-channel affine transform y = x * scale + shift equivalent to a BatchNormalization.
struct ChannelAffine {
  std::vector<float> scale;
  std::vector<float> shift;
};

Result<std::optional<ChannelAffine>> batchnorm_affine(const Graph& g, const Node& bn) {
  if (bn.outputs.size() != 1 || bn.inputs.size() != 5) return std::optional<ChannelAffine>();
  for (int i = 1; i < 5; ++i) {
    const ValueId v = bn.inputs[static_cast<size_t>(i)];
    if (v == kNoValue || !g.value(v).is_constant || g.value(v).info.dtype != DType::kF32) {
      return std::optional<ChannelAffine>();
    }
  }
  Activation act;
  ASSIGN_OR_RETURN(act, parse_fused_activation(bn.attrs));
  if (act.kind != ActivationKind::kNone) return std::optional<ChannelAffine>();
  ASSIGN_OR_RETURN(float eps, bn.attrs.float_or("epsilon", 1e-5f));
  const Tensor& gamma = g.value(bn.inputs[1]).data;
  const Tensor& beta = g.value(bn.inputs[2]).data;
  const Tensor& mean = g.value(bn.inputs[3]).data;
  const Tensor& var = g.value(bn.inputs[4]).data;
  const int64_t c = gamma.numel();
  if (beta.numel() != c || mean.numel() != c || var.numel() != c) {
    return std::optional<ChannelAffine>();
  }
  ChannelAffine a;
  a.scale.resize(static_cast<size_t>(c));
  a.shift.resize(static_cast<size_t>(c));
  for (int64_t i = 0; i < c; ++i) {
    const double s =
        gamma.data<float>()[i] / std::sqrt(static_cast<double>(var.data<float>()[i]) + eps);
    a.scale[static_cast<size_t>(i)] = static_cast<float>(s);
    a.shift[static_cast<size_t>(i)] =
        static_cast<float>(beta.data<float>()[i] - mean.data<float>()[i] * s);
  }
  return std::optional<ChannelAffine>(std::move(a));
}

// Scales the weight of `layer` per output channel and returns the folded bias, or nullopt if the
// layer's form is not one we fold (e.g. Gemm with alpha != 1 or an unbroadcastable C).
Result<bool> fold_into_layer(Graph& g, NodeId layer_id, const ChannelAffine& a) {
  Node& layer = g.node(layer_id);
  const ValueId wid = layer.inputs.size() > 1 ? layer.inputs[1] : kNoValue;
  if (wid == kNoValue || !g.value(wid).is_constant || g.value(wid).info.dtype != DType::kF32) {
    return false;
  }
  Activation act;
  ASSIGN_OR_RETURN(act, parse_fused_activation(layer.attrs));
  if (act.kind != ActivationKind::kNone) return false;
  const Tensor& w = g.value(wid).data;
  const int64_t channels = static_cast<int64_t>(a.scale.size());

  // Where output channel `oc` lives in the weight: w viewed as [outer, oc_dim, inner].
  int64_t outer = 1, oc_dim = 0, inner = 1;
  int64_t groups = 1;
  ValueId bias_id = layer.inputs.size() > 2 ? layer.inputs[2] : kNoValue;
  if (layer.kind == OpKind::kConv) {
    oc_dim = w.dim(0);
    for (int d = 1; d < w.rank(); ++d) inner *= w.dim(d);
  } else if (layer.kind == OpKind::kConvTranspose) {
    // Weight [Cin, Cout/groups, k...]; output channel = group * (Cout/groups) + j.
    ASSIGN_OR_RETURN(groups, layer.attrs.int_or("group", 1));
    if (w.rank() < 2 || groups != 1) return false;
    outer = w.dim(0);
    oc_dim = w.dim(1);
    for (int d = 2; d < w.rank(); ++d) inner *= w.dim(d);
  } else if (layer.kind == OpKind::kGemm) {
    ASSIGN_OR_RETURN(float alpha, layer.attrs.float_or("alpha", 1.f));
    ASSIGN_OR_RETURN(float beta, layer.attrs.float_or("beta", 1.f));
    ASSIGN_OR_RETURN(int64_t trans_b, layer.attrs.int_or("transB", 0));
    if (alpha != 1.f || beta != 1.f || w.rank() != 2) return false;
    if (trans_b) {  // B is [N, K]
      oc_dim = w.dim(0);
      inner = w.dim(1);
    } else {  // B is [K, N]
      outer = w.dim(0);
      oc_dim = w.dim(1);
    }
    if (bias_id != kNoValue) {
      const TensorInfo& ci = g.value(bias_id).info;
      if (!(ci.shape.numel() == channels && ci.shape.rank() >= 1 &&
            ci.shape[ci.shape.rank() - 1] == channels) &&
          ci.shape.numel() != 1) {
        return false;
      }
    }
  } else {
    return false;
  }
  if (oc_dim != channels) return false;
  if (bias_id != kNoValue &&
      (!g.value(bias_id).is_constant || g.value(bias_id).info.dtype != DType::kF32)) {
    return false;
  }

  ASSIGN_OR_RETURN(Tensor new_w, Tensor::create(DType::kF32, w.shape()));
  const float* src = w.data<float>();
  float* dst = new_w.data<float>();
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c = 0; c < oc_dim; ++c) {
      const float s = a.scale[static_cast<size_t>(c)];
      const int64_t base = (o * oc_dim + c) * inner;
      for (int64_t k = 0; k < inner; ++k) dst[base + k] = src[base + k] * s;
    }
  }
  ASSIGN_OR_RETURN(Tensor new_b, Tensor::create(DType::kF32, Shape{channels}));
  for (int64_t c = 0; c < channels; ++c) {
    float b = 0.f;
    if (bias_id != kNoValue) {
      const Tensor& old_b = g.value(bias_id).data;
      b = old_b.numel() == 1 ? old_b.data<float>()[0] : old_b.data<float>()[c];
    }
    new_b.data<float>()[c] = b * a.scale[static_cast<size_t>(c)] + a.shift[static_cast<size_t>(c)];
  }
  const std::string base_name = g.node(layer_id).name;
  const ValueId nw = g.add_constant(base_name + ".weight_bn", std::move(new_w));
  const ValueId nb = g.add_constant(base_name + ".bias_bn", std::move(new_b));
  Node& l = g.node(layer_id);  // re-fetch: add_constant does not touch nodes, but stay explicit
  l.inputs[1] = nw;
  if (l.inputs.size() < 3) l.inputs.resize(3, kNoValue);
  l.inputs[2] = nb;
  return true;
}

}  // namespace

Status fold_batchnorm(Graph& g, PassStats* stats) {
  std::vector<bool> remove(static_cast<size_t>(g.num_nodes()), false);
  std::vector<int> uses = use_counts(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).kind != OpKind::kBatchNormalization) continue;
    const ValueId x = g.node(i).inputs[0];
    const NodeId p = g.value(x).producer;
    if (p == kNoNode || uses[static_cast<size_t>(x)] != 1 || g.node(p).outputs.size() != 1)
      continue;
    ASSIGN_OR_RETURN(std::optional<ChannelAffine> affine, batchnorm_affine(g, g.node(i)));
    if (!affine) continue;
    ASSIGN_OR_RETURN(bool folded, fold_into_layer(g, p, *affine));
    if (!folded) continue;
    // The layer now writes the BatchNorm's output directly.
    const ValueId y = g.node(i).outputs[0];
    g.node(p).outputs[0] = y;
    g.value(y).producer = p;
    remove[static_cast<size_t>(i)] = true;
    if (stats) ++stats->folded_batchnorms;
  }
  g.remove_nodes(remove);
  return Status();
}

Status fuse_activations(Graph& g, PassStats* stats) {
  std::vector<bool> remove(static_cast<size_t>(g.num_nodes()), false);
  const std::vector<int> uses = use_counts(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& a = g.node(i);
    if (a.inputs.empty() || a.outputs.size() != 1) continue;
    NodeContext nc(g, a);
    auto act = activation_of_node(nc.ctx());
    if (!act.ok() || !act.value().has_value())
      continue;  // not an activation, or Clip with
                 // non-constant bounds
    const ValueId x = a.inputs[0];
    const NodeId p = g.value(x).producer;
    if (p == kNoNode || remove[static_cast<size_t>(p)] || uses[static_cast<size_t>(x)] != 1)
      continue;
    Node& layer = g.node(p);
    if (layer.outputs.size() != 1 || !op_schema(layer.kind).accepts_fused_activation) continue;
    if (g.value(x).info.dtype != DType::kF32) continue;
    ASSIGN_OR_RETURN(Activation existing, parse_fused_activation(layer.attrs));
    if (existing.kind != ActivationKind::kNone) continue;
    set_fused_activation(&layer.attrs, *act.value());
    const ValueId y = a.outputs[0];
    layer.outputs[0] = y;
    g.value(y).producer = p;
    remove[static_cast<size_t>(i)] = true;
    if (stats) ++stats->fused_activations;
  }
  g.remove_nodes(remove);
  return Status();
}

Status fuse_hard_swish(Graph& g, PassStats* stats) {
  std::vector<bool> remove(static_cast<size_t>(g.num_nodes()), false);
  const std::vector<int> uses = use_counts(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node& m = g.node(i);
    if (m.kind != OpKind::kMul || m.inputs.size() != 2 || m.outputs.size() != 1) continue;
    for (int k = 0; k < 2; ++k) {
      const ValueId gate = m.inputs[static_cast<size_t>(k)];
      const ValueId x = m.inputs[static_cast<size_t>(1 - k)];
      const NodeId h = g.value(gate).producer;
      if (h == kNoNode || remove[static_cast<size_t>(h)] || uses[static_cast<size_t>(gate)] != 1)
        continue;
      const Node& hs = g.node(h);
      if (hs.kind != OpKind::kHardSigmoid || hs.inputs.size() != 1 || hs.inputs[0] != x) continue;
      if (g.value(x).info.dtype != DType::kF32 || g.value(x).info.shape != g.value(gate).info.shape)
        continue;
      ASSIGN_OR_RETURN(float alpha, hs.attrs.float_or("alpha", 0.2f));
      ASSIGN_OR_RETURN(float beta, hs.attrs.float_or("beta", 0.5f));
      // HardSwish(x) = x * HardSigmoid(x) with alpha = 1/6 (as exported: 0.16666667f), beta = 1/2.
      if (std::abs(alpha * 6.f - 1.f) > 1e-6f || beta != 0.5f) continue;
      m.kind = OpKind::kHardSwish;
      m.inputs = {x};
      m.attrs = Attributes();
      remove[static_cast<size_t>(h)] = true;
      if (stats) ++stats->fused_hard_swishes;
      break;
    }
  }
  g.remove_nodes(remove);
  return Status();
}

namespace {

// The single f32 value of constant `v` when it holds one element, else nullopt.
std::optional<float> scalar_constant(const Graph& g, ValueId v) {
  if (v == kNoValue) return std::nullopt;
  const Value& val = g.value(v);
  if (!val.is_constant || val.data.dtype() != DType::kF32 || val.data.numel() != 1) {
    return std::nullopt;
  }
  return val.data.data<float>()[0];
}

bool near(std::optional<float> v, double want) {
  return v && std::fabs(*v - want) <= 1e-5 * std::max(1.0, std::fabs(want));
}

// The one node reading each value, or kNoNode where the value has no reader, several, or is a
// graph output.
std::vector<NodeId> sole_consumers(const Graph& g) {
  const std::vector<int> uses = use_counts(g);
  std::vector<NodeId> c(static_cast<size_t>(g.num_values()), kNoNode);
  for (NodeId i = 0; i < g.num_nodes(); ++i) {
    for (ValueId v : g.node(i).inputs) {
      if (v != kNoValue && uses[static_cast<size_t>(v)] == 1) c[static_cast<size_t>(v)] = i;
    }
  }
  return c;
}

// Matching state: the nodes a pattern covers, checked to be used only inside it.
struct GeluMatcher {
  const Graph& g;
  const std::vector<NodeId>& consumer;
  const std::vector<bool>& taken;
  std::vector<NodeId> nodes;

  // The node of kind `k` producing `v`, if `v` is read only by the pattern.
  const Node* producer(ValueId v, OpKind k) {
    if (v == kNoValue || consumer[static_cast<size_t>(v)] == kNoNode) return nullptr;
    const NodeId p = g.value(v).producer;
    if (p == kNoNode || taken[static_cast<size_t>(p)] || g.node(p).kind != k) return nullptr;
    const Node& n = g.node(p);
    if (n.outputs.size() != 1 || n.attrs.has("activation")) return nullptr;
    nodes.push_back(p);
    return &n;
  }
  // The sole reader of the output of `n` if it has kind `k`.
  const Node* consumer_of(const Node& n, OpKind k) {
    const NodeId c = consumer[static_cast<size_t>(n.outputs[0])];
    if (c == kNoNode || taken[static_cast<size_t>(c)] || g.node(c).kind != k) return nullptr;
    const Node& m = g.node(c);
    if (m.outputs.size() != 1 || m.inputs.size() != 2 || m.attrs.has("activation")) return nullptr;
    nodes.push_back(c);
    return &m;
  }
  // For a two-input node, the input other than `v`.
  static ValueId other(const Node& n, ValueId v) {
    if (n.inputs.size() != 2) return kNoValue;
    return n.inputs[0] == v ? n.inputs[1] : n.inputs[1] == v ? n.inputs[0] : kNoValue;
  }
  // For a two-input node with one input the scalar constant `c`, the other input.
  ValueId other_than_constant(const Node& n, double c) const {
    if (n.inputs.size() != 2) return kNoValue;
    for (int k = 0; k < 2; ++k) {
      if (near(scalar_constant(g, n.inputs[static_cast<size_t>(k)]), c)) {
        return n.inputs[static_cast<size_t>(1 - k)];
      }
    }
    return kNoValue;
  }

  // From the node `f` computing erf(x / sqrt 2) or tanh(...): the tail 0.5 * x * (1 + f), in
  // any of the orders exporters write it. Returns the last node, or null.
  const Node* tail(const Node& f, ValueId x) {
    const Node* plus = consumer_of(f, OpKind::kAdd);
    if (!plus || other(*plus, f.outputs[0]) == kNoValue ||
        !near(scalar_constant(g, other(*plus, f.outputs[0])), 1.0)) {
      return nullptr;
    }
    const Node* m1 = consumer_of(*plus, OpKind::kMul);
    if (!m1) return nullptr;
    const ValueId o = other(*m1, plus->outputs[0]);
    if (o == x) {  // (x * (1 + f)) * 0.5
      const Node* m2 = consumer_of(*m1, OpKind::kMul);
      if (!m2 || !near(scalar_constant(g, other(*m2, m1->outputs[0])), 0.5)) return nullptr;
      return m2;
    }
    if (near(scalar_constant(g, o), 0.5)) {  // ((1 + f) * 0.5) * x
      const Node* m2 = consumer_of(*m1, OpKind::kMul);
      if (!m2 || other(*m2, m1->outputs[0]) != x) return nullptr;
      return m2;
    }
    // (0.5 * x) * (1 + f)
    const Node* half = producer(o, OpKind::kMul);
    if (!half || other_than_constant(*half, 0.5) != x) return nullptr;
    return m1;
  }

  // erf(x / sqrt 2) or erf(x * (1 / sqrt 2)): x, or kNoValue.
  ValueId erf_argument(const Node& erf) {
    const ValueId t = erf.inputs[0];
    if (const Node* d = producer(t, OpKind::kDiv)) {
      if (d->inputs.size() == 2 && near(scalar_constant(g, d->inputs[1]), std::sqrt(2.0))) {
        return d->inputs[0];
      }
      return kNoValue;
    }
    if (const Node* m = producer(t, OpKind::kMul)) return other_than_constant(*m, std::sqrt(0.5));
    return kNoValue;
  }

  // tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)), x^3 as Pow(x, 3), x * (x * x) or (x * x) * x: x,
  // or kNoValue.
  ValueId tanh_argument(const Node& tanh) {
    const Node* scale = producer(tanh.inputs[0], OpKind::kMul);
    if (!scale) return kNoValue;
    const Node* sum =
        producer(other_than_constant(*scale, std::sqrt(2.0 / std::numbers::pi)), OpKind::kAdd);
    if (!sum || sum->inputs.size() != 2) return kNoValue;
    for (int k = 0; k < 2; ++k) {
      const ValueId x = sum->inputs[static_cast<size_t>(k)];
      const ValueId cubic = sum->inputs[static_cast<size_t>(1 - k)];
      const size_t mark = nodes.size();
      if (const Node* kappa = producer(cubic, OpKind::kMul)) {
        const ValueId cube = other_than_constant(*kappa, 0.044715);
        if (cube != kNoValue && is_cube(cube, x)) return x;
      }
      nodes.resize(mark);
    }
    return kNoValue;
  }

  bool is_cube(ValueId cube, ValueId x) {
    if (const Node* p = producer(cube, OpKind::kPow)) {
      return p->inputs.size() == 2 && p->inputs[0] == x &&
             near(scalar_constant(g, p->inputs[1]), 3.0);
    }
    const Node* outer = producer(cube, OpKind::kMul);
    if (!outer) return false;
    const ValueId sq = other(*outer, x);
    if (sq == kNoValue) return false;
    const Node* square = producer(sq, OpKind::kMul);
    return square && square->inputs.size() == 2 && square->inputs[0] == x && square->inputs[1] == x;
  }
};

}  // namespace

Status fuse_gelu(Graph& g, PassStats* stats) {
  std::vector<bool> taken(static_cast<size_t>(g.num_nodes()), false);
  std::vector<bool> remove(static_cast<size_t>(g.num_nodes()), false);
  const std::vector<NodeId> consumer = sole_consumers(g);
  for (NodeId i = 0; i < g.num_nodes(); ++i) {
    const Node& f = g.node(i);
    if ((f.kind != OpKind::kErf && f.kind != OpKind::kTanh) || taken[static_cast<size_t>(i)] ||
        f.inputs.size() != 1 || f.outputs.size() != 1 || f.attrs.has("activation")) {
      continue;
    }
    GeluMatcher m{g, consumer, taken, {}};
    const bool erf = f.kind == OpKind::kErf;
    const ValueId x = erf ? m.erf_argument(f) : m.tanh_argument(f);
    if (x == kNoValue || g.value(x).info.dtype != DType::kF32) continue;
    const Node* last = m.tail(f, x);
    if (last == nullptr || g.value(last->outputs[0]).info.shape != g.value(x).info.shape) continue;
    // The last node becomes Gelu(x); every other node of the pattern goes.
    const NodeId last_id = g.value(last->outputs[0]).producer;
    m.nodes.push_back(i);
    for (NodeId n : m.nodes) {
      taken[static_cast<size_t>(n)] = true;
      if (n != last_id) remove[static_cast<size_t>(n)] = true;
    }
    Node& gelu = g.node(last_id);
    gelu.kind = OpKind::kGelu;
    gelu.inputs = {x};
    gelu.attrs = Attributes();
    if (!erf) gelu.attrs.set("approximate", std::string("tanh"));
    if (stats) ++stats->fused_gelus;
  }
  g.remove_nodes(remove);
  return Status();
}

Status eliminate_dead_nodes(Graph& g, PassStats* stats) {
  std::vector<bool> needed(static_cast<size_t>(g.num_values()), false);
  for (ValueId v : g.outputs()) needed[static_cast<size_t>(v)] = true;
  std::vector<bool> remove(static_cast<size_t>(g.num_nodes()), true);
  for (int i = g.num_nodes() - 1; i >= 0; --i) {
    const Node& n = g.node(i);
    bool live = false;
    for (ValueId v : n.outputs) live = live || needed[static_cast<size_t>(v)];
    if (!live) continue;
    remove[static_cast<size_t>(i)] = false;
    for (ValueId v : n.inputs) {
      if (v != kNoValue) needed[static_cast<size_t>(v)] = true;
    }
  }
  int dead = 0;
  for (bool r : remove) dead += r ? 1 : 0;
  if (stats) stats->dead_nodes += dead;
  g.remove_nodes(remove);
  return Status();
}

Status prune_padding_taps(Graph& g, PassStats* stats) {
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.kind != OpKind::kConv || n.inputs.size() < 2 || n.outputs.size() != 1) continue;
    const ValueId wid = n.inputs[1];
    if (wid == kNoValue || !g.value(wid).is_constant || g.value(wid).info.dtype != DType::kF32) {
      continue;
    }
    const Shape& xs = g.value(n.inputs[0]).info.shape;
    const Tensor& w = g.value(wid).data;
    const int rank = w.rank() - 2;
    if (rank < 1 || xs.rank() != w.rank()) continue;
    std::vector<int64_t> in(static_cast<size_t>(rank)), k(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      in[static_cast<size_t>(d)] = xs[d + 2];
      k[static_cast<size_t>(d)] = w.dim(d + 2);
    }
    Result<WindowGeometry> geo = [&] {
      NodeContext nc(g, n);
      return forward_window(nc.ctx(), in, k, {});
    }();
    if (!geo.ok()) continue;  // the node's own validation reports it
    // Per spatial dim, the first and last taps that read real input for some output position.
    std::vector<int64_t> first(static_cast<size_t>(rank)), last(static_cast<size_t>(rank));
    bool prunes = false, empty = false;
    for (int d = 0; d < rank; ++d) {
      const size_t u = static_cast<size_t>(d);
      int64_t f = -1, l = -1;
      for (int64_t t = 0; t < k[u]; ++t) {
        const int64_t offset = t * geo->dilations[u] - geo->pads_begin[u];
        if (tap_output_range(in[u], geo->output[u], geo->strides[u], offset).size() > 0) {
          if (f < 0) f = t;
          l = t;
        }
      }
      if (f < 0) empty = true;
      first[u] = f;
      last[u] = l;
      // The new pads keep every output position and what it reads: tap t becomes t - first,
      // so the begin pad shrinks by first * dilation and the end pad by the dropped tail.
      if (f > 0 || l < k[u] - 1) prunes = true;
      if (geo->pads_begin[u] - f * geo->dilations[u] < 0 ||
          geo->pads_end[u] - (k[u] - 1 - l) * geo->dilations[u] < 0) {
        empty = true;  // not expressible as padding: leave the node as it is
      }
    }
    if (!prunes || empty) continue;
    // The dropped taps only ever multiply padding zeros; a NaN or infinity among them would make
    // NaN of those zeros, so such weights are kept.
    std::vector<int64_t> nk(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      const size_t u = static_cast<size_t>(d);
      nk[u] = last[u] - first[u] + 1;
    }
    std::vector<int64_t> dims = {w.dim(0), w.dim(1)};
    dims.insert(dims.end(), nk.begin(), nk.end());
    ASSIGN_OR_RETURN(Tensor nw, Tensor::create(DType::kF32, Shape(dims)));
    const int64_t taps = geo->kernel_volume();
    const int64_t rows = w.dim(0) * w.dim(1);
    const float* src = w.data<float>();
    float* dst = nw.data<float>();
    bool finite = true;
    int64_t out_i = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t t = 0; t < taps; ++t) {
        // Tap t's coordinates, innermost dim last.
        int64_t rem = t;
        bool kept = true;
        for (int d = rank - 1; d >= 0; --d) {
          const size_t u = static_cast<size_t>(d);
          const int64_t c = rem % k[u];
          rem /= k[u];
          if (c < first[u] || c > last[u]) kept = false;
        }
        const float v = src[r * taps + t];
        if (kept) {
          dst[out_i++] = v;
        } else if (!std::isfinite(v)) {
          finite = false;
        }
      }
    }
    if (!finite) continue;
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank)), dil = geo->dilations;
    for (int d = 0; d < rank; ++d) {
      const size_t u = static_cast<size_t>(d);
      pads[u] = geo->pads_begin[u] - first[u] * geo->dilations[u];
      pads[u + static_cast<size_t>(rank)] =
          geo->pads_end[u] - (k[u] - 1 - last[u]) * geo->dilations[u];
      if (nk[u] == 1) dil[u] = 1;  // one tap: the dilation no longer matters
    }
    const ValueId nid = g.add_constant(n.name + ".weight_pruned", std::move(nw));
    Node& c = g.node(i);
    c.inputs[1] = nid;
    c.attrs.set("kernel_shape", nk);
    c.attrs.set("pads", pads);
    c.attrs.set("dilations", dil);
    c.attrs.set("auto_pad", std::string("NOTSET"));
    if (stats) ++stats->pruned_conv_taps;
  }
  return Status();
}

Status optimize_graph(Graph& g, PassStats* stats, uint64_t memory_budget) {
  PassStats local;
  PassStats* s = stats ? stats : &local;
  RETURN_IF_ERROR(g.validate());
  RETURN_IF_ERROR(fold_constants(g, s, memory_budget));  // infers shapes as it goes
  RETURN_IF_ERROR(remove_identities(g, s));
  RETURN_IF_ERROR(fold_batchnorm(g, s));
  RETURN_IF_ERROR(prune_padding_taps(g, s));
  RETURN_IF_ERROR(fuse_hard_swish(g, s));
  RETURN_IF_ERROR(fuse_gelu(g, s));
  RETURN_IF_ERROR(fuse_activations(g, s));
  RETURN_IF_ERROR(eliminate_dead_nodes(g, s));
  RETURN_IF_ERROR(g.validate());
  return g.infer_shapes();
}

}  // namespace tessera
