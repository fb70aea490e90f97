// Split rules (ops/split_rule.h, graph/split.h) against the unsplit reference kernels: every
// piece run by the reference kernel on its region, merged, equals the unsplit layer; and the
// bytes scattered and gathered equal the corrected Tables I-II of seed 004 exactly.
#include "ops/split_rule.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "graph/split.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using namespace tessera::testing;

// Runs every piece of `method` over `ratios` with the reference kernel and merges.
Result<Tensor> run_split_reference(const Graph& g, SplitMethod method,
                                   const std::vector<double>& ratios,
                                   const std::vector<Tensor>& feeds) {
  ASSIGN_OR_RETURN(SplitLayer sl, split_layer(g, 0, method, ratios));
  const Node& n = g.node(0);
  std::vector<Tensor> outs;
  for (size_t p = 0; p < sl.pieces.size(); ++p) {
    const Graph& pg = sl.pieces[p].graph;
    const Node& pn = pg.node(sl.pieces[p].node);
    std::vector<Tensor> ins(pn.inputs.size());
    int feed = 0;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      const ValueId v = n.inputs[i];
      if (v == kNoValue) continue;
      if (g.value(v).is_constant) {
        if (pn.inputs[i] != kNoValue) ins[i] = pg.value(pn.inputs[i]).data;
        continue;
      }
      ASSIGN_OR_RETURN(
          ins[i], slice_region(feeds[static_cast<size_t>(feed++)], sl.rule.pieces[p].inputs[i]));
      EXPECT_EQ(ins[i].shape(), pg.value(pn.inputs[i]).info.shape);
    }
    const TensorInfo& oi = pg.value(pn.outputs[0]).info;
    std::vector<Tensor> o(1);
    ASSIGN_OR_RETURN(o[0], Tensor::create(oi.dtype, oi.shape));
    NodeContext rc(pn, ins);
    RETURN_IF_ERROR(run_reference(rc.ctx(), ins, o));
    outs.push_back(o[0]);
  }
  Tensor merged;
  RETURN_IF_ERROR(merge_split(sl.rule, outs, &merged));
  return merged;
}

// Checks method over ratios on a one-node graph against the unsplit reference.
void check_split(OpKind kind, const Attributes& attrs, const std::vector<OpInput>& inputs,
                 SplitMethod method, const std::vector<double>& ratios, const std::string& what) {
  SCOPED_TRACE(what + " " + split_method_name(method) + " n=" + std::to_string(ratios.size()));
  auto want = run_op(kind, attrs, inputs);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  Graph g = single_node_graph(kind, attrs, inputs, 1);
  ASSERT_TRUE(g.infer_shapes().ok());
  std::vector<Tensor> feeds;
  for (const OpInput& i : inputs) {
    if (!i.constant && !i.omitted) feeds.push_back(i.tensor);
  }
  auto got = run_split_reference(g, method, ratios, feeds);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  expect_near(*got, (*want)[0], 1e-4f, 1e-4f);
}

Attributes conv_attrs(int64_t k, int64_t s, int64_t d, const std::string& pad, bool relu) {
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{k, k});
  a.set("strides", std::vector<int64_t>{s, s});
  a.set("dilations", std::vector<int64_t>{d, d});
  if (pad == "explicit") {
    a.set("pads", std::vector<int64_t>{k / 2 + (k > 1 ? 1 : 0), 0, k / 2, 1});  // asymmetric
  } else {
    a.set("auto_pad", pad);
  }
  if (relu) set_fused_activation(&a, Activation{ActivationKind::kRelu, 0, 0});
  return a;
}

const std::vector<std::vector<double>> kRatios = {
    {0.5, 0.5}, {0.7, 0.3}, {1, 1, 1}, {0.2, 0.5, 0.3}, {1, 1, 1, 1}, {0.1, 0.4, 0.3, 0.2}};

