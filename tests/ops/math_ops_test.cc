// The element-wise math, variadic, comparison, selection and shape-building ops (Sqrt ... Gelu,
// Min/Max/Sum, Equal/Less/Greater, Where, PRelu, Pow, Expand, Tile, ConstantOfShape, Range):
// reference kernels against element-wise oracles computed here in double precision (or by
// brute-force index arithmetic), odd and broadcast shapes, randomised inputs, and every
// refusal naming what is wrong.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numbers>
#include <random>

#include "graph/graph.h"
#include "graph/passes.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using testing::constant;
using testing::in;
using testing::random_tensor;
using testing::run_op;
using Ints = std::vector<int64_t>;

Tensor ints(const Shape& s, Ints v) {
  return Tensor::from_int64s(s, v);
}

double softplus(double x) {
  return std::log1p(std::exp(-std::fabs(x))) + std::max(x, 0.0);
}

// The double-precision definition of each unary op.
double oracle(OpKind k, double x, bool tanh_gelu = false) {
  switch (k) {
    case OpKind::kSqrt:
      return std::sqrt(x);
    case OpKind::kExp:
      return std::exp(x);
    case OpKind::kLog:
      return std::log(x);
    case OpKind::kErf:
      return std::erf(x);
    case OpKind::kAbs:
      return std::fabs(x);
    case OpKind::kNeg:
      return -x;
    case OpKind::kReciprocal:
      return 1.0 / x;
    case OpKind::kSoftplus:
      return softplus(x);
    case OpKind::kMish:
      return x * std::tanh(softplus(x));
    case OpKind::kGelu:
      if (tanh_gelu) {
        return 0.5 * x *
               (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
      }
      return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    default:
      return NAN;
  }
}

TEST(MathOps, UnaryMatchDoublePrecisionDefinitions) {
  for (OpKind k :
       {OpKind::kSqrt, OpKind::kExp, OpKind::kLog, OpKind::kErf, OpKind::kAbs, OpKind::kNeg,
        OpKind::kReciprocal, OpKind::kSoftplus, OpKind::kMish, OpKind::kGelu}) {
    for (bool tanh_gelu : {false, true}) {
      if (tanh_gelu && k != OpKind::kGelu) continue;
      SCOPED_TRACE(std::string(op_name(k)) + (tanh_gelu ? " tanh" : ""));
      const bool positive = k == OpKind::kSqrt || k == OpKind::kLog;
      Tensor x = random_tensor({3, 13, 7}, 11, positive ? 1e-3f : -9.f, 9.f);
      Attributes a;
      if (tanh_gelu) a.set("approximate", std::string("tanh"));
      auto y = run_op(k, a, {in(x)});
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const double want = oracle(k, x.data<float>()[i], tanh_gelu);
        ASSERT_NEAR((*y)[0].data<float>()[i], want, 2e-6 * std::max(1.0, std::fabs(want)))
            << "x = " << x.data<float>()[i];
      }
    }
  }
}

TEST(MathOps, UnaryEdgesFollowIeee) {
  const float inf = std::numeric_limits<float>::infinity();
  Tensor x = Tensor::from_floats({6}, std::vector<float>{0.f, -1.f, inf, -inf, NAN, 100.f});
  auto at = [&](OpKind k, int i) { return run_op(k, {}, {in(x)}).value()[0].data<float>()[i]; };
  EXPECT_EQ(at(OpKind::kLog, 0), -inf);
  EXPECT_TRUE(std::isnan(at(OpKind::kLog, 1)));
  EXPECT_TRUE(std::isnan(at(OpKind::kSqrt, 1)));
  EXPECT_EQ(at(OpKind::kReciprocal, 0), inf);
  EXPECT_EQ(at(OpKind::kExp, 3), 0.f);
  EXPECT_EQ(at(OpKind::kSoftplus, 2), inf);
  EXPECT_EQ(at(OpKind::kSoftplus, 3), 0.f);
  EXPECT_EQ(at(OpKind::kSoftplus, 5), 100.f);  // no overflow through e^100
  EXPECT_EQ(at(OpKind::kMish, 5), 100.f);
  EXPECT_EQ(at(OpKind::kGelu, 2), inf);
  for (OpKind k : {OpKind::kSqrt, OpKind::kExp, OpKind::kErf, OpKind::kSoftplus, OpKind::kMish,
                   OpKind::kGelu, OpKind::kAbs, OpKind::kNeg}) {
    EXPECT_TRUE(std::isnan(at(k, 4))) << op_name(k);
  }
}

