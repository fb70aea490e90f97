#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/activation.h"
#include "ops/registry.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using testing::constant;
using testing::in;
using testing::omitted;
using testing::run_op;

Tensor values() {
  const float v[] = {-7.f, -3.f, -0.5f, 0.f, 0.25f, 2.9f, 3.f, 8.f, NAN};
  return Tensor::from_floats(Shape{9}, v);
}

float at(const Tensor& t, int i) {
  return t.data<float>()[i];
}

TEST(Activation, ReluHandComputed) {
  auto out = run_op(OpKind::kRelu, {}, {in(values())}).value();
  const float want[] = {0, 0, 0, 0, 0.25f, 2.9f, 3.f, 8.f};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(at(out[0], i), want[i]);
  EXPECT_TRUE(std::isnan(at(out[0], 8)));
}

TEST(Activation, LeakyReluUsesAlpha) {
  Attributes a;
  a.set("alpha", 0.1f);
  auto out = run_op(OpKind::kLeakyRelu, a, {in(values())}).value();
  EXPECT_FLOAT_EQ(at(out[0], 0), -0.7f);
  EXPECT_FLOAT_EQ(at(out[0], 5), 2.9f);
}

TEST(Activation, ClipWithInputsAndDefaults) {
  auto out =
      run_op(OpKind::kClip, {},
             {in(values()), constant(Tensor::scalar_f32(0.f)), constant(Tensor::scalar_f32(6.f))})
          .value();
  EXPECT_EQ(at(out[0], 0), 0.f);
  EXPECT_EQ(at(out[0], 7), 6.f);
  // Omitted min: only the max applies.
  out = run_op(OpKind::kClip, {}, {in(values()), omitted(), constant(Tensor::scalar_f32(1.f))})
            .value();
  EXPECT_EQ(at(out[0], 0), -7.f);
  EXPECT_EQ(at(out[0], 6), 1.f);
}

TEST(Activation, ClipWithMinAboveMaxGivesMax) {
  // ONNX Clip-13: when min > max every value becomes max.
  auto r =
      run_op(OpKind::kClip, {},
             {in(values()), constant(Tensor::scalar_f32(2.f)), constant(Tensor::scalar_f32(1.f))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(at(r.value()[0], i), 1.f) << i;
  EXPECT_TRUE(std::isnan(at(r.value()[0], 8)));
  // min == max: every value is that bound.
  r = run_op(
      OpKind::kClip, {},
      {in(values()), constant(Tensor::scalar_f32(0.5f)), constant(Tensor::scalar_f32(0.5f))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (int i = 0; i < 8; ++i) EXPECT_EQ(at(r.value()[0], i), 0.5f) << i;
}

TEST(Activation, SmoothFunctions) {
  auto sig = run_op(OpKind::kSigmoid, {}, {in(values())}).value();
  auto hs = run_op(OpKind::kHardSigmoid, {}, {in(values())}).value();
  auto hw = run_op(OpKind::kHardSwish, {}, {in(values())}).value();
  auto th = run_op(OpKind::kTanh, {}, {in(values())}).value();
  const Tensor x = values();
  for (int i = 0; i < 8; ++i) {
    const float v = at(x, i);
    EXPECT_NEAR(at(sig[0], i), 1.f / (1.f + std::exp(-v)), 1e-6f);
    EXPECT_NEAR(at(hs[0], i), std::fmax(0.f, std::fmin(1.f, 0.2f * v + 0.5f)), 1e-6f);
    EXPECT_NEAR(at(hw[0], i), v * std::fmax(0.f, std::fmin(1.f, v / 6.f + 0.5f)), 1e-6f);
    EXPECT_NEAR(at(th[0], i), std::tanh(v), 1e-6f);
  }
}

TEST(Activation, RejectsNonFloat) {
  Tensor i = Tensor::from_int64s(Shape{2}, std::vector<int64_t>{1, 2});
  auto r = run_op(OpKind::kRelu, {}, {in(i)});
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
}

TEST(Activation, FusedAttributesRoundTrip) {
  Attributes a;
  set_fused_activation(&a, Activation{ActivationKind::kClip, 0.f, 6.f});
  Activation b = parse_fused_activation(a).value();
  EXPECT_EQ(b.kind, ActivationKind::kClip);
  EXPECT_EQ(b.beta, 6.f);
  set_fused_activation(&a, Activation{});
  EXPECT_FALSE(a.has("activation"));
  a.set("activation", std::string("swishy"));
  EXPECT_FALSE(parse_fused_activation(a).ok());
}

}  // namespace
}  // namespace tessera
