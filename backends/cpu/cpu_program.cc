#include "backends/cpu/cpu_program.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <unordered_map>

#include "backends/arena.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/onednn.h"
#include "core/allocator.h"
#include "core/denormals.h"
#include "graph/qdq.h"

namespace tessera::cpu {

namespace {

// Conversions only matter for rank-4 f32 tensors whose two layouts differ in memory.
bool convertible(const TensorInfo& info) {
  return info.dtype == DType::kF32 && info.shape.rank() == 4 && !layout_trivial(info.shape);
}

// The forms a value may be held in, one buffer each: f32 in NCHW (slot 0) or NHWC (slot 1), the
// slot of a Layout's value; or the program's reduced precision (kBf16Slot: bf16 in a bf16
// program, int8 with the value's QuantParam in an int8 one), NHWC for rank 4 and logical order
// otherwise.
constexpr int kBf16Slot = 2;
constexpr int kNumSlots = 3;
int slot_of(Layout l) {
  return static_cast<int>(l);
}
// Whether kernel k, of a node with these inputs, reads value v in the reduced precision: v is its
// reduced input (or all its inputs are).
bool reads_reduced_value(const Kernel* k, const std::vector<ValueId>& inputs, ValueId v) {
  return k != nullptr && (k->bf16_io() || k->int8_io()) &&
         (k->reduced_inputs_all() ||
          (k->reduced_input() < inputs.size() && inputs[k->reduced_input()] == v));
}

// Whether kernel k writes its output 0 in the reduced precision.
bool writes_reduced(const Kernel* k) {
  return k != nullptr && (k->bf16_io() || (k->int8_io() && k->int8_output()));
}

Layout bf16_layout(const TensorInfo& info) {
  return info.shape.rank() == 4 ? Layout::kNHWC : Layout::kNCHW;
}

// The step of an Add fused into the convolution that produces one of its inputs: that
// convolution's step reads the other input and writes the Add's output, so this one does nothing.
// The step of a node whose work another layer's kernel does (a residual Add, a SiLU's Sigmoid
// and Mul): it reads and writes nothing.
class FusedAwayKernel final : public Kernel {
 public:
  explicit FusedAwayKernel(std::string what) : what_(std::move(what)) {}
  Status bind(std::span<const Operand>, std::span<const Operand>, ThreadPool&) override {
    return Status();
  }
  Status run(ThreadPool&) override { return Status(); }
  std::string describe() const override { return what_; }
  bool fused_away() const override { return true; }

