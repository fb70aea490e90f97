// The case list (see op_cases.h) and the one-node-graph builder.
//
// Shapes are odd (13, 127: the tails of every tile and vector loop), attributes cover each op's
// variants, and inputs plant NaN and infinities where an op must pass them through. The cases came
// together from the cpu, OpenCL and Vulkan harnesses that this list replaces; none was dropped.
#include "tests/backends/op_cases.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

namespace tessera::testing {

Result<Graph> one_node_graph(OpKind kind, const Attributes& attrs,
                             const std::vector<NodeInput>& inputs, int num_outputs,
                             bool through_pad) {
  Graph g = single_node_graph(kind, attrs, inputs, num_outputs);
  if (through_pad) {
    // Rebuild with a Pad in front of the first input fed at run time.
    Graph h;
    Node pad;
    pad.name = "feed_pad";
    pad.kind = OpKind::kPad;
    Node n = g.node(0);
    n.inputs.clear();
    bool padded = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::string name = "in" + std::to_string(i);
      if (inputs[i].omitted) {
        n.inputs.push_back(kNoValue);
      } else if (inputs[i].constant) {
        n.inputs.push_back(h.add_constant(name, inputs[i].tensor));
      } else {
        const Tensor& t = inputs[i].tensor;
        const ValueId v = h.add_value(name, TensorInfo{t.dtype(), t.shape()});
        h.inputs().push_back(v);
        n.inputs.push_back(v);
        if (!padded) {
          const int64_t rank = t.rank();
          pad.inputs = {
              v, h.add_constant(
                     "feed_pads",
                     Tensor::from_int64s(Shape{2 * rank},
                                         std::vector<int64_t>(static_cast<size_t>(2 * rank))))};
          pad.outputs = {h.add_value("fed")};
          n.inputs.back() = pad.outputs[0];
          padded = true;
        }
      }
    }
    n.outputs.clear();
    for (int o = 0; o < num_outputs; ++o)
      n.outputs.push_back(h.add_value("out" + std::to_string(o)));
    if (padded) h.add_node(pad);
    h.add_node(n);
    g = std::move(h);
  }
  g.outputs() = g.node(g.num_nodes() - 1).outputs;
  RETURN_IF_ERROR(g.infer_shapes());
  return g;
}

std::vector<std::pair<ValueId, Tensor>> graph_feeds(const Graph& g,
                                                    const std::vector<NodeInput>& inputs) {
  std::vector<std::pair<ValueId, Tensor>> feed;
  size_t next = 0;
  for (ValueId v : g.inputs()) {
    while (next < inputs.size() && (inputs[next].constant || inputs[next].omitted)) ++next;
    if (next == inputs.size()) break;
    feed.emplace_back(v, inputs[next++].tensor);
  }
  return feed;
}

std::vector<NodeId> all_layers(const Graph& g) {
  std::vector<NodeId> layers;
  for (NodeId i = 0; i < g.num_nodes(); ++i) layers.push_back(i);
  return layers;
}

Result<std::vector<Tensor>> run_layers(Device& device, const Graph& g,
                                       const std::vector<NodeId>& layers,
                                       const std::vector<std::pair<ValueId, Tensor>>& feed,
                                       std::string* description, int runs,
                                       const CompileOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<Program> p, device.compile(g, layers, options));
  if (description != nullptr) *description = p->describe();
  std::vector<Tensor> ins;
  for (ValueId v : p->input_values()) {
    bool found = false;
    for (const auto& [id, t] : feed) {
      if (id == v) {
        ins.push_back(t);
        found = true;
      }
    }
    if (!found) return not_found("no tensor fed for '" + g.value(v).name + "'");
  }
  std::vector<Tensor> outs(p->output_values().size());
  RETURN_IF_ERROR(p->run(ins, outs));
  for (int r = 1; r < runs; ++r) {
    std::vector<Tensor> again(outs.size());
    RETURN_IF_ERROR(p->run(ins, again));
    for (size_t o = 0; o < outs.size(); ++o) {
      if (again[o].byte_size() != outs[o].byte_size() ||
          std::memcmp(again[o].raw(), outs[o].raw(), outs[o].byte_size()) != 0) {
        // NaN payloads may differ between runs only if NaN is there: compare as values then.
        const std::string diff = compare_outputs(again[o], outs[o], Tolerance{0, 0, false, false});
        if (!diff.empty()) {
          return internal_error("run " + std::to_string(r + 1) + " differs from run 1: " + diff);
        }
      }
    }
  }
  return outs;
}

std::string compare_outputs(const Tensor& got, const Tensor& ref, const Tolerance& tol,
                            double* max_abs_err) {
  std::ostringstream os;
  if (got.dtype() != ref.dtype() || got.shape() != ref.shape()) {
    os << "got " << dtype_name(got.dtype()) << got.shape().to_string() << ", reference "
       << dtype_name(ref.dtype()) << ref.shape().to_string();
    return os.str();
  }
  if (ref.dtype() != DType::kF32) {
    const size_t es = dtype_size(ref.dtype());
    int reported = 0;
    for (int64_t i = 0; i < ref.numel() && reported < 5; ++i) {
      if (ref.dtype() == DType::kF16 && std::isnan(got.float_at(i)) &&
          std::isnan(ref.float_at(i))) {
        continue;  // NaN payloads are not specified
      }
      if (std::memcmp(static_cast<const char*>(got.raw()) + i * es,
                      static_cast<const char*>(ref.raw()) + i * es, es) != 0) {
        os << "[" << i << "] " << got.float_at(i) << " vs reference " << ref.float_at(i) << " ("
           << dtype_name(ref.dtype()) << "); ";
        ++reported;
      }
    }
    return os.str();
  }
  double max_ref = 0;
  for (float v : ref.span<float>()) {
    if (std::isfinite(v)) max_ref = std::max(max_ref, static_cast<double>(std::fabs(v)));
  }
  const double bound = tol.scale_by_max ? tol.tol * std::max(1.0, max_ref) : tol.tol;
  double worst = 0;
  int reported = 0;
  for (int64_t i = 0; i < ref.numel(); ++i) {
    const float g = got.data<float>()[i], r = ref.data<float>()[i];
    bool ok;
    if (std::isnan(r)) {
      ok = tol.nan_may_clamp || tol.nonfinite_may_saturate || std::isnan(g);
    } else if (std::isinf(r)) {
      ok = g == r || tol.nonfinite_may_saturate;
    } else {
      const double err = std::fabs(static_cast<double>(g) - r);
      ok = std::isfinite(g) && err <= bound + tol.rel * std::fabs(r);
      if (std::isfinite(g)) worst = std::max(worst, err);
    }
    if (!ok && reported++ < 5) {
      os << "[" << i << "] " << g << " vs reference " << r << " (bound "
         << bound + tol.rel * std::fabs(r) << "); ";
    }
  }
  if (max_abs_err != nullptr) *max_abs_err = worst;
  return os.str();
}

