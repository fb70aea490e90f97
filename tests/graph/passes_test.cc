// Graph passes: each rewrite must leave the outputs unchanged (checked by running the graph on
// the reference device before and after) and must actually simplify the graph.
#include "graph/passes.h"

#include <gtest/gtest.h>

#include <random>

#include "api/tessera.h"
#include "graph/layer_graph.h"
#include "ops/activation.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using testing::random_tensor;

// Small builder over Graph for readable tests.
struct Builder {
  Graph g;
  int counter = 0;

  ValueId input(const std::string& name, Shape s) {
    ValueId v = g.add_value(name, TensorInfo{DType::kF32, std::move(s)});
    g.inputs().push_back(v);
    return v;
  }
  ValueId constant(Tensor t) {
    return g.add_constant("c" + std::to_string(counter++), std::move(t));
  }
  ValueId ints(std::vector<int64_t> v) {
    return constant(Tensor::from_int64s(Shape{static_cast<int64_t>(v.size())}, v));
  }
  std::vector<ValueId> node(OpKind kind, std::vector<ValueId> inputs, Attributes attrs = {},
                            int outputs = 1) {
    Node n;
    n.name = std::string(op_name(kind)) + "_" + std::to_string(counter++);
    n.kind = kind;
    n.inputs = std::move(inputs);
    n.attrs = std::move(attrs);
    for (int i = 0; i < outputs; ++i)
      n.outputs.push_back(g.add_value(n.name + ".out" + std::to_string(i)));
    std::vector<ValueId> outs = n.outputs;
    g.add_node(std::move(n));
    return outs;
  }
  ValueId one(OpKind kind, std::vector<ValueId> inputs, Attributes attrs = {}) {
    return node(kind, std::move(inputs), std::move(attrs))[0];
  }
  ValueId conv(ValueId x, int64_t cin, int64_t cout, uint32_t seed, int64_t group = 1) {
    Attributes a;
    a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
    a.set("group", group);
    ValueId w = constant(random_tensor(Shape{cout, cin / group, 3, 3}, seed));
    ValueId b = constant(random_tensor(Shape{cout}, seed + 1));
    return one(OpKind::kConv, {x, w, b}, a);
  }
  ValueId batchnorm(ValueId x, int64_t c, uint32_t seed) {
    ValueId scale = constant(random_tensor(Shape{c}, seed, 0.5f, 1.5f));
    ValueId bias = constant(random_tensor(Shape{c}, seed + 1));
    ValueId mean = constant(random_tensor(Shape{c}, seed + 2));
    ValueId var = constant(random_tensor(Shape{c}, seed + 3, 0.2f, 2.f));
    Attributes a;
    a.set("epsilon", 1e-3f);
    return one(OpKind::kBatchNormalization, {x, scale, bias, mean, var}, a);
  }
};

std::vector<Tensor> run_graph(Graph g, const std::vector<Tensor>& inputs) {
  auto model = Model::from_graph(std::move(g));
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  auto session = Session::create(*model, "reference");
  EXPECT_TRUE(session.ok()) << session.status().to_string();
  auto out = (*session)->run(inputs);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return *out;
}

int count_kind(const Graph& g, OpKind k) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.kind == k ? 1 : 0;
  return n;
}

