// Add, Sub, Mul, Div and the broadcasting machinery they share (ops/broadcast.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/activation.h"
#include "ops/broadcast.h"
#include "tests/ops/naive_index.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using testing::constant;
using testing::f32s;
using testing::i64s;
using testing::in;
using testing::run_op;
using testing::typed_tensor;

// ---- broadcast_shapes / plan_broadcast -------------------------------------------------------

TEST(Broadcast, Shapes) {
  EXPECT_EQ(broadcast_shapes(Shape{2, 3, 4}, Shape{4}).value(), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes(Shape{2, 1, 4}, Shape{3, 1}).value(), (Shape{2, 3, 4}));
  EXPECT_EQ(broadcast_shapes(Shape{}, Shape{5}).value(), (Shape{5}));
  EXPECT_EQ(broadcast_shapes(Shape{0, 1}, Shape{1, 3}).value(), (Shape{0, 3}));
  Result<Shape> bad = broadcast_shapes(Shape{2, 3}, Shape{4, 3});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[2, 3]"), std::string::npos);
  EXPECT_TRUE(broadcasts_to(Shape{3, 1}, Shape{2, 3, 4}));
  EXPECT_FALSE(broadcasts_to(Shape{2, 3, 4}, Shape{3, 4}));
  EXPECT_FALSE(broadcasts_to(Shape{2}, Shape{3}));
}

TEST(Broadcast, PlanMergesDimensions) {
  // Same shapes collapse into one row.
  {
    const Shape in[] = {Shape{2, 3, 4}, Shape{2, 3, 4}};
    BroadcastPlan p = plan_broadcast(Shape{2, 3, 4}, in);
    EXPECT_EQ(p.rank, 1);
    EXPECT_EQ(p.row_length(), 24);
    EXPECT_EQ(p.inner_stride(0), 1);
    EXPECT_EQ(p.inner_stride(1), 1);
  }
  // Per-channel: [N,C,H,W] + [1,C,1,1] -> rows of H*W, the bias fixed within a row.
  {
    const Shape in[] = {Shape{2, 5, 7, 9}, Shape{1, 5, 1, 1}};
    BroadcastPlan p = plan_broadcast(Shape{2, 5, 7, 9}, in);
    EXPECT_EQ(p.rank, 3);
    EXPECT_EQ(p.row_length(), 63);
    EXPECT_EQ(p.inner_stride(0), 1);
    EXPECT_EQ(p.inner_stride(1), 0);
    EXPECT_EQ(p.strides[1][1], 1);
    EXPECT_EQ(p.strides[1][0], 0);
  }
  // Scalar.
  {
    const Shape in[] = {Shape{4, 6}, Shape{}};
    BroadcastPlan p = plan_broadcast(Shape{4, 6}, in);
    EXPECT_EQ(p.rank, 1);
    EXPECT_EQ(p.inner_stride(1), 0);
  }
}

TEST(Broadcast, RowsVisitEveryOutputOnce) {
  const Shape out{3, 1, 4, 5};
  const Shape in[] = {Shape{3, 1, 1, 5}, Shape{4, 1}};
  BroadcastPlan p = plan_broadcast(out, in);
  std::vector<int> seen(static_cast<size_t>(out.numel()), 0);
  for_each_broadcast_row(p, [&](int64_t y, const int64_t* x, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      ++seen[static_cast<size_t>(y + i)];
      const std::vector<int64_t> idx = testing::unravel(y + i, out);
      EXPECT_EQ(x[0] + i * p.inner_stride(0), idx[0] * 5 + idx[3]);
      EXPECT_EQ(x[1] + i * p.inner_stride(1), idx[2]);
    }
  });
  for (int s : seen) EXPECT_EQ(s, 1);
}

// ---- hand-computed ---------------------------------------------------------------------------