 private:
  std::string what_;
};

}  // namespace

Result<std::unique_ptr<CpuProgram>> CpuProgram::compile(const Graph& graph,
                                                        std::span<const NodeId> slice,
                                                        std::shared_ptr<ThreadPool> pool,
                                                        const char* variant, KernelChoice choice,
                                                        Precision precision,
                                                        const CalibrationTable* calibration) {
  // int8 runs on oneDNN or on XNNPACK (use_xnnpack_int8); bf16 needs oneDNN.
  if (precision == Precision::kBf16 && !onednn_available()) {
    return unimplemented(std::string(precision_name(precision)) +
                         " on the cpu device needs oneDNN: " + onednn_note());
  }
  if (precision == Precision::kBf16 && !onednn_bf16_available()) {
    return unimplemented(
        "bf16 on the cpu device needs AVX-512 (oneDNN has no bf16 kernels below "
        "it): " +
        onednn_note());
  }
  // A QDQ model's QuantizeLinear -> DequantizeLinear pairs give their values' quantisation and
  // vanish from an int8 program (graph/qdq.h): it compiles the graph without them.
  std::optional<QdqFolding> qdq;
  std::vector<std::pair<ValueId, QdqQuantisation>> qdq_all;  // the whole graph's pairs
  if (precision == Precision::kInt8 && variant == nullptr) {
    qdq = fold_qdq_pairs(graph, slice);
    qdq_all = qdq_quantisation(graph);
  }
  if (precision == Precision::kInt8 && calibration == nullptr && qdq_all.empty()) {
    return failed_precondition(
        "int8 needs calibrated activation ranges: run `tessera calibrate MODEL.tsr` (it writes "
        "MODEL.tsr.calib.json, read from there) or give --calibration FILE (a QDQ model brings "
        "its own)");
  }
  std::unique_ptr<Graph> owned = qdq ? std::make_unique<Graph>(std::move(qdq->graph)) : nullptr;
  const Graph& g = owned != nullptr ? *owned : graph;
  const std::span<const NodeId> layers = qdq ? std::span<const NodeId>(qdq->layers) : slice;
  std::unique_ptr<CpuProgram> p(new CpuProgram(g, std::move(pool)));
  p->owned_graph_ = std::move(owned);
  p->int8_ = precision == Precision::kInt8;
  bool xnn_int8 = false;  // the int8 kernels are XNNPACK's (every int8 tensor s8)
  if (p->int8_) {
    ASSIGN_OR_RETURN(xnn_int8, use_xnnpack_int8());
    p->assign_quantisation(layers, calibration, qdq_all, qdq ? &qdq->quant : nullptr, xnn_int8);
    p->qdq_pairs_ = qdq ? qdq->pairs : 0;
  }
  p->measured_ = variant == nullptr && choice == KernelChoice::kMeasured;
  // The boundary of the slice as given: folding changes neither its values nor (here) their order.
  slice_boundary(graph, slice, &p->inputs_, &p->outputs_);

  // Phase 1: build a kernel per layer (weights packed here). First the reduced-precision kernels
  // (bf16 / int8 programs), then the precision choice with both neighbours known, then the f32
  // kernels of the other layers.
  const size_t nl = layers.size();
  std::vector<std::unique_ptr<Kernel>> kernels(nl);
  const std::vector<std::vector<NodeId>> readers = g.consumers();
  std::unordered_map<NodeId, size_t> position;
  for (size_t i = 0; i < nl; ++i) position[layers[i]] = i;
  const auto request = [&](const Node& node, NodeContext& nc) {
    KernelRequest req{g, node, nc.ctx(), *p->pool_};
    req.packs = &p->packs_;
    // Output 0 read only by a Concat of this slice, and not a slice output: the Concat may take
    // it in place (place_concat_inputs).
    const ValueId y = node.outputs.empty() ? kNoValue : node.outputs[0];
    if (y != kNoValue && readers[static_cast<size_t>(y)].size() == 1 &&
        std::find(p->outputs_.begin(), p->outputs_.end(), y) == p->outputs_.end()) {
      const NodeId r = readers[static_cast<size_t>(y)][0];
      req.output_to_concat = position.count(r) != 0 && g.node(r).kind == OpKind::kConcat;
    }
    return req;
  };
  const auto failed = [&](const Node& node, const Status& st) {
    return st.with_context("node " + quote_name(node.name) + " (" + op_name(node.kind) + ")");
  };
  for (size_t i = 0; i < nl; ++i) {
    const Node& node = g.node(layers[i]);
    for (ValueId v : node.inputs) {
      if (v != kNoValue && !g.value(v).has_info && !g.value(v).is_constant) {
        return failed_precondition("node " + quote_name(node.name) + ": input '" + g.value(v).name +
                                   "' has no inferred shape (run shape inference first)");
      }
    }
    if (variant != nullptr || precision == Precision::kF32) continue;
    NodeContext nc(g, node);
    const KernelRequest req = request(node, nc);
    Result<std::unique_ptr<Kernel>> k = std::unique_ptr<Kernel>();
    if (precision == Precision::kBf16) {
      // Tessera's MaxPool first: oneDNN 2.6's bf16 pooling ran ResNet-18's 3x3/2 stem pool in
      // 0.24 ms on one core of the AMX host, 3x its int8 one.
      if (node.kind == OpKind::kMaxPool) k = make_bf16_max_pool(req);
      // Tessera's GEMV at batch 1: oneDNN 2.6's bf16 matmul streamed AlexNet's fc6 weights at
      // 3 GB/s on the AMX host, 1.4x slower than the f32 GEMV over twice the bytes.
      if (k.ok() && *k == nullptr && (node.kind == OpKind::kGemm || node.kind == OpKind::kMatMul))
        k = make_bf16_gemv(req);
      if (k.ok() && *k == nullptr) k = make_onednn_bf16_kernel(req);
      if (k.ok() && *k == nullptr && node.kind == OpKind::kConcat) k = make_bf16_concat(req);
      if (k.ok() && *k == nullptr && node.kind == OpKind::kBatchNormalization)
        k = make_bf16_batch_norm(req);
      if (k.ok() && *k == nullptr && node.kind == OpKind::kMul) k = make_bf16_channel_gate(req);
    } else {
      // Tessera's GEMV at batch 1 (as in bf16): see docs/precision.md for the measurements.
      if (node.kind == OpKind::kGemm || node.kind == OpKind::kMatMul)
        k = make_int8_gemv(req, p->quant_);
      if (k.ok() && *k == nullptr)
        k = xnn_int8 ? make_xnn_int8_kernel(req, p->quant_)
                     : make_onednn_int8_kernel(req, p->quant_);
      if (k.ok() && *k == nullptr) k = make_int8_kernel(req, p->quant_);
    }
    if (k.ok() && *k == nullptr) k = make_reduced_movement_kernel(req, precision, p->quant_);
    if (!k.ok()) return failed(node, k.status());
    kernels[i] = std::move(*k);
  }
  p->fusions_.assign(nl, Fusion{});
  if (variant == nullptr && precision != Precision::kF32) {
    fuse_channel_shuffles(g, layers, p->outputs_, &kernels, precision, p->quant_);
    p->fuse_reduced_silu(layers, readers, position, &kernels);
  }
  for (size_t i = 0; i < nl && p->measured_; ++i) {
    // Element moves have no arithmetic to time (drop_unlinked_reduced_moves decides them).
    if (kernels[i] == nullptr || kernels[i]->fused_away() || kernels[i]->precision_neutral())
      continue;
    // A convolution with its SiLU fused stays reduced. Measured alone against f32 convolution
    // plus f32 SiLU plus conversions, EfficientNet-B0's depthwise layers chose f32, and the
    // program ran slower than all reduced (int8 on an AMX host: 8.0 ms measured, 6.9 ms kept;
    // bf16: 11.0 and 10.2 ms).
    // (No residual is fused yet: a layer that writes another value here has its SiLU fused.)
    if (p->fusions_[i].writes != kNoValue) continue;
    // A reduced kernel that measures slower than the f32 one (with the conversions each needs
    // between its neighbours) gives way. Input 0 arrives in f32 from a slice input or an f32
    // producer (decided already: producers come first); output 0 goes on in f32 when no reader
    // in the slice has a reduced kernel (readers are tentative: not yet decided).
    const Node& node = g.node(layers[i]);
    const ValueId x = node.inputs[0], y = node.outputs[0];
    const NodeId producer = x == kNoValue ? kNoNode : g.value(x).producer;
    const auto at = position.find(producer);
    const bool input_f32 = at == position.end() || !writes_reduced(kernels[at->second].get());
    bool output_f32 = true;
    for (NodeId r : y == kNoValue ? std::vector<NodeId>{} : readers[static_cast<size_t>(y)]) {
      const auto rt = position.find(r);
      if (rt == position.end() || rt->second <= i) continue;
      if (reads_reduced_value(kernels[rt->second].get(), g.node(r).inputs, y)) output_f32 = false;
    }
    const auto quant = [&](ValueId v) { return p->int8_ ? quant_of(p->quant_, v) : QuantParam{}; };
    NodeContext nc(g, node);
    Result<std::unique_ptr<Kernel>> f32 = f32_kernel_if_faster(
        request(node, nc), *kernels[i],
        p->int8_ ? PrecisionConversion::Reduced::kInt8 : PrecisionConversion::Reduced::kBf16,
        quant(x), quant(y), NeighbourPrecision{input_f32, output_f32});
    if (!f32.ok()) return failed(node, f32.status());
    if (*f32 != nullptr) {
      kernels[i] = std::move(*f32);
      p->measured_f32_.push_back(layers[i]);
    }
  }
  if (variant == nullptr && precision != Precision::kF32)
    p->drop_unlinked_reduced_moves(layers, readers, position, &kernels);
  for (size_t i = 0; i < nl; ++i) {
    if (kernels[i] != nullptr) continue;
    const Node& node = g.node(layers[i]);
    NodeContext nc(g, node);
    const KernelRequest req = request(node, nc);
    Result<std::unique_ptr<Kernel>> k =
        p->measured_ ? build_measured_kernel(req) : build_kernel(req, variant);
    if (!k.ok()) return failed(node, k.status());
    kernels[i] = std::move(*k);
  }
  fuse_channel_shuffles(g, layers, p->outputs_, &kernels);
  fuse_silu(g, layers, p->outputs_, &kernels);
  p->fuse_residual_adds(layers, &kernels);
  // What the kernels own, plus each packing they share through the cache once.
  p->owned_bytes_ = p->packs_.bytes();
  for (const std::unique_ptr<Kernel>& k : kernels) p->owned_bytes_ += k->owned_bytes();

  // Phase 2: layouts. Inputs start in logical order; if the first reader of an input wants
  // NHWC, plan again with that input converted on the way in (one conversion, no copy).
  std::vector<Layout> in_layouts(p->inputs_.size(), Layout::kNCHW), wanted;
  p->plan(layers, kernels, in_layouts, &wanted);
  if (wanted != in_layouts) {
    in_layouts = wanted;
    p->plan(layers, kernels, in_layouts, &wanted);
  }
  size_t next = 0;
  for (Step& s : p->steps_) {
    if (s.node != kNoNode) s.kernel = std::move(kernels[next++]);
  }
  p->num_layers_ = layers.size();
  p->place_concat_inputs();

  // Phase 3: arena and binding.
  RETURN_IF_ERROR(p->allocate_and_bind());
  return p;
}

void CpuProgram::assign_quantisation(
    std::span<const NodeId> layers, const CalibrationTable* table,
    const std::vector<std::pair<ValueId, QdqQuantisation>>& graph_qdq,
    const std::vector<std::pair<ValueId, QdqQuantisation>>* qdq, bool all_signed) {
  quant_.assign(static_cast<size_t>(g_.num_values()), QuantParam{});
  for (ValueId v = 0; v < g_.num_values() && table != nullptr; ++v) {
    const Value& val = g_.value(v);
    if (val.is_constant || !val.has_info || val.info.dtype != DType::kF32) continue;
    if (const std::pair<float, float>* r = table->find(val.name)) {
      quant_[static_cast<size_t>(v)] = QuantParam::from_range(r->first, r->second);
    }
  }
  // A QDQ model's own quantisation wins over a calibrated range: the graph's pairs for values at
  // the slice's edges (a pair cut by the slice), the pairs folded inside it (never replaced
  // below, and held in int8 however they are produced).
  for (const auto& [v, q] : graph_qdq) {
    // Held as the same grid without a zero point where there is one (QuantParam::canonical).
    quant_[static_cast<size_t>(v)] = QuantParam{q.scale, q.is_unsigned, q.zero_point}.canonical();
  }
  // The pairs folded in the slice are among the graph's (a pair that folds in a slice folds in
  // the whole graph, with the same parameters): only mark them.
  std::vector<bool>& fixed = qdq_value_;
  fixed.assign(quant_.size(), false);
  if (qdq != nullptr) {
    for (const auto& [v, q] : *qdq) fixed[static_cast<size_t>(v)] = true;
  }
  // A pool's output keeps its input's quantisation (max and average stay within the input's
  // range), so that int8 pools pass their input's bytes through without rescaling; a pool whose
  // output has a QDQ quantisation of its own keeps that one (and runs in f32 if they differ).
  // Element moves keep it too (the values are the same, or a subset): int8 views, slices and
  // shuffles copy bytes.
  const auto keeps_quantisation = [](OpKind k) {
    switch (k) {
      case OpKind::kMaxPool:
      case OpKind::kAveragePool:
      case OpKind::kGlobalAveragePool:
      case OpKind::kReshape:
      case OpKind::kFlatten:
      case OpKind::kSqueeze:
      case OpKind::kUnsqueeze:
      case OpKind::kIdentity:
      case OpKind::kDropout:
      case OpKind::kSlice:
      case OpKind::kTranspose:
      case OpKind::kGather:
        return true;
      default:
        return false;
    }
  };
  for (NodeId id : layers) {
    const Node& n = g_.node(id);
    if (keeps_quantisation(n.kind) && !n.inputs.empty() && n.inputs[0] != kNoValue &&
        !n.outputs.empty() && !fixed[static_cast<size_t>(n.outputs[0])]) {
      const QuantParam in = quant_[static_cast<size_t>(n.inputs[0])];
      if (in.valid()) quant_[static_cast<size_t>(n.outputs[0])] = in;
    }
  }
  // XNNPACK's int8 operators take s8: a u8 grid is held as s8 with its zero point 128 lower.
  if (all_signed) {
    for (QuantParam& q : quant_) {
      if (q.valid() && q.is_unsigned) q = QuantParam{q.scale, false, q.zero_point - 128};
    }
  }
}

void CpuProgram::drop_unlinked_reduced_moves(std::span<const NodeId> layers,
                                             const std::vector<std::vector<NodeId>>& readers,
                                             const std::unordered_map<NodeId, size_t>& position,
                                             std::vector<std::unique_ptr<Kernel>>* kernels) const {
  std::vector<std::unique_ptr<Kernel>>& ks = *kernels;
  const size_t nl = layers.size();
  const auto moves = [&](size_t i) {
    return writes_reduced(ks[i].get()) && ks[i]->precision_neutral();
  };
  // The layer that writes value v (a convolution with a fused SiLU writes its Mul's output).
  std::unordered_map<ValueId, size_t> writer;
  for (size_t i = 0; i < nl; ++i) {
    const Node& n = g_.node(layers[i]);
    if (!n.outputs.empty()) writer[n.outputs[0]] = i;
  }
  for (size_t i = 0; i < nl; ++i) {
    if (fusions_[i].writes != kNoValue) writer[fusions_[i].writes] = i;
  }
  // Chains of moves (union-find over producer -> reader links between them), and whether each
  // move touches a reduced kernel that computes.
  std::vector<size_t> root(nl);
  for (size_t i = 0; i < nl; ++i) root[i] = i;
  const auto find = [&](size_t i) {
    while (root[i] != i) i = root[i] = root[root[i]];
    return i;
  };
  std::vector<bool> linked(nl, false);
  for (size_t i = 0; i < nl; ++i) {
    if (!moves(i)) continue;
    const Node& n = g_.node(layers[i]);
    const auto w = writer.find(n.inputs[ks[i]->reduced_input()]);
    if (w != writer.end() && writes_reduced(ks[w->second].get()) && !ks[w->second]->fused_away()) {
      if (moves(w->second)) {
        root[find(i)] = find(w->second);
      } else {
        linked[i] = true;
      }
    }
    const ValueId y = n.outputs[0];
    for (NodeId r : readers[static_cast<size_t>(y)]) {
      const auto at = position.find(r);
      if (at == position.end()) continue;
      const Kernel* rk = ks[at->second].get();
      if (reads_reduced_value(rk, g_.node(r).inputs, y) && !rk->precision_neutral())
        linked[i] = true;
    }
  }
  std::vector<bool> keep(nl, false);
  for (size_t i = 0; i < nl; ++i) {
    if (moves(i) && linked[i]) keep[find(i)] = true;
  }
  for (size_t i = 0; i < nl; ++i) {
    if (moves(i) && !keep[find(i)]) ks[i].reset();
  }
}

void CpuProgram::fuse_reduced_silu(std::span<const NodeId> layers,
                                   const std::vector<std::vector<NodeId>>& consumers,
                                   const std::unordered_map<NodeId, size_t>& at,
                                   std::vector<std::unique_ptr<Kernel>>* kernels) {
  const auto is_output = [&](ValueId v) {
    return g_.is_graph_output(v) ||
           std::find(outputs_.begin(), outputs_.end(), v) != outputs_.end();
  };
  const auto plain = [&](const Node& n) {
    const Result<Activation> act = parse_fused_activation(n.attrs);
    return act.ok() && act->kind == ActivationKind::kNone && n.outputs.size() == 1;
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    Kernel* k = (*kernels)[i].get();
    const Node& conv = g_.node(layers[i]);
    if (k == nullptr || !(k->bf16_io() || k->int8_io()) || conv.kind != OpKind::kConv ||
        conv.outputs.empty())
      continue;
    const ValueId x = conv.outputs[0];
    const std::vector<NodeId>& rx = consumers[static_cast<size_t>(x)];
    if (rx.size() != 2 || is_output(x)) continue;
    // The Sigmoid of x and the Mul of x and that Sigmoid, both later in the slice.
    int sig = -1, mul = -1;
    for (NodeId r : rx) {
      const auto it = at.find(r);
      if (it == at.end() || it->second <= i) continue;
      const Node& n = g_.node(r);
      if (n.kind == OpKind::kSigmoid && n.inputs.size() == 1 && plain(n)) sig = int(it->second);
      if (n.kind == OpKind::kMul && n.inputs.size() == 2 && plain(n)) mul = int(it->second);
    }
    if (sig < 0 || mul < 0) continue;
    const Node& sn = g_.node(layers[static_cast<size_t>(sig)]);
    const Node& mn = g_.node(layers[static_cast<size_t>(mul)]);
    const ValueId s = sn.outputs[0], y = mn.outputs[0];
    const bool pair =
        (mn.inputs[0] == x && mn.inputs[1] == s) || (mn.inputs[1] == x && mn.inputs[0] == s);
    if (!pair || consumers[static_cast<size_t>(s)].size() != 1 || is_output(s) ||
        g_.value(y).info.shape != g_.value(x).info.shape)
      continue;
    const QuantParam out = int8_ ? quant_[static_cast<size_t>(y)] : QuantParam{};
    if (int8_ && !out.valid()) continue;
    if (!k->fuse_silu(out)) continue;
    fusions_[i].writes = y;
    fusions_[static_cast<size_t>(sig)].into = static_cast<int>(i);
    fusions_[static_cast<size_t>(mul)].into = static_cast<int>(i);
    const std::string into = " fused into " + quote_name(conv.name) + " (silu)";
    (*kernels)[static_cast<size_t>(sig)] = std::make_unique<FusedAwayKernel>("sigmoid" + into);
    (*kernels)[static_cast<size_t>(mul)] = std::make_unique<FusedAwayKernel>("mul" + into);
  }
}

void CpuProgram::fuse_residual_adds(std::span<const NodeId> layers,
                                    std::vector<std::unique_ptr<Kernel>>* kernels) {
  const std::vector<std::vector<NodeId>> consumers = g_.consumers();
  // Each node's position in this slice (-1: not in it).
  std::vector<int> at(static_cast<size_t>(g_.num_nodes()), -1);
  for (size_t i = 0; i < layers.size(); ++i)
    at[static_cast<size_t>(layers[i])] = static_cast<int>(i);
  auto position = [&](NodeId id) { return at[static_cast<size_t>(id)]; };
  auto is_slice_input = [&](ValueId v) {
    return std::find(inputs_.begin(), inputs_.end(), v) != inputs_.end();
  };
  for (size_t a = 0; a < layers.size(); ++a) {
    const Node& add = g_.node(layers[a]);
    if (add.kind != OpKind::kAdd || add.inputs.size() != 2 || add.outputs.size() != 1) continue;
    const Result<Activation> act = parse_fused_activation(add.attrs);
    if (!act.ok()) continue;
    // Two f32 rank-4 activations of the output's shape: no broadcast, no constant.
    const TensorInfo& out = g_.value(add.outputs[0]).info;
    bool plain =
        out.dtype == DType::kF32 && out.shape.rank() == 4 && add.inputs[0] != add.inputs[1];
    for (ValueId v : add.inputs) {
      plain = plain && v != kNoValue && !g_.value(v).is_constant && g_.value(v).has_info &&
              g_.value(v).info.dtype == DType::kF32 && g_.value(v).info.shape == out.shape;
    }
    if (!plain) continue;
    // X (input k) from a convolution of this slice that nothing else reads, R (the other input)
    // ready before that convolution runs: a slice input or an earlier layer's output.
    for (size_t k = 0; k < 2; ++k) {
      const ValueId x = add.inputs[k], r = add.inputs[1 - k];
      const NodeId conv_id = g_.value(x).producer;
      const int c = conv_id == kNoNode ? -1 : position(conv_id);
      if (c < 0 || g_.node(conv_id).kind != OpKind::kConv || g_.node(conv_id).outputs[0] != x ||
          fusions_[static_cast<size_t>(c)].residual != kNoValue)
        continue;
      if (consumers[static_cast<size_t>(x)].size() != 1 || g_.is_graph_output(x) ||
          std::find(outputs_.begin(), outputs_.end(), x) != outputs_.end())
        continue;
      const NodeId r_id = g_.value(r).producer;
      const int rp = r_id == kNoNode ? -1 : position(r_id);
      if (!(rp >= 0 ? rp < c : is_slice_input(r))) continue;
      bool fused = false;
      (*kernels)[static_cast<size_t>(c)] = fusing_kernel(
          conv_id, std::move((*kernels)[static_cast<size_t>(c)]), *act, r, add.outputs[0], &fused);
      if (!fused) continue;
      fusions_[static_cast<size_t>(c)].residual = r;
      fusions_[static_cast<size_t>(c)].writes = add.outputs[0];
      fusions_[a].into = c;
      (*kernels)[a] = std::make_unique<FusedAwayKernel>("residual add fused into " +
                                                        quote_name(g_.node(conv_id).name));
      break;
    }
  }
}

std::unique_ptr<Kernel> CpuProgram::fusing_kernel(NodeId conv, std::unique_ptr<Kernel> k,
                                                  const Activation& act, ValueId residual,
                                                  ValueId writes, bool* fused) {
  if (k->int8_io()) {
    const QuantParam r = quant_[static_cast<size_t>(residual)];
    const QuantParam out = quant_[static_cast<size_t>(writes)];
    *fused = r.valid() && out.valid() && k->fuse_residual_int8(act, r, out);
    return k;
  }
  *fused = k->fuse_residual(act);
  if (*fused || !measured_ || k->bf16_io()) return k;
  const Node& node = g_.node(conv);
  NodeContext nc(g_, node);
  KernelRequest req{g_, node, nc.ctx(), *pool_};
  req.packs = &packs_;
  Result<std::unique_ptr<Kernel>> rules = build_kernel(req);
  if (!rules.ok() || !*rules || !(*rules)->fuse_residual(act)) return k;
  *fused = true;
  return std::move(*rules);
}

void CpuProgram::plan(std::span<const NodeId> layers,
                      const std::vector<std::unique_ptr<Kernel>>& kernels,
                      const std::vector<Layout>& input_layouts, std::vector<Layout>* first_wanted) {
  bufs_.clear();
  steps_.clear();
  input_bufs_.clear();
  output_bufs_.clear();
  // For each value, its buffer in each slot (-1: none) and the slot it was produced in.
  std::vector<std::array<int, kNumSlots>> buf_of(static_cast<size_t>(g_.num_values()),
                                                 {-1, -1, -1});
  std::vector<int> primary(static_cast<size_t>(g_.num_values()), 0);
  auto new_buf = [&](ValueId v, int slot, int step) {
    const TensorInfo& info = g_.value(v).info;
    Buf b;
    b.value = v;
    b.bf16 = slot == kBf16Slot && !int8_;
    b.int8 = slot == kBf16Slot && int8_;
    if (b.int8) b.quant = quant_[static_cast<size_t>(v)];
    b.layout = slot == kBf16Slot   ? bf16_layout(info)
               : convertible(info) ? static_cast<Layout>(slot)
                                   : Layout::kNCHW;
    b.bytes = b.bf16   ? static_cast<uint64_t>(info.shape.numel()) * 2
              : b.int8 ? static_cast<uint64_t>(info.shape.numel())
                       : info.byte_size();
    b.first = b.last = step;
    bufs_.push_back(b);
    const int idx = static_cast<int>(bufs_.size()) - 1;
    buf_of[static_cast<size_t>(v)][static_cast<size_t>(slot)] = idx;
    return idx;
  };
  auto touch = [&](int b, int step) {
    bufs_[static_cast<size_t>(b)].last = std::max(bufs_[static_cast<size_t>(b)].last, step);
  };

  // Step 0 copies the inputs in; steps 1.. are conversions and layers; the last copies out.
  first_wanted->assign(inputs_.size(), Layout::kNCHW);
  std::vector<bool> seen(inputs_.size(), false);
  for (size_t i = 0; i < inputs_.size(); ++i) {
    const ValueId v = inputs_[i];
    const Layout l = convertible(g_.value(v).info) ? input_layouts[i] : Layout::kNCHW;
    primary[static_cast<size_t>(v)] = slot_of(l);
    const int b = new_buf(v, slot_of(l), 0);
    if (!convertible(g_.value(v).info)) buf_of[static_cast<size_t>(v)] = {b, b, -1};
    input_bufs_.push_back(b);
  }
  // A QDQ model's folded value (graph/qdq.h) that arrives or is produced in f32 is quantised
  // right away, and every reader reads its int8 form (converted back where it reads f32): the
  // pair's rounding and clamping stay in the model.
  auto quantise_now = [&](ValueId v) {
    if (!int8_ || !qdq_value_[static_cast<size_t>(v)]) return;
    std::array<int, kNumSlots>& have = buf_of[static_cast<size_t>(v)];
    if (have[kBf16Slot] >= 0) return;
    const int src = have[static_cast<size_t>(primary[static_cast<size_t>(v)])];
    if (src < 0) return;
    Step conv;
    const int cstep = static_cast<int>(steps_.size()) + 1;
    touch(src, cstep);
    conv.inputs = {src};
    conv.in_layouts = {bufs_[static_cast<size_t>(src)].layout};
    const int b = new_buf(v, kBf16Slot, cstep);
    conv.outputs = {b};
    steps_.push_back(std::move(conv));
    have = {-1, -1, b};
    primary[static_cast<size_t>(v)] = kBf16Slot;
  };
  for (ValueId v : inputs_) quantise_now(v);
  auto input_index = [&](ValueId v) -> int {
    for (size_t i = 0; i < inputs_.size(); ++i) {
      if (inputs_[i] == v) return static_cast<int>(i);
    }
    return -1;
  };

  std::vector<Layout> available, wanted, produced;
  for (size_t li = 0; li < layers.size(); ++li) {
    const Node& node = g_.node(layers[li]);
    // A reduced-precision kernel (bf16, or int8 in an int8 program) reads input 0 and a fused
    // residual in the reduced slot, and writes output 0 there unless it is an int8 kernel with
    // an f32 output.
    const Kernel& kernel = *kernels[li];
    const bool bf16 = kernel.bf16_io() || (int8_ && kernel.int8_io());
    const bool reduced_out =
        kernel.bf16_io() || (int8_ && kernel.int8_io() && kernel.int8_output());
    const size_t ni = node.inputs.size();
    available.assign(ni, Layout::kNCHW);
    wanted.assign(ni, Layout::kNCHW);
    produced.assign(node.outputs.size(), Layout::kNCHW);
    for (size_t j = 0; j < ni; ++j) {
      const ValueId v = node.inputs[j];
      if (v == kNoValue || g_.value(v).is_constant) continue;
      // A value with no buffer (the output of a convolution whose Add is fused into it, read by
      // that Add's step, which reads nothing) offers no layout.
      const int b =
          buf_of[static_cast<size_t>(v)][static_cast<size_t>(primary[static_cast<size_t>(v)])];
      if (b >= 0) available[j] = bufs_[static_cast<size_t>(b)].layout;
    }
    kernels[li]->choose_layouts(available, wanted, produced);

    Step step;
    step.node = layers[li];
    // A fused Add's step reads and writes nothing; a convolution with a fused Add reads the
    // residual as one more input, in the layout (and precision) of its output, and writes the
    // Add's output.
    const Fusion& fusion = fusions_[li];
    std::vector<ValueId> reads = node.inputs;
    if (fusion.into >= 0) std::fill(reads.begin(), reads.end(), kNoValue);
    if (fusion.residual != kNoValue) {
      reads.push_back(fusion.residual);
      wanted.push_back(produced[0]);
    }
    for (size_t j = 0; j < reads.size(); ++j) {
      const ValueId v = reads[j];
      if (v == kNoValue) {
        step.inputs.push_back(-1);
        step.in_layouts.push_back(Layout::kNCHW);
        continue;
      }
      if (g_.value(v).is_constant) {
        step.inputs.push_back(-2);
        step.in_layouts.push_back(Layout::kNCHW);
        continue;
      }
      const TensorInfo& info = g_.value(v).info;
      // A bf16 kernel reads its activation input 0 and a fused residual in bf16.
      const bool want_bf16 = bf16 && (j == kernel.reduced_input() || j >= node.inputs.size() ||
                                      kernel.reduced_inputs_all());
      const Layout want_layout = want_bf16                ? bf16_layout(info)
                                 : info.shape.rank() == 4 ? wanted[j]
                                                          : Layout::kNCHW;
      const int want = want_bf16 ? kBf16Slot : slot_of(want_layout);
      const int in_idx = input_index(v);
      if (in_idx >= 0 && !seen[static_cast<size_t>(in_idx)]) {
        seen[static_cast<size_t>(in_idx)] = true;
        (*first_wanted)[static_cast<size_t>(in_idx)] =
            convertible(info) && !want_bf16 ? want_layout : Layout::kNCHW;
      }
      std::array<int, kNumSlots>& have = buf_of[static_cast<size_t>(v)];
      int b = have[static_cast<size_t>(want)];
      if (b < 0) {
        // A conversion step right before this layer, from an f32 buffer where there is one
        // (the one in the wanted layout's other f32 slot first), else from the bf16 one.
        const std::array<int, 2> order =
            want == kBf16Slot ? std::array<int, 2>{1, 0} : std::array<int, 2>{1 - want, kBf16Slot};
        int src = -1;
        for (int slot : order) {
          if (src < 0) src = have[static_cast<size_t>(slot)];
        }
        Step conv;
        conv.kernel = nullptr;
        const int cstep = static_cast<int>(steps_.size()) + 1;
        touch(src, cstep);
        conv.inputs = {src};
        conv.in_layouts = {bufs_[static_cast<size_t>(src)].layout};
        b = new_buf(v, want, cstep);
        // A layout-trivial f32 tensor serves both f32 slots from one buffer.
        if (want != kBf16Slot && !convertible(info)) have[0] = have[1] = b;
        conv.outputs = {b};
        steps_.push_back(std::move(conv));
      }
      step.inputs.push_back(b);
      step.in_layouts.push_back(bufs_[static_cast<size_t>(b)].layout);
    }
    const int sidx = static_cast<int>(steps_.size()) + 1;
    for (int b : step.inputs) {
      if (b >= 0) touch(b, sidx);
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      const ValueId v = fusion.into >= 0                      ? kNoValue
                        : o == 0 && fusion.writes != kNoValue ? fusion.writes
                                                              : node.outputs[o];
      if (v == kNoValue) {
        step.outputs.push_back(-1);
        continue;
      }
      const TensorInfo& info = g_.value(v).info;
      const int slot = reduced_out && o == 0    ? kBf16Slot
                       : info.shape.rank() == 4 ? slot_of(produced[o])
                                                : 0;
      primary[static_cast<size_t>(v)] = slot;
      const int b = new_buf(v, slot, sidx);
      // A layout-trivial f32 tensor serves both f32 slots from one buffer.
      if (slot != kBf16Slot && !convertible(info)) buf_of[static_cast<size_t>(v)] = {b, b, -1};
      // A reshape-like output shares its input's storage.
      if (o == 0 && kernels[li]->aliases_input() && !step.inputs.empty() && step.inputs[0] >= 0 &&
          bufs_[static_cast<size_t>(step.inputs[0])].bytes == bufs_[static_cast<size_t>(b)].bytes &&
          bufs_[static_cast<size_t>(step.inputs[0])].bf16 == bufs_[static_cast<size_t>(b)].bf16 &&
          bufs_[static_cast<size_t>(step.inputs[0])].int8 == bufs_[static_cast<size_t>(b)].int8) {
        bufs_[static_cast<size_t>(b)].alias = step.inputs[0];
      }
      step.outputs.push_back(b);
    }
    steps_.push_back(std::move(step));
    for (int b : steps_.back().outputs) {
      if (b >= 0) quantise_now(bufs_[static_cast<size_t>(b)].value);
    }
  }
  const int last = static_cast<int>(steps_.size()) + 1;
  for (ValueId v : outputs_) {
    const int b =
        buf_of[static_cast<size_t>(v)][static_cast<size_t>(primary[static_cast<size_t>(v)])];
    touch(b, last);
    output_bufs_.push_back(b);
  }
}

void CpuProgram::place_concat_inputs() {
  // How often each buffer is read (by steps, by the copy-out, as shared storage) and which layer
  // step writes it as its output 0.
  std::vector<int> reads(bufs_.size(), 0), producer(bufs_.size(), -1);
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step& s = steps_[si];
    for (int b : s.inputs) {
      if (b >= 0) ++reads[static_cast<size_t>(b)];
    }
    if (s.node != kNoNode && !s.outputs.empty() && s.outputs[0] >= 0)
      producer[static_cast<size_t>(s.outputs[0])] = static_cast<int>(si);
  }
  for (int b : output_bufs_) ++reads[static_cast<size_t>(b)];
  for (const Buf& b : bufs_) {
    if (b.alias >= 0) ++reads[static_cast<size_t>(b.alias)];
  }
  auto in_place = [&](int b) {
    const Buf& buf = bufs_[static_cast<size_t>(b)];
    const int p = producer[static_cast<size_t>(b)];
    return buf.layout == Layout::kNHWC && !buf.bf16 && !buf.int8 && buf.alias < 0 &&
           reads[static_cast<size_t>(b)] == 1 && p >= 0 &&
           steps_[static_cast<size_t>(p)].kernel->writes_strided_output();
  };
  // Steps run in order, so an inner Concat's output becomes a slice of the outer one after its
  // own inputs became slices of it; allocate_and_bind resolves such chains.
  for (const Step& s : steps_) {
    if (s.node == kNoNode) continue;
    const Node& node = g_.node(s.node);
    if (node.kind != OpKind::kConcat || s.outputs.size() != 1 || s.outputs[0] < 0) continue;
    const Buf& whole = bufs_[static_cast<size_t>(s.outputs[0])];
    const TensorInfo& info = g_.value(whole.value).info;
    const Result<int64_t> axis = node.attrs.get_int("axis");
    if (whole.layout != Layout::kNHWC || whole.bf16 || whole.int8 || info.dtype != DType::kF32 ||
        info.shape.rank() != 4 || !axis.ok() || (*axis != 1 && *axis != -3) ||
        std::any_of(s.inputs.begin(), s.inputs.end(), [](int b) { return b < 0; }))
      continue;
    int64_t channel = 0;
    for (size_t j = 0; j < s.inputs.size(); ++j) {
      const int b = s.inputs[j];
      if (in_place(b)) {
        Buf& part = bufs_[static_cast<size_t>(b)];
        part.alias = s.outputs[0];
        part.alias_offset = static_cast<uint64_t>(channel) * sizeof(float);
        part.pixel_stride = info.shape[1];
      }
      channel += g_.value(node.inputs[j]).info.shape[1];
    }
  }
}