TEST(Passes, FoldsShapeSubgraphBatchNormAndActivation) {
  Builder b;
  ValueId x = b.input("x", Shape{1, 3, 5, 5});
  ValueId c = b.conv(x, 3, 8, 1);
  ValueId bn = b.batchnorm(c, 8, 10);
  ValueId r = b.one(OpKind::kRelu, {bn});
  // Flatten through a shape subgraph: Reshape(r, Concat(Unsqueeze(Gather(Shape(r), 0)), [-1])).
  ValueId shape = b.one(OpKind::kShape, {r});
  ValueId idx = b.constant(Tensor::from_int64s(Shape{}, std::vector<int64_t>{0}));
  Attributes gather_axis;
  gather_axis.set("axis", int64_t{0});
  ValueId n = b.one(OpKind::kGather, {shape, idx}, gather_axis);
  ValueId un = b.one(OpKind::kUnsqueeze, {n, b.ints({0})});
  Attributes concat_axis;
  concat_axis.set("axis", int64_t{0});
  ValueId target = b.one(OpKind::kConcat, {un, b.ints({-1})}, concat_axis);
  ValueId flat = b.one(OpKind::kReshape, {r, target});
  ValueId id = b.one(OpKind::kIdentity, {flat});
  std::vector<ValueId> drop = b.node(OpKind::kDropout, {id}, {}, 2);
  b.g.outputs().push_back(drop[0]);
  b.g.value(drop[0]).name = "y";

  Graph original = b.g;
  Tensor input = random_tensor(Shape{1, 3, 5, 5}, 99);
  std::vector<Tensor> want = run_graph(original, {input});

  PassStats stats;
  ASSERT_TRUE(optimize_graph(b.g, &stats).ok());
  EXPECT_EQ(b.g.num_nodes(), 2) << stats.to_string();  // Conv(+relu), Reshape
  EXPECT_EQ(count_kind(b.g, OpKind::kConv), 1);
  EXPECT_EQ(count_kind(b.g, OpKind::kReshape), 1);
  EXPECT_EQ(stats.folded_batchnorms, 1);
  EXPECT_EQ(stats.fused_activations, 1);
  EXPECT_EQ(stats.removed_identities, 2);
  EXPECT_GE(stats.folded_nodes, 4);
  for (const Node& node : b.g.nodes()) {
    if (node.kind == OpKind::kConv) {
      EXPECT_EQ(parse_fused_activation(node.attrs).value().kind, ActivationKind::kRelu);
    }
  }
  // The graph output keeps its name.
  EXPECT_EQ(b.g.value(b.g.outputs()[0]).name, "y");
  std::vector<Tensor> got = run_graph(b.g, {input});
  testing::expect_near(got[0], want[0], 1e-5f, 1e-4f);
}

TEST(Passes, RandomLayerStacksKeepTheirOutputs) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 25; ++trial) {
    Builder b;
    int64_t c = 4;
    ValueId x = b.input("x", Shape{1, c, 7, 6});
    ValueId cur = x;
    ValueId skip = kNoValue;
    const int depth = 2 + static_cast<int>(rng() % 5);
    for (int d = 0; d < depth; ++d) {
      const uint32_t seed = static_cast<uint32_t>(rng());
      switch (rng() % 6) {
        case 0:
          cur = b.conv(cur, c, c, seed);
          break;
        case 1:
          cur = b.conv(cur, c, c, seed, c);
          break;  // depthwise
        case 2:
          cur = b.batchnorm(cur, c, seed);
          break;  // BN not after a conv stays
        case 3:
          cur = b.batchnorm(b.conv(cur, c, c, seed), c, seed + 5);
          break;
        case 4: {
          const OpKind acts[] = {OpKind::kRelu, OpKind::kSigmoid, OpKind::kHardSwish, OpKind::kTanh,
                                 OpKind::kLeakyRelu};
          cur = b.one(acts[rng() % 5], {cur});
          break;
        }
        case 5: {
          ValueId lo = b.constant(Tensor::scalar_f32(0.f));
          ValueId hi = b.constant(Tensor::scalar_f32(6.f));
          cur = b.one(OpKind::kClip, {cur, lo, hi});
          break;
        }
      }
      if (d == 0) skip = cur;
    }
    if (rng() % 2) cur = b.one(OpKind::kAdd, {cur, skip});
    b.g.outputs().push_back(cur);
    Graph original = b.g;
    Tensor input = random_tensor(Shape{1, c, 7, 6}, static_cast<uint32_t>(trial));
    std::vector<Tensor> want = run_graph(original, {input});
    PassStats stats;
    ASSERT_TRUE(optimize_graph(b.g, &stats).ok());
    EXPECT_LE(b.g.num_nodes(), original.num_nodes());
    std::vector<Tensor> got = run_graph(b.g, {input});
    testing::expect_near(got[0], want[0], 1e-4f, 1e-4f);
  }
}