namespace {

using Ints = std::vector<int64_t>;

Attributes attrs(std::initializer_list<std::pair<const char*, AttributeValue>> list) {
  Attributes a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

Tensor rnd(const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  return random_tensor(s, seed, lo, hi);
}

// A random tensor with NaN, +Inf and -Inf planted at fixed places.
Tensor with_specials(Tensor t) {
  float* p = t.data<float>();
  const int64_t n = t.numel();
  if (n > 3) {
    p[n / 3] = std::numeric_limits<float>::quiet_NaN();
    p[n / 2] = std::numeric_limits<float>::infinity();
    p[n - 1] = -std::numeric_limits<float>::infinity();
  }
  return t;
}

Tensor ints64(const Shape& s, std::vector<int64_t> v) {
  return Tensor::from_int64s(s, v);
}
Tensor ints64(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_int64s(Shape({n}), v);
}
Tensor scalar(float v) {
  return Tensor::scalar_f32(v);
}
Tensor floats(std::vector<float> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_floats(Shape({n}), v);
}
// Random bytes in `dtype` (integers wrap, bools see bytes other than 0 and 1).
Tensor typed(DType dtype, const Shape& s, uint32_t seed) {
  Tensor t = Tensor::create(dtype, s).value();
  std::mt19937 rng(seed);
  auto* bytes = static_cast<unsigned char*>(t.raw());
  for (size_t i = 0; i < t.byte_size(); ++i) bytes[i] = static_cast<unsigned char>(rng());
  return t;
}

std::vector<OpCase> conv_cases() {
  std::vector<OpCase> c;
  auto conv = [&](std::string name, Shape x, Shape w, bool bias, Attributes a, uint32_t seed) {
    std::vector<NodeInput> in = {activation(rnd(x, seed)), weight(rnd(w, seed + 1))};
    if (bias) in.push_back(weight(rnd(Shape({w[0]}), seed + 2)));
    c.push_back({"Conv_" + name, OpKind::kConv, std::move(a), std::move(in), 1, 1e-4f});
  };
  conv("3x3_pad1", Shape({2, 13, 13, 13}), Shape({17, 13, 3, 3}), true,
       attrs({{"pads", Ints{1, 1, 1, 1}}}), 1);
  conv("3x3_s2_relu", Shape({1, 16, 27, 29}), Shape({70, 16, 3, 3}), true,
       attrs({{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"activation", "relu"}}), 2);
  conv("3x3_dilated_asym", Shape({1, 5, 19, 23}), Shape({7, 5, 3, 3}), false,
       attrs({{"pads", Ints{2, 0, 1, 3}}, {"dilations", Ints{2, 3}}}), 3);
  conv("1x1_fast", Shape({2, 127, 13, 13}), Shape({33, 127, 1, 1}), true,
       attrs({{"activation", "clip"}, {"activation_alpha", 0.f}, {"activation_beta", 0.5f}}), 4);
  // The clip to [0, 0.5] hides sums of 127 products (up to ~6) that bf16 rounding scales with.
  c.back().precision_scale = 4.f;
  conv("1x1_fast_no_bias", Shape({1, 64, 7, 7}), Shape({130, 64, 1, 1}), false, attrs({}), 5);
  conv("1x1_stride2", Shape({1, 24, 13, 13}), Shape({40, 24, 1, 1}), true,
       attrs({{"strides", Ints{2, 2}}}), 6);
  conv("depthwise_3x3", Shape({2, 13, 15, 17}), Shape({13, 1, 3, 3}), true,
       attrs({{"group", int64_t{13}}, {"pads", Ints{1, 1, 1, 1}}, {"activation", "hard_swish"}}),
       7);
  conv("depthwise_5x5_s2", Shape({1, 32, 29, 31}), Shape({32, 1, 5, 5}), true,
       attrs({{"group", int64_t{32}}, {"pads", Ints{2, 2, 2, 2}}, {"strides", Ints{2, 2}}}), 8);
  conv("depthwise_multiplier", Shape({1, 6, 11, 9}), Shape({12, 1, 3, 3}), false,
       attrs({{"group", int64_t{6}}, {"dilations", Ints{2, 1}}}), 9);
  conv("grouped", Shape({1, 12, 13, 13}), Shape({9, 4, 3, 3}), true,
       attrs({{"group", int64_t{3}}, {"pads", Ints{1, 1, 1, 1}}}), 10);
  conv("stem_7x7_s2", Shape({1, 3, 61, 61}), Shape({64, 3, 7, 7}), true,
       attrs({{"pads", Ints{3, 3, 3, 3}}, {"strides", Ints{2, 2}}}), 11);
  conv("same_upper", Shape({1, 5, 12, 13}), Shape({6, 5, 4, 4}), true,
       attrs({{"auto_pad", "SAME_UPPER"}, {"strides", Ints{2, 2}}}), 12);
  conv("conv1d", Shape({2, 7, 127}), Shape({9, 7, 5}), true,
       attrs({{"pads", Ints{2, 2}}, {"strides", Ints{3}}}), 13);
  conv("conv3d", Shape({1, 3, 5, 9, 8}), Shape({4, 3, 3, 3, 3}), true,
       attrs({{"pads", Ints{1, 1, 1, 1, 1, 1}}}), 14);
  conv(
      "large_k", Shape({1, 96, 13, 13}), Shape({130, 96, 3, 3}), true,
      attrs({{"pads", Ints{1, 1, 1, 1}}, {"activation", "leaky_relu"}, {"activation_alpha", 0.1f}}),
      15);
  {
    Tensor x = with_specials(rnd(Shape({1, 4, 9, 9}), 16));
    c.push_back({"Conv_nan_inf",
                 OpKind::kConv,
                 attrs({{"pads", Ints{1, 1, 1, 1}}}),
                 {activation(x), weight(rnd(Shape({5, 4, 3, 3}), 17))},
                 1,
                 1e-4f});
  }
  auto convt = [&](std::string name, Shape x, Shape w, Attributes a, uint32_t seed) {
    const int64_t group = a.int_or("group", 1).value();
    std::vector<NodeInput> in = {activation(rnd(x, seed)), weight(rnd(w, seed + 1)),
                                 weight(rnd(Shape({w[1] * group}), seed + 2))};
    c.push_back(
        {"ConvTranspose_" + name, OpKind::kConvTranspose, std::move(a), std::move(in), 1, 1e-4f});
  };
  convt(
      "s2_p1_op1", Shape({1, 8, 7, 9}), Shape({8, 5, 3, 3}),
      attrs({{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"output_padding", Ints{1, 1}}}),
      20);
  convt("grouped_dilated", Shape({2, 6, 5, 5}), Shape({6, 2, 3, 3}),
        attrs({{"group", int64_t{3}}, {"dilations", Ints{2, 2}}, {"activation", "sigmoid"}}), 21);
  return c;
}

std::vector<OpCase> gemm_cases() {
  std::vector<OpCase> c;
  auto gemm = [&](std::string name, Shape a, Shape b, std::optional<Shape> cs, Attributes at,
                  uint32_t seed) {
    std::vector<NodeInput> in = {activation(rnd(a, seed)), weight(rnd(b, seed + 1))};
    if (cs) in.push_back(weight(rnd(*cs, seed + 2)));
    c.push_back({"Gemm_" + name, OpKind::kGemm, std::move(at), std::move(in), 1, 1e-4f});
  };
  gemm("plain", Shape({13, 127}), Shape({127, 33}), std::nullopt, attrs({}), 1);
  gemm("transA_transB_bias_n", Shape({127, 13}), Shape({70, 127}), Shape({70}),
       attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}}), 2);
  gemm("alpha_beta_mn", Shape({65, 17}), Shape({17, 66}), Shape({65, 66}),
       attrs({{"alpha", 0.5f}, {"beta", -2.f}}), 3);
  gemm("bias_m1", Shape({13, 9}), Shape({9, 5}), Shape({13, 1}), attrs({}), 4);
  gemm("bias_scalar_relu", Shape({7, 9}), Shape({9, 5}), Shape({}), attrs({{"activation", "relu"}}),
       5);
  gemm("fc_batch1_transB", Shape({1, 1000}), Shape({127, 1000}), Shape({127}),
       attrs({{"transB", int64_t{1}}}), 6);
  gemm("fc_batch3", Shape({3, 257}), Shape({257, 129}), Shape({1, 129}), attrs({}), 7);
  gemm("fc_batch2_transB_tanh", Shape({2, 300}), Shape({13, 300}), Shape({13}),
       attrs({{"transB", int64_t{1}}, {"activation", "tanh"}}), 8);
  // Four rows and a k tail (1027 = 4 * 256 + 3) through the float4 dot kernel; with transA the
  // rows of A are strided, which takes the scalar dot kernel.
  gemm("fc_batch4_transB_k_tail", Shape({4, 1027}), Shape({65, 1027}), Shape({65}),
       attrs({{"transB", int64_t{1}}}), 9);
  gemm("fc_batch3_transA_transB", Shape({127, 3}), Shape({13, 127}), Shape({13}),
       attrs({{"transA", int64_t{1}}, {"transB", int64_t{1}}}), 10);
  auto matmul = [&](std::string name, Shape a, Shape b, bool b_const, uint32_t seed) {
    c.push_back({"MatMul_" + name,
                 OpKind::kMatMul,
                 attrs({}),
                 {activation(rnd(a, seed)),
                  b_const ? weight(rnd(b, seed + 1)) : activation(rnd(b, seed + 1))},
                 1,
                 1e-4f});
  };
  matmul("2d", Shape({13, 127}), Shape({127, 33}), true, 10);
  matmul("batched_weight", Shape({2, 3, 13, 17}), Shape({17, 5}), true, 11);
  matmul("batched_both", Shape({4, 13, 17}), Shape({4, 17, 9}), false, 12);
  matmul("broadcast_a", Shape({1, 13, 17}), Shape({3, 17, 9}), false, 13);
  matmul("mixed_broadcast", Shape({2, 1, 4, 5}), Shape({3, 5, 6}), false, 14);
  matmul("vec_mat", Shape({127}), Shape({127, 13}), true, 15);
  matmul("mat_vec", Shape({13, 127}), Shape({127}), false, 16);
  return c;
}

std::vector<OpCase> pool_cases() {
  std::vector<OpCase> c;
  auto pool = [&](OpKind k, std::string name, Shape x, Attributes a, uint32_t seed,
                  bool specials = false) {
    Tensor t = rnd(x, seed);
    if (specials) t = with_specials(t);
    c.push_back({std::string(op_name(k)) + "_" + name, k, std::move(a), {activation(t)}});
  };
  pool(OpKind::kMaxPool, "3x3_s2_p1", Shape({2, 13, 15, 17}),
       attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
       1);
  pool(OpKind::kMaxPool, "ceil_dilated", Shape({1, 5, 14, 13}),
       attrs({{"kernel_shape", Ints{3, 2}},
              {"strides", Ints{2, 2}},
              {"ceil_mode", int64_t{1}},
              {"dilations", Ints{2, 1}}}),
       2);
  pool(OpKind::kMaxPool, "nan_inf", Shape({1, 3, 9, 9}),
       attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}), 3, true);
  pool(OpKind::kMaxPool, "1d", Shape({2, 3, 127}), attrs({{"kernel_shape", Ints{5}}}), 4);
  pool(OpKind::kAveragePool, "exclude_pad", Shape({2, 13, 15, 17}),
       attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
       5);
  pool(OpKind::kAveragePool, "include_pad_ceil", Shape({1, 7, 13, 12}),
       attrs({{"kernel_shape", Ints{3, 3}},
              {"strides", Ints{2, 2}},
              {"pads", Ints{1, 0, 1, 1}},
              {"count_include_pad", int64_t{1}},
              {"ceil_mode", int64_t{1}}}),
       6);
  pool(OpKind::kAveragePool, "3d", Shape({1, 2, 5, 6, 7}), attrs({{"kernel_shape", Ints{2, 3, 2}}}),
       7);
  pool(OpKind::kGlobalAveragePool, "odd", Shape({2, 13, 7, 9}), attrs({}), 8);
  pool(OpKind::kGlobalAveragePool, "large_plane", Shape({1, 3, 127, 129}), attrs({}), 9);
  pool(OpKind::kGlobalMaxPool, "odd", Shape({2, 13, 7, 9}), attrs({}), 10);
  pool(OpKind::kGlobalMaxPool, "nan_inf", Shape({1, 4, 13, 13}), attrs({}), 11, true);
  return c;
}