TEST(Elementwise, HandComputedF32) {
  const Tensor a = f32s(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = f32s(Shape{3}, {10, 20, 40});
  auto add = run_op(OpKind::kAdd, {}, {in(a), in(b)}).value();
  testing::expect_near(add[0], f32s(Shape{2, 3}, {11, 22, 43, 14, 25, 46}));
  auto sub = run_op(OpKind::kSub, {}, {in(a), in(b)}).value();
  testing::expect_near(sub[0], f32s(Shape{2, 3}, {-9, -18, -37, -6, -15, -34}));
  auto mul = run_op(OpKind::kMul, {}, {in(b), in(a)}).value();
  testing::expect_near(mul[0], f32s(Shape{2, 3}, {10, 40, 120, 40, 100, 240}));
  auto div = run_op(OpKind::kDiv, {}, {in(a), in(b)}).value();
  testing::expect_near(div[0], f32s(Shape{2, 3}, {0.1f, 0.1f, 0.075f, 0.4f, 0.25f, 0.15f}));
}

TEST(Elementwise, ColumnTimesRow) {
  // [3,1] * [1,4] -> outer product.
  const Tensor a = f32s(Shape{3, 1}, {1, 2, 3});
  const Tensor b = f32s(Shape{1, 4}, {1, 10, 100, 1000});
  auto y = run_op(OpKind::kMul, {}, {in(a), in(b)}).value();
  testing::expect_near(y[0],
                       f32s(Shape{3, 4}, {1, 10, 100, 1000, 2, 20, 200, 2000, 3, 30, 300, 3000}));
}

TEST(Elementwise, FloatDivisionByZeroIsIeee) {
  auto y =
      run_op(OpKind::kDiv, {}, {in(f32s(Shape{3}, {1, -1, 0})), in(f32s(Shape{1}, {0}))}).value();
  EXPECT_EQ(y[0].data<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(y[0].data<float>()[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(y[0].data<float>()[2]));
}

TEST(Elementwise, IntegerDivisionTruncates) {
  const Tensor a = i64s({7, -7, 7, -7, 0, std::numeric_limits<int64_t>::min()});
  const Tensor b = i64s({2, 2, -2, -2, 5, -1});
  auto y = run_op(OpKind::kDiv, {}, {in(a), in(b)}).value();
  const int64_t want[] = {3, -3, -3, 3, 0, std::numeric_limits<int64_t>::min()};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(y[0].data<int64_t>()[i], want[i]) << i;

  const Tensor a32 = typed_tensor<int32_t>(DType::kI32, Shape{3}, {9, -9, 100});
  const Tensor b32 = typed_tensor<int32_t>(DType::kI32, Shape{}, {4});
  auto y32 = run_op(OpKind::kDiv, {}, {in(a32), in(b32)}).value();
  EXPECT_EQ(y32[0].dtype(), DType::kI32);
  EXPECT_EQ(y32[0].data<int32_t>()[0], 2);
  EXPECT_EQ(y32[0].data<int32_t>()[1], -2);
  EXPECT_EQ(y32[0].data<int32_t>()[2], 25);
}

TEST(Elementwise, IntegerDivisionByZeroIsAnError) {
  auto r = run_op(OpKind::kDiv, {}, {in(i64s({1, 2, 3})), in(i64s({1, 0, 1}))});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("division by zero"), std::string::npos);
  EXPECT_NE(r.status().message().find("test_node"), std::string::npos);
  const Tensor z32 = typed_tensor<int32_t>(DType::kI32, Shape{}, {0});
  const Tensor a32 = typed_tensor<int32_t>(DType::kI32, Shape{2}, {1, 2});
  EXPECT_FALSE(run_op(OpKind::kDiv, {}, {in(a32), in(z32)}).ok());
}

TEST(Elementwise, IntegerArithmeticWraps) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto add = run_op(OpKind::kAdd, {}, {in(i64s({big})), in(i64s({1}))}).value();
  EXPECT_EQ(add[0].data<int64_t>()[0], std::numeric_limits<int64_t>::min());
  auto mul = run_op(OpKind::kMul, {}, {in(i64s({big})), in(i64s({2}))}).value();
  EXPECT_EQ(mul[0].data<int64_t>()[0], -2);
  // Shape arithmetic as in exported models: Shape -> Gather -> Mul/Sub.
  auto sub =
      run_op(OpKind::kSub, {}, {in(i64s({1, 64, 56})), constant(i64s(Shape{}, {1}))}).value();
  EXPECT_EQ(sub[0].data<int64_t>()[1], 63);
}

TEST(Elementwise, FusedActivation) {
  Attributes attrs;
  set_fused_activation(&attrs, Activation{ActivationKind::kRelu, 0, 0});
  auto y =
      run_op(OpKind::kAdd, attrs, {in(f32s(Shape{3}, {-5, 1, 2})), in(f32s(Shape{}, {1}))}).value();
  testing::expect_near(y[0], f32s(Shape{3}, {0, 2, 3}));
  auto bad = run_op(OpKind::kAdd, attrs, {in(i64s({1})), in(i64s({1}))});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("fused activation"), std::string::npos);
}

