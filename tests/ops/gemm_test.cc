// Gemm and MatMul: hand-computed cases, randomised comparison with a naive triple loop (shapes
// chosen to cross the GEMM engine's panel and block edges), cost and error paths.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "ops/op.h"
#include "tests/ops/nn_test_util.h"

namespace tessera {
namespace {

using testing::contains;
using testing::in;
using testing::omitted;
using testing::random_tensor;
using testing::run_error;
using testing::run_op;
using testing::tensor;

float at(const Tensor& t, int64_t i) {
  return t.data<float>()[i];
}

// Y = alpha * op(A) * op(B) + beta * C, in double, C broadcast by right-aligned dims.
Tensor naive_gemm(const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb, float alpha,
                  float beta) {
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  Tensor y = testing::zeros(Shape{m, n});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p) {
        const float av = ta ? at(a, p * m + i) : at(a, i * k + p);
        const float bv = tb ? at(b, j * k + p) : at(b, p * n + j);
        s += static_cast<double>(av) * bv;
      }
      double v = alpha * s;
      if (c != nullptr) {
        const Shape& cs = c->shape();
        const int64_t rows = cs.rank() == 2 ? cs[0] : 1;
        const int64_t cols = cs.rank() >= 1 ? cs[cs.rank() - 1] : 1;
        v += static_cast<double>(beta) * at(*c, (rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j));
      }
      y.data<float>()[i * n + j] = static_cast<float>(v);
    }
  }
  return y;
}

TEST(Gemm, HandComputed) {
  Tensor a = tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = tensor(Shape{3, 2}, {1, 0, 0, 1, 1, 1});
  Tensor c = tensor(Shape{2}, {10, 20});
  Attributes attrs;
  attrs.set("alpha", 2.f);
  attrs.set("beta", 0.5f);
  auto out = run_op(OpKind::kGemm, attrs, {in(a), in(b), in(c)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{2, 2}));
  // A*B = [[4, 5], [10, 11]]; Y = 2 * A*B + 0.5 * [10, 20].
  const float want[] = {13, 20, 25, 32};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at(out[0], i), want[i]);
}

TEST(Gemm, TransposesAndBroadcastsMatchOracle) {
  const int64_t m = 13, n = 7, k = 11;
  const std::vector<Shape> c_shapes = {Shape{},     Shape{1},    Shape{n},   Shape{1, n},
                                       Shape{m, 1}, Shape{m, n}, Shape{1, 1}};
  uint32_t seed = 1;
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      for (const Shape& cs : c_shapes) {
        SCOPED_TRACE(::testing::Message()
                     << "transA " << ta << " transB " << tb << " C " << cs.to_string());
        const Tensor a = random_tensor(ta ? Shape{k, m} : Shape{m, k}, ++seed);
        const Tensor b = random_tensor(tb ? Shape{n, k} : Shape{k, n}, ++seed);
        const Tensor c = random_tensor(cs, ++seed);
        Attributes attrs;
        attrs.set("transA", int64_t{ta});
        attrs.set("transB", int64_t{tb});
        attrs.set("alpha", 0.75f);
        attrs.set("beta", -1.5f);
        auto out = run_op(OpKind::kGemm, attrs, {in(a), in(b), in(c)});
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        testing::expect_near((*out)[0], naive_gemm(a, b, &c, ta, tb, 0.75f, -1.5f));
      }
    }
  }
}