TEST(Passes, DoesNotFuseIntoLayerWithSecondReader) {
  Builder b;
  ValueId x = b.input("x", Shape{1, 2, 4, 4});
  ValueId c = b.conv(x, 2, 2, 3);
  ValueId r = b.one(OpKind::kRelu, {c});
  ValueId s = b.one(OpKind::kAdd, {r, c});  // c is read twice
  b.g.outputs().push_back(s);
  PassStats stats;
  ASSERT_TRUE(optimize_graph(b.g, &stats).ok());
  // The Relu cannot fold into the Conv: c has a second reader that needs it unactivated.
  EXPECT_EQ(stats.fused_activations, 0);
  EXPECT_EQ(count_kind(b.g, OpKind::kRelu), 1);
}

// x * HardSigmoid(x) as exported before opset 14: one HardSwish, folded into the Conv; the
// pattern must not fire on other slopes, on a gate read twice, or on a gate of another tensor.
TEST(Passes, FusesHardSwishPatternIntoTheConv) {
  auto hard_sigmoid = [](float alpha, float beta) {
    Attributes a;
    a.set("alpha", alpha);
    a.set("beta", beta);
    return a;
  };
  for (int variant = 0; variant < 5; ++variant) {
    SCOPED_TRACE(variant);
    Builder b;
    ValueId x = b.input("x", Shape{1, 3, 6, 5});
    ValueId c = b.conv(x, 3, 8, 7);
    const float alpha = variant == 2 ? 0.2f : 1.f / 6.f;
    ValueId h = b.one(OpKind::kHardSigmoid, {variant == 4 ? b.conv(x, 3, 8, 9) : c},
                      hard_sigmoid(alpha, 0.5f));
    // Variant 1: HardSigmoid(x) * x (gate first); 3: the gate has a second reader.
    ValueId y = variant == 1 ? b.one(OpKind::kMul, {h, c}) : b.one(OpKind::kMul, {c, h});
    b.g.outputs().push_back(y);
    if (variant == 3) b.g.outputs().push_back(h);
    Graph original = b.g;
    Tensor input = random_tensor(Shape{1, 3, 6, 5}, 5, -4.f, 4.f);
    std::vector<Tensor> want = run_graph(original, {input});
    PassStats stats;
    ASSERT_TRUE(optimize_graph(b.g, &stats).ok());
    const bool fuse = variant <= 1;
    EXPECT_EQ(stats.fused_hard_swishes, fuse ? 1 : 0) << stats.to_string();
    EXPECT_EQ(count_kind(b.g, OpKind::kMul), fuse ? 0 : 1);
    if (fuse) {
      ASSERT_EQ(b.g.num_nodes(), 1);  // Conv(+hardswish)
      EXPECT_EQ(parse_fused_activation(b.g.node(0).attrs).value().kind, ActivationKind::kHardSwish);
    }
    std::vector<Tensor> got = run_graph(b.g, {input});
    for (size_t i = 0; i < want.size(); ++i) testing::expect_near(got[i], want[i], 1e-5f, 1e-5f);
  }
}

// A Conv of `x` with weight shape `w` and the given attributes, as a one-node graph.
Graph conv_graph(const Shape& x, const Shape& w, Attributes a, uint32_t seed, float nan_at = -1) {
  Builder b;
  ValueId in = b.input("x", x);
  Tensor wt = random_tensor(w, seed);
  if (nan_at >= 0) wt.data<float>()[static_cast<int64_t>(nan_at)] = NAN;
  ValueId wv = b.constant(std::move(wt));
  ValueId bias = b.constant(random_tensor(Shape{w[0]}, seed + 1));
  b.g.outputs().push_back(b.one(OpKind::kConv, {in, wv, bias}, std::move(a)));
  return std::move(b.g);
}