// Exhaustive small corners: every kernel, stride, dilation and padding, every method, 2-4
// pieces with equal and unequal ratios, on odd shapes.
TEST(SplitRule, ConvEveryMethodKernelStridePadding) {
  uint32_t seed = 1;
  for (int64_t k : {1, 3, 5, 7, 9}) {
    for (int64_t s : {1, 2, 3}) {
      for (int64_t d : {1, 2}) {
        for (const char* pad : {"VALID", "SAME_UPPER", "SAME_LOWER", "explicit"}) {
          const int64_t h = 13 + (k - 1) * d;  // VALID keeps >= 4 output rows
          const Tensor x = random_tensor(Shape{1, 4, h, 11 + (k - 1) * d}, seed++);
          const Tensor w = random_tensor(Shape{5, 4, k, k}, seed++);
          const Tensor b = random_tensor(Shape{5}, seed++, 1.f, 3.f);
          const Attributes a = conv_attrs(k, s, d, pad, (seed % 2) == 0);
          const std::string what = "k" + std::to_string(k) + " s" + std::to_string(s) + " d" +
                                   std::to_string(d) + " " + pad;
          for (SplitMethod m : {SplitMethod::kConvChannel, SplitMethod::kConvSpatial,
                                SplitMethod::kConvFilter, SplitMethod::kConvGrid}) {
            const auto& r = kRatios[static_cast<size_t>(seed) % kRatios.size()];
            check_split(OpKind::kConv, a, {in(x), constant(w), constant(b)}, m, r, what);
          }
        }
      }
    }
  }
}

TEST(SplitRule, GroupedAndDepthwiseConvChannel) {
  Attributes a = conv_attrs(3, 1, 1, "SAME_UPPER", true);
  a.set("group", int64_t{6});
  const Tensor x = random_tensor(Shape{1, 6, 13, 13}, 1);
  const Tensor w = random_tensor(Shape{6, 1, 3, 3}, 2);
  for (const auto& r : kRatios) {
    check_split(OpKind::kConv, a, {in(x), constant(w)}, SplitMethod::kConvChannel, r, "dw");
    check_split(OpKind::kConv, a, {in(x), constant(w)}, SplitMethod::kConvSpatial, r, "dw");
    check_split(OpKind::kConv, a, {in(x), constant(w)}, SplitMethod::kConvGrid, r, "dw");
  }
  a.set("group", int64_t{3});
  const Tensor w3 = random_tensor(Shape{9, 2, 3, 3}, 3);
  check_split(OpKind::kConv, a, {in(x), constant(w3)}, SplitMethod::kConvChannel, {1, 2}, "group3");
}

TEST(SplitRule, GemmAndMatMulEveryLayout) {
  uint32_t seed = 7;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (int c_rank = 0; c_rank < 3; ++c_rank) {
        Attributes a;
        a.set("transA", int64_t{ta});
        a.set("transB", int64_t{tb});
        a.set("alpha", 0.5f);
        a.set("beta", 2.f);
        set_fused_activation(&a, Activation{ActivationKind::kRelu, 0, 0});
        const int64_t m = 3, k = 127, n = 13;
        const Tensor x = random_tensor(ta ? Shape{k, m} : Shape{m, k}, seed++);
        const Tensor w = random_tensor(tb ? Shape{n, k} : Shape{k, n}, seed++);
        std::vector<OpInput> ins = {in(x), constant(w)};
        if (c_rank == 1) ins.push_back(constant(random_tensor(Shape{n}, seed++)));
        if (c_rank == 2) ins.push_back(constant(random_tensor(Shape{m, n}, seed++)));
        for (const auto& r : kRatios) {
          check_split(OpKind::kGemm, a, ins, SplitMethod::kFcOut, r, "gemm");
          check_split(OpKind::kGemm, a, ins, SplitMethod::kFcIn, r, "gemm");
        }
      }
    }
  }
  const Tensor x = random_tensor(Shape{2, 3, 13}, 50);
  const Tensor w = random_tensor(Shape{13, 7}, 51);
  for (const auto& r : kRatios) {
    check_split(OpKind::kMatMul, {}, {in(x), constant(w)}, SplitMethod::kFcOut, r, "matmul");
    check_split(OpKind::kMatMul, {}, {in(x), constant(w)}, SplitMethod::kFcIn, r, "matmul");
  }
}

