// Conv: hand-computed cases, randomised comparison against a naive direct-loop oracle, cost
// and error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

// One convolution problem. `pads` (2 * rank values) is used with auto_pad NOTSET.
struct ConvCase {
  int64_t n = 1, c = 1, m = 1, group = 1;
  std::vector<int64_t> in, kernel, strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

int rank_of(const ConvCase& p) {
  return static_cast<int>(p.in.size());
}

// The begin/end pads the case means, derived from the ONNX definitions independently of
// ops/conv_pool_util.cc.
std::vector<int64_t> resolved_pads(const ConvCase& p) {
  const int r = rank_of(p);
  if (p.auto_pad == "NOTSET") return p.pads;
  std::vector<int64_t> pads(2 * r, 0);
  if (p.auto_pad == "VALID") return pads;
  for (int i = 0; i < r; ++i) {
    const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
    const int64_t out = (p.in[i] + p.strides[i] - 1) / p.strides[i];
    const int64_t total = std::max<int64_t>(0, (out - 1) * p.strides[i] + ek - p.in[i]);
    const int64_t extra = total % 2;
    pads[i] = total / 2 + (p.auto_pad == "SAME_LOWER" ? extra : 0);
    pads[r + i] = total - pads[i];
  }
  return pads;
}

std::vector<int64_t> out_dims(const ConvCase& p) {
  const int r = rank_of(p);
  const std::vector<int64_t> pads = resolved_pads(p);
  std::vector<int64_t> out(r);
  for (int i = 0; i < r; ++i) {
    const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
    out[i] = (p.in[i] + pads[i] + pads[r + i] - ek) / p.strides[i] + 1;
  }
  return out;
}

Attributes conv_attrs(const ConvCase& p) {
  Attributes a;
  a.set("group", p.group);
  a.set("strides", p.strides);
  a.set("dilations", p.dilations);
  if (p.auto_pad == "NOTSET") {
    a.set("pads", p.pads);
  } else {
    a.set("auto_pad", p.auto_pad);
  }
  return a;
}

// Direct definition: for every output element, the sum over its group's input channels and
// kernel taps, in double. Spatial dims are padded to 3 at the front.
Tensor naive_conv(const ConvCase& p, const Tensor& x, const Tensor& w, const Tensor* b) {
  const int r = rank_of(p);
  const std::vector<int64_t> pads = resolved_pads(p);
  const std::vector<int64_t> out = out_dims(p);
  int64_t I[3], O[3], K[3], S[3], D[3], P[3];
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - r);
    const bool real = j >= 0;
    I[i] = real ? p.in[j] : 1;
    O[i] = real ? out[j] : 1;
    K[i] = real ? p.kernel[j] : 1;
    S[i] = real ? p.strides[j] : 1;
    D[i] = real ? p.dilations[j] : 1;
    P[i] = real ? pads[j] : 0;
  }
  std::vector<int64_t> ydims = {p.n, p.m};
  ydims.insert(ydims.end(), out.begin(), out.end());
  Tensor y = testing::zeros(Shape(ydims));
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  const float* xd = x.data<float>();
  const float* wd = w.data<float>();
  float* yd = y.data<float>();
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t m = 0; m < p.m; ++m)
      for (int64_t oz = 0; oz < O[0]; ++oz)
        for (int64_t oy = 0; oy < O[1]; ++oy)
          for (int64_t ox = 0; ox < O[2]; ++ox) {
            double acc = b ? b->data<float>()[m] : 0.0;
            const int64_t g = m / mg;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t kz = 0; kz < K[0]; ++kz)
                for (int64_t ky = 0; ky < K[1]; ++ky)
                  for (int64_t kx = 0; kx < K[2]; ++kx) {
                    const int64_t iz = oz * S[0] + kz * D[0] - P[0];
                    const int64_t iy = oy * S[1] + ky * D[1] - P[1];
                    const int64_t ix = ox * S[2] + kx * D[2] - P[2];
                    if (iz < 0 || iz >= I[0] || iy < 0 || iy >= I[1] || ix < 0 || ix >= I[2])
                      continue;
                    const int64_t c = g * cg + ci;
                    const float xv = xd[(((n * p.c + c) * I[0] + iz) * I[1] + iy) * I[2] + ix];
                    const float wv = wd[(((m * cg + ci) * K[0] + kz) * K[1] + ky) * K[2] + kx];
                    acc += static_cast<double>(xv) * wv;
                  }
            yd[(((n * p.m + m) * O[0] + oz) * O[1] + oy) * O[2] + ox] = static_cast<float>(acc);
          }
  return y;
}