TEST(MathOps, IntegerAbsAndNegWrap) {
  const int64_t lo = std::numeric_limits<int64_t>::min();
  Tensor x = ints({4}, {lo, -5, 0, 7});
  auto neg = run_op(OpKind::kNeg, {}, {in(x)});
  auto abs = run_op(OpKind::kAbs, {}, {in(x)});
  ASSERT_TRUE(neg.ok() && abs.ok());
  EXPECT_EQ((*neg)[0].span<int64_t>()[0], lo);
  EXPECT_EQ((*neg)[0].span<int64_t>()[1], 5);
  EXPECT_EQ((*abs)[0].span<int64_t>()[1], 5);
  EXPECT_EQ((*abs)[0].span<int64_t>()[3], 7);
  // Other math ops refuse integers, naming the dtype.
  auto sqrt = run_op(OpKind::kSqrt, {}, {in(x)});
  ASSERT_FALSE(sqrt.ok());
  EXPECT_NE(sqrt.status().message().find("i64"), std::string::npos) << sqrt.status().to_string();
}

TEST(MathOps, GeluRefusesAnUnknownApproximation) {
  Attributes a;
  a.set("approximate", std::string("fast"));
  auto y = run_op(OpKind::kGelu, a, {in(random_tensor({3}, 1))});
  ASSERT_FALSE(y.ok());
  EXPECT_NE(y.status().message().find("fast"), std::string::npos) << y.status().to_string();
}

// Brute force: the element of `t` (shape s) that broadcasts to output index `o` of shape `out`.
int64_t source_index(const Shape& s, const Shape& out, int64_t o) {
  int64_t idx = 0, stride = 1;
  for (int d = out.rank() - 1, e = s.rank() - 1; d >= 0; --d, --e) {
    const int64_t coord = o % out[d];
    o /= out[d];
    if (e >= 0) {
      if (s[e] != 1) idx += coord * stride;
      stride *= s[e];
    }
  }
  return idx;
}

TEST(MathOps, VariadicMinMaxSumBroadcastLikeNumpy) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 20; ++trial) {
    // Up to four inputs with random shapes broadcasting to [2, 3, 5].
    const Shape out{2, 3, 5};
    std::vector<Tensor> xs;
    const int n = 1 + static_cast<int>(rng() % 4);
    for (int i = 0; i < n; ++i) {
      std::vector<int64_t> d;
      const int rank = static_cast<int>(rng() % 4);
      for (int r = 3 - rank; r < 3; ++r) d.push_back(rng() % 2 ? out[r] : 1);
      xs.push_back(random_tensor(Shape(d), 100 + static_cast<uint32_t>(trial * 4 + i)));
    }
    // Make one input full-shape so the output is [2, 3, 5].
    xs[0] = random_tensor(out, 7 + static_cast<uint32_t>(trial));
    std::vector<testing::OpInput> inputs;
    for (const Tensor& t : xs) inputs.push_back(in(t));
    for (OpKind k : {OpKind::kMin, OpKind::kMax, OpKind::kSum}) {
      auto y = run_op(k, {}, inputs);
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      ASSERT_EQ((*y)[0].shape(), out);
      for (int64_t o = 0; o < out.numel(); ++o) {
        double want = xs[0].data<float>()[o];
        for (size_t i = 1; i < xs.size(); ++i) {
          const double v = xs[i].data<float>()[source_index(xs[i].shape(), out, o)];
          want = k == OpKind::kMin   ? std::min(want, v)
                 : k == OpKind::kMax ? std::max(want, v)
                                     : want + v;
        }
        ASSERT_NEAR((*y)[0].data<float>()[o], want, 1e-6) << op_name(k) << " at " << o;
      }
    }
  }
}