TEST(SplitRule, PoolsAndElementwiseThatFollow) {
  uint32_t seed = 100;
  for (const char* op : {"MaxPool", "AveragePool"}) {
    for (int ceil = 0; ceil < 2; ++ceil) {
      for (int64_t k : {2, 3}) {
        for (int64_t s : {1, 2, 3}) {
          Attributes a;
          a.set("kernel_shape", std::vector<int64_t>{k, k});
          a.set("strides", std::vector<int64_t>{s, s});
          a.set("pads", std::vector<int64_t>{1, 0, 0, 1});
          a.set("ceil_mode", int64_t{ceil});
          const OpKind kind = *op_from_name(op);
          const Tensor x = random_tensor(Shape{1, 3, 13, 12}, seed++);
          for (const auto& r : {kRatios[1], kRatios[3]}) {
            check_split(kind, a, {in(x)}, SplitMethod::kConvChannel, r, op);
            check_split(kind, a, {in(x)}, SplitMethod::kConvSpatial, r, op);
          }
          for (const auto& r : {kRatios[4], kRatios[5], kRatios[2]}) {
            check_split(kind, a, {in(x)}, SplitMethod::kConvGrid, r, op);
          }
        }
      }
    }
  }
  const Tensor x = random_tensor(Shape{1, 5, 13, 7}, 1), y = random_tensor(Shape{1, 5, 13, 7}, 2);
  for (OpKind kind : {OpKind::kAdd, OpKind::kMul}) {
    check_split(kind, {}, {in(x), in(y)}, SplitMethod::kConvChannel, {1, 2, 1}, "binary");
    check_split(kind, {}, {in(x), in(y)}, SplitMethod::kConvSpatial, {1, 2, 1}, "binary");
    check_split(kind, {}, {in(x), in(y)}, SplitMethod::kConvGrid, {1, 2, 1, 3}, "binary");
  }
  check_split(OpKind::kRelu, {}, {in(x)}, SplitMethod::kConvSpatial, {3, 1}, "relu");
  check_split(OpKind::kGlobalAveragePool, {}, {in(x)}, SplitMethod::kConvChannel, {3, 1}, "gap");
}

// A filter split must add the bias once and apply the activation after the sum: with a large
// bias and ReLU, adding it twice or clamping partial sums would change almost every output.
TEST(SplitRule, FilterSplitAddsBiasOnceAndActivatesAfterTheSum) {
  const Tensor x = random_tensor(Shape{1, 8, 13, 13}, 3);
  const Tensor w = random_tensor(Shape{4, 8, 3, 3}, 4);
  const Tensor b = random_tensor(Shape{4}, 5, -4.f, 4.f);
  const Attributes a = conv_attrs(3, 1, 1, "SAME_UPPER", true);
  Graph g = single_node_graph(OpKind::kConv, a, {in(x), constant(w), constant(b)}, 1);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto sl = split_layer(g, 0, SplitMethod::kConvFilter, std::vector<double>{1, 1, 1});
  ASSERT_TRUE(sl.ok()) << sl.status().to_string();
  EXPECT_EQ(sl->rule.merge, SplitMerge::kSum);
  EXPECT_EQ(sl->rule.activation.kind, ActivationKind::kRelu);
  for (size_t p = 0; p < sl->pieces.size(); ++p) {
    const Node& pn = sl->pieces[p].graph.node(sl->pieces[p].node);
    EXPECT_EQ(pn.inputs.size() > 2 && pn.inputs[2] != kNoValue, p == 0) << "bias in piece " << p;
    EXPECT_FALSE(pn.attrs.has("activation")) << "piece " << p << " must not activate";
  }
  check_split(OpKind::kConv, a, {in(x), constant(w), constant(b)}, SplitMethod::kConvFilter,
              {1, 1, 1}, "bias");
}

uint64_t traffic_scatter(OpKind kind, const Attributes& a, const std::vector<OpInput>& ins,
                         SplitMethod m, const std::vector<double>& r, uint64_t* gather) {
  Graph g = single_node_graph(kind, a, ins, 1);
  EXPECT_TRUE(g.infer_shapes().ok());
  NodeContext nc(g, g.node(0));
  auto rule = split_node(nc.ctx(), m, r);
  EXPECT_TRUE(rule.ok()) << rule.status().to_string();
  if (!rule.ok()) return 0;
  const SplitTraffic t = split_traffic(nc.ctx(), *rule);
  *gather = t.gather_bytes;
  return t.scatter_bytes;
}

