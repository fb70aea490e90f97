// ReduceSum/ReduceMax/ReduceMin, ArgMax/ArgMin and TopK against brute-force oracles written from
// coordinates (tests/ops/naive_index.h), on odd and random shapes, plus their error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "tests/ops/naive_index.h"
#include "tests/ops/nn_test_util.h"

namespace tessera {
namespace {

using testing::constant;
using testing::contains;
using testing::i64s;
using testing::in;
using testing::random_tensor;
using testing::ravel;
using testing::run_error;
using testing::run_op;
using testing::tensor;
using testing::unravel;

// Reduces `x` over `axes` by brute force: for every output coordinate, visits every input
// coordinate that maps onto it.
Tensor brute_reduce(const Tensor& x, const std::vector<int>& axes, bool keepdims, int kind) {
  const Shape& s = x.shape();
  Shape kept = s;
  for (int a : axes) kept[a] = 1;
  std::vector<int64_t> out_dims;
  for (int d = 0; d < s.rank(); ++d) {
    const bool red = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!red) out_dims.push_back(s[d]);
    if (red && keepdims) out_dims.push_back(1);
  }
  std::vector<double> acc(static_cast<size_t>(kept.numel()),
                          kind == 0   ? 0.0
                          : kind == 1 ? -std::numeric_limits<double>::infinity()
                                      : std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> c = unravel(i, s);
    for (int a : axes) c[static_cast<size_t>(a)] = 0;
    double& r = acc[static_cast<size_t>(ravel(c, kept))];
    const double v = x.data<float>()[i];
    r = kind == 0 ? r + v : kind == 1 ? std::max(r, v) : std::min(r, v);
  }
  Tensor out = Tensor::create(DType::kF32, Shape(out_dims)).value();
  for (size_t i = 0; i < acc.size(); ++i) out.data<float>()[i] = static_cast<float>(acc[i]);
  return out;
}

const OpKind kReduceKinds[] = {OpKind::kReduceSum, OpKind::kReduceMax, OpKind::kReduceMin};

TEST(ReduceSumMaxMin, MatchBruteForceOnRandomShapesAndAxes) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d) dims.push_back(1 + static_cast<int64_t>(rng() % 13));
    const Shape s(dims);
    const Tensor x = random_tensor(s, 100 + static_cast<uint32_t>(trial), -5.f, 5.f);
    std::vector<int> axes;
    std::vector<int64_t> given;
    for (int d = 0; d < rank; ++d) {
      if (rng() % 2) {
        axes.push_back(d);
        given.push_back(rng() % 2 ? d : d - rank);  // negative axes too
      }
    }
    if (axes.empty()) continue;
    const bool keepdims = rng() % 2;
    for (int k = 0; k < 3; ++k) {
      SCOPED_TRACE(std::string(op_name(kReduceKinds[k])) + " " + s.to_string());
      Attributes a;
      a.set("keepdims", int64_t{keepdims});
      // Alternate between the attribute form and the opset-13/18 input form.
      const Tensor axes_input = i64s(Shape{static_cast<int64_t>(given.size())}, given);
      if (trial % 2) a.set("axes", given);
      const std::vector<testing::OpInput> ins =
          trial % 2 ? std::vector<testing::OpInput>{in(x)}
                    : std::vector<testing::OpInput>{in(x), constant(axes_input)};
      auto out = run_op(kReduceKinds[k], a, ins);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      testing::expect_near((*out)[0], brute_reduce(x, axes, keepdims, k), 1e-4f, 1e-5f);
    }
  }
}

TEST(ReduceSumMaxMin, NoAxesReducesAllUnlessNoop) {
  const Tensor x = tensor(Shape{2, 3}, {1, -2, 3, 4, 5, -6});
  auto sum = run_op(OpKind::kReduceSum, {}, {in(x)});
  ASSERT_TRUE(sum.ok());
  EXPECT_EQ((*sum)[0].shape(), (Shape{1, 1}));
  EXPECT_FLOAT_EQ((*sum)[0].data<float>()[0], 5.f);
  auto mx = run_op(OpKind::kReduceMax, {}, {in(x)});
  EXPECT_FLOAT_EQ((*mx)[0].data<float>()[0], 5.f);
  auto mn = run_op(OpKind::kReduceMin, {}, {in(x)});
  EXPECT_FLOAT_EQ((*mn)[0].data<float>()[0], -6.f);
  Attributes noop;
  noop.set("noop_with_empty_axes", int64_t{1});
  auto id = run_op(OpKind::kReduceSum, noop, {in(x), constant(i64s(Shape{0}, {}))});
  ASSERT_TRUE(id.ok()) << id.status().to_string();
  testing::expect_near((*id)[0], x);
}

TEST(ReduceSumMaxMin, MaxAndMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = tensor(Shape{2, 2}, {1, nan, 3, 4});
  Attributes a;
  a.set("axes", std::vector<int64_t>{1});
  a.set("keepdims", int64_t{0});
  for (OpKind k : {OpKind::kReduceMax, OpKind::kReduceMin}) {
    auto out = run_op(k, a, {in(x)});
    ASSERT_TRUE(out.ok());
    EXPECT_TRUE(std::isnan((*out)[0].data<float>()[0]));
    EXPECT_FALSE(std::isnan((*out)[0].data<float>()[1]));
  }
}