TEST(Gemm, EngineEdgesMatchOracle) {
  // Single row (vector path, both B layouts), single column, and a shape crossing the packed
  // engine's row-block (256), depth-block (256) and column-block (512) edges.
  struct Dims {
    int64_t m, n, k;
    bool tb;
  };
  const Dims dims[] = {{1, 37, 300, false}, {1, 37, 300, true},     {29, 1, 45, false},
                       {3, 5, 1, false},    {261, 521, 259, false}, {261, 33, 259, true}};
  uint32_t seed = 40;
  for (const Dims& d : dims) {
    SCOPED_TRACE(::testing::Message() << d.m << "x" << d.n << "x" << d.k << " tb " << d.tb);
    const Tensor a = random_tensor(Shape{d.m, d.k}, ++seed);
    const Tensor b = random_tensor(d.tb ? Shape{d.n, d.k} : Shape{d.k, d.n}, ++seed);
    Attributes attrs;
    attrs.set("transB", int64_t{d.tb});
    auto out = run_op(OpKind::kGemm, attrs, {in(a), in(b)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_near((*out)[0], naive_gemm(a, b, nullptr, false, d.tb, 1.f, 0.f), 1e-4f, 1e-4f);
  }
}

TEST(Gemm, OmittedCAndFusedActivation) {
  const Tensor a = random_tensor(Shape{5, 4}, 3);
  const Tensor b = random_tensor(Shape{4, 6}, 4);
  Attributes attrs;
  attrs.set("activation", std::string("relu"));
  auto out = run_op(OpKind::kGemm, attrs, {in(a), in(b), omitted()}).value();
  Tensor want = naive_gemm(a, b, nullptr, false, false, 1.f, 0.f);
  for (float& v : want.span<float>()) v = std::max(v, 0.f);
  testing::expect_near(out[0], want);
}

TEST(Gemm, CostAndErrors) {
  auto cost = testing::op_cost(OpKind::kGemm, {},
                               {in(testing::zeros(Shape{3, 5})), in(testing::zeros(Shape{5, 7}))})
                  .value();
  EXPECT_EQ(cost.flops, 2.0 * 3 * 7 * 5);

  const Tensor a = testing::zeros(Shape{3, 5});
  EXPECT_TRUE(contains(run_error(OpKind::kGemm, {}, {in(a), in(testing::zeros(Shape{4, 7}))}),
                       "inner dimensions differ"));
  EXPECT_TRUE(contains(run_error(OpKind::kGemm, {}, {in(testing::zeros(Shape{1, 3, 5})), in(a)}),
                       "expected rank 2"));
  EXPECT_TRUE(
      contains(run_error(OpKind::kGemm, {},
                         {in(a), in(testing::zeros(Shape{5, 7})), in(testing::zeros(Shape{3, 2}))}),
               "not broadcastable"));
  EXPECT_TRUE(contains(
      run_error(OpKind::kGemm, {},
                {in(a), in(testing::zeros(Shape{5, 7})), in(testing::zeros(Shape{1, 3, 7}))}),
      "not broadcastable"));
  Attributes bad;
  bad.set("transA", int64_t{2});
  EXPECT_TRUE(contains(run_error(OpKind::kGemm, bad, {in(a), in(a)}), "'transA' = 2"));
}

// Numpy matmul on contiguous tensors, in double: promotes 1-D operands and broadcasts batches.
Tensor naive_matmul(const Tensor& a, const Tensor& b) {
  std::vector<int64_t> ad = a.shape().dims(), bd = b.shape().dims();
  const bool av = ad.size() == 1, bv = bd.size() == 1;
  if (av) ad.insert(ad.begin(), 1);
  if (bv) bd.push_back(1);
  const int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  const size_t nb = std::max(ad.size(), bd.size()) - 2;
  std::vector<int64_t> ab(nb, 1), bb(nb, 1), ob(nb, 1);
  for (size_t i = 0; i + 2 < ad.size(); ++i) ab[nb - (ad.size() - 2) + i] = ad[i];
  for (size_t i = 0; i + 2 < bd.size(); ++i) bb[nb - (bd.size() - 2) + i] = bd[i];
  for (size_t i = 0; i < nb; ++i) ob[i] = std::max(ab[i], bb[i]);
  std::vector<int64_t> od = ob;
  if (!av) od.push_back(m);
  if (!bv) od.push_back(n);
  Tensor y = testing::zeros(Shape(od));
  int64_t total = 1;
  for (int64_t x : ob) total *= x;
  for (int64_t t = 0; t < total; ++t) {
    // Decompose t over ob; index A and B with broadcasting.
    int64_t rem = t, aoff = 0, boff = 0, astr = 1, bstr = 1;
    for (size_t i = nb; i-- > 0;) {
      const int64_t idx = rem % ob[i];
      rem /= ob[i];
      aoff += (ab[i] == 1 ? 0 : idx) * astr;
      boff += (bb[i] == 1 ? 0 : idx) * bstr;
      astr *= ab[i];
      bstr *= bb[i];
    }
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p) {
          s += static_cast<double>(at(a, aoff * m * k + i * k + p)) *
               at(b, boff * k * n + p * n + j);
        }
        y.data<float>()[t * m * n + i * n + j] = static_cast<float>(s);
      }
    }
  }
  return y;
}