Status CpuProgram::allocate_and_bind() {
  // Resolve every aliasing buffer to the storage it finally lives in: the root buffer, the byte
  // offset into it and, for a channel slice of a slice (a Concat inside a Concat), the pixel
  // stride of the outermost one.
  const size_t nb = bufs_.size();
  std::vector<int> root(nb);
  std::vector<uint64_t> offset(nb, 0);
  std::vector<int64_t> stride(nb, 0);
  std::vector<char> done(nb, 0);
  std::vector<size_t> chain;
  for (size_t i = 0; i < nb; ++i) {
    chain.clear();
    size_t j = i;
    while (!done[j] && bufs_[j].alias >= 0) {
      chain.push_back(j);
      j = static_cast<size_t>(bufs_[j].alias);
    }
    if (!done[j]) {  // a root
      root[j] = static_cast<int>(j);
      done[j] = 1;
    }
    for (size_t k = chain.size(); k-- > 0;) {
      const size_t c = chain[k], a = static_cast<size_t>(bufs_[c].alias);
      root[c] = root[a];
      offset[c] = offset[a] + bufs_[c].alias_offset;
      stride[c] = stride[a] != 0 ? stride[a] : bufs_[c].pixel_stride;
      done[c] = 1;
    }
  }
  // An aliasing buffer takes no arena space and keeps its root's storage alive as long as itself.
  for (size_t i = 0; i < nb; ++i) {
    Buf& r = bufs_[static_cast<size_t>(root[i])];
    r.first = std::min(r.first, bufs_[i].first);
    r.last = std::max(r.last, bufs_[i].last);
  }
  std::vector<ArenaRequest> req;
  std::vector<size_t> owner;  // buffer of each request
  for (size_t i = 0; i < bufs_.size(); ++i) {
    if (bufs_[i].alias >= 0) continue;
    req.push_back({bufs_[i].bytes, bufs_[i].first, bufs_[i].last});
    owner.push_back(i);
  }
  const ArenaPlan plan = plan_arena(req, kTensorAlignment, 16);
  for (size_t r = 0; r < owner.size(); ++r) bufs_[owner[r]].offset = plan.offsets[r];
  for (size_t i = 0; i < nb; ++i) {
    if (bufs_[i].alias < 0) continue;
    bufs_[i].offset = bufs_[static_cast<size_t>(root[i])].offset + offset[i];
    bufs_[i].pixel_stride = stride[i];
  }
  arena_bytes_ = plan.total_bytes;
  ASSIGN_OR_RETURN(arena_,
                   allocate_host(static_cast<size_t>(std::max<uint64_t>(plan.total_bytes, 1))));

  std::vector<Operand> ins, outs;
  for (Step& s : steps_) {
    ins.clear();
    outs.clear();
    const Node* node = s.node != kNoNode ? &g_.node(s.node) : nullptr;
    for (size_t j = 0; j < s.inputs.size(); ++j) {
      Operand o;
      const int b = s.inputs[j];
      if (b == -1) {
        ins.push_back(o);
        continue;
      }
      if (b == -2) {
        ins.push_back(constant_operand(g_.value(node->inputs[j]).data));
        continue;
      }
      const Buf& buf = bufs_[static_cast<size_t>(b)];
      const TensorInfo& info = g_.value(buf.value).info;
      o.data = address(b);
      o.dtype = info.dtype;
      o.shape = info.shape;
      o.layout = s.in_layouts[j];
      o.pixel_stride = buf.pixel_stride;
      o.bf16 = buf.bf16;
      o.int8 = buf.int8;
      o.quant = buf.quant;
      ins.push_back(o);
    }
    for (int b : s.outputs) {
      Operand o;
      if (b >= 0) {
        const Buf& buf = bufs_[static_cast<size_t>(b)];
        const TensorInfo& info = g_.value(buf.value).info;
        o.data = address(b);
        o.dtype = info.dtype;
        o.shape = info.shape;
        o.layout = buf.layout;
        o.pixel_stride = buf.pixel_stride;
        o.bf16 = buf.bf16;
        o.int8 = buf.int8;
        o.quant = buf.quant;
      }
      outs.push_back(o);
    }
    if (s.kernel == nullptr) {
      using Reduced = PrecisionConversion::Reduced;
      if (ins[0].int8 != outs[0].int8 || ins[0].bf16 != outs[0].bf16) {
        const Reduced r = ins[0].int8 != outs[0].int8 ? Reduced::kInt8 : Reduced::kBf16;
        const bool to_reduced = outs[0].int8 || outs[0].bf16;
        s.kernel =
            std::make_unique<PrecisionConversion>(s.in_layouts[0], outs[0].layout, r, to_reduced);
      } else {
        s.kernel = std::make_unique<LayoutConversion>(s.in_layouts[0], outs[0].layout);
      }
    }
    Status st = s.kernel->bind(ins, outs, *pool_);
    if (!st.ok()) {
      return node != nullptr ? st.with_context("node " + quote_name(node->name) + " (" +
                                               op_name(node->kind) + ")")
                             : st;
    }
  }
  return Status();
}