TEST(ReduceSumMaxMin, ErrorsNameTheProblem) {
  const Tensor x = random_tensor(Shape{2, 3}, 1);
  Attributes a;
  a.set("axes", std::vector<int64_t>{2});
  EXPECT_TRUE(contains(run_error(OpKind::kReduceSum, a, {in(x)}), "axis"))
      << run_error(OpKind::kReduceSum, a, {in(x)});
  Attributes both;
  both.set("axes", std::vector<int64_t>{0});
  const std::string msg =
      run_error(OpKind::kReduceMax, both, {in(x), constant(i64s(Shape{1}, {1}))});
  EXPECT_TRUE(contains(msg, "test_node")) << msg;
}

// ---- ArgMax / ArgMin ---------------------------------------------------------------------------

TEST(ArgMaxMin, MatchBruteForceWithTiesAndSelectLastIndex) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 30; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    std::vector<int64_t> dims;
    for (int d = 0; d < rank; ++d) dims.push_back(1 + static_cast<int64_t>(rng() % 7));
    const Shape s(dims);
    // Few distinct values, so ties are common.
    Tensor x = Tensor::create(DType::kF32, s).value();
    for (float& v : x.span<float>()) v = static_cast<float>(rng() % 4);
    const int axis = static_cast<int>(rng() % static_cast<unsigned>(rank));
    const bool last = rng() % 2, keep = rng() % 2;
    for (OpKind kind : {OpKind::kArgMax, OpKind::kArgMin}) {
      Attributes a;
      a.set("axis", int64_t{axis - (trial % 2 ? rank : 0)});
      a.set("keepdims", int64_t{keep});
      a.set("select_last_index", int64_t{last});
      auto out = run_op(kind, a, {in(x)});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const Tensor& y = (*out)[0];
      ASSERT_EQ(y.dtype(), DType::kI64);
      Shape kept = s;
      kept[axis] = 1;
      for (int64_t o = 0; o < kept.numel(); ++o) {
        std::vector<int64_t> c = unravel(o, kept);
        int64_t pick = -1;
        float best = 0;
        for (int64_t k = 0; k < s[axis]; ++k) {
          c[static_cast<size_t>(axis)] = k;
          const float v = x.data<float>()[ravel(c, s)];
          const bool better = kind == OpKind::kArgMax ? v > best : v < best;
          if (pick < 0 || better || (last && v == best)) {
            pick = k;
            best = v;
          }
        }
        ASSERT_EQ(y.data<int64_t>()[o], pick) << "output " << o;
      }
    }
  }
}

TEST(ArgMaxMin, RejectsAnEmptyAxisAndABadAxis) {
  const Tensor x = Tensor::create(DType::kF32, Shape{2, 0}).value();
  Attributes a;
  a.set("axis", int64_t{1});
  EXPECT_TRUE(contains(run_error(OpKind::kArgMax, a, {in(x)}), "empty"));
  a.set("axis", int64_t{5});
  EXPECT_TRUE(contains(run_error(OpKind::kArgMin, a, {in(random_tensor(Shape{2}, 1))}), "axis"));
}

// ---- TopK --------------------------------------------------------------------------------------

TEST(TopK, MatchesAStableSortOnOddShapes) {
  std::mt19937 rng(11);
  for (const Shape& s : {Shape{13}, Shape{3, 127}, Shape{2, 7, 5}, Shape{1, 1}}) {
    Tensor x = Tensor::create(DType::kF32, s).value();
    for (float& v : x.span<float>()) v = static_cast<float>(rng() % 9);  // ties
    for (int axis = 0; axis < s.rank(); ++axis) {
      for (int largest = 0; largest < 2; ++largest) {
        const int64_t k = 1 + static_cast<int64_t>(rng() % static_cast<unsigned>(s[axis]));
        Attributes a;
        a.set("axis", int64_t{axis});
        a.set("largest", int64_t{largest});
        auto out = run_op(OpKind::kTopK, a, {in(x), constant(i64s(Shape{1}, {k}))}, 2);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        Shape os = s;
        os[axis] = k;
        ASSERT_EQ((*out)[0].shape(), os);
        for (int64_t o = 0; o < os.numel(); o += 1) {
          std::vector<int64_t> c = unravel(o, os);
          const int64_t j = c[static_cast<size_t>(axis)];
          std::vector<std::pair<float, int64_t>> col;
          for (int64_t t = 0; t < s[axis]; ++t) {
            c[static_cast<size_t>(axis)] = t;
            col.emplace_back(x.data<float>()[ravel(c, s)], t);
          }
          std::stable_sort(col.begin(), col.end(), [&](const auto& p, const auto& q) {
            return largest ? p.first > q.first : p.first < q.first;
          });
          EXPECT_EQ((*out)[0].data<float>()[o], col[static_cast<size_t>(j)].first);
          EXPECT_EQ((*out)[1].data<int64_t>()[o], col[static_cast<size_t>(j)].second);
        }
      }
    }
  }
}

TEST(TopK, RefusesKOutOfRangeOrNotConstant) {
  const Tensor x = random_tensor(Shape{2, 5}, 2);
  std::string msg = run_error(OpKind::kTopK, {}, {in(x), constant(i64s(Shape{1}, {6}))}, 2);
  EXPECT_TRUE(contains(msg, "K = 6")) << msg;
  msg = run_error(OpKind::kTopK, {}, {in(x), in(i64s(Shape{1}, {2}))}, 2);
  EXPECT_TRUE(contains(msg, "K")) << msg;
}

}  // namespace
}  // namespace tessera