// Runs Conv on random data and compares with the oracle.
void check_conv(const ConvCase& p, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "seed " << seed << " rank " << rank_of(p) << " c " << p.c << " m " << p.m
               << " group " << p.group << " auto_pad " << p.auto_pad);
  std::vector<int64_t> xdims = {p.n, p.c}, wdims = {p.m, p.c / p.group};
  xdims.insert(xdims.end(), p.in.begin(), p.in.end());
  wdims.insert(wdims.end(), p.kernel.begin(), p.kernel.end());
  const Tensor x = random_tensor(Shape(xdims), seed);
  const Tensor w = random_tensor(Shape(wdims), seed + 1);
  const Tensor b = random_tensor(Shape{p.m}, seed + 2);
  std::vector<testing::OpInput> inputs = {in(x), in(w)};
  if (p.bias) inputs.push_back(in(b));
  auto out = run_op(OpKind::kConv, conv_attrs(p), inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  testing::expect_near((*out)[0], naive_conv(p, x, w, p.bias ? &b : nullptr), 1e-4f, 1e-4f);
}

float at(const Tensor& t, int64_t i) {
  return t.data<float>()[i];
}

TEST(Conv, HandComputed3x3Ones) {
  // 3x3 input 1..9, 3x3 kernel of ones, pads 1: each output is its 3x3 neighbourhood's sum.
  Tensor x = tensor(Shape{1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = tensor(Shape{1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  auto out = run_op(OpKind::kConv, a, {in(x), in(w)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 3, 3}));
  const float want[] = {12, 21, 16, 27, 45, 33, 24, 39, 28};
  for (int i = 0; i < 9; ++i) EXPECT_EQ(at(out[0], i), want[i]) << i;
}

TEST(Conv, HandComputedStrideBiasTwoChannels) {
  // 1-D, 2 input channels, stride 2, bias; output length floor((5 - 2) / 2) + 1 = 2.
  Tensor x = tensor(Shape{1, 2, 5}, {1, 2, 3, 4, 5, 10, 20, 30, 40, 50});
  Tensor w = tensor(Shape{1, 2, 2}, {1, -1, 0.5f, 2});
  Tensor b = tensor(Shape{1}, {100});
  Attributes a;
  a.set("strides", std::vector<int64_t>{2});
  auto out = run_op(OpKind::kConv, a, {in(x), in(w), in(b)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 2}));
  // y0 = 1 - 2 + 5 + 40 + 100; y1 = 3 - 4 + 15 + 80 + 100.
  EXPECT_EQ(at(out[0], 0), 144.f);
  EXPECT_EQ(at(out[0], 1), 194.f);
}

TEST(Conv, SameUpperAndLowerPlaceTheOddPad) {
  // in 4, kernel 2, stride 1: total pad 1, at the end (UPPER) or the beginning (LOWER).
  Tensor x = tensor(Shape{1, 1, 4}, {1, 2, 3, 4});
  Tensor w = tensor(Shape{1, 1, 2}, {1, 10});
  Attributes a;
  a.set("auto_pad", std::string("SAME_UPPER"));
  auto up = run_op(OpKind::kConv, a, {in(x), in(w)}).value();
  a.set("auto_pad", std::string("SAME_LOWER"));
  auto low = run_op(OpKind::kConv, a, {in(x), in(w)}).value();
  const float want_up[] = {21, 32, 43, 4};
  const float want_low[] = {10, 21, 32, 43};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(at(up[0], i), want_up[i]);
    EXPECT_EQ(at(low[0], i), want_low[i]);
  }
}

TEST(Conv, KernelShapeAttributeMustMatchWeights) {
  Tensor x = random_tensor(Shape{1, 1, 5, 5}, 1);
  Tensor w = random_tensor(Shape{1, 1, 3, 3}, 2);
  Attributes a;
  a.set("kernel_shape", std::vector<int64_t>{3, 3});
  EXPECT_TRUE(run_op(OpKind::kConv, a, {in(x), in(w)}).ok());
  a.set("kernel_shape", std::vector<int64_t>{3, 2});
  EXPECT_TRUE(contains(run_error(OpKind::kConv, a, {in(x), in(w)}), "kernel_shape"));
}

TEST(Conv, NamedCasesMatchOracle) {
  std::vector<ConvCase> cases;
  // Odd 13x13 input, stride 2, asymmetric pads, 3 groups.
  cases.push_back({1, 6, 9, 3, {13, 13}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 2, 1}});
  // Depthwise, dilation 2.
  cases.push_back({2, 7, 7, 7, {13, 11}, {3, 3}, {1, 1}, {2, 2}, {2, 2, 2, 2}});
  // Depthwise with channel multiplier 2, stride 3, no bias.
  {
    ConvCase p{1, 4, 8, 4, {13, 13}, {3, 3}, {3, 3}, {1, 1}, {1, 1, 1, 1}};
    p.bias = false;
    cases.push_back(p);
  }
  // SAME_UPPER / SAME_LOWER with stride 2 and even kernel (odd total pads).
  cases.push_back({1, 3, 5, 1, {7, 13}, {4, 2}, {2, 2}, {1, 1}, {}, "SAME_UPPER"});
  cases.push_back({1, 3, 5, 1, {7, 13}, {4, 2}, {2, 3}, {1, 2}, {}, "SAME_LOWER"});
  cases.push_back({1, 3, 5, 1, {7, 13}, {3, 3}, {2, 2}, {1, 1}, {}, "VALID"});
  // 1-D and 3-D.
  cases.push_back({2, 4, 6, 2, {127}, {5}, {2}, {3}, {4, 1}});
  cases.push_back({1, 3, 4, 1, {5, 6, 7}, {3, 2, 3}, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 1, 1, 2}});
  // 1x1 conv, stride 2.
  cases.push_back({1, 16, 13, 1, {9, 9}, {1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}});
  // Deep enough for two K blocks (40 * 9 = 360 > 256) and wide enough for two output tiles.
  cases.push_back({1, 40, 13, 1, {25, 25}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}});
  uint32_t seed = 100;
  for (const ConvCase& p : cases) check_conv(p, seed += 7);
}