std::vector<OpCase> elementwise_cases() {
  std::vector<OpCase> c;
  const Shape odd({2, 13, 7, 9});
  auto unary = [&](OpKind k, std::string name, Attributes a, std::vector<NodeInput> extra = {}) {
    std::vector<NodeInput> in = {activation(with_specials(rnd(odd, 1, -8.f, 8.f)))};
    for (NodeInput& e : extra) in.push_back(std::move(e));
    c.push_back({std::string(op_name(k)) + "_" + name, k, std::move(a), std::move(in)});
  };
  unary(OpKind::kRelu, "nan_inf", attrs({}));
  unary(OpKind::kLeakyRelu, "alpha", attrs({{"alpha", 0.3f}}));
  unary(OpKind::kClip, "relu6", attrs({}), {weight(scalar(0.f)), weight(scalar(6.f))});
  unary(OpKind::kClip, "min_only", attrs({}), {weight(scalar(-0.5f))});
  unary(OpKind::kClip, "min_above_max", attrs({}), {weight(scalar(1.f)), weight(scalar(-1.f))});
  unary(OpKind::kSigmoid, "nan_inf", attrs({}));
  unary(OpKind::kHardSigmoid, "alpha_beta", attrs({{"alpha", 0.25f}, {"beta", 0.4f}}));
  unary(OpKind::kHardSwish, "nan_inf", attrs({}));
  unary(OpKind::kTanh, "nan_inf", attrs({}));
  {
    // A length that is not a multiple of the 4-wide vectors.
    c.push_back({"Relu_tail", OpKind::kRelu, attrs({}), {activation(rnd(Shape({127}), 2))}});
  }
  auto binary = [&](OpKind k, std::string name, Shape a, Shape b, Attributes at, uint32_t seed,
                    bool b_const = false) {
    Tensor tb = rnd(b, seed + 1, 0.5f, 2.f);
    c.push_back({std::string(op_name(k)) + "_" + name,
                 k,
                 std::move(at),
                 {activation(rnd(a, seed)), b_const ? weight(tb) : activation(tb)}});
  };
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    binary(k, "same", odd, odd, attrs({}), 1);
    binary(k, "channel", odd, Shape({1, 13, 1, 1}), attrs({}), 2, true);
    binary(k, "outer", Shape({13, 1}), Shape({1, 17}), attrs({}), 3);
    binary(k, "scalar_left", Shape({}), Shape({3, 127}), attrs({}), 4);
  }
  binary(OpKind::kAdd, "same_relu", odd, odd, attrs({{"activation", "relu"}}), 5);
  binary(OpKind::kMul, "se_gate", Shape({2, 13, 7, 9}), Shape({2, 13, 1, 1}), attrs({}), 6);
  // The gate first (torchvision writes scale * input), one gate for both images, 37 channels (a
  // vector and a tail).
  binary(OpKind::kMul, "se_gate_left", Shape({1, 37, 1, 1}), Shape({2, 37, 5, 3}), attrs({}), 9);
  binary(OpKind::kAdd, "row_bias", Shape({3, 5, 127}), Shape({127}), attrs({}), 7, true);
  // Two activations of one rank-3 shape: an int8 Add in logical order (not NHWC).
  binary(OpKind::kAdd, "same_rank3_relu", Shape({3, 5, 127}), Shape({3, 5, 127}),
         attrs({{"activation", "relu"}}), 8);
  // Shape arithmetic in i32 / i64: wrapping on random bits, broadcasting, and every Div corner
  // (negative operands truncate toward zero, MIN / -1 wraps).
  for (DType t : {DType::kI32, DType::kI64}) {
    const std::string ty = dtype_name(t);
    for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul}) {
      c.push_back(
          {std::string(op_name(k)) + "_" + ty + "_wraps",
           k,
           attrs({}),
           {activation(typed(t, Shape({3, 13}), 50)), activation(typed(t, Shape({13}), 51))}});
    }
    const std::vector<int64_t> num = {7,
                                      -7,
                                      7,
                                      -7,
                                      0,
                                      100,
                                      std::numeric_limits<int64_t>::min(),
                                      std::numeric_limits<int32_t>::min(),
                                      5,
                                      -1,
                                      12,
                                      13};
    const std::vector<int64_t> den = {2, 2, -2, -2, 3, 7, -1, -1, 9, 1, -5, 4};
    Tensor a = Tensor::from_int64s(Shape({2, 6}), num), b = Tensor::from_int64s(Shape({2, 6}), den);
    if (t == DType::kI32) {
      Tensor a32 = Tensor::create(t, a.shape()).value(), b32 = Tensor::create(t, b.shape()).value();
      for (int64_t i = 0; i < a.numel(); ++i) {
        a32.data<int32_t>()[i] = static_cast<int32_t>(num[static_cast<size_t>(i)]);
        b32.data<int32_t>()[i] = static_cast<int32_t>(den[static_cast<size_t>(i)]);
      }
      a = a32;
      b = b32;
    }
    c.push_back(
        {"Div_" + ty + "_truncates", OpKind::kDiv, attrs({}), {activation(a), activation(b)}});
    c.push_back(
        {"Mul_" + ty + "_by_constant_row",
         OpKind::kMul,
         attrs({}),
         {activation(typed(t, Shape({4, 1, 3}), 52)), weight(typed(t, Shape({5, 1}), 53))}});
  }
  {
    Tensor a = with_specials(rnd(odd, 8));
    c.push_back({"Div_by_zero_nan",
                 OpKind::kDiv,
                 attrs({}),
                 {activation(a), activation(Tensor::create(DType::kF32, odd).value())}});
  }
  auto bn = [&](std::string name, Shape x, Attributes at, uint32_t seed) {
    const Shape ch({x[1]});
    c.push_back({"BatchNormalization_" + name,
                 OpKind::kBatchNormalization,
                 std::move(at),
                 {activation(rnd(x, seed)), weight(rnd(ch, seed + 1)), weight(rnd(ch, seed + 2)),
                  weight(rnd(ch, seed + 3)), weight(rnd(ch, seed + 4, 0.1f, 2.f))},
                 1,
                 1e-4f});
  };
  bn("odd", odd, attrs({{"epsilon", 1e-3f}}), 10);
  bn("relu_3d", Shape({1, 5, 3, 4, 7}), attrs({{"activation", "relu"}}), 11);
  bn("rank2", Shape({3, 127}), attrs({}), 12);
  {
    // Parameters fed at run time (training-style graphs, or a slice cut before them), a mean far
    // from the data to catch the folded form's cancellation.
    const Shape x({2, 13, 7, 9}), ch({13});
    c.push_back(
        {"BatchNormalization_runtime_params",
         OpKind::kBatchNormalization,
         attrs({{"epsilon", 1e-3f}, {"activation", "relu"}}),
         {activation(rnd(x, 13, 99.f, 101.f)), activation(rnd(ch, 14)), activation(rnd(ch, 15)),
          activation(rnd(ch, 16, 99.5f, 100.5f)), activation(rnd(ch, 17, 0.1f, 2.f))},
         1,
         1e-4f});
    c.push_back({"BatchNormalization_runtime_mean_only",
                 OpKind::kBatchNormalization,
                 attrs({}),
                 {activation(rnd(Shape({3, 127}), 18)), weight(rnd(Shape({127}), 19)),
                  weight(rnd(Shape({127}), 20)), activation(rnd(Shape({127}), 21)),
                  weight(rnd(Shape({127}), 22, 0.1f, 2.f))},
                 1,
                 1e-4f});
  }
  return c;
}

std::vector<OpCase> normalization_cases() {
  std::vector<OpCase> c;
  c.push_back({"Softmax_last",
               OpKind::kSoftmax,
               attrs({}),
               {activation(rnd(Shape({3, 1000}), 1, -10.f, 10.f))}});
  c.push_back({"Softmax_axis1",
               OpKind::kSoftmax,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 13, 7}), 2, -5.f, 5.f))}});
  c.push_back({"Softmax_short_rows",
               OpKind::kSoftmax,
               attrs({{"axis", int64_t{-1}}}),
               {activation(rnd(Shape({5, 7, 3}), 3))}});
  c.push_back({"LRN_alexnet",
               OpKind::kLRN,
               attrs({{"size", int64_t{5}}, {"alpha", 1e-4f}, {"beta", 0.75f}, {"bias", 2.f}}),
               {activation(rnd(Shape({2, 13, 7, 9}), 4, -3.f, 3.f))}});
  c.push_back({"LRN_even_size",
               OpKind::kLRN,
               attrs({{"size", int64_t{4}}, {"alpha", 0.01f}}),
               {activation(rnd(Shape({1, 9, 5, 3}), 5))}});
  c.push_back({"ReduceMean_hw_keep",
               OpKind::kReduceMean,
               attrs({{"axes", Ints{2, 3}}}),
               {activation(rnd(Shape({2, 13, 7, 9}), 6))}});
  c.push_back({"ReduceMean_c_nokeep",
               OpKind::kReduceMean,
               attrs({{"axes", Ints{1}}, {"keepdims", int64_t{0}}}),
               {activation(rnd(Shape({2, 13, 7, 9}), 7))}});
  c.push_back({"ReduceMean_all",
               OpKind::kReduceMean,
               attrs({}),
               {activation(rnd(Shape({3, 5, 127}), 8))},
               1,
               1e-4f});
  c.push_back({"ReduceMean_outer_inner",
               OpKind::kReduceMean,
               attrs({{"axes", Ints{0, -1}}}),
               {activation(rnd(Shape({3, 5, 17}), 9))}});
  return c;
}

