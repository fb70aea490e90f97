// MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool: hand-computed cases (padding, ceil
// mode, SAME padding, count_include_pad), randomised comparison against a naive oracle, cost
// and error paths.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/op.h"
#include "tests/ops/nn_test_util.h"

namespace tessera {
namespace {

using testing::contains;
using testing::in;
using testing::random_tensor;
using testing::run_error;
using testing::run_op;
using testing::tensor;

float at(const Tensor& t, int64_t i) {
  return t.data<float>()[i];
}

Attributes pool_attrs(std::vector<int64_t> kernel, std::vector<int64_t> strides = {},
                      std::vector<int64_t> pads = {}) {
  Attributes a;
  a.set("kernel_shape", std::move(kernel));
  if (!strides.empty()) a.set("strides", std::move(strides));
  if (!pads.empty()) a.set("pads", std::move(pads));
  return a;
}

std::vector<float> values(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

TEST(MaxPool, HandComputed2x2Stride2) {
  Tensor x = tensor(Shape{1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  auto out = run_op(OpKind::kMaxPool, pool_attrs({2, 2}, {2, 2}), {in(x)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 2, 2}));
  EXPECT_EQ(values(out[0]), (std::vector<float>{6, 8, 14, 16}));
}

TEST(MaxPool, PaddingIsMinusInfinity) {
  // All-negative input: zero padding would win; -inf padding must not.
  Tensor x = tensor(Shape{1, 1, 3}, {-5, -1, -3});
  auto out = run_op(OpKind::kMaxPool, pool_attrs({3}, {1}, {1, 1}), {in(x)}).value();
  EXPECT_EQ(values(out[0]), (std::vector<float>{-1, -1, -1}));
  Tensor y = tensor(Shape{1, 1, 3}, {-5, -7, -3});
  out = run_op(OpKind::kMaxPool, pool_attrs({2}, {1}, {1, 1}), {in(y)}).value();
  EXPECT_EQ(values(out[0]), (std::vector<float>{-5, -5, -3, -3}));
}

TEST(MaxPool, CeilModeDropsWindowsStartingInEndPadding) {
  Tensor x = tensor(Shape{1, 1, 5}, {1, 5, 2, 4, 3});
  Attributes a = pool_attrs({2}, {2});
  a.set("ceil_mode", int64_t{1});
  auto out = run_op(OpKind::kMaxPool, a, {in(x)}).value();
  EXPECT_EQ(values(out[0]), (std::vector<float>{5, 4, 3}));  // floor mode would give 2 outputs
  // pads 1 + 1: padded 7, ceil((7 - 2) / 2) + 1 = 4, but window 4 would start at input 5 (in the
  // end padding): dropped.
  a.set("pads", std::vector<int64_t>{1, 1});
  out = run_op(OpKind::kMaxPool, a, {in(x)}).value();
  EXPECT_EQ(values(out[0]), (std::vector<float>{1, 5, 4}));
}

TEST(MaxPool, SameUpperAndLower) {
  Tensor x = tensor(Shape{1, 1, 4}, {1, 3, 2, 4});
  Attributes a = pool_attrs({2});
  a.set("auto_pad", std::string("SAME_UPPER"));
  EXPECT_EQ(values(run_op(OpKind::kMaxPool, a, {in(x)}).value()[0]),
            (std::vector<float>{3, 3, 4, 4}));
  a.set("auto_pad", std::string("SAME_LOWER"));
  EXPECT_EQ(values(run_op(OpKind::kMaxPool, a, {in(x)}).value()[0]),
            (std::vector<float>{1, 3, 3, 4}));
}

TEST(MaxPool, NanPropagates) {
  Tensor x = tensor(Shape{1, 1, 4}, {1, NAN, 2, 3});
  auto out = run_op(OpKind::kMaxPool, pool_attrs({2}, {2}), {in(x)}).value();
  EXPECT_TRUE(std::isnan(at(out[0], 0)));
  EXPECT_EQ(at(out[0], 1), 3.f);
}

TEST(AveragePool, CountIncludePad) {
  Tensor x = tensor(Shape{1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Attributes a = pool_attrs({3, 3}, {1, 1}, {1, 1, 1, 1});
  auto excl = run_op(OpKind::kAveragePool, a, {in(x)}).value();
  for (float v : values(excl[0])) EXPECT_EQ(v, 1.f);
  a.set("count_include_pad", int64_t{1});
  auto incl = run_op(OpKind::kAveragePool, a, {in(x)}).value();
  const float want[] = {4, 6, 4, 6, 9, 6, 4, 6, 4};
  for (int i = 0; i < 9; ++i) EXPECT_FLOAT_EQ(at(incl[0], i), want[i] / 9.f) << i;
}

TEST(AveragePool, CeilModeWindowPastTheEndPaddingIsClipped) {
  // in 6, kernel 3, stride 2, pads 1 + 1, ceil: 4 windows starting at input -1, 1, 3, 5. The
  // last covers 5 (input), 6 (end padding) and 7 (beyond the padded input, never counted).
  Tensor x = tensor(Shape{1, 1, 6}, {1, 2, 3, 4, 5, 6});
  Attributes a = pool_attrs({3}, {2}, {1, 1});
  a.set("ceil_mode", int64_t{1});
  auto excl = run_op(OpKind::kAveragePool, a, {in(x)}).value();
  ASSERT_EQ(excl[0].shape(), (Shape{1, 1, 4}));
  EXPECT_EQ(values(excl[0]), (std::vector<float>{1.5f, 3, 5, 6}));
  a.set("count_include_pad", int64_t{1});
  auto incl = run_op(OpKind::kAveragePool, a, {in(x)}).value();
  EXPECT_EQ(values(incl[0]), (std::vector<float>{1, 3, 5, 3}));
}

TEST(AveragePool, SameUpperExcludesPadByDefault) {
  Tensor x = tensor(Shape{1, 1, 4}, {1, 3, 2, 4});
  Attributes a = pool_attrs({2});
  a.set("auto_pad", std::string("SAME_UPPER"));
  EXPECT_EQ(values(run_op(OpKind::kAveragePool, a, {in(x)}).value()[0]),
            (std::vector<float>{2, 2.5f, 3, 4}));
  a.set("count_include_pad", int64_t{1});
  EXPECT_EQ(values(run_op(OpKind::kAveragePool, a, {in(x)}).value()[0]),
            (std::vector<float>{2, 2.5f, 3, 2}));
}

// The oracle: for every output, visit every window tap (with dilation) over the input and the
// padding explicitly.
struct PoolCase {
  std::vector<int64_t> in, kernel, strides, dilations, pads;
  bool ceil_mode = false;
  bool count_include_pad = false;
};

std::vector<int64_t> pool_out_dims(const PoolCase& p) {
  const size_t r = p.in.size();
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
    const int64_t padded = p.in[i] + p.pads[i] + p.pads[r + i];
    const double exact = static_cast<double>(padded - ek) / static_cast<double>(p.strides[i]) + 1;
    out[i] = static_cast<int64_t>(p.ceil_mode ? std::ceil(exact) : std::floor(exact));
    // A window must start inside the input or the begin padding.
    if (p.ceil_mode && (out[i] - 1) * p.strides[i] - p.pads[i] >= p.in[i]) --out[i];
  }
  return out;
}

Tensor naive_pool(const PoolCase& p, const Tensor& x, bool is_max) {
  const int r = static_cast<int>(p.in.size());
  const std::vector<int64_t> out = pool_out_dims(p);
  int64_t I[3], O[3], K[3], S[3], D[3], PB[3], PE[3];
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - r);
    I[i] = j >= 0 ? p.in[j] : 1;
    O[i] = j >= 0 ? out[j] : 1;
    K[i] = j >= 0 ? p.kernel[j] : 1;
    S[i] = j >= 0 ? p.strides[j] : 1;
    D[i] = j >= 0 ? p.dilations[j] : 1;
    PB[i] = j >= 0 ? p.pads[j] : 0;
    PE[i] = j >= 0 ? p.pads[r + j] : 0;
  }
  std::vector<int64_t> ydims = {x.dim(0), x.dim(1)};
  ydims.insert(ydims.end(), out.begin(), out.end());
  Tensor y = testing::zeros(Shape(ydims));
  const int64_t planes = x.dim(0) * x.dim(1);
  for (int64_t pl = 0; pl < planes; ++pl) {
    for (int64_t oz = 0; oz < O[0]; ++oz)
      for (int64_t oy = 0; oy < O[1]; ++oy)
        for (int64_t ox = 0; ox < O[2]; ++ox) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t in_count = 0, padded_count = 0;
          for (int64_t kz = 0; kz < K[0]; ++kz)
            for (int64_t ky = 0; ky < K[1]; ++ky)
              for (int64_t kx = 0; kx < K[2]; ++kx) {
                const int64_t pos[3] = {oz * S[0] + kz * D[0] - PB[0],
                                        oy * S[1] + ky * D[1] - PB[1],
                                        ox * S[2] + kx * D[2] - PB[2]};
                bool inside = true, inside_padded = true;
                for (int d = 0; d < 3; ++d) {
                  inside = inside && pos[d] >= 0 && pos[d] < I[d];
                  inside_padded = inside_padded && pos[d] >= -PB[d] && pos[d] < I[d] + PE[d];
                }
                padded_count += inside_padded;
                if (!inside) continue;
                ++in_count;
                const float v = at(x, ((pl * I[0] + pos[0]) * I[1] + pos[1]) * I[2] + pos[2]);
                best = std::max(best, static_cast<double>(v));
                sum += v;
              }
          const int64_t count = p.count_include_pad ? padded_count : in_count;
          y.data<float>()[((pl * O[0] + oz) * O[1] + oy) * O[2] + ox] =
              static_cast<float>(is_max ? best : sum / static_cast<double>(count));
        }
  }
  return y;
}

TEST(Pool, RandomisedAgainstOracle) {
  std::mt19937 rng(99);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int done = 0;
  while (done < 80) {
    PoolCase p;
    const int r = static_cast<int>(pick(1, 3));
    const int64_t max_in = r == 1 ? 31 : r == 2 ? 13 : 7;
    const bool is_max = pick(0, 1) == 1;
    bool ok = true;
    for (int i = 0; i < r; ++i) {
      p.in.push_back(pick(1, max_in));
      p.kernel.push_back(pick(1, 4));
      p.strides.push_back(pick(1, 3));
      // Dilation only for MaxPool (AveragePool gained it after opset 17).
      p.dilations.push_back(is_max ? pick(1, 2) : 1);
    }
    for (int i = 0; i < 2 * r; ++i) p.pads.push_back(pick(0, 2));
    for (int i = 0; i < r; ++i) {
      const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
      if (p.pads[i] >= ek || p.pads[r + i] >= ek) ok = false;
      if (p.in[i] + p.pads[i] + p.pads[r + i] < ek) ok = false;
    }
    if (!ok) continue;
    p.ceil_mode = pick(0, 1) == 1;
    p.count_include_pad = pick(0, 1) == 1;
    const Tensor x = random_tensor(Shape([&] {
                                     std::vector<int64_t> d = {pick(1, 2), pick(1, 3)};
                                     d.insert(d.end(), p.in.begin(), p.in.end());
                                     return d;
                                   }()),
                                   300 + done);
    Attributes a = pool_attrs(p.kernel, p.strides, p.pads);
    if (is_max) a.set("dilations", p.dilations);
    a.set("ceil_mode", int64_t{p.ceil_mode});
    if (!is_max) a.set("count_include_pad", int64_t{p.count_include_pad});
    SCOPED_TRACE(::testing::Message() << "case " << done << (is_max ? " max" : " avg") << " rank "
                                      << r << " ceil " << p.ceil_mode);
    auto out = run_op(is_max ? OpKind::kMaxPool : OpKind::kAveragePool, a, {in(x)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_near((*out)[0], naive_pool(p, x, is_max), 1e-5f, 1e-5f);
    ++done;
  }
}

TEST(Pool, SameLowerOracleOnOddSizes) {
  // SAME_LOWER on 13x13 with stride 2 and kernel 4: total pad 3 -> 2 before, 1 after.
  const Tensor x = random_tensor(Shape{1, 2, 13, 13}, 5);
  Attributes a = pool_attrs({4, 4}, {2, 2});
  a.set("auto_pad", std::string("SAME_LOWER"));
  PoolCase p{{13, 13}, {4, 4}, {2, 2}, {1, 1}, {2, 2, 1, 1}};
  testing::expect_near(run_op(OpKind::kMaxPool, a, {in(x)}).value()[0], naive_pool(p, x, true));
  testing::expect_near(run_op(OpKind::kAveragePool, a, {in(x)}).value()[0],
                       naive_pool(p, x, false));
}

TEST(GlobalPool, AverageAndMax) {
  const Tensor x = random_tensor(Shape{2, 3, 7, 13}, 8);
  auto avg = run_op(OpKind::kGlobalAveragePool, {}, {in(x)}).value();
  auto mx = run_op(OpKind::kGlobalMaxPool, {}, {in(x)}).value();
  ASSERT_EQ(avg[0].shape(), (Shape{2, 3, 1, 1}));
  ASSERT_EQ(mx[0].shape(), (Shape{2, 3, 1, 1}));
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0;
    float m = -INFINITY;
    for (int64_t i = 0; i < 91; ++i) {
      s += at(x, p * 91 + i);
      m = std::max(m, at(x, p * 91 + i));
    }
    EXPECT_NEAR(at(avg[0], p), s / 91, 1e-6);
    EXPECT_EQ(at(mx[0], p), m);
  }
  // 1-D and 3-D spatial.
  auto avg1 = run_op(OpKind::kGlobalAveragePool, {}, {in(tensor(Shape{1, 1, 4}, {1, 2, 3, 6}))});
  EXPECT_EQ(at(avg1.value()[0], 0), 3.f);
  auto mx3 =
      run_op(OpKind::kGlobalMaxPool, {}, {in(tensor(Shape{1, 2, 1, 2, 1}, {-1, -4, NAN, 2}))})
          .value();
  ASSERT_EQ(mx3[0].shape(), (Shape{1, 2, 1, 1, 1}));
  EXPECT_EQ(at(mx3[0], 0), -1.f);
  EXPECT_TRUE(std::isnan(at(mx3[0], 1)));
}

TEST(Pool, Cost) {
  auto c = testing::op_cost(OpKind::kMaxPool, pool_attrs({3, 3}, {2, 2}),
                            {in(testing::zeros(Shape{1, 4, 9, 9}))})
               .value();
  EXPECT_EQ(c.flops, 4.0 * 4 * 4 * 9);  // output elements * window
  c = testing::op_cost(OpKind::kGlobalAveragePool, {}, {in(testing::zeros(Shape{1, 4, 9, 9}))})
          .value();
  EXPECT_EQ(c.flops, 4.0 * 81);
}

TEST(Pool, Errors) {
  const Tensor x = testing::zeros(Shape{1, 1, 5, 5});
  EXPECT_TRUE(contains(run_error(OpKind::kMaxPool, {}, {in(x)}), "'kernel_shape' is required"));
  EXPECT_TRUE(contains(run_error(OpKind::kMaxPool, pool_attrs({3, 3}), {in(x)}, 2), "Indices"));
  EXPECT_EQ(run_op(OpKind::kMaxPool, pool_attrs({3, 3}), {in(x)}, 2).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_TRUE(contains(run_error(OpKind::kMaxPool, pool_attrs({3}), {in(x)}),
                       "'kernel_shape' has 1 values, expected 2"));
  EXPECT_TRUE(contains(run_error(OpKind::kMaxPool, pool_attrs({int64_t{1} << 40, 1}), {in(x)}),
                       "'kernel_shape'[0]"));
  EXPECT_TRUE(
      contains(run_error(OpKind::kMaxPool, pool_attrs({0, 1}), {in(x)}), "'kernel_shape'[0] = 0"));
  EXPECT_TRUE(
      contains(run_error(OpKind::kMaxPool, pool_attrs({2, 2}, {1, 1}, {2, 0, 0, 0}), {in(x)}),
               "smaller than the effective kernel"));
  EXPECT_TRUE(contains(run_error(OpKind::kMaxPool, pool_attrs({7, 1}), {in(x)}),
                       "exceeds the padded input"));
  Attributes a = pool_attrs({2, 2});
  a.set("storage_order", int64_t{2});
  EXPECT_TRUE(contains(run_error(OpKind::kMaxPool, a, {in(x)}), "'storage_order' = 2"));
  a = pool_attrs({2, 2});
  a.set("storage_order", int64_t{1});  // only affects Indices
  EXPECT_TRUE(run_op(OpKind::kMaxPool, a, {in(x)}).ok());
  a = pool_attrs({2, 2});
  a.set("count_include_pad", int64_t{3});
  EXPECT_TRUE(contains(run_error(OpKind::kAveragePool, a, {in(x)}), "'count_include_pad' = 3"));
  a = pool_attrs({2, 2});
  a.set("ceil_mode", int64_t{-1});
  EXPECT_TRUE(contains(run_error(OpKind::kAveragePool, a, {in(x)}), "'ceil_mode' = -1"));
  EXPECT_TRUE(contains(run_error(OpKind::kGlobalAveragePool, {}, {in(testing::zeros(Shape{2, 3}))}),
                       "spatial"));
  EXPECT_TRUE(contains(run_error(OpKind::kGlobalMaxPool, {}, {in(testing::zeros(Shape{2, 3, 0}))}),
                       "empty"));
  EXPECT_TRUE(
      contains(run_error(OpKind::kMaxPool, {}, {in(testing::zeros(Shape{2, 3}))}), "spatial"));
}

}  // namespace
}  // namespace tessera