Attributes conv_attrs(std::vector<int64_t> pads, std::vector<int64_t> dil,
                      std::vector<int64_t> strides, int64_t group = 1) {
  Attributes a;
  a.set("pads", std::move(pads));
  a.set("dilations", std::move(dil));
  a.set("strides", std::move(strides));
  a.set("group", group);
  return a;
}

Shape conv_weight_shape(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.kind == OpKind::kConv) return g.value(n.inputs[1]).info.shape;
  }
  return Shape{};
}

// DeepLab's atrous pyramid at 20x20: dilations 24 and 36 leave only the centre tap reading the
// input, so the 3x3 becomes a 1x1; dilation 12 keeps all nine taps. A 3x3 with pad 1 on a 1x1
// map is a 1x1 too. Outputs are unchanged (reference device, before and after).
TEST(Passes, PrunesConvTapsThatReadOnlyPadding) {
  struct Case {
    Shape x, w;
    Attributes a;
    Shape want_w;
  };
  const std::vector<Case> cases = {
      {Shape{1, 8, 20, 20}, Shape{6, 8, 3, 3}, conv_attrs({36, 36, 36, 36}, {36, 36}, {1, 1}),
       Shape{6, 8, 1, 1}},
      {Shape{1, 8, 20, 20}, Shape{6, 8, 3, 3}, conv_attrs({24, 24, 24, 24}, {24, 24}, {1, 1}),
       Shape{6, 8, 1, 1}},
      {Shape{1, 8, 20, 20}, Shape{6, 8, 3, 3}, conv_attrs({12, 12, 12, 12}, {12, 12}, {1, 1}),
       Shape{6, 8, 3, 3}},
      {Shape{2, 5, 1, 1}, Shape{7, 5, 3, 3}, conv_attrs({1, 1, 1, 1}, {1, 1}, {1, 1}),
       Shape{7, 5, 1, 1}},
      // Rows only: H is 3, W is 40; depthwise.
      {Shape{1, 4, 3, 40}, Shape{4, 1, 3, 3}, conv_attrs({6, 6, 6, 6}, {6, 6}, {1, 1}, 4),
       Shape{4, 1, 1, 3}},
      // Asymmetric pads: the taps left are not the centre one.
      {Shape{1, 3, 4, 4}, Shape{2, 3, 3, 3}, conv_attrs({0, 10, 10, 0}, {5, 5}, {1, 1}),
       Shape{2, 3, 1, 1}},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    Graph g = conv_graph(c.x, c.w, c.a, seed++);
    ASSERT_TRUE(g.infer_shapes().ok());
    Tensor input = random_tensor(c.x, seed++);
    std::vector<Tensor> want = run_graph(g, {input});
    PassStats stats;
    ASSERT_TRUE(prune_padding_taps(g, &stats).ok());
    ASSERT_TRUE(g.validate().ok());
    ASSERT_TRUE(g.infer_shapes().ok());
    EXPECT_EQ(conv_weight_shape(g), c.want_w);
    EXPECT_EQ(stats.pruned_conv_taps, c.want_w == c.w ? 0 : 1);
    std::vector<Tensor> got = run_graph(g, {input});
    ASSERT_EQ(got[0].shape(), want[0].shape());
    testing::expect_near(got[0], want[0], 1e-5f, 1e-5f);
  }
}

// A NaN among the weights a pruning would drop makes NaN of the padding zeros it multiplies:
// such a Conv is left as it is.
TEST(Passes, KeepsPaddingTapsWithNonFiniteWeights) {
  Graph g = conv_graph(Shape{1, 2, 4, 4}, Shape{3, 2, 3, 3},
                       conv_attrs({20, 20, 20, 20}, {20, 20}, {1, 1}), 3, /*nan_at=*/0);
  ASSERT_TRUE(g.infer_shapes().ok());
  PassStats stats;
  ASSERT_TRUE(prune_padding_taps(g, &stats).ok());
  EXPECT_EQ(stats.pruned_conv_taps, 0);
  EXPECT_EQ(conv_weight_shape(g), (Shape{3, 2, 3, 3}));
}