// Tables I-II (corrected, wave2-spec.md Sect. 4.2), in elements of 4 bytes.
TEST(SplitRule, BytesEqualTheCorrectedTables) {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t n = 2 + static_cast<int64_t>(rng() % 3);
    std::vector<double> r;
    for (int64_t i = 0; i < n; ++i) r.push_back(0.5 + static_cast<double>(rng() % 100) / 100.0);
    uint64_t gather = 0;
    // fc: d_i inputs, d_o outputs.
    const int64_t di = 13 + static_cast<int64_t>(rng() % 200), d_o = 13 + rng() % 100;
    Attributes fc;
    fc.set("transB", int64_t{1});
    const std::vector<OpInput> fins = {in(random_tensor(Shape{1, di}, 1)),
                                       constant(random_tensor(Shape{d_o, di}, 2)),
                                       constant(random_tensor(Shape{d_o}, 3))};
    EXPECT_EQ(traffic_scatter(OpKind::kGemm, fc, fins, SplitMethod::kFcOut, r, &gather),
              4u * static_cast<uint64_t>(n * di));
    EXPECT_EQ(gather, 4u * static_cast<uint64_t>(d_o));
    EXPECT_EQ(traffic_scatter(OpKind::kGemm, fc, fins, SplitMethod::kFcIn, r, &gather),
              4u * static_cast<uint64_t>(di));
    EXPECT_EQ(gather, 4u * static_cast<uint64_t>(n * d_o));
    // conv, same padding, stride 1: H_i x W_i x C_i input, k filters of f x f.
    const int64_t f = 1 + 2 * static_cast<int64_t>(rng() % 5), ci = 1 + rng() % 9,
                  k = 4 + rng() % 9;
    const int64_t hi = 4 * 4 * f + rng() % 40, wi = 13 + rng() % 20;  // strips >= f/2 rows
    const Attributes ca = conv_attrs(f, 1, 1, "SAME_UPPER", false);
    const std::vector<OpInput> cins = {in(random_tensor(Shape{1, ci, hi, wi}, 4)),
                                       constant(random_tensor(Shape{k, ci, f, f}, 5))};
    const uint64_t hw = static_cast<uint64_t>(hi * wi);
    EXPECT_EQ(
        traffic_scatter(OpKind::kConv, ca, cins, SplitMethod::kConvChannel, r, &gather) + gather,
        4u * static_cast<uint64_t>(n * ci + k) * hw);
    if (ci >= n) {
      EXPECT_EQ(
          traffic_scatter(OpKind::kConv, ca, cins, SplitMethod::kConvFilter, r, &gather) + gather,
          4u * static_cast<uint64_t>(ci + k * n) * hw);
    }
    // Spatial in rows: d = n strips; each of the n - 1 inner borders reads floor(f/2) halo rows
    // on both sides (the 1-D form of the exact halo, 2*floor(f/2)*C_i*(d-1)*W_i).
    const uint64_t scatter =
        traffic_scatter(OpKind::kConv, ca, cins, SplitMethod::kConvSpatial, r, &gather);
    EXPECT_EQ(scatter, 4u * static_cast<uint64_t>(ci * wi * (hi + 2 * (f / 2) * (n - 1))));
    EXPECT_EQ(gather, 4u * static_cast<uint64_t>(k) * hw);
    // Grid of d x d equal cells: the exact total halo of wave2-spec.md Sect. 4.2,
    // 2*floor(f/2)*C_i*(d-1)*(H_i + W_i) + 4*floor(f/2)^2*C_i*(d-1)^2 over the input.
    for (int64_t d : {2, 3}) {
      if (wi < d * f) continue;
      const std::vector<double> equal(static_cast<size_t>(d * d), 1.0);
      const int64_t h = f / 2;
      const uint64_t grid =
          traffic_scatter(OpKind::kConv, ca, cins, SplitMethod::kConvGrid, equal, &gather);
      EXPECT_EQ(grid, 4u * static_cast<uint64_t>(ci * (hi * wi + 2 * h * (d - 1) * (hi + wi) +
                                                       4 * h * h * (d - 1) * (d - 1))));
      EXPECT_EQ(gather, 4u * static_cast<uint64_t>(k) * hw);
    }
  }
}