TEST(MathOps, MinAndMaxPropagateNaN) {
  Tensor a = Tensor::from_floats({3}, std::vector<float>{NAN, 1.f, 2.f});
  Tensor b = Tensor::from_floats({3}, std::vector<float>{0.f, NAN, 1.f});
  for (OpKind k : {OpKind::kMin, OpKind::kMax}) {
    auto y = run_op(k, {}, {in(a), in(b)});
    ASSERT_TRUE(y.ok());
    EXPECT_TRUE(std::isnan((*y)[0].data<float>()[0]));
    EXPECT_TRUE(std::isnan((*y)[0].data<float>()[1]));
    EXPECT_EQ((*y)[0].data<float>()[2], k == OpKind::kMin ? 1.f : 2.f);
  }
}

TEST(MathOps, VariadicRefusesMixedDtypesAndBadShapes) {
  auto mixed = run_op(OpKind::kSum, {}, {in(random_tensor({3}, 1)), in(ints({3}, {1, 2, 3}))});
  ASSERT_FALSE(mixed.ok());
  EXPECT_NE(mixed.status().message().find("input 1"), std::string::npos);
  auto shapes = run_op(OpKind::kMax, {}, {in(random_tensor({3}, 1)), in(random_tensor({4}, 2))});
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.status().message().find("[4]"), std::string::npos)
      << shapes.status().to_string();
}

TEST(MathOps, ComparisonsGiveBoolAndNaNComparesFalse) {
  Tensor a = Tensor::from_floats({4}, std::vector<float>{1.f, 2.f, NAN, -0.f});
  Tensor b = Tensor::from_floats({4}, std::vector<float>{2.f, 2.f, NAN, 0.f});
  const uint8_t want[3][4] = {{0, 1, 0, 1}, {1, 0, 0, 0}, {0, 0, 0, 0}};
  int r = 0;
  for (OpKind k : {OpKind::kEqual, OpKind::kLess, OpKind::kGreater}) {
    auto y = run_op(k, {}, {in(a), in(b)});
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    ASSERT_EQ((*y)[0].dtype(), DType::kBool);
    for (int i = 0; i < 4; ++i) EXPECT_EQ((*y)[0].data<uint8_t>()[i], want[r][i]) << i;
    ++r;
  }
  auto bad = run_op(OpKind::kLess, {}, {in(a), in(ints({4}, {1, 2, 3, 4}))});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("different dtypes"), std::string::npos);
}

TEST(MathOps, WhereSelectsAndBroadcasts) {
  Tensor cond = Tensor::create(DType::kBool, Shape{2, 1}).value();
  cond.data<uint8_t>()[0] = 7;  // any nonzero byte is true
  cond.data<uint8_t>()[1] = 0;
  Tensor x = random_tensor({2, 3}, 1);
  Tensor y = random_tensor({3}, 2);
  auto out = run_op(OpKind::kWhere, {}, {in(cond), in(x), in(y)});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ((*out)[0].data<float>()[j], x.data<float>()[j]);
    EXPECT_EQ((*out)[0].data<float>()[3 + j], y.data<float>()[j]);
  }
  auto not_bool = run_op(OpKind::kWhere, {}, {in(x), in(x), in(x)});
  ASSERT_FALSE(not_bool.ok());
  EXPECT_NE(not_bool.status().message().find("not bool"), std::string::npos);
}

TEST(MathOps, PReluPerChannelAndRefusals) {
  Tensor x = random_tensor({2, 3, 4, 5}, 1, -2.f, 2.f);
  Tensor s = random_tensor({3, 1, 1}, 2);
  auto y = run_op(OpKind::kPRelu, {}, {in(x), constant(s)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const float v = x.data<float>()[i];
    const float a = s.data<float>()[(i / 20) % 3];
    EXPECT_EQ((*y)[0].data<float>()[i], v < 0 ? a * v : v);
  }
  auto bad = run_op(OpKind::kPRelu, {}, {in(x), constant(random_tensor({2, 3, 4, 5, 1}, 3))});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("does not broadcast"), std::string::npos);
}