// Random 1-D, 2-D and 3-D convolutions with strides, dilations, groups, odd and asymmetric pads
// and SAME_UPPER: pruning never changes an output, and it does prune some of them.
TEST(Passes, PruningPaddingTapsKeepsRandomConvOutputs) {
  std::mt19937 rng(77);
  int pruned = 0;
  for (int trial = 0; trial < 60; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    const int rank = 1 + static_cast<int>(rng() % 3);
    const int64_t group = rng() % 3 == 0 ? 2 : 1;
    const int64_t cin = 2 * group, cout = 2 * group;
    std::vector<int64_t> xs = {1 + static_cast<int64_t>(rng() % 2), cin};
    std::vector<int64_t> ws = {cout, cin / group};
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank)), dil, strides;
    for (int d = 0; d < rank; ++d) {
      xs.push_back(1 + static_cast<int64_t>(rng() % 7));
      ws.push_back(1 + static_cast<int64_t>(rng() % 4));
      dil.push_back(1 + static_cast<int64_t>(rng() % 6));
      strides.push_back(1 + static_cast<int64_t>(rng() % 3));
    }
    for (int64_t& p : pads) p = static_cast<int64_t>(rng() % 9);
    Attributes a = conv_attrs(pads, dil, strides, group);
    if (rng() % 5 == 0) {
      a = conv_attrs(std::vector<int64_t>(static_cast<size_t>(2 * rank), 0), dil, strides, group);
      a.set("auto_pad", std::string("SAME_UPPER"));
    }
    Graph g = conv_graph(Shape(xs), Shape(ws), a, static_cast<uint32_t>(rng()));
    if (!g.infer_shapes().ok()) continue;  // an empty output: not a case
    Tensor input = random_tensor(Shape(xs), static_cast<uint32_t>(rng()));
    std::vector<Tensor> want = run_graph(g, {input});
    PassStats stats;
    ASSERT_TRUE(prune_padding_taps(g, &stats).ok());
    pruned += stats.pruned_conv_taps;
    ASSERT_TRUE(g.infer_shapes().ok());
    std::vector<Tensor> got = run_graph(g, {input});
    ASSERT_EQ(got[0].shape(), want[0].shape());
    testing::expect_near(got[0], want[0], 1e-5f, 1e-5f);
  }
  EXPECT_GT(pruned, 5);
}

TEST(Passes, RemovesDeadNodes) {
  Builder b;
  ValueId x = b.input("x", Shape{1, 2, 4, 4});
  ValueId used = b.one(OpKind::kRelu, {x});
  b.one(OpKind::kSigmoid, {x});  // nobody reads it
  b.g.outputs().push_back(used);
  PassStats stats;
  ASSERT_TRUE(optimize_graph(b.g, &stats).ok());
  EXPECT_EQ(stats.dead_nodes, 1);
  EXPECT_EQ(b.g.num_nodes(), 1);
}

TEST(Passes, KeepsAndRefusesDropoutWithRunTimeTrainingMode) {
  // training_mode is a graph input: it may be true at run time, so the Dropout is not an
  // identity. The passes must not bypass it, and the graph must be refused naming the node.
  Builder b;
  ValueId x = b.input("x", Shape{1, 2, 4, 4});
  ValueId training = b.g.add_value("training", TensorInfo{DType::kBool, Shape{}});
  b.g.inputs().push_back(training);
  std::vector<ValueId> drop = b.node(OpKind::kDropout, {x, kNoValue, training});
  b.g.outputs().push_back(drop[0]);
  Graph copy = b.g;
  const Status st = optimize_graph(b.g);
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented) << st.to_string();
  EXPECT_NE(st.message().find(b.g.node(0).name), std::string::npos) << st.message();
  // remove_identities on its own (shapes inferred without the Dropout's check) keeps it too.
  copy.value(drop[0]).info = copy.value(x).info;
  copy.value(drop[0]).has_info = true;
  PassStats stats;
  ASSERT_TRUE(remove_identities(copy, &stats).ok());
  EXPECT_EQ(stats.removed_identities, 0);
  EXPECT_EQ(count_kind(copy, OpKind::kDropout), 1);
}