std::vector<OpCase> tensor_cases() {
  std::vector<OpCase> c;
  c.push_back({"Concat_channels",
               OpKind::kConcat,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 13, 5, 7}), 1)), activation(rnd(Shape({2, 3, 5, 7}), 2)),
                weight(rnd(Shape({2, 1, 5, 7}), 3))}});
  c.push_back({"Concat_last_axis",
               OpKind::kConcat,
               attrs({{"axis", int64_t{-1}}}),
               {activation(rnd(Shape({3, 13}), 4)), activation(rnd(Shape({3, 127}), 5))}});
  c.push_back({"Concat_i64",
               OpKind::kConcat,
               attrs({{"axis", int64_t{0}}}),
               {activation(typed(DType::kI64, Shape({3, 5}), 6)),
                activation(typed(DType::kI64, Shape({2, 5}), 7))}});
  c.push_back({"Split_equal",
               OpKind::kSplit,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 12, 5, 3}), 8))},
               3});
  c.push_back({"Split_sizes",
               OpKind::kSplit,
               attrs({{"axis", int64_t{-1}}}),
               {activation(rnd(Shape({3, 127}), 9)), weight(ints64({100, 27}))},
               2});
  c.push_back({"Slice_steps",
               OpKind::kSlice,
               attrs({}),
               {activation(rnd(Shape({5, 13, 17}), 10)), weight(ints64({1, -2})),
                weight(ints64({100, 0})), weight(ints64({2, 1})), weight(ints64({2, 1}))}});
  c.push_back({"Slice_negative_step",
               OpKind::kSlice,
               attrs({}),
               {activation(rnd(Shape({4, 13}), 11)), weight(ints64({-1})),
                weight(ints64({std::numeric_limits<int64_t>::min()})), weight(ints64({1})),
                weight(ints64({-3}))}});
  c.push_back({"Transpose_nhwc",
               OpKind::kTranspose,
               attrs({{"perm", Ints{0, 2, 3, 1}}}),
               {activation(rnd(Shape({2, 13, 5, 7}), 12))}});
  c.push_back({"Transpose_default",
               OpKind::kTranspose,
               attrs({}),
               {activation(rnd(Shape({3, 13, 17}), 13))}});
  c.push_back({"Transpose_u8",
               OpKind::kTranspose,
               attrs({{"perm", Ints{1, 0}}}),
               {activation(typed(DType::kU8, Shape({13, 7}), 14))}});
  c.push_back({"Transpose_i64_shuffle",
               OpKind::kTranspose,
               attrs({{"perm", Ints{0, 2, 1, 3}}}),
               {activation(typed(DType::kI64, Shape({1, 2, 3, 5}), 15))}});
  c.push_back({"Pad_constant",
               OpKind::kPad,
               attrs({}),
               {activation(rnd(Shape({1, 3, 5, 7}), 16)), weight(ints64({0, 1, 2, -1, 0, 0, 1, 3})),
                weight(scalar(1.5f))}});
  {
    Tensor v = Tensor::create(DType::kU8, Shape({})).value();
    v.data<uint8_t>()[0] = 200;
    c.push_back({"Pad_u8_constant",
                 OpKind::kPad,
                 attrs({}),
                 {activation(typed(DType::kU8, Shape({3, 5}), 44)), weight(ints64({1, 0, 2, 3})),
                  weight(v)}});
  }
  {
    Tensor v = ints64(Shape({}), {-1234567890123});
    c.push_back({"Pad_i64_constant",
                 OpKind::kPad,
                 attrs({}),
                 {activation(typed(DType::kI64, Shape({2, 3}), 45)), weight(ints64({0, 2, 1, 1})),
                  weight(v)}});
  }
  c.push_back(
      {"Pad_reflect",
       OpKind::kPad,
       attrs({{"mode", "reflect"}}),
       {activation(rnd(Shape({1, 2, 5, 4}), 17)), weight(ints64({0, 0, 3, 5, 0, 0, 6, 2}))}});
  c.push_back({"Pad_edge",
               OpKind::kPad,
               attrs({{"mode", "edge"}}),
               {activation(rnd(Shape({2, 3, 4}), 18)), weight(ints64({0, 2, 1, 0, -1, 4}))}});
  c.push_back(
      {"Gather_axis0",
       OpKind::kGather,
       attrs({}),
       {activation(rnd(Shape({13, 5}), 19)), weight(ints64(Shape({2, 2}), {0, -1, 7, 3}))}});
  c.push_back({"Gather_axis1_scalar",
               OpKind::kGather,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({3, 13, 5}), 20)), weight(ints64(Shape({}), {-2}))}});
  c.push_back({"Gather_runtime_i64_axis1",
               OpKind::kGather,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({3, 13, 5}), 40)),
                activation(ints64(Shape({2, 3}), {0, -1, 12, 7, -13, 3}))}});
  {
    Tensor idx = Tensor::create(DType::kI32, Shape({4})).value();
    const int32_t v[] = {126, 0, -127, 64};
    std::memcpy(idx.raw(), v, sizeof(v));
    c.push_back({"Gather_runtime_i32_last_axis",
                 OpKind::kGather,
                 attrs({{"axis", int64_t{-1}}}),
                 {activation(rnd(Shape({2, 3, 127}), 41)), activation(idx)}});
  }
  c.push_back({"Gather_runtime_u8_data",
               OpKind::kGather,
               attrs({}),
               {activation(typed(DType::kU8, Shape({13, 7}), 42)),
                activation(ints64(Shape({3}), {12, 0, -2}))}});
  c.push_back(
      {"Gather_runtime_i64_data_scalar_index",
       OpKind::kGather,
       attrs({}),
       {activation(typed(DType::kI64, Shape({5, 3}), 43)), activation(ints64(Shape({}), {-5}))}});
  c.push_back(
      {"Resize_nearest_x2",
       OpKind::kResize,
       attrs({{"mode", "nearest"}}),
       {activation(rnd(Shape({1, 3, 5, 7}), 21)), absent(), weight(floats({1.f, 1.f, 2.f, 2.f}))}});
  c.push_back({"Resize_nearest_sizes_floor",
               OpKind::kResize,
               attrs({{"mode", "nearest"},
                      {"nearest_mode", "floor"},
                      {"coordinate_transformation_mode", "asymmetric"}}),
               {activation(rnd(Shape({1, 2, 13, 9}), 22)), absent(), absent(),
                weight(ints64({1, 2, 5, 20}))}});
  c.push_back({"Resize_linear_half_pixel",
               OpKind::kResize,
               attrs({{"mode", "linear"}}),
               {activation(rnd(Shape({1, 3, 5, 7}), 23)), absent(),
                weight(floats({1.f, 1.f, 2.5f, 1.5f}))}});
  c.push_back({"Resize_linear_align_corners",
               OpKind::kResize,
               attrs({{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
               {activation(rnd(Shape({2, 3, 13, 4}), 24)), absent(), absent(),
                weight(ints64({2, 3, 6, 9}))}});
  c.push_back({"Flatten",
               OpKind::kFlatten,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 13, 3, 3}), 25))}});
  c.push_back({"Reshape",
               OpKind::kReshape,
               attrs({}),
               {activation(rnd(Shape({2, 13, 3, 3}), 26)), weight(ints64({2, -1, 9}))}});
  c.push_back({"Squeeze",
               OpKind::kSqueeze,
               attrs({}),
               {activation(rnd(Shape({2, 1, 13, 1}), 27)), weight(ints64({1, 3}))}});
  c.push_back({"Unsqueeze",
               OpKind::kUnsqueeze,
               attrs({}),
               {activation(rnd(Shape({2, 13}), 28)), weight(ints64({0, 3}))}});
  c.push_back({"Identity", OpKind::kIdentity, attrs({}), {activation(rnd(Shape({127}), 29))}});
  c.push_back({"Dropout", OpKind::kDropout, attrs({}), {activation(rnd(Shape({3, 13}), 30))}});
  c.push_back({"Shape", OpKind::kShape, attrs({}), {activation(rnd(Shape({2, 13, 3}), 31))}});
  c.push_back({"Cast_same_type",
               OpKind::kCast,
               attrs({{"to", int64_t{1}}}),
               {activation(rnd(Shape({3, 13}), 32))}});
  // Every source dtype to every target dtype (ONNX TensorProto numbers). Float sources hold NaN,
  // infinities, values beyond every integer range and both signs of the truncation; integer
  // sources hold random bits, so narrowing wraps and bool sees bytes other than 0 and 1.
  {
    const std::pair<int64_t, DType> targets[] = {
        {1, DType::kF32}, {10, DType::kF16}, {3, DType::kI8},  {2, DType::kU8},
        {6, DType::kI32}, {7, DType::kI64},  {9, DType::kBool}};
    Tensor f = rnd(Shape({3, 43}), 33, -300.f, 300.f);
    float* p = f.data<float>();
    const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                              std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              3e9f,
                              -3e9f,
                              1e19f,
                              -1e19f,
                              -0.f,
                              -0.7f,
                              0.7f,
                              255.5f,
                              -128.9f,
                              65504.f,
                              1e-8f};
    for (size_t i = 0; i < std::size(specials); ++i) p[i * 3] = specials[i];
    for (const auto& [from_code, from] : targets) {
      Tensor src;
      if (from == DType::kF32) {
        src = f;
      } else if (from == DType::kF16) {
        // Halves of the f32 values (NaN excluded: its payload bits are not specified).
        src = Tensor::create(DType::kF16, f.shape()).value();
        for (int64_t i = 0; i < f.numel(); ++i) {
          const float v = std::isnan(p[i]) ? 1.f : p[i];
          src.data<uint16_t>()[i] = float_to_half(v);
        }
      } else {
        src = typed(from, f.shape(), 34 + static_cast<uint32_t>(from_code));
      }
      for (const auto& [to_code, to] : targets) {
        if (to == DType::kF16 && from == DType::kF32) continue;  // below, without NaN
        c.push_back({std::string("Cast_") + dtype_name(from) + "_to_" + dtype_name(to),
                     OpKind::kCast,
                     attrs({{"to", to_code}}),
                     {activation(src)}});
      }
    }
    Tensor no_nan = f.clone().value();
    no_nan.data<float>()[0] = 65520.f;  // rounds to +inf in f16
    c.push_back(
        {"Cast_f32_to_f16", OpKind::kCast, attrs({{"to", int64_t{10}}}), {activation(no_nan)}});
  }
  return c;
}

// Cases of the cpu harness: odd shapes, fused activations, Clip's bounds, broadcasting.
std::vector<OpCase> cpu_harness_cases() {
  std::vector<OpCase> c;
  auto add = [&](std::string name, OpKind k, Attributes a, std::vector<NodeInput> in,
                 int outputs = 1) {
    c.push_back(
        {std::string(op_name(k)) + "_" + name, k, std::move(a), std::move(in), outputs, 1e-4f});
  };
  auto act = [](const Shape& s, uint32_t seed) { return activation(rnd(s, seed)); };
  auto wt = [](const Shape& s, uint32_t seed) { return weight(rnd(s, seed, -0.5f, 0.5f)); };
  struct ConvCase {
    const char* name;
    Shape x, w;
    Attributes a;
  };
  const ConvCase convs[] = {
      {"pads", {1, 3, 13, 13}, {8, 3, 3, 3}, attrs({{"pads", Ints{1, 1, 1, 1}}})},
      {"s2_asym",
       {2, 5, 17, 13},
       {7, 5, 3, 3},
       attrs({{"strides", Ints{2, 2}}, {"pads", Ints{0, 1, 2, 1}}})},
      {"dw16",
       {1, 16, 13, 13},
       {16, 1, 3, 3},
       attrs({{"group", int64_t{16}}, {"pads", Ints{1, 1, 1, 1}}})},
      {"dw_mult2_5x5_s2",
       {1, 12, 15, 15},
       {24, 1, 5, 5},
       attrs({{"group", int64_t{12}}, {"strides", Ints{2, 2}}})},
      {"grouped_dilated",
       {1, 12, 13, 13},
       {6, 4, 3, 3},
       attrs({{"group", int64_t{3}}, {"dilations", Ints{2, 2}}})},
      {"1x1_127", {1, 127, 7, 7}, {13, 127, 1, 1}, attrs({})},
      {"same_upper_s2",
       {1, 8, 13, 13},
       {5, 8, 3, 3},
       attrs({{"auto_pad", "SAME_UPPER"}, {"strides", Ints{2, 2}}})},
      {"relu", {1, 4, 9, 11}, {3, 4, 3, 3}, attrs({{"activation", "relu"}})},
      {"clip",
       {1, 4, 9, 11},
       {3, 4, 3, 3},
       attrs({{"activation", "clip"}, {"activation_alpha", 0.f}, {"activation_beta", 0.3f}})},
      // Clip with min > max (every value becomes max) and min == max: XNNPACK refuses such an
      // output range, so the cpu device runs them as a separate pass.
      {"clip_min_above_max",
       {1, 4, 9, 11},
       {3, 4, 3, 3},
       attrs({{"activation", "clip"}, {"activation_alpha", 0.5f}, {"activation_beta", -0.25f}})},
      {"clip_min_eq_max",
       {1, 4, 9, 11},
       {3, 4, 3, 3},
       attrs({{"activation", "clip"}, {"activation_alpha", 0.25f}, {"activation_beta", 0.25f}})},
      {"hard_swish", {1, 4, 9, 11}, {3, 4, 3, 3}, attrs({{"activation", "hard_swish"}})},
      {"sigmoid", {1, 4, 9, 11}, {3, 4, 3, 3}, attrs({{"activation", "sigmoid"}})},
      {"tanh", {1, 4, 9, 11}, {3, 4, 3, 3}, attrs({{"activation", "tanh"}})},
      {"leaky_relu",
       {1, 4, 9, 11},
       {3, 4, 3, 3},
       attrs({{"activation", "leaky_relu"}, {"activation_alpha", 0.1f}})},
      {"1d", {1, 3, 10}, {4, 3, 3}, attrs({})},
  };
  uint32_t seed = 1;
  for (const ConvCase& cc : convs) {
    add(std::string("cpu_") + cc.name, OpKind::kConv, cc.a,
        {act(cc.x, seed), wt(cc.w, seed + 1), wt(Shape{cc.w[0]}, seed + 2)});
    ++seed;
  }
  add("cpu_no_bias", OpKind::kConv, {}, {act({1, 3, 13, 13}, 9), wt({4, 3, 3, 3}, 10)});
  add("cpu_transB", OpKind::kGemm, attrs({{"transB", int64_t{1}}}),
      {act({1, 127}, 1), wt({13, 127}, 2), wt({13}, 3)});
  add("cpu_alpha_beta", OpKind::kGemm, attrs({{"alpha", 0.5f}, {"beta", 2.f}}),
      {act({3, 13}, 4), wt({13, 127}, 5), wt({1, 127}, 6)});
  add("cpu_relu", OpKind::kGemm, attrs({{"activation", "relu"}}),
      {act({2, 13}, 7), wt({13, 5}, 8)});
  add("cpu_transA", OpKind::kGemm, attrs({{"transA", int64_t{1}}}),
      {act({13, 2}, 9), wt({13, 5}, 10), wt({2, 5}, 11)});
  add("cpu_batched_weight", OpKind::kMatMul, {}, {act({2, 3, 13}, 12), wt({13, 127}, 13)});
  add("cpu_batched_both", OpKind::kMatMul, {}, {act({2, 13, 17}, 14), act({2, 17, 127}, 15)});
  add("cpu_vec_mat", OpKind::kMatMul, {}, {act({13}, 16), wt({13, 7}, 17)});
  add("cpu_3x3_s2_p1", OpKind::kMaxPool,
      attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {act({1, 13, 15, 17}, 1)});
  add("cpu_ceil", OpKind::kMaxPool,
      attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
      {act({2, 7, 14, 13}, 2)});
  add("cpu_dilated", OpKind::kMaxPool,
      attrs({{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}), {act({1, 5, 13, 13}, 3)});
  add("cpu_3x3_p1", OpKind::kAveragePool,
      attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}),
      {act({1, 13, 9, 9}, 4)});
  add("cpu_include_pad", OpKind::kAveragePool,
      attrs({{"kernel_shape", Ints{3, 3}},
             {"pads", Ints{1, 1, 1, 1}},
             {"count_include_pad", int64_t{1}}}),
      {act({1, 13, 9, 9}, 5)});
  add("cpu_2x2_s2", OpKind::kAveragePool,
      attrs({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}), {act({1, 127, 8, 8}, 6)});
  add("cpu", OpKind::kGlobalAveragePool, {}, {act({2, 127, 7, 7}, 7)});
  add("cpu", OpKind::kGlobalMaxPool, {}, {act({2, 13, 5, 3}, 8)});
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    add("cpu_same", k, {}, {act({1, 13, 7, 9}, 1), act({1, 13, 7, 9}, 2)});
    add("cpu_channel_const", k, {}, {act({2, 13, 7, 9}, 3), wt({13, 1, 1}, 4)});
    add("cpu_batch_const", k, {}, {act({2, 13, 7, 9}, 5), wt({1, 13, 7, 9}, 6)});
    add("cpu_row", k, {}, {act({127}, 7), act({3, 127}, 8)});
    add("cpu_left_broadcast", k, {}, {act({2, 13, 1, 1}, 9), act({2, 13, 5, 5}, 10)});
  }
  add("cpu_relu", OpKind::kAdd, attrs({{"activation", "relu"}}),
      {act({1, 13, 7, 9}, 11), act({1, 13, 7, 9}, 12)});
  add("cpu_hard_sigmoid", OpKind::kMul,
      attrs(
          {{"activation", "hard_sigmoid"}, {"activation_alpha", 0.2f}, {"activation_beta", 0.5f}}),
      {act({1, 13, 7, 9}, 13), act({1, 13, 7, 9}, 14)});
  const Shape s{1, 13, 9, 127};
  add("cpu", OpKind::kRelu, {}, {act(s, 1)});
  add("cpu", OpKind::kSigmoid, {}, {act(s, 2)});
  add("cpu", OpKind::kTanh, {}, {act(s, 3)});
  add("cpu", OpKind::kHardSwish, {}, {act(s, 4)});
  add("cpu", OpKind::kHardSigmoid, {}, {act(s, 5)});
  add("cpu", OpKind::kLeakyRelu, attrs({{"alpha", 0.2f}}), {act(s, 6)});
  add("cpu", OpKind::kClip, {}, {act(s, 7), weight(scalar(-0.5f)), weight(scalar(0.25f))});
  // Clip-13: min > max makes every value max; min == max every value that bound.
  add("cpu_min_above_max", OpKind::kClip, {},
      {act(s, 7), weight(scalar(0.5f)), weight(scalar(-0.25f))});
  add("cpu_min_eq_max", OpKind::kClip, {},
      {act(s, 7), weight(scalar(0.25f)), weight(scalar(0.25f))});
  add("cpu_1000", OpKind::kSoftmax, attrs({{"axis", int64_t{-1}}}), {act({3, 1000}, 8)});
  add("cpu_axis1", OpKind::kSoftmax, attrs({{"axis", int64_t{1}}}), {act({2, 13, 5, 7}, 9)});
  add("cpu_axis2", OpKind::kSoftmax, attrs({{"axis", int64_t{2}}}), {act({2, 13, 5, 7}, 10)});
  add("cpu", OpKind::kBatchNormalization, {},
      {act({2, 13, 5, 7}, 12), wt({13}, 13), wt({13}, 14), wt({13}, 15),
       weight(rnd({13}, 11, 0.5f, 2.f))});
  {
    Tensor x = rnd({1, 13, 5, 5}, 1);
    x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
    x.data<float>()[7] = std::numeric_limits<float>::infinity();
    x.data<float>()[11] = -std::numeric_limits<float>::infinity();
    for (OpKind k : {OpKind::kGlobalMaxPool, OpKind::kTanh, OpKind::kRelu, OpKind::kSigmoid,
                     OpKind::kGlobalAveragePool}) {
      add("cpu_nan_inf", k, {}, {activation(x)});
    }
    for (OpKind k : {OpKind::kAdd, OpKind::kMul}) {
      add("cpu_nan_inf", k, {}, {activation(x), act({1, 13, 5, 5}, 2)});
    }
  }
  add("cpu_channels3", OpKind::kConcat, attrs({{"axis", int64_t{1}}}),
      {act({1, 13, 5, 7}, 1), act({1, 3, 5, 7}, 2), act({1, 127, 5, 7}, 3)});
  add("cpu_last", OpKind::kConcat, attrs({{"axis", int64_t{-1}}}),
      {act({2, 3, 13}, 4), act({2, 3, 5}, 5)});
  add("cpu_const_h", OpKind::kConcat, attrs({{"axis", int64_t{2}}}),
      {act({1, 3, 5, 7}, 6), wt({1, 3, 2, 7}, 7)});
  add("cpu_halves", OpKind::kSplit, attrs({{"axis", int64_t{1}}}), {act({1, 14, 5, 7}, 8)}, 2);
  add("cpu", OpKind::kFlatten, attrs({{"axis", int64_t{1}}}), {act({2, 13, 3, 3}, 9)});
  add("cpu_nhwc", OpKind::kTranspose, attrs({{"perm", Ints{0, 2, 3, 1}}}),
      {act({2, 13, 3, 5}, 10)});
  add("cpu", OpKind::kReshape, {}, {act({2, 13, 3, 5}, 11), weight(ints64({26, 15}))});
  return c;
}

