// fold_qdq_pairs (graph/qdq.h): which QuantizeLinear -> DequantizeLinear pairs fold, what the
// folded graph reads, and which pairs stay (per-axis scales, mismatched parameters, values read
// outside the slice, requantisation chains). The int8 programs that use it: cpu_int8_test.cc.
#include <gtest/gtest.h>

#include <algorithm>

#include "graph/qdq.h"

namespace tessera {
namespace {

struct Builder {
  Graph g;
  std::vector<NodeId> layers;

  ValueId node(OpKind kind, const std::string& name, std::vector<ValueId> in) {
    Node n;
    n.name = name;
    n.kind = kind;
    n.inputs = std::move(in);
    n.outputs = {g.add_value(name)};
    layers.push_back(g.add_node(n));
    return n.outputs[0];
  }
  ValueId scale(float s) {
    return g.add_constant("s" + std::to_string(g.num_values()), Tensor::scalar_f32(s));
  }
  ValueId zero_point(int zp, DType t) {
    Tensor z = *Tensor::create(t, Shape{});
    if (t == DType::kU8) {
      z.data<uint8_t>()[0] = static_cast<uint8_t>(zp);
    } else {
      z.data<int8_t>()[0] = static_cast<int8_t>(zp);
    }
    return g.add_constant("z" + std::to_string(g.num_values()), z);
  }
  // x -> Q -> DQ with the given constants; returns the DequantizeLinear output.
  ValueId qdq(ValueId x, ValueId s, ValueId z, const std::string& name) {
    const ValueId q = node(OpKind::kQuantizeLinear, name + ".q", {x, s, z});
    return node(OpKind::kDequantizeLinear, name + ".dq", {q, s, z});
  }
  ValueId input(const std::string& name) {
    const ValueId x = g.add_value(name, TensorInfo{DType::kF32, Shape{1, 4, 3, 3}});
    g.inputs().push_back(x);
    return x;
  }
  void finish(std::vector<ValueId> outputs) {
    g.outputs() = std::move(outputs);
    ASSERT_TRUE(g.infer_shapes().ok());
  }
};

bool contains(const std::vector<NodeId>& v, NodeId id) {
  return std::find(v.begin(), v.end(), id) != v.end();
}

TEST(QdqFolding, FoldsPairsAndRedirectsTheirReaders) {
  Builder b;
  const ValueId x = b.input("x");
  const ValueId s = b.scale(0.05f), z = b.zero_point(128, DType::kU8);
  const ValueId xd = b.qdq(x, s, z, "x");
  const ValueId r = b.node(OpKind::kRelu, "relu", {xd});
  const ValueId s2 = b.scale(0.02f), z2 = b.zero_point(-3, DType::kI8);
  const ValueId rd = b.qdq(r, s2, z2, "r");
  const ValueId y = b.node(OpKind::kSigmoid, "sig", {rd});
  b.finish({y});
  ASSERT_FALSE(has_qdq_pairs(Graph()));
  EXPECT_TRUE(has_qdq_pairs(b.g));
  auto f = fold_qdq_pairs(b.g, b.layers);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->pairs, 2);
  // Only relu and sig remain, reading x and relu's output directly.
  ASSERT_EQ(f->layers.size(), 2u);
  const Node& relu = f->graph.node(f->layers[0]);
  const Node& sig = f->graph.node(f->layers[1]);
  EXPECT_EQ(relu.inputs, std::vector<ValueId>{x});
  EXPECT_EQ(sig.inputs, std::vector<ValueId>{r});
  // The folded nodes read nothing; the original graph is untouched.
  for (NodeId id : b.layers) {
    if (!contains(f->layers, id)) {
      EXPECT_TRUE(f->graph.node(id).inputs.empty());
    }
    EXPECT_FALSE(b.g.node(id).inputs.empty());
  }
  ASSERT_EQ(f->quant.size(), 2u);
  EXPECT_EQ(f->quant[0].first, x);
  EXPECT_EQ(f->quant[0].second.scale, 0.05f);
  EXPECT_EQ(f->quant[0].second.zero_point, 128);
  EXPECT_TRUE(f->quant[0].second.is_unsigned);
  EXPECT_EQ(f->quant[1].first, r);
  EXPECT_EQ(f->quant[1].second.zero_point, -3);
  EXPECT_FALSE(f->quant[1].second.is_unsigned);
}

TEST(QdqFolding, PairsThatCannotFoldStay) {
  // A DequantizeLinear output that is a graph output; a DequantizeLinear with another scale; a
  // per-axis scale; a pair inside a slice whose value is read by a node outside it.
  Builder b;
  const ValueId x = b.input("x");
  const ValueId s = b.scale(0.05f), z = b.zero_point(0, DType::kU8);
  const ValueId out_dq = b.qdq(x, s, z, "graph_output");
  const ValueId other = b.scale(0.06f);
  const ValueId q = b.node(OpKind::kQuantizeLinear, "mismatch.q", {x, s, z});
  const ValueId mismatch = b.node(OpKind::kDequantizeLinear, "mismatch.dq", {q, other, z});
  const ValueId m1 = b.node(OpKind::kRelu, "m1", {mismatch});
  Tensor per_axis = *Tensor::create(DType::kF32, Shape{4});
  for (int i = 0; i < 4; ++i) per_axis.data<float>()[i] = 0.1f;
  const ValueId pa = b.g.add_constant("per_axis", per_axis);
  Tensor zeros = *Tensor::create(DType::kU8, Shape{4});
  const ValueId pz = b.g.add_constant("per_axis_zp", zeros);
  const ValueId axis_dq = b.qdq(x, pa, pz, "axis");
  const ValueId m2 = b.node(OpKind::kRelu, "m2", {axis_dq});
  b.finish({out_dq, m1, m2});
  EXPECT_FALSE(fold_qdq_pairs(b.g, b.layers).has_value());
  EXPECT_FALSE(has_qdq_pairs(b.g));

  // Within a slice of the first two nodes of x -> Q -> DQ -> relu, the DQ output read outside.
  Builder c;
  const ValueId cx = c.input("x");
  const ValueId cd = c.qdq(cx, c.scale(0.05f), c.zero_point(0, DType::kU8), "x");
  const ValueId cr = c.node(OpKind::kRelu, "relu", {cd});
  c.finish({cr});
  const std::vector<NodeId> first_two(c.layers.begin(), c.layers.begin() + 2);
  EXPECT_FALSE(fold_qdq_pairs(c.g, first_two).has_value());
  EXPECT_TRUE(fold_qdq_pairs(c.g, c.layers).has_value());
}

TEST(QdqFolding, ARequantisationChainKeepsItsSecondPair) {
  // x -> Q1 -> DQ1 -> Q2 -> DQ2 -> relu: the second pair reads a folded value and stays.
  Builder b;
  const ValueId x = b.input("x");
  const ValueId d1 = b.qdq(x, b.scale(0.05f), b.zero_point(0, DType::kU8), "a");
  const ValueId d2 = b.qdq(d1, b.scale(0.1f), b.zero_point(5, DType::kU8), "b");
  const ValueId y = b.node(OpKind::kRelu, "relu", {d2});
  b.finish({y});
  auto f = fold_qdq_pairs(b.g, b.layers);
  ASSERT_TRUE(f.has_value());
  EXPECT_EQ(f->pairs, 1);
  ASSERT_EQ(f->layers.size(), 3u);  // b.q, b.dq, relu
  EXPECT_EQ(f->graph.node(f->layers[0]).kind, OpKind::kQuantizeLinear);
  EXPECT_EQ(f->graph.node(f->layers[0]).inputs[0], x);  // reads x, the folded a-pair's value
  EXPECT_EQ(f->graph.node(f->layers[2]).inputs, std::vector<ValueId>{d2});
}

}  // namespace
}  // namespace tessera