TEST(Graph, ValidateRefusesTwoTensorsWithOneName) {
  Builder b;
  ValueId x = b.input("x", Shape{1, 2, 4, 4});
  ValueId y = b.one(OpKind::kRelu, {x});
  b.g.outputs().push_back(y);
  ASSERT_TRUE(b.g.validate().ok());
  b.g.value(y).name = "x";
  Status s = b.g.validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'x'"), std::string::npos) << s.message();
  // A value nothing references may keep a stale name.
  b.g.value(y).name = "relu_out";
  b.g.add_value("x");
  EXPECT_TRUE(b.g.validate().ok());
}

TEST(LayerGraph, LiveTensorsAcrossSkipConnections) {
  Builder b;
  ValueId x = b.input("x", Shape{1, 4, 8, 8});
  ValueId a = b.one(OpKind::kRelu, {b.conv(x, 4, 4, 1)});
  ValueId c = b.conv(a, 4, 4, 2);
  ValueId s = b.one(OpKind::kAdd, {a, c});
  b.g.outputs().push_back(s);
  ASSERT_TRUE(optimize_graph(b.g).ok());
  auto lg = LayerGraph::build(b.g);
  ASSERT_TRUE(lg.ok());
  ASSERT_EQ(lg->num_layers(), 3);  // conv+relu, conv, add
  const uint64_t t = 4 * 8 * 8 * 4;
  EXPECT_EQ(lg->cut(0).live_bytes, t);      // x
  EXPECT_EQ(lg->cut(1).live_bytes, t);      // a
  EXPECT_EQ(lg->cut(2).live_bytes, 2 * t);  // a (skip) and c
  EXPECT_EQ(lg->cut(3).live_bytes, t);      // the output
  EXPECT_EQ(lg->cut(2).live.size(), 2u);
  EXPECT_EQ(lg->slice_inputs(1, 3).size(), 1u);  // a only
  EXPECT_EQ(lg->slice_outputs(0, 2).size(), 2u);
  EXPECT_NEAR(lg->layer(0).cost.flops, 2.0 * 4 * 8 * 8 * 4 * 9, 4 * 8 * 8 * 4);
  EXPECT_EQ(lg->total_parameters(), 2u * (4 * 4 * 9 + 4));
}

TEST(LayerGraph, SharedWeightCountsOnce) {
  // Two convolutions reading one weight and one bias: each layer reports what it reads, the
  // total counts the shared constants once.
  Builder b;
  ValueId x = b.input("x", Shape{1, 4, 8, 8});
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  ValueId w = b.constant(random_tensor(Shape{4, 4, 3, 3}, 1));
  ValueId bias = b.constant(random_tensor(Shape{4}, 2));
  ValueId c1 = b.one(OpKind::kConv, {x, w, bias}, a);
  ValueId c2 = b.one(OpKind::kConv, {c1, w, bias}, a);
  b.g.outputs().push_back(c2);
  ASSERT_TRUE(optimize_graph(b.g).ok());
  auto lg = LayerGraph::build(b.g);
  ASSERT_TRUE(lg.ok());
  ASSERT_EQ(lg->num_layers(), 2);
  EXPECT_EQ(lg->layer(0).parameter_count, 4u * 4 * 9 + 4);
  EXPECT_EQ(lg->layer(1).parameter_count, 4u * 4 * 9 + 4);
  EXPECT_EQ(lg->total_parameters(), 4u * 4 * 9 + 4);
}

}  // namespace
}  // namespace tessera