TEST(Elementwise, Errors) {
  auto shapes = run_op(OpKind::kAdd, {},
                       {in(f32s(Shape{2, 3}, std::vector<float>(6))),
                        in(f32s(Shape{4, 3}, std::vector<float>(12)))});
  ASSERT_FALSE(shapes.ok());
  EXPECT_EQ(shapes.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(shapes.status().message().find("cannot be broadcast"), std::string::npos);
  EXPECT_NE(shapes.status().message().find("(Add)"), std::string::npos);

  auto dtypes = run_op(OpKind::kMul, {}, {in(f32s(Shape{1}, {1})), in(i64s({1}))});
  ASSERT_FALSE(dtypes.ok());
  EXPECT_NE(dtypes.status().message().find("different dtypes"), std::string::npos);

  const Tensor u8 = typed_tensor<uint8_t>(DType::kU8, Shape{2}, {1, 2});
  auto unsupported = run_op(OpKind::kSub, {}, {in(u8), in(u8)});
  EXPECT_EQ(unsupported.status().code(), StatusCode::kUnimplemented);
}

TEST(Elementwise, EmptyOutput) {
  auto y = run_op(OpKind::kDiv, {}, {in(i64s(Shape{0, 3}, {})), in(i64s(Shape{1, 3}, {0, 0, 0}))})
               .value();
  EXPECT_EQ(y[0].shape(), (Shape{0, 3}));
}

// ---- randomised against a naive oracle -------------------------------------------------------

// The input coordinate that output coordinate `idx` reads under numpy broadcasting.
int64_t broadcast_source(const std::vector<int64_t>& idx, const Shape& in_shape) {
  const int lead = static_cast<int>(idx.size()) - in_shape.rank();
  std::vector<int64_t> src;
  for (int d = 0; d < in_shape.rank(); ++d) {
    src.push_back(in_shape[d] == 1 ? 0 : idx[static_cast<size_t>(d + lead)]);
  }
  return testing::ravel(src, in_shape);
}

// Makes a random input shape broadcasting to `out`: a random suffix with random dims set to 1.
Shape random_operand(std::mt19937& rng, const Shape& out) {
  std::uniform_int_distribution<int> rank(0, out.rank());
  std::bernoulli_distribution one(0.4);
  const int r = rank(rng);
  std::vector<int64_t> dims;
  for (int d = out.rank() - r; d < out.rank(); ++d) dims.push_back(one(rng) ? 1 : out[d]);
  return Shape(std::move(dims));
}

template <typename T>
T oracle_apply(OpKind k, T a, T b) {
  switch (k) {
    case OpKind::kAdd:
      return static_cast<T>(a + b);
    case OpKind::kSub:
      return static_cast<T>(a - b);
    case OpKind::kMul:
      return static_cast<T>(a * b);
    default:
      return static_cast<T>(a / b);
  }
}

template <typename T>
void check_random_broadcasts(DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<int64_t> dims = {1, 2, 3, 5, 13};
  const OpKind kinds[] = {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv};
  for (int iter = 0; iter < 60; ++iter) {
    std::uniform_int_distribution<int> rank(0, 5);
    Shape out = testing::random_shape(rng, rank(rng), dims);
    if (iter % 10 == 0 && out.rank() >= 2) out[out.rank() - 1] = 127;  // vector-loop tails
    Shape sa = random_operand(rng, out), sb = random_operand(rng, out);
    // The real output is the broadcast of the operands (it may be smaller than `out`).
    const Shape y_shape = broadcast_shapes(sa, sb).value();
    Tensor a = testing::random_int_tensor(dtype, sa, seed + 7 * iter, -50, 50);
    Tensor b = testing::random_int_tensor(dtype, sb, seed + 7 * iter + 1, 1, 9);
    if (dtype == DType::kF32) a = testing::random_tensor(sa, seed + 7 * iter, -3.f, 3.f);
    for (OpKind k : kinds) {
      auto r = run_op(k, {}, {in(a), in(b)});
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const Tensor& y = (*r)[0];
      ASSERT_EQ(y.shape(), y_shape);
      for (int64_t i = 0; i < y.numel(); ++i) {
        const std::vector<int64_t> idx = testing::unravel(i, y_shape);
        const T va = a.data<T>()[broadcast_source(idx, sa)];
        const T vb = b.data<T>()[broadcast_source(idx, sb)];
        ASSERT_EQ(y.data<T>()[i], oracle_apply(k, va, vb))
            << op_name(k) << " " << sa.to_string() << " with " << sb.to_string() << " at " << i;
      }
    }
  }
}

TEST(Elementwise, RandomBroadcastsF32) {
  check_random_broadcasts<float>(DType::kF32, 11);
}
TEST(Elementwise, RandomBroadcastsI64) {
  check_random_broadcasts<int64_t>(DType::kI64, 23);
}
TEST(Elementwise, RandomBroadcastsI32) {
  check_random_broadcasts<int32_t>(DType::kI32, 37);
}

TEST(Elementwise, ChannelBroadcastOddShape) {
  // The common bias/scale shape, with odd sizes: [2,13,127] * [13,1].
  const Tensor x = testing::random_tensor(Shape{2, 13, 127}, 5);
  const Tensor s = testing::random_tensor(Shape{13, 1}, 6);
  auto y = run_op(OpKind::kMul, {}, {in(x), constant(s)}).value();
  for (int64_t i = 0; i < y[0].numel(); ++i) {
    const int64_t c = (i / 127) % 13;
    ASSERT_EQ(y[0].data<float>()[i], x.data<float>()[i] * s.data<float>()[c]);
  }
}

TEST(Elementwise, CostIsOneFlopPerOutput) {
  Graph g;
  Node n;
  n.name = "add";
  n.kind = OpKind::kAdd;
  n.inputs = {g.add_value("a", TensorInfo{DType::kF32, Shape{2, 8, 4, 4}}),
              g.add_constant("b", Tensor::create(DType::kF32, Shape{1, 8, 1, 1}).value())};
  n.outputs = {g.add_value("y")};
  g.add_node(n);
  NodeContext nc(g, g.node(0));
  std::vector<TensorInfo> outs;
  ASSERT_TRUE(infer_node(nc.ctx(), 1, &outs).ok());
  const OpCost c = node_cost(nc.ctx(), outs);
  EXPECT_EQ(c.flops, 256);
  EXPECT_EQ(c.input_bytes, 256u * 4);
  EXPECT_EQ(c.weight_bytes, 8u * 4);
  EXPECT_EQ(c.output_bytes, 256u * 4);
}

}  // namespace
}  // namespace tessera