// conv-grid against a brute-force oracle: each cell reads exactly the bounding box of the input
// positions its output windows touch, whatever the kernel, stride, dilation and padding.
TEST(SplitRule, GridCellsReadTheBoxTheirWindowsTouch) {
  uint32_t seed = 300;
  int cells = 0;
  for (int64_t k : {1, 2, 3, 5}) {
    for (int64_t s : {1, 2, 3}) {
      for (int64_t dil : {1, 2}) {
        const Attributes a = conv_attrs(k, s, dil, "explicit", false);
        const int64_t hi = 13 + (k - 1) * dil, wi = 11 + (k - 1) * dil;
        const std::vector<OpInput> ins = {in(random_tensor(Shape{1, 2, hi, wi}, seed++)),
                                          constant(random_tensor(Shape{3, 2, k, k}, seed++))};
        Graph g = single_node_graph(OpKind::kConv, a, ins, 1);
        ASSERT_TRUE(g.infer_shapes().ok());
        NodeContext nc(g, g.node(0));
        const std::vector<int64_t> pads = *a.get_ints("pads");
        for (const auto& r : {kRatios[4], kRatios[5], kRatios[2]}) {
          auto rule = split_node(nc.ctx(), SplitMethod::kConvGrid, r);
          if (!rule.ok()) {  // a cell may read only padding with large strides
            EXPECT_NE(rule.status().message().find("padding"), std::string::npos)
                << rule.status().message();
            continue;
          }
          for (const SplitPiece& p : rule->pieces) {
            int64_t lo[2] = {INT64_MAX, INT64_MAX}, hi_[2] = {-1, -1};
            for (int64_t oy = p.output.begin[2]; oy < p.output.end[2]; ++oy) {
              for (int64_t ox = p.output.begin[3]; ox < p.output.end[3]; ++ox) {
                for (int64_t ky = 0; ky < k; ++ky) {
                  for (int64_t kx = 0; kx < k; ++kx) {
                    const int64_t iy = oy * s - pads[0] + ky * dil;
                    const int64_t ix = ox * s - pads[1] + kx * dil;
                    if (iy < 0 || iy >= hi || ix < 0 || ix >= wi) continue;
                    lo[0] = std::min(lo[0], iy);
                    hi_[0] = std::max(hi_[0], iy + 1);
                    lo[1] = std::min(lo[1], ix);
                    hi_[1] = std::max(hi_[1], ix + 1);
                  }
                }
              }
            }
            EXPECT_EQ(p.inputs[0].begin[2], lo[0]);
            EXPECT_EQ(p.inputs[0].end[2], hi_[0]);
            EXPECT_EQ(p.inputs[0].begin[3], lo[1]);
            EXPECT_EQ(p.inputs[0].end[3], hi_[1]);
            ++cells;
          }
        }
      }
    }
  }
  EXPECT_EQ(cells, 24 * 11);  // 24 layers, each split into 4, 4 and 3 cells
}