TEST(MatMul, HandComputedVectorPromotion) {
  Tensor v = tensor(Shape{3}, {1, 2, 3});
  Tensor mat = tensor(Shape{3, 2}, {1, 4, 2, 5, 3, 6});
  auto vm = run_op(OpKind::kMatMul, {}, {in(v), in(mat)}).value();
  ASSERT_EQ(vm[0].shape(), (Shape{2}));
  EXPECT_EQ(at(vm[0], 0), 14.f);
  EXPECT_EQ(at(vm[0], 1), 32.f);
  Tensor mt = tensor(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  auto mv = run_op(OpKind::kMatMul, {}, {in(mt), in(v)}).value();
  ASSERT_EQ(mv[0].shape(), (Shape{2}));
  EXPECT_EQ(at(mv[0], 0), 14.f);
  EXPECT_EQ(at(mv[0], 1), 32.f);
  auto vv = run_op(OpKind::kMatMul, {}, {in(v), in(v)}).value();
  ASSERT_EQ(vv[0].shape(), (Shape{}));
  EXPECT_EQ(at(vv[0], 0), 14.f);
}

TEST(MatMul, BroadcastShapesMatchOracle) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {Shape{13, 7}, Shape{7, 5}},         {Shape{3, 13, 7}, Shape{7, 5}},
      {Shape{2, 1, 4, 7}, Shape{3, 7, 5}}, {Shape{7}, Shape{2, 7, 5}},
      {Shape{2, 3, 4, 7}, Shape{7}},       {Shape{1, 4, 7}, Shape{2, 7, 1}},
      {Shape{2, 5, 3}, Shape{2, 3, 127}},  {Shape{1, 300, 9}, Shape{1, 1, 9, 261}},
  };
  uint32_t seed = 70;
  for (const auto& [as, bs] : cases) {
    SCOPED_TRACE(as.to_string() + " x " + bs.to_string());
    const Tensor a = random_tensor(as, ++seed);
    const Tensor b = random_tensor(bs, ++seed);
    auto out = run_op(OpKind::kMatMul, {}, {in(a), in(b)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_near((*out)[0], naive_matmul(a, b), 1e-5f, 1e-4f);
  }
}

TEST(MatMul, CostAndErrors) {
  auto cost =
      testing::op_cost(OpKind::kMatMul, {},
                       {in(testing::zeros(Shape{2, 1, 3, 4})), in(testing::zeros(Shape{5, 4, 6}))})
          .value();
  EXPECT_EQ(cost.flops, 2.0 * 2 * 5 * 3 * 6 * 4);
  EXPECT_TRUE(
      contains(run_error(OpKind::kMatMul, {},
                         {in(testing::zeros(Shape{3, 4})), in(testing::zeros(Shape{5, 6}))}),
               "inner dimensions differ"));
  EXPECT_TRUE(
      contains(run_error(OpKind::kMatMul, {},
                         {in(testing::zeros(Shape{2, 3, 4})), in(testing::zeros(Shape{3, 4, 6}))}),
               "do not broadcast"));
  EXPECT_TRUE(contains(
      run_error(OpKind::kMatMul, {}, {in(Tensor::scalar_f32(1.f)), in(testing::zeros(Shape{1}))}),
      "rank >= 1"));
}

}  // namespace
}  // namespace tessera