// Cases of the Vulkan harness: tiled and direct kernels' shapes, 3-D layers, run-time weights and
// indices, Cast between every dtype pair, and one representative case per op.
std::vector<OpCase> vulkan_harness_cases() {
  std::vector<OpCase> c;
  int n = 0;
  auto add = [&](OpKind k, Attributes a, std::vector<NodeInput> in, float tol = 1e-4f,
                 int outputs = 1) {
    c.push_back({std::string(op_name(k)) + "_vk" + std::to_string(n++), k, std::move(a),
                 std::move(in), outputs, tol});
  };
  auto r = [](const Shape& s, uint32_t seed, float lo = -1.f, float hi = 1.f) {
    return rnd(s, seed, lo, hi);
  };
  // Conv: 3x3 same padding with bias and fused relu (the tiled implicit GEMM).
  add(OpKind::kConv, attrs({{"pads", Ints{1, 1, 1, 1}}, {"activation", "relu"}}),
      {activation(r({1, 13, 17, 19}, 1)), weight(r({29, 13, 3, 3}, 2)), weight(r({29}, 3))});
  // Stride 2, dilation 2, asymmetric pads, no bias, batch 2.
  add(OpKind::kConv,
      attrs({{"strides", Ints{2, 2}}, {"dilations", Ints{2, 1}}, {"pads", Ints{0, 1, 2, 2}}}),
      {activation(r({2, 13, 23, 21}, 4)), weight(r({67, 13, 3, 5}, 5))});
  // Pointwise 1x1 with 127 output channels.
  add(OpKind::kConv, {},
      {activation(r({2, 64, 13, 13}, 6)), weight(r({127, 64, 1, 1}, 7)), weight(r({127}, 8))});
  // Depthwise 3x3 stride 2 with clip (relu6): the direct kernel.
  add(OpKind::kConv,
      attrs({{"group", int64_t{32}},
             {"strides", Ints{2, 2}},
             {"pads", Ints{1, 1, 1, 1}},
             {"activation", "clip"},
             {"activation_alpha", 0.f},
             {"activation_beta", 0.5f}}),
      {activation(r({1, 32, 15, 15}, 9)), weight(r({32, 1, 3, 3}, 10)), weight(r({32}, 11))});
  add(OpKind::kConv, attrs({{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}}),
      {activation(r({1, 64, 9, 11}, 12)), weight(r({128, 16, 3, 3}, 13))});
  add(OpKind::kConv, attrs({{"auto_pad", "SAME_UPPER"}}),
      {activation(r({1, 13, 127}, 14)), weight(r({17, 13, 4}, 15))});
  // Weights as a run-time input.
  add(OpKind::kConv, {}, {activation(r({1, 8, 7, 7}, 16)), activation(r({9, 8, 3, 3}, 17))});
  // Fully-connected at batch 1 (transB = 1): the gemv kernel.
  add(OpKind::kGemm, attrs({{"transB", int64_t{1}}}),
      {activation(r({1, 1027}, 20)), weight(r({13, 1027}, 21)), weight(r({13}, 22))});
  add(OpKind::kGemm,
      attrs({{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.f}, {"activation", "sigmoid"}}),
      {activation(r({9, 127}, 23)), weight(r({65, 127}, 24)), weight(r({1, 65}, 25))});
  add(OpKind::kGemm, attrs({{"transA", int64_t{1}}}),
      {activation(r({129, 37}, 26)), activation(r({129, 71}, 27)), weight(r({37, 1}, 28))});
  add(OpKind::kGemm, {}, {activation(r({13, 13}, 29)), weight(r({13, 127}, 30))});
  add(OpKind::kMatMul, {}, {activation(r({2, 3, 37, 29}, 31)), weight(r({29, 41}, 32))});
  add(OpKind::kMatMul, {}, {activation(r({3, 13, 17}, 33)), activation(r({3, 17, 19}, 34))});
  {
    const Tensor x = r({2, 13, 17, 19}, 40);
    add(OpKind::kMaxPool,
        attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
        {activation(x)});
    add(OpKind::kMaxPool,
        attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
        {activation(x)});
    add(OpKind::kAveragePool,
        attrs({{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 1}}}),
        {activation(x)});
    add(OpKind::kAveragePool,
        attrs({{"kernel_shape", Ints{3, 3}},
               {"strides", Ints{2, 2}},
               {"pads", Ints{1, 1, 1, 1}},
               {"count_include_pad", int64_t{1}},
               {"ceil_mode", int64_t{1}}}),
        {activation(x)});
    add(OpKind::kMaxPool, attrs({{"kernel_shape", Ints{5}}, {"strides", Ints{3}}}),
        {activation(r({1, 7, 127}, 41))});
    add(OpKind::kGlobalAveragePool, {}, {activation(x)});
    add(OpKind::kGlobalMaxPool, {}, {activation(x)});
    add(OpKind::kReduceMean, attrs({{"axes", Ints{2, 3}}}), {activation(x)});
    add(OpKind::kReduceMean, attrs({{"axes", Ints{1}}, {"keepdims", int64_t{0}}}), {activation(x)});
  }
  {
    const Tensor a = r({2, 13, 7, 9}, 50);
    add(OpKind::kAdd, attrs({{"activation", "relu"}}),
        {activation(a), activation(r({2, 13, 7, 9}, 51))});
    add(OpKind::kSub, {}, {activation(a), weight(r({1, 13, 1, 1}, 52))});
    add(OpKind::kMul, {}, {activation(a), weight(r({9}, 53))});
    add(OpKind::kMul, {}, {activation(r({2, 13, 1, 1}, 54)), activation(a)});
    add(OpKind::kDiv, {}, {activation(a), weight(r({}, 55, 1.f, 2.f))});
    add(OpKind::kAdd, {}, {activation(r({13, 1, 5}, 56)), activation(r({1, 7, 5}, 57))});
  }
  {
    const Tensor x = r({3, 127, 13}, 60, -8.f, 8.f);
    for (OpKind k : {OpKind::kRelu, OpKind::kSigmoid, OpKind::kHardSwish, OpKind::kTanh}) {
      add(k, {}, {activation(x)});
    }
    add(OpKind::kLeakyRelu, attrs({{"alpha", 0.13f}}), {activation(x)});
    add(OpKind::kHardSigmoid, attrs({{"alpha", 0.3f}, {"beta", 0.4f}}), {activation(x)});
    add(OpKind::kClip, {}, {activation(x), weight(scalar(-1.f)), weight(scalar(6.f))});
    add(OpKind::kClip, {}, {activation(x), weight(scalar(1.f)), weight(scalar(-1.f))});
    const Tensor special = floats({NAN, INFINITY, -INFINITY, 0.f, -2.f});
    add(OpKind::kRelu, {}, {activation(special)});
    add(OpKind::kSigmoid, {}, {activation(special)});
  }
  add(OpKind::kBatchNormalization, attrs({{"epsilon", 1e-3f}, {"activation", "hard_swish"}}),
      {activation(r({2, 13, 7, 9}, 70)), weight(r({13}, 71)), weight(r({13}, 72)),
       weight(r({13}, 73)), weight(r({13}, 74, 0.5f, 2.f))});
  add(OpKind::kSoftmax, attrs({{"axis", int64_t{-1}}}),
      {activation(r({3, 1000}, 75, -10.f, 10.f))});
  add(OpKind::kSoftmax, attrs({{"axis", int64_t{1}}}), {activation(r({2, 13, 5}, 76))});
  add(OpKind::kLRN, attrs({{"size", int64_t{5}}, {"alpha", 1e-3f}, {"beta", 0.75f}, {"bias", 2.f}}),
      {activation(r({1, 13, 7, 9}, 77))});
  add(OpKind::kLRN, attrs({{"size", int64_t{4}}}), {activation(r({2, 7, 5}, 78))});
  {
    const Tensor x = r({2, 13, 7, 9}, 80);
    add(OpKind::kConcat, attrs({{"axis", int64_t{1}}}),
        {activation(x), activation(r({2, 3, 7, 9}, 81)), weight(r({2, 1, 7, 9}, 82))});
    add(OpKind::kConcat, attrs({{"axis", int64_t{-1}}}),
        {activation(x), activation(r({2, 13, 7, 4}, 83))});
    add(OpKind::kSplit, attrs({{"axis", int64_t{1}}}), {activation(x), weight(ints64({3, 10}))},
        1e-6f, 2);
    add(OpKind::kSlice, {},
        {activation(x), weight(ints64({-1, 1})), weight(ints64({-100, 8})), weight(ints64({3, 2})),
         weight(ints64({-2, 1}))});
    add(OpKind::kTranspose, attrs({{"perm", Ints{0, 2, 3, 1}}}), {activation(x)});
    for (const char* mode : {"constant", "reflect", "edge"}) {
      add(OpKind::kPad, attrs({{"mode", mode}}),
          {activation(x), weight(ints64({0, 0, 1, 2, 0, 0, 3, 1})), weight(scalar(0.25f))});
    }
    add(OpKind::kGather, attrs({{"axis", int64_t{1}}}),
        {activation(x), weight(ints64({12, 0, -1, 5}))});
    add(OpKind::kResize, attrs({{"mode", "nearest"}}),
        {activation(x), absent(), weight(floats({1, 1, 2, 1.5f}))});
    add(OpKind::kResize,
        attrs({{"mode", "linear"}, {"coordinate_transformation_mode", "align_corners"}}),
        {activation(x), absent(), absent(), weight(ints64({2, 13, 13, 17}))});
    add(OpKind::kFlatten, attrs({{"axis", int64_t{1}}}), {activation(x)});
    add(OpKind::kReshape, {}, {activation(x), weight(ints64({26, -1, 9}))});
  }
  // 2-D, stride 2, pads, output_padding, bias and a fused relu (the DCGAN/U-Net upsampler).
  add(OpKind::kConvTranspose,
      attrs({{"strides", Ints{2, 2}},
             {"pads", Ints{1, 1, 1, 1}},
             {"output_padding", Ints{1, 1}},
             {"activation", "relu"}}),
      {activation(r({2, 13, 7, 9}, 100)), weight(r({13, 11, 3, 3}, 101)), weight(r({11}, 102))});
  // Groups, dilation, asymmetric stride, weights as a run-time input.
  add(OpKind::kConvTranspose,
      attrs({{"group", int64_t{2}}, {"strides", Ints{3, 1}}, {"dilations", Ints{1, 2}}}),
      {activation(r({1, 8, 5, 6}, 103)), activation(r({8, 3, 2, 3}, 104))});
  // 1-D with output_shape (SAME-like pads derived by the op).
  add(OpKind::kConvTranspose, attrs({{"strides", Ints{2}}, {"output_shape", Ints{26}}}),
      {activation(r({1, 5, 13}, 105)), weight(r({5, 7, 4}, 106))});
  add(OpKind::kConvTranspose, attrs({{"strides", Ints{2, 1, 2}}, {"pads", Ints{0, 1, 1, 1, 0, 0}}}),
      {activation(r({1, 3, 4, 5, 6}, 107)), weight(r({3, 4, 3, 3, 2}, 108)), weight(r({4}, 109))});
  {
    const Tensor v = r({2, 5, 7, 9, 11}, 110);
    add(OpKind::kConv,
        attrs({{"strides", Ints{1, 2, 2}},
               {"pads", Ints{1, 1, 0, 1, 1, 1}},
               {"dilations", Ints{2, 1, 1}},
               {"activation", "relu"}}),
        {activation(v), weight(r({6, 5, 3, 3, 3}, 111)), weight(r({6}, 112))});
    add(OpKind::kMaxPool,
        attrs({{"kernel_shape", Ints{2, 3, 3}},
               {"strides", Ints{2, 2, 2}},
               {"ceil_mode", int64_t{1}}}),
        {activation(v)});
    add(OpKind::kAveragePool,
        attrs({{"kernel_shape", Ints{3, 3, 3}},
               {"strides", Ints{1, 2, 2}},
               {"pads", Ints{1, 1, 1, 1, 1, 1}},
               {"count_include_pad", int64_t{1}}}),
        {activation(v)});
    add(OpKind::kAveragePool,
        attrs({{"kernel_shape", Ints{3, 3, 3}}, {"pads", Ints{1, 0, 1, 0, 1, 1}}}),
        {activation(v)});
  }
  {
    const Tensor x = r({2, 13, 7, 9}, 120);
    // i64 indices, negative ones, a 2-D index tensor, each axis.
    for (int64_t axis : {0, 1, 3, -2}) {
      add(OpKind::kGather, attrs({{"axis", axis}}),
          {activation(x), activation(ints64({2, 2}, {1, 0, -1, -2}))});
    }
    Tensor idx = Tensor::create(DType::kI32, Shape{3}).value();
    const int32_t iv[] = {12, 0, -13};
    std::memcpy(idx.raw(), iv, sizeof(iv));
    add(OpKind::kGather, attrs({{"axis", int64_t{1}}}), {activation(x), activation(idx)});
    // 64-bit data (a shape vector gathered with a run-time index).
    add(OpKind::kGather, {}, {activation(ints64({1, 3, 224, -7})), activation(ints64({-1, 2}))});
  }
  {
    // Cast between every pair of f32, f16, i8, u8, i32, i64, bool (ONNX `to` codes): rounding,
    // truncation, saturation, NaN and infinities, f16 subnormals and overflow; wrapping, sign
    // extension, large magnitudes (i64 -> f32 rounds once). Sources made by the reference Cast.
    const int64_t codes[] = {1, 10, 3, 2, 6, 7, 9};
    const Tensor fl =
        floats({0.f,     -0.f,    0.5f,  -1.7f, 127.9f, 128.5f,    -129.f,   255.5f,
                300.f,   -3e9f,   3e9f,  1e19f, -1e19f, NAN,       INFINITY, -INFINITY,
                65504.f, 65520.f, 6e-8f, 3e-5f, 2049.f, 1.f / 3.f, -65519.f});
    const Tensor i64 =
        ints64({0, 1, -1, 127, 128, 255, 256, -129, 2147483648LL, -2147483649LL, 16777217,
                (1LL << 53) + 1, 9007199791611905LL, INT64_MAX, INT64_MIN, -16777219, 70000});
    for (int64_t from : codes) {
      for (const Tensor* base : {&fl, &i64}) {
        auto src = run_op(OpKind::kCast, attrs({{"to", from}}), {in(*base)});
        if (!src.ok()) continue;  // op_cases_test checks the list against this count
        for (int64_t to : codes) {
          add(OpKind::kCast, attrs({{"to", to}}), {activation((*src)[0])}, 0.f);
        }
      }
    }
  }
  // A representative case per op.
  const Tensor x = r({1, 6, 9, 11}, 130);
  add(OpKind::kConv, attrs({{"pads", Ints{1, 1, 1, 1}}}),
      {activation(x), weight(r({8, 6, 3, 3}, 131))});
  add(OpKind::kConvTranspose, attrs({{"strides", Ints{2, 2}}}),
      {activation(x), weight(r({6, 4, 3, 3}, 132))});
  add(OpKind::kGemm, attrs({{"transB", int64_t{1}}}),
      {activation(r({2, 37}, 133)), weight(r({13, 37}, 134)), weight(r({13}, 135))});
  add(OpKind::kMatMul, {}, {activation(r({3, 5, 7}, 136)), activation(r({7, 4}, 137))});
  add(OpKind::kBatchNormalization, {},
      {activation(x), weight(r({6}, 138)), weight(r({6}, 139)), weight(r({6}, 140)),
       weight(r({6}, 141, 0.5f, 2.f))});
  for (OpKind k : {OpKind::kMaxPool, OpKind::kAveragePool}) {
    add(k, attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}}), {activation(x)});
  }
  add(OpKind::kLRN, attrs({{"size", int64_t{3}}}), {activation(x)});
  for (OpKind k :
       {OpKind::kSoftmax, OpKind::kGlobalAveragePool, OpKind::kGlobalMaxPool, OpKind::kRelu,
        OpKind::kLeakyRelu, OpKind::kSigmoid, OpKind::kHardSigmoid, OpKind::kHardSwish,
        OpKind::kTanh, OpKind::kIdentity, OpKind::kDropout, OpKind::kShape}) {
    add(k, {}, {activation(x)});
  }
  add(OpKind::kClip, {}, {activation(x), weight(scalar(-0.5f)), weight(scalar(0.5f))});
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    add(k, {}, {activation(x), activation(r({6, 1, 11}, 142, 0.5f, 1.f))});
  }
  add(OpKind::kConcat, attrs({{"axis", int64_t{1}}}), {activation(x), activation(x)});
  add(OpKind::kSplit, attrs({{"axis", int64_t{1}}}), {activation(x), weight(ints64({2, 4}))}, 1e-4f,
      2);
  add(OpKind::kSlice, {}, {activation(x), weight(ints64({1})), weight(ints64({5}))});
  add(OpKind::kFlatten, attrs({{"axis", int64_t{2}}}), {activation(x)});
  add(OpKind::kReshape, {}, {activation(x), weight(ints64({6, -1}))});
  add(OpKind::kTranspose, attrs({{"perm", Ints{0, 3, 1, 2}}}), {activation(x)});
  add(OpKind::kSqueeze, {}, {activation(x), weight(ints64({0}))});
  add(OpKind::kUnsqueeze, {}, {activation(x), weight(ints64({2}))});
  add(OpKind::kPad, {}, {activation(x), weight(ints64({0, 0, 1, 1, 0, 0, 2, 0}))});
  add(OpKind::kReduceMean, attrs({{"axes", Ints{2, 3}}}), {activation(x)});
  add(OpKind::kResize, attrs({{"mode", "linear"}}),
      {activation(x), absent(), weight(floats({1, 1, 2, 2}))});
  add(OpKind::kGather, attrs({{"axis", int64_t{1}}}), {activation(x), activation(ints64({5, -6}))});
  add(OpKind::kConstant, attrs({{"value_ints", Ints{3, -1, 4}}}), {});
  add(OpKind::kCast, attrs({{"to", int64_t{10}}}), {activation(x)});
  return c;
}