TEST(Conv, RandomisedAgainstOracle) {
  std::mt19937 rng(1234);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const char* auto_pads[] = {"NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"};
  int done = 0;
  while (done < 60) {
    ConvCase p;
    const int r = static_cast<int>(pick(1, 3));
    const int64_t max_in = r == 1 ? 31 : r == 2 ? 13 : 6;
    const bool depthwise = pick(0, 3) == 0;
    p.group = depthwise ? pick(1, 6) : pick(1, 3);
    p.c = depthwise ? p.group : p.group * pick(1, 3);
    p.m = p.group * pick(1, 3);
    p.n = pick(1, 2);
    p.bias = pick(0, 1) == 1;
    p.auto_pad = auto_pads[pick(0, 4)];
    bool ok = true;
    for (int i = 0; i < r; ++i) {
      p.in.push_back(pick(1, max_in));
      p.kernel.push_back(pick(1, 4));
      p.strides.push_back(pick(1, 3));
      p.dilations.push_back(pick(1, 2));
    }
    for (int i = 0; i < 2 * r; ++i) p.pads.push_back(pick(0, 2));
    const std::vector<int64_t> pads = resolved_pads(p);
    for (int i = 0; i < r; ++i) {
      const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
      if (p.in[i] + pads[i] + pads[r + i] < ek) ok = false;
    }
    if (!ok) continue;  // kernel larger than the padded input: an error case, tested below
    check_conv(p, 5000 + done);
    if (::testing::Test::HasFatalFailure()) return;
    ++done;
  }
}