Status CpuProgram::execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                           const RunOptions& options) {
  const ScopedFlushDenormals flush;  // core/denormals.h; the pool's workers flush too
  RETURN_IF_ERROR(check_and_allocate(inputs, outputs));
  if (options.layer_ms != nullptr) {
    options.layer_ms->assign(num_layers_, 0.0);
    return pool_->run([&]() { return run_steps(inputs, outputs, options); });
  }
  return pool_->run([&]() {
    const bool workers = choice_.next(pool_->num_threads());
    pool_->set_use_workers(workers);
    const auto t0 = std::chrono::steady_clock::now();
    Status st = run_steps(inputs, outputs, options);
    choice_.record(
        workers,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    return st;
  });
}

Status CpuProgram::check_and_allocate(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
    return invalid_argument("program takes " + std::to_string(inputs_.size()) + " inputs and " +
                            std::to_string(outputs_.size()) + " outputs, got " +
                            std::to_string(inputs.size()) + " and " +
                            std::to_string(outputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g_.value(inputs_[i]);
    if (inputs[i].dtype() != v.info.dtype || inputs[i].shape() != v.info.shape ||
        !inputs[i].defined()) {
      return invalid_argument("input " + quote_name(v.name) + " expects " +
                              dtype_name(v.info.dtype) + v.info.shape.to_string() + ", got " +
                              inputs[i].describe());
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorInfo& info = g_.value(outputs_[i]).info;
    Tensor& t = outputs[i];
    if (t.raw() == nullptr || t.dtype() != info.dtype || t.shape() != info.shape) {
      ASSIGN_OR_RETURN(t, Tensor::create(info.dtype, info.shape));
    }
  }
  return Status();
}

Status CpuProgram::run_steps(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                             const RunOptions& options) {
  using Clock = std::chrono::steady_clock;
  std::vector<double>* layer_ms = options.layer_ms;
  ThreadPool& pool = *pool_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Buf& b = bufs_[static_cast<size_t>(input_bufs_[i])];
    const Tensor& t = inputs[i];
    if (b.layout == Layout::kNHWC) {
      nchw_to_nhwc(t.data<float>(), static_cast<float*>(address(input_bufs_[i])), t.dim(0),
                   t.dim(1), t.dim(2) * t.dim(3), &pool);
    } else {
      copy_bytes(address(input_bufs_[i]), t.raw(), t.byte_size(), &pool);
    }
  }
  // Layer i's time runs from the end of the previous layer's step (so conversions between
  // them are charged to the layer that needs them) to the end of its own.
  size_t layer = 0;
  Clock::time_point t0 = layer_ms != nullptr ? Clock::now() : Clock::time_point();
  bool parked = false;  // the pthreadpool workers sleep while OpenMP kernels run
  for (Step& s : steps_) {
    if (s.node != kNoNode && options.stop_requested()) {
      return options.check("node " + quote_name(g_.node(s.node).name));
    }
    const bool openmp = s.kernel->runs_on_openmp();
    if (openmp && !parked) pool.park_workers();
    if (s.node != kNoNode) parked = openmp;
    Status st = s.kernel->run(pool);
    if (layer_ms != nullptr && s.node != kNoNode) {
      const Clock::time_point t1 = Clock::now();
      (*layer_ms)[layer++] = std::chrono::duration<double, std::milli>(t1 - t0).count();
      t0 = t1;
    }
    if (!st.ok()) {
      if (s.node == kNoNode) return st;
      const Node& n = g_.node(s.node);
      return st.with_context("node " + quote_name(n.name) + " (" + op_name(n.kind) + ")");
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Buf& b = bufs_[static_cast<size_t>(output_bufs_[i])];
    Tensor& t = outputs[i];
    if (b.int8) {
      const void* src = address(output_bufs_[i]);
      if (t.rank() == 4 && !layout_trivial(t.shape())) {
        nhwc_int8_to_nchw_f32(src, t.data<float>(), t.dim(0), t.dim(1), t.dim(2) * t.dim(3),
                              b.quant, &pool);
      } else {
        dequantize_array(src, t.data<float>(), t.shape().numel(), b.quant, &pool);
      }
    } else if (b.bf16) {
      const auto* src = static_cast<const uint16_t*>(address(output_bufs_[i]));
      if (t.rank() == 4 && !layout_trivial(t.shape())) {
        nhwc_bf16_to_nchw_f32(src, t.data<float>(), t.dim(0), t.dim(1), t.dim(2) * t.dim(3), &pool);
      } else {
        bf16_to_f32_array(src, t.data<float>(), t.shape().numel(), &pool);
      }
    } else if (b.layout == Layout::kNHWC) {
      nhwc_to_nchw(static_cast<const float*>(address(output_bufs_[i])), t.data<float>(), t.dim(0),
                   t.dim(1), t.dim(2) * t.dim(3), &pool);
    } else {
      copy_bytes(t.raw(), address(output_bufs_[i]), t.byte_size(), &pool);
    }
  }
  return Status();
}

std::string CpuProgram::describe() const {
  std::string s;
  for (const Step& st : steps_) {
    s += st.node != kNoNode ? g_.node(st.node).name : std::string("(layout)");
    s += ": " + st.kernel->describe();
    if (st.node != kNoNode &&
        std::find(measured_f32_.begin(), measured_f32_.end(), st.node) != measured_f32_.end())
      s += " (f32: measured faster than its reduced kernel)";
    s += "\n";
  }
  return s;
}

int CpuProgram::num_reference_steps() const {
  int n = 0;
  for (const Step& s : steps_) n += s.kernel->is_reference() ? 1 : 0;
  return n;
}

int CpuProgram::num_in_place_concat_inputs() const {
  int n = 0;
  for (const Buf& b : bufs_) n += b.pixel_stride > 0 ? 1 : 0;
  return n;
}

int CpuProgram::num_bf16_layers() const {
  int n = 0;
  for (const Step& s : steps_) n += s.node != kNoNode && s.kernel->bf16_io() ? 1 : 0;
  return n;
}

int CpuProgram::num_int8_layers() const {
  int n = 0;
  for (const Step& s : steps_) n += s.node != kNoNode && s.kernel->int8_io() ? 1 : 0;
  return n;
}

int CpuProgram::num_int8_buffers() const {
  int n = 0;
  for (const Buf& b : bufs_) n += b.int8 ? 1 : 0;
  return n;
}

int CpuProgram::num_bf16_buffers() const {
  int n = 0;
  for (const Buf& b : bufs_) n += b.bf16 ? 1 : 0;
  return n;
}

int CpuProgram::num_conversions() const {
  int n = 0;
  for (const Step& s : steps_) n += s.node == kNoNode ? 1 : 0;
  return n;
}

}  // namespace tessera::cpu