TEST(MathOps, PowOfMixedTypes) {
  Tensor b = Tensor::from_floats({4}, std::vector<float>{2.f, -2.f, 9.f, -8.f});
  auto sq = run_op(OpKind::kPow, {}, {in(b), constant(ints({}, {3}))});
  ASSERT_TRUE(sq.ok()) << sq.status().to_string();
  EXPECT_EQ((*sq)[0].data<float>()[1], -8.f);
  auto half = run_op(OpKind::kPow, {}, {in(b), constant(Tensor::scalar_f32(0.5f))});
  ASSERT_TRUE(half.ok());
  EXPECT_EQ((*half)[0].data<float>()[2], 3.f);
  EXPECT_TRUE(std::isnan((*half)[0].data<float>()[1]));
  auto integer = run_op(OpKind::kPow, {}, {in(ints({3}, {3, -2, 10})), in(ints({3}, {4, 3, 18}))});
  ASSERT_TRUE(integer.ok());
  EXPECT_EQ((*integer)[0].span<int64_t>()[0], 81);
  EXPECT_EQ((*integer)[0].span<int64_t>()[1], -8);
  EXPECT_EQ((*integer)[0].span<int64_t>()[2], 1000000000000000000);
}

TEST(MathOps, ExpandTileConstantOfShapeRange) {
  Tensor x = random_tensor({3, 1}, 1);
  auto e = run_op(OpKind::kExpand, {}, {in(x), constant(ints({3}, {2, 1, 4}))});
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  ASSERT_EQ((*e)[0].shape(), (Shape{2, 3, 4}));
  for (int64_t i = 0; i < 24; ++i) {
    EXPECT_EQ((*e)[0].data<float>()[i], x.data<float>()[(i / 4) % 3]);
  }
  auto t = run_op(OpKind::kTile, {}, {in(random_tensor({2, 3}, 2)), constant(ints({2}, {2, 2}))});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)[0].shape(), (Shape{4, 6}));
  Attributes v;
  v.set("value", Tensor::from_int64s(Shape{1}, Ints{5}));
  auto c = run_op(OpKind::kConstantOfShape, v, {constant(ints({2}, {2, 3}))});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].dtype(), DType::kI64);
  EXPECT_EQ((*c)[0].span<int64_t>()[5], 5);
  auto r = run_op(OpKind::kRange, {},
                  {constant(ints({}, {10})), constant(ints({}, {-7})), constant(ints({}, {-3}))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)[0].shape(), (Shape{6}));
  EXPECT_EQ((*r)[0].span<int64_t>()[5], -5);
}

TEST(MathOps, ShapeOpsRefuseWhatTheyCannotSize) {
  // Range's length depends on its values: inputs fed at run time are refused, naming one.
  auto r = run_op(OpKind::kRange, {},
                  {in(ints({}, {0})), constant(ints({}, {5})), constant(ints({}, {1}))});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("start must be a constant"), std::string::npos);
  auto zero = run_op(OpKind::kRange, {},
                     {constant(ints({}, {0})), constant(ints({}, {5})), constant(ints({}, {0}))});
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("delta is 0"), std::string::npos);
  auto tile = run_op(OpKind::kTile, {}, {in(random_tensor({2, 3}, 2)), constant(ints({1}, {2}))});
  ASSERT_FALSE(tile.ok());
  EXPECT_NE(tile.status().message().find("rank 2"), std::string::npos);
  auto expand = run_op(OpKind::kExpand, {}, {in(random_tensor({3}, 2)), constant(ints({1}, {4}))});
  ASSERT_FALSE(expand.ok());
  auto huge = run_op(OpKind::kTile, {},
                     {in(random_tensor({2, 3}, 2)), constant(ints({2}, {int64_t{1} << 40, 2}))});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("too large"), std::string::npos);
  auto neg = run_op(OpKind::kConstantOfShape, {}, {constant(ints({2}, {2, -1}))});
  ASSERT_FALSE(neg.ok());
  EXPECT_NE(neg.status().message().find("negative"), std::string::npos);
}