// The element-wise math ops (ops/unary_math.h), variadic Min/Max/Sum, comparisons, Where, PRelu,
// Pow, and the shape-building ops Expand, Range, ConstantOfShape, Tile.
std::vector<OpCase> math_cases() {
  std::vector<OpCase> c;
  const Shape odd({2, 13, 7, 9});
  auto add = [&](std::string name, OpKind k, Attributes a, std::vector<NodeInput> in,
                 float tol = 1e-5f, int outputs = 1) {
    c.push_back(
        {std::string(op_name(k)) + "_" + name, k, std::move(a), std::move(in), outputs, tol});
  };
  // Unary math on [-4, 4] with NaN and infinities planted, on a vector tail, and on the domain
  // edges (Log and Sqrt of 0 and negatives, Reciprocal of 0).
  for (OpKind k :
       {OpKind::kSqrt, OpKind::kExp, OpKind::kLog, OpKind::kErf, OpKind::kAbs, OpKind::kNeg,
        OpKind::kReciprocal, OpKind::kSoftplus, OpKind::kMish, OpKind::kGelu}) {
    const bool positive = k == OpKind::kSqrt || k == OpKind::kLog;
    add("odd", k, {}, {activation(rnd(odd, 1, positive ? 0.01f : -4.f, 4.f))});
    add("nan_inf", k, {}, {activation(with_specials(rnd(Shape({3, 127}), 2, -4.f, 4.f)))});
    add("edges", k, {},
        {activation(floats({0.f, -0.f, -1.f, 1e-30f, -1e-30f, 30.f, -30.f, 88.f, -88.f, 100.f,
                            -100.f, 1e30f, -1e30f}))});
  }
  add("tanh_approx", OpKind::kGelu, attrs({{"approximate", "tanh"}}),
      {activation(with_specials(rnd(odd, 3, -6.f, 6.f)))});
  for (OpKind k : {OpKind::kAbs, OpKind::kNeg}) {
    add("i64", k, {},
        {activation(ints64({0, 1, -1, 7, -7, std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max()}))});
    add("i32_random", k, {}, {activation(typed(DType::kI32, Shape({5, 13}), 4))});
  }
  // Variadic Min / Max / Sum: one input, two, four with every kind of broadcast, NaN, integers.
  for (OpKind k : {OpKind::kMin, OpKind::kMax, OpKind::kSum}) {
    add("one", k, {}, {activation(rnd(odd, 5))});
    add("two_broadcast", k, {}, {activation(rnd(odd, 6)), weight(rnd(Shape({13, 1, 1}), 7))});
    add("four", k, {},
        {activation(rnd(Shape({13, 1}), 8)), activation(rnd(Shape({1, 17}), 9)),
         weight(rnd(Shape({}), 10)), activation(rnd(Shape({2, 13, 17}), 11))});
    add("nan_inf", k, {},
        {activation(with_specials(rnd(Shape({3, 127}), 12))), activation(rnd(Shape({127}), 13))});
    add("i64", k, {},
        {activation(typed(DType::kI64, Shape({3, 5}), 14)),
         activation(typed(DType::kI64, Shape({5}), 15)),
         activation(typed(DType::kI64, Shape({3, 1}), 16))});
    add("i32", k, {},
        {activation(typed(DType::kI32, Shape({4, 7}), 17)),
         weight(typed(DType::kI32, Shape({7}), 18))});
  }
  // Comparisons: broadcasting, NaN (false everywhere), ties, integers, bool (Equal).
  for (OpKind k : {OpKind::kEqual, OpKind::kLess, OpKind::kGreater}) {
    Tensor a = with_specials(rnd(odd, 20));
    Tensor b = rnd(Shape({13, 1, 9}), 21);
    // Ties: copy some of b into a.
    for (int64_t i = 0; i < 9; ++i) a.data<float>()[i] = b.data<float>()[i];
    add("f32_broadcast", k, {}, {activation(a), weight(b)});
    add("i64", k, {},
        {activation(ints64({-3, 0, 5, 5, 9, std::numeric_limits<int64_t>::min()})),
         activation(ints64({0, 0, 5, 4, 10, std::numeric_limits<int64_t>::min()}))});
    add("i32_scalar", k, {},
        {activation(typed(DType::kI32, Shape({3, 13}), 22)),
         weight(typed(DType::kI32, Shape({}), 23))});
  }
  {
    Tensor a = typed(DType::kBool, Shape({4, 13}), 24), b = typed(DType::kBool, Shape({13}), 25);
    add("bool", OpKind::kEqual, {}, {activation(a), activation(b)});
  }
  // Where: bool condition (random bytes: any nonzero is true), every broadcast, several dtypes.
  {
    Tensor cond = typed(DType::kBool, Shape({2, 1, 7, 9}), 30);
    add("f32", OpKind::kWhere, {},
        {activation(cond), activation(with_specials(rnd(odd, 31))),
         weight(rnd(Shape({13, 1, 1}), 32))});
    add("i64_scalar_y", OpKind::kWhere, {},
        {activation(typed(DType::kBool, Shape({3, 5}), 33)),
         activation(typed(DType::kI64, Shape({3, 5}), 34)), weight(ints64(Shape({}), {-1}))});
    add("u8_condition_broadcast", OpKind::kWhere, {},
        {weight(typed(DType::kBool, Shape({5}), 35)),
         activation(typed(DType::kU8, Shape({3, 5}), 36)),
         activation(typed(DType::kU8, Shape({3, 1}), 37))});
  }
  // PRelu: per-channel slope [C, 1, 1], one shared slope, a slope along the last axis.
  add("per_channel", OpKind::kPRelu, {},
      {activation(with_specials(rnd(odd, 40, -3.f, 3.f))), weight(rnd(Shape({13, 1, 1}), 41))});
  add("shared", OpKind::kPRelu, {}, {activation(rnd(odd, 42)), weight(floats({0.25f}))});
  add("last_axis_runtime", OpKind::kPRelu, {},
      {activation(rnd(Shape({3, 127}), 43)), activation(rnd(Shape({127}), 44))});
  // Pow: square, square root, cube (the tanh-GELU spelling), negative bases with integral and
  // fractional exponents (NaN), integer exponents, integer bases.
  add("square", OpKind::kPow, {}, {activation(rnd(odd, 50, -3.f, 3.f)), weight(scalar(2.f))});
  add("sqrt", OpKind::kPow, {}, {activation(rnd(odd, 51, 0.f, 3.f)), weight(scalar(0.5f))});
  add("cube_nan_inf", OpKind::kPow, {},
      {activation(with_specials(rnd(Shape({3, 127}), 52, -3.f, 3.f))), weight(scalar(3.f))});
  add("broadcast_fractional", OpKind::kPow, {},
      {activation(rnd(Shape({5, 13}), 53, -2.f, 2.f)), activation(rnd(Shape({13}), 54, -2.f, 2.f))},
      1e-4f);
  add("i64_exponent", OpKind::kPow, {},
      {activation(rnd(Shape({3, 4}), 55, -2.f, 2.f)), weight(ints64({0, 1, 2, 3}))});
  add("i32_base_i64_exponent", OpKind::kPow, {},
      {activation(ints64({2, -3, 0, 7, 1, -1})), activation(ints64({10, 3, 0, 2, 60, 61}))});
  // Expand: to a larger rank, keeping a dimension with 1, a scalar to a shape, i64 data.
  add("channel", OpKind::kExpand, {},
      {activation(rnd(Shape({13, 1, 1}), 60)), weight(ints64({2, 13, 7, 9}))});
  add("keep_with_one", OpKind::kExpand, {},
      {activation(rnd(Shape({3, 1, 5}), 61)), weight(ints64({1, 4, 1}))});
  add("scalar", OpKind::kExpand, {}, {activation(rnd(Shape({}), 62)), weight(ints64({3, 127}))});
  add("i64", OpKind::kExpand, {},
      {activation(typed(DType::kI64, Shape({1, 5}), 63)), weight(ints64({4, 5}))});
  // Tile: every axis, a repeat of 1, a zero repeat (empty output), bytes of u8.
  add("nchw", OpKind::kTile, {},
      {activation(rnd(Shape({1, 3, 5, 7}), 70)), weight(ints64({2, 1, 3, 2}))});
  add("vector", OpKind::kTile, {}, {activation(rnd(Shape({127}), 71)), weight(ints64({3}))});
  add("zero", OpKind::kTile, {}, {activation(rnd(Shape({3, 5}), 72)), weight(ints64({0, 2}))});
  add("u8", OpKind::kTile, {},
      {activation(typed(DType::kU8, Shape({2, 3}), 73)), weight(ints64({2, 5}))});
  // ConstantOfShape: the default f32 zero, an i64 value, a float value, an empty shape.
  add("default", OpKind::kConstantOfShape, {}, {weight(ints64({2, 3, 5}))});
  add("i64", OpKind::kConstantOfShape, attrs({{"value", ints64(Shape({1}), {-7})}}),
      {weight(ints64({4, 13}))});
  add("f32", OpKind::kConstantOfShape, attrs({{"value", floats({1.5f})}}), {weight(ints64({127}))});
  add("scalar", OpKind::kConstantOfShape, attrs({{"value", floats({2.f})}}),
      {weight(Tensor::from_int64s(Shape({0}), std::vector<int64_t>{}))});
  // Range: i64 (an anchor grid's), negative delta, f32 with a fractional step, empty.
  auto range = [&](std::string name, Tensor s, Tensor l, Tensor d) {
    add(name, OpKind::kRange, {},
        {weight(std::move(s)), weight(std::move(l)), weight(std::move(d))});
  };
  range("i64", ints64(Shape({}), {0}), ints64(Shape({}), {80}), ints64(Shape({}), {1}));
  range("i64_negative", ints64(Shape({}), {10}), ints64(Shape({}), {-7}), ints64(Shape({}), {-3}));
  range("f32_fraction", scalar(0.5f), scalar(13.f), scalar(0.75f));
  range("empty", ints64(Shape({}), {5}), ints64(Shape({}), {5}), ints64(Shape({}), {2}));
  return c;
}