TEST(Conv, FusedActivationAppliesAfterBias) {
  ConvCase p{1, 3, 4, 1, {7, 7}, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}};
  const Tensor x = random_tensor(Shape{1, 3, 7, 7}, 11);
  const Tensor w = random_tensor(Shape{4, 3, 3, 3}, 12);
  const Tensor b = random_tensor(Shape{4}, 13);
  Attributes a = conv_attrs(p);
  a.set("activation", std::string("relu"));
  auto out = run_op(OpKind::kConv, a, {in(x), in(w), in(b)}).value();
  Tensor want = naive_conv(p, x, w, &b);
  for (float& v : want.span<float>()) v = std::max(v, 0.f);
  testing::expect_near(out[0], want, 1e-4f, 1e-4f);
}

TEST(Conv, CostCountsMultiplyAddsOfEveryOutput) {
  // 2 * N * M * Hout * Wout * (C / group) * kH * kW = 2 * 2 * 6 * 4 * 4 * 2 * 3 * 3.
  Attributes a;
  a.set("group", int64_t{2});
  auto cost = testing::op_cost(OpKind::kConv, a,
                               {in(testing::zeros(Shape{2, 4, 6, 6})),
                                testing::constant(testing::zeros(Shape{6, 2, 3, 3})),
                                testing::constant(testing::zeros(Shape{6}))})
                  .value();
  EXPECT_EQ(cost.flops, 2.0 * 2 * 6 * 4 * 4 * 2 * 3 * 3);
  EXPECT_EQ(cost.input_bytes, 2u * 4 * 6 * 6 * 4);
  EXPECT_EQ(cost.weight_bytes, (6u * 2 * 3 * 3 + 6) * 4);
  EXPECT_EQ(cost.output_bytes, 2u * 6 * 4 * 4 * 4);
}

TEST(Conv, ZeroInputChannelsGiveTheBias) {
  Tensor x = testing::zeros(Shape{1, 0, 3, 3});
  Tensor w = testing::zeros(Shape{2, 0, 1, 1});
  Tensor b = tensor(Shape{2}, {1.5f, -2.f});
  auto out = run_op(OpKind::kConv, {}, {in(x), in(w), in(b)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 2, 3, 3}));
  EXPECT_EQ(at(out[0], 0), 1.5f);
  EXPECT_EQ(at(out[0], 17), -2.f);
}

class ConvErrors : public ::testing::Test {
 protected:
  std::string error(const Attributes& a, const Shape& xs = Shape{1, 4, 8, 8},
                    const Shape& ws = Shape{6, 2, 3, 3}, bool with_bias = false,
                    const Shape& bs = Shape{6}) {
    std::vector<testing::OpInput> inputs = {in(testing::zeros(xs)), in(testing::zeros(ws))};
    if (with_bias) inputs.push_back(in(testing::zeros(bs)));
    return run_error(OpKind::kConv, a, inputs);
  }
  Attributes group2() {
    Attributes a;
    a.set("group", int64_t{2});
    return a;
  }
};