TEST(SplitRule, GridShapes) {
  const Tensor x = random_tensor(Shape{1, 3, 9, 7}, 1);
  Graph g = single_node_graph(OpKind::kRelu, {}, {in(x)}, 1);
  ASSERT_TRUE(g.infer_shapes().ok());
  NodeContext nc(g, g.node(0));
  // n -> rows x cols of cells, read off the pieces' output boxes.
  const std::pair<int, std::pair<int, int>> cases[] = {
      {2, {1, 2}}, {3, {1, 3}}, {4, {2, 2}}, {6, {2, 3}}, {9, {3, 3}}};
  for (const auto& [n, grid] : cases) {
    auto rule = split_node(nc.ctx(), SplitMethod::kConvGrid, std::vector<double>(n, 1.0));
    ASSERT_TRUE(rule.ok()) << rule.status().to_string();
    std::set<int64_t> rows, cols;
    for (const SplitPiece& p : rule->pieces) {
      rows.insert(p.output.begin[2]);
      cols.insert(p.output.begin[3]);
    }
    EXPECT_EQ(static_cast<int>(rows.size()), grid.first) << n;
    EXPECT_EQ(static_cast<int>(cols.size()), grid.second) << n;
  }
  // More columns of cells than output columns: refused, naming the grid.
  auto wide = split_node(nc.ctx(), SplitMethod::kConvGrid, std::vector<double>(11, 1.0));
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("1x11 grid"), std::string::npos)
      << wide.status().message();
  // A rank-3 output has no grid.
  Graph g3 = single_node_graph(OpKind::kRelu, {}, {in(random_tensor(Shape{1, 3, 9}, 2))}, 1);
  ASSERT_TRUE(g3.infer_shapes().ok());
  NodeContext nc3(g3, g3.node(0));
  EXPECT_FALSE(split_extent(nc3.ctx(), SplitMethod::kConvGrid).ok());
}

TEST(SplitRule, Apportion) {
  EXPECT_EQ(*apportion(10, std::vector<double>{1, 1}), (std::vector<int64_t>{5, 5}));
  EXPECT_EQ(*apportion(13, std::vector<double>{0.7, 0.3}), (std::vector<int64_t>{9, 4}));
  EXPECT_EQ(*apportion(3, std::vector<double>{100, 1, 1}), (std::vector<int64_t>{1, 1, 1}));
  for (int64_t total = 4; total < 60; total += 7) {
    auto s = apportion(total, std::vector<double>{0.1, 0.6, 0.3});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ((*s)[0] + (*s)[1] + (*s)[2], total);
  }
  EXPECT_FALSE(apportion(2, std::vector<double>{1, 1, 1}).ok());
  EXPECT_FALSE(apportion(5, std::vector<double>{1, -1}).ok());
}

TEST(SplitRule, ErrorsNameTheNodeAndTheMissingRule) {
  const Tensor x = random_tensor(Shape{1, 4, 13, 13}, 1);
  Graph g = single_node_graph(OpKind::kSoftmax, {}, {in(x)}, 1);
  ASSERT_TRUE(g.infer_shapes().ok());
  auto sl = split_layer(g, 0, SplitMethod::kConvChannel, std::vector<double>{1, 1});
  ASSERT_FALSE(sl.ok());
  EXPECT_NE(sl.status().message().find("test_node"), std::string::npos) << sl.status().message();
  EXPECT_NE(sl.status().message().find("conv-channel"), std::string::npos);
  // Filter split of a depthwise conv, more pieces than filters, a piece reading only padding.
  Attributes dw = conv_attrs(3, 1, 1, "SAME_UPPER", false);
  dw.set("group", int64_t{4});
  Graph g2 = single_node_graph(OpKind::kConv, dw,
                               {in(x), constant(random_tensor(Shape{4, 1, 3, 3}, 2))}, 1);
  ASSERT_TRUE(g2.infer_shapes().ok());
  EXPECT_FALSE(split_layer(g2, 0, SplitMethod::kConvFilter, std::vector<double>{1, 1}).ok());
  EXPECT_FALSE(split_layer(g2, 0, SplitMethod::kConvChannel, std::vector<double>(5, 1.0)).ok());
  Attributes padded;
  padded.set("kernel_shape", std::vector<int64_t>{1, 1});
  padded.set("pads", std::vector<int64_t>{8, 0, 0, 0});
  Graph g3 = single_node_graph(OpKind::kConv, padded,
                               {in(x), constant(random_tensor(Shape{2, 4, 1, 1}, 3))}, 1);
  ASSERT_TRUE(g3.infer_shapes().ok());
  auto only_pad = split_layer(g3, 0, SplitMethod::kConvSpatial, std::vector<double>{1, 3});
  ASSERT_FALSE(only_pad.ok());
  EXPECT_NE(only_pad.status().message().find("padding"), std::string::npos);
  EXPECT_FALSE(parse_split_method("rows").ok());
}

}  // namespace
}  // namespace tessera