// An integer tensor of `dtype` (i8, u8 or i32) with values drawn uniformly from [lo, hi].
Tensor int_range(DType dtype, const Shape& s, uint32_t seed, int lo, int hi) {
  Tensor t = Tensor::create(dtype, s).value();
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int v = pick(rng);
    if (dtype == DType::kI8) t.data<int8_t>()[i] = static_cast<int8_t>(v);
    if (dtype == DType::kU8) t.data<uint8_t>()[i] = static_cast<uint8_t>(v);
    if (dtype == DType::kI32) t.data<int32_t>()[i] = v;
  }
  return t;
}

// Normalisations, block moves, reductions, selection, Einsum, recurrent layers and the quantized
// ops (the ops after the foundation set). Integer outputs (ArgMax, TopK's indices, the quantized
// tensors) must match the reference exactly.
std::vector<OpCase> sequence_quantized_cases() {
  std::vector<OpCase> c;
  const Tensor x = rnd(Shape({2, 6, 7, 5}), 300, -2.f, 3.f);
  c.push_back({"LayerNormalization_last_axis",
               OpKind::kLayerNormalization,
               attrs({}),
               {activation(rnd(Shape({3, 5, 127}), 301, -2.f, 4.f)), weight(rnd(Shape({127}), 302)),
                weight(rnd(Shape({127}), 303))},
               1,
               1e-4f});
  c.push_back({"LayerNormalization_axis1_no_bias",
               OpKind::kLayerNormalization,
               attrs({{"axis", int64_t{1}}, {"epsilon", 1e-3f}}),
               {activation(x), weight(rnd(Shape({6, 7, 5}), 304))},
               1,
               1e-4f});
  c.push_back({"InstanceNormalization_nchw",
               OpKind::kInstanceNormalization,
               attrs({}),
               {activation(x), weight(rnd(Shape({6}), 305)), weight(rnd(Shape({6}), 306))},
               1,
               1e-4f});
  c.push_back({"GroupNormalization_per_channel",
               OpKind::kGroupNormalization,
               attrs({{"num_groups", int64_t{3}}}),
               {activation(x), weight(rnd(Shape({6}), 307)), weight(rnd(Shape({6}), 308))},
               1,
               1e-4f});
  c.push_back({"GroupNormalization_per_group",
               OpKind::kGroupNormalization,
               attrs({{"num_groups", int64_t{2}}, {"epsilon", 1e-2f}}),
               {activation(x), weight(rnd(Shape({2}), 309)), weight(rnd(Shape({2}), 310))},
               1,
               1e-4f});
  const Tensor deep = rnd(Shape({2, 12, 3, 5}), 311);
  c.push_back({"DepthToSpace_dcr",
               OpKind::kDepthToSpace,
               attrs({{"blocksize", int64_t{2}}}),
               {activation(deep)},
               1,
               0.f});
  c.push_back({"DepthToSpace_crd",
               OpKind::kDepthToSpace,
               attrs({{"blocksize", int64_t{2}}, {"mode", std::string("CRD")}}),
               {activation(deep)},
               1,
               0.f});
  c.push_back({"SpaceToDepth_block3",
               OpKind::kSpaceToDepth,
               attrs({{"blocksize", int64_t{3}}}),
               {activation(rnd(Shape({1, 5, 9, 6}), 312))},
               1,
               0.f});
  c.push_back({"ReduceSum_axes_input",
               OpKind::kReduceSum,
               attrs({}),
               {activation(rnd(Shape({3, 5, 127}), 313)), weight(ints64({0, -1}))},
               1,
               1e-4f});
  c.push_back({"ReduceSum_all_nokeep",
               OpKind::kReduceSum,
               attrs({{"keepdims", int64_t{0}}}),
               {activation(x)},
               1,
               1e-4f,
               8.f});
  c.push_back({"ReduceMax_hw", OpKind::kReduceMax, attrs({{"axes", Ints{2, 3}}}), {activation(x)}});
  c.push_back({"ReduceMin_c_nokeep",
               OpKind::kReduceMin,
               attrs({{"axes", Ints{1}}, {"keepdims", int64_t{0}}}),
               {activation(x)}});
  c.push_back({"ArgMax_axis1", OpKind::kArgMax, attrs({{"axis", int64_t{1}}}), {activation(x)}});
  c.push_back(
      {"ArgMax_last_nokeep_select_last",
       OpKind::kArgMax,
       attrs({{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}, {"select_last_index", int64_t{1}}}),
       {activation(rnd(Shape({4, 13}), 314))}});
  c.push_back({"ArgMin_axis0", OpKind::kArgMin, attrs({}), {activation(x)}});
  c.push_back({"TopK_largest_last",
               OpKind::kTopK,
               attrs({}),
               {activation(rnd(Shape({3, 127}), 315)), weight(ints64({5}))},
               2});
  c.push_back({"TopK_smallest_axis1",
               OpKind::kTopK,
               attrs({{"axis", int64_t{1}}, {"largest", int64_t{0}}}),
               {activation(x), weight(ints64({3}))},
               2});
  c.push_back({"Einsum_batched_matmul",
               OpKind::kEinsum,
               attrs({{"equation", std::string("bij,bjk->bik")}}),
               {activation(rnd(Shape({3, 7, 13}), 316)), activation(rnd(Shape({3, 13, 5}), 317))},
               1,
               1e-5f,
               4.f});
  c.push_back(
      {"Einsum_attention_scores",
       OpKind::kEinsum,
       attrs({{"equation", std::string("bhij,bhkj->bhik")}}),
       {activation(rnd(Shape({2, 3, 5, 8}), 318)), activation(rnd(Shape({2, 3, 7, 8}), 319))},
       1,
       1e-5f,
       3.f});
  c.push_back({"Einsum_outer",
               OpKind::kEinsum,
               attrs({{"equation", std::string("i,k->ik")}}),
               {activation(rnd(Shape({9}), 320)), activation(rnd(Shape({4}), 321))}});
  // LSTM: S=5, B=2, I=3, H=4.
  c.push_back({"LSTM_bidirectional_states",
               OpKind::kLSTM,
               attrs({{"hidden_size", int64_t{4}}, {"direction", std::string("bidirectional")}}),
               {activation(rnd(Shape({5, 2, 3}), 322)), weight(rnd(Shape({2, 16, 3}), 323)),
                weight(rnd(Shape({2, 16, 4}), 324)), weight(rnd(Shape({2, 32}), 325)), absent(),
                activation(rnd(Shape({2, 2, 4}), 326)), activation(rnd(Shape({2, 2, 4}), 327))},
               3,
               1e-5f,
               4.f});
  c.push_back(
      {"LSTM_reverse_clip_peepholes",
       OpKind::kLSTM,
       attrs({{"hidden_size", int64_t{4}}, {"direction", std::string("reverse")}, {"clip", 0.5f}}),
       {activation(rnd(Shape({5, 2, 3}), 328)), weight(rnd(Shape({1, 16, 3}), 329)),
        weight(rnd(Shape({1, 16, 4}), 330)), weight(rnd(Shape({1, 32}), 331)), absent(), absent(),
        absent(), weight(rnd(Shape({1, 12}), 332))},
       3,
       1e-5f,
       4.f});
  c.push_back({"GRU_forward",
               OpKind::kGRU,
               attrs({{"hidden_size", int64_t{5}}}),
               {activation(rnd(Shape({4, 3, 6}), 333)), weight(rnd(Shape({1, 15, 6}), 334)),
                weight(rnd(Shape({1, 15, 5}), 335)), weight(rnd(Shape({1, 30}), 336))},
               2,
               1e-5f,
               4.f});
  c.push_back({"GRU_bidirectional_linear_before_reset",
               OpKind::kGRU,
               attrs({{"hidden_size", int64_t{5}},
                      {"direction", std::string("bidirectional")},
                      {"linear_before_reset", int64_t{1}}}),
               {activation(rnd(Shape({4, 3, 6}), 337)), weight(rnd(Shape({2, 15, 6}), 338)),
                weight(rnd(Shape({2, 15, 5}), 339)), absent(), absent(),
                activation(rnd(Shape({2, 3, 5}), 340))},
               2,
               1e-5f,
               4.f});
  // Quantisation: values past both ends of the int8 / uint8 range saturate.
  c.push_back({"QuantizeLinear_u8_per_tensor",
               OpKind::kQuantizeLinear,
               attrs({}),
               {activation(rnd(Shape({2, 5, 13}), 341, -40.f, 100.f)), weight(scalar(0.3f)),
                weight(int_range(DType::kU8, Shape({}), 342, 100, 140))}});
  c.push_back({"QuantizeLinear_i8_per_axis",
               OpKind::kQuantizeLinear,
               attrs({{"axis", int64_t{1}}}),
               {activation(rnd(Shape({2, 5, 13}), 343, -60.f, 60.f)),
                weight(rnd(Shape({5}), 344, 0.1f, 0.6f)),
                weight(int_range(DType::kI8, Shape({5}), 345, -10, 10))}});
  c.push_back({"DequantizeLinear_u8_per_tensor",
               OpKind::kDequantizeLinear,
               attrs({}),
               {activation(int_range(DType::kU8, Shape({3, 127}), 346, 0, 255)),
                weight(scalar(0.05f)), weight(int_range(DType::kU8, Shape({}), 347, 0, 255))}});
  c.push_back({"DequantizeLinear_i8_per_axis0",
               OpKind::kDequantizeLinear,
               attrs({{"axis", int64_t{0}}}),
               {activation(int_range(DType::kI8, Shape({4, 9}), 348, -128, 127)),
                weight(rnd(Shape({4}), 349, 0.01f, 0.1f))}});
  // QLinearConv: u8 activations, i8 weights per output channel, i32 bias.
  c.push_back({"QLinearConv_per_channel_bias",
               OpKind::kQLinearConv,
               attrs({{"pads", Ints{1, 1, 1, 1}}}),
               {activation(int_range(DType::kU8, Shape({1, 3, 7, 6}), 350, 0, 255)),
                weight(scalar(0.02f)), weight(int_range(DType::kU8, Shape({}), 351, 100, 150)),
                weight(int_range(DType::kI8, Shape({4, 3, 3, 3}), 352, -127, 127)),
                weight(rnd(Shape({4}), 353, 0.002f, 0.01f)),
                weight(int_range(DType::kI8, Shape({4}), 354, 0, 0)), weight(scalar(0.05f)),
                weight(int_range(DType::kU8, Shape({}), 355, 120, 130)),
                weight(int_range(DType::kI32, Shape({4}), 356, -2000, 2000))}});
  c.push_back({"QLinearMatMul_u8",
               OpKind::kQLinearMatMul,
               attrs({}),
               {activation(int_range(DType::kU8, Shape({2, 5, 13}), 357, 0, 255)),
                weight(scalar(0.03f)), weight(int_range(DType::kU8, Shape({}), 358, 100, 150)),
                weight(int_range(DType::kI8, Shape({13, 7}), 359, -127, 127)),
                weight(scalar(0.01f)), weight(int_range(DType::kI8, Shape({}), 360, 0, 0)),
                weight(scalar(0.2f)), weight(int_range(DType::kU8, Shape({}), 361, 120, 130))}});
  return c;
}

}  // namespace

std::vector<OpCase> all_op_cases() {
  std::vector<OpCase> all;
  for (auto family : {conv_cases(), gemm_cases(), pool_cases(), elementwise_cases(),
                      normalization_cases(), tensor_cases(), cpu_harness_cases(),
                      vulkan_harness_cases(), math_cases(), sequence_quantized_cases()}) {
    for (OpCase& c : family) all.push_back(std::move(c));
  }
  return all;
}

}  // namespace tessera::testing