TEST_F(ConvErrors, ShapesAndGroups) {
  EXPECT_TRUE(contains(error(group2(), Shape{1, 4, 8, 8}, Shape{6, 2, 3}), "expected rank 4"));
  EXPECT_TRUE(contains(error({}), "channels"));  // group 1 but W expects 2 channels
  Attributes g3;
  g3.set("group", int64_t{3});
  EXPECT_TRUE(contains(error(g3, Shape{1, 6, 8, 8}, Shape{4, 2, 3, 3}), "not divisible"));
  Attributes g0;
  g0.set("group", int64_t{0});
  EXPECT_TRUE(contains(error(g0), "group"));
  EXPECT_TRUE(
      contains(error(group2(), Shape{1, 4, 8, 8}, Shape{6, 2, 3, 3}, true, Shape{5}), "bias"));
  EXPECT_TRUE(contains(error(group2(), Shape{1, 4}, Shape{6, 2}), "spatial"));
  EXPECT_TRUE(
      contains(error(group2(), Shape{1, 4, 2, 2, 2, 2}, Shape{6, 2, 1, 1, 1, 1}), "spatial"));
  EXPECT_EQ(run_op(OpKind::kConv, {},
                   {in(testing::zeros(Shape{1, 1, 1, 1, 1, 1})),
                    in(testing::zeros(Shape{1, 1, 1, 1, 1, 1}))})
                .status()
                .code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(
      run_op(OpKind::kConv, {}, {in(testing::zeros(Shape{1, 1})), in(testing::zeros(Shape{1, 1}))})
          .status()
          .code(),
      StatusCode::kInvalidArgument);
  // The message names the node.
  EXPECT_TRUE(contains(error({}), "test_node"));
}

TEST_F(ConvErrors, Attributes) {
  Attributes a = group2();
  a.set("strides", std::vector<int64_t>{1, 0});
  EXPECT_TRUE(contains(error(a), "'strides'[1] = 0"));
  a = group2();
  a.set("strides", std::vector<int64_t>{1});
  EXPECT_TRUE(contains(error(a), "'strides' has 1 values, expected 2"));
  a = group2();
  a.set("strides", std::vector<int64_t>{int64_t{1} << 40, 1});
  EXPECT_TRUE(contains(error(a), "out of range"));
  a = group2();
  a.set("dilations", std::vector<int64_t>{int64_t{1} << 40, 1});
  EXPECT_TRUE(contains(error(a), "'dilations'[0]"));
  a = group2();
  a.set("dilations", std::vector<int64_t>{int64_t{1} << 31, int64_t{1} << 31});
  EXPECT_TRUE(contains(error(a), "exceeds the padded input"));
  a = group2();
  a.set("pads", std::vector<int64_t>{0, -1, 0, 0});
  EXPECT_TRUE(contains(error(a), "'pads'[1] = -1"));
  a = group2();
  a.set("pads", std::vector<int64_t>{1, 1});
  EXPECT_TRUE(contains(error(a), "'pads' has 2 values, expected 4"));
  a = group2();
  a.set("auto_pad", std::string("SAME"));
  EXPECT_TRUE(contains(error(a), "auto_pad"));
  a = group2();
  a.set("auto_pad", std::string("SAME_UPPER"));
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  EXPECT_TRUE(contains(error(a), "non-zero while 'auto_pad'"));
  a.set("pads", std::vector<int64_t>{0, 0, 0, 0});  // all-zero pads beside auto_pad are fine
  EXPECT_EQ(error(a), "");
  a = group2();
  a.set("strides", std::string("2"));
  EXPECT_TRUE(contains(error(a), "strides"));
  // Kernel larger than the padded input.
  EXPECT_TRUE(contains(error(group2(), Shape{1, 4, 2, 8}), "exceeds the padded input"));
}

TEST_F(ConvErrors, NonFloatInput) {
  Tensor xi = Tensor::from_int64s(Shape{1, 1, 2}, std::vector<int64_t>{1, 2});
  auto r = run_op(OpKind::kConv, {}, {in(xi), in(testing::zeros(Shape{1, 1, 1}))});
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
}

}  // namespace
}  // namespace tessera