// fuse_gelu: both spellings exporters write become one Gelu node computing the same values;
// a pattern whose intermediate value is read elsewhere is left alone.
TEST(GeluFusion, ErfAndTanhSpellingsFuse) {
  for (bool tanh : {false, true}) {
    for (bool escape : {false, true}) {
      SCOPED_TRACE(std::string(tanh ? "tanh" : "erf") + (escape ? " with escaping value" : ""));
      Graph g;
      const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 13}});
      g.inputs().push_back(x);
      auto scalar = [&](float v) {
        return g.add_constant("c" + std::to_string(g.num_values()), Tensor::scalar_f32(v));
      };
      auto node = [&](OpKind k, std::vector<ValueId> ins) {
        Node n;
        n.name = std::string(op_name(k)) + std::to_string(g.num_nodes());
        n.kind = k;
        n.inputs = std::move(ins);
        n.outputs = {g.add_value(n.name)};
        const ValueId v = n.outputs[0];
        g.add_node(std::move(n));
        return v;
      };
      ValueId f, inner;
      if (tanh) {
        const ValueId sq = node(OpKind::kMul, {x, x});
        const ValueId cube = node(OpKind::kMul, {x, sq});
        const ValueId k = node(OpKind::kMul, {scalar(0.044715f), cube});
        inner = node(OpKind::kAdd, {x, k});
        f = node(OpKind::kTanh, {node(OpKind::kMul, {scalar(0.7978845608f), inner})});
      } else {
        inner = node(OpKind::kDiv, {x, scalar(1.4142135f)});
        f = node(OpKind::kErf, {inner});
      }
      const ValueId plus = node(OpKind::kAdd, {f, scalar(1.f)});
      const ValueId y = node(OpKind::kMul, {node(OpKind::kMul, {x, plus}), scalar(0.5f)});
      g.outputs().push_back(y);
      if (escape) g.outputs().push_back(inner);
      ASSERT_TRUE(g.infer_shapes().ok());
      const Tensor feed = random_tensor({2, 13}, 3, -4.f, 4.f);
      auto run_graph = [&](const Graph& graph) {
        // Reference evaluation of every node in order.
        std::vector<Tensor> vals(static_cast<size_t>(graph.num_values()));
        vals[static_cast<size_t>(graph.inputs()[0])] = feed;
        for (const Node& n : graph.nodes()) {
          std::vector<testing::OpInput> ins;
          for (ValueId v : n.inputs) {
            ins.push_back(graph.value(v).is_constant ? constant(graph.value(v).data)
                                                     : in(vals[static_cast<size_t>(v)]));
          }
          auto o = run_op(n.kind, n.attrs, ins);
          EXPECT_TRUE(o.ok()) << o.status().to_string();
          vals[static_cast<size_t>(n.outputs[0])] = (*o)[0];
        }
        return vals[static_cast<size_t>(graph.outputs()[0])];
      };
      const Tensor before = run_graph(g);
      PassStats stats;
      ASSERT_TRUE(fuse_gelu(g, &stats).ok());
      ASSERT_TRUE(g.validate().ok());
      ASSERT_TRUE(g.infer_shapes().ok());
      if (escape) {
        EXPECT_EQ(stats.fused_gelus, 0);
        continue;
      }
      EXPECT_EQ(stats.fused_gelus, 1);
      ASSERT_EQ(g.num_nodes(), 1);
      EXPECT_EQ(g.node(0).kind, OpKind::kGelu);
      EXPECT_EQ(g.node(0).attrs.has("approximate"), tanh);
      testing::expect_near(run_graph(g), before, 1e-6f, 1e-5f);
    }
  }
}

}  // namespace
}  // namespace tessera
