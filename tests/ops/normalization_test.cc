// BatchNormalization, LRN and Softmax: hand-computed cases, oracle comparisons on odd shapes,
// cost and error paths.
#include <gtest/gtest.h>

#include <cmath>
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

std::vector<testing::OpInput> bn_inputs(const Tensor& x, int64_t c) {
  return {in(x), in(random_tensor(Shape{c}, 21)), in(random_tensor(Shape{c}, 22)),
          in(random_tensor(Shape{c}, 23)), in(random_tensor(Shape{c}, 24, 0.1f, 2.f))};
}

TEST(BatchNormalization, HandComputed) {
  Tensor x = tensor(Shape{1, 2, 2}, {1, 3, 10, 20});
  Tensor scale = tensor(Shape{2}, {2, 1});
  Tensor bias = tensor(Shape{2}, {1, 0});
  Tensor mean = tensor(Shape{2}, {2, 15});
  Tensor var = tensor(Shape{2}, {4, 25});
  Attributes a;
  a.set("epsilon", 0.f);
  auto out = run_op(OpKind::kBatchNormalization, a, {in(x), in(scale), in(bias), in(mean), in(var)})
                 .value();
  // ch0: (x - 2) / 2 * 2 + 1; ch1: (x - 15) / 5.
  const float want[] = {0, 2, -1, 1};
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(at(out[0], i), want[i]);
}

TEST(BatchNormalization, MatchesFormulaOnOddShapes) {
  for (const Shape& s : {Shape{2, 13}, Shape{3, 7, 13, 5}, Shape{1, 5, 3, 3, 3}}) {
    const Tensor x = random_tensor(s, 20);
    const auto ins = bn_inputs(x, s[1]);
    Attributes a;
    a.set("epsilon", 1e-3f);
    a.set("momentum", 0.9f);  // training-only, ignored
    auto out = run_op(OpKind::kBatchNormalization, a, ins);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const int64_t plane = s.numel() / (s[0] * s[1]);
    for (int64_t i = 0; i < s.numel(); ++i) {
      const int64_t c = (i / plane) % s[1];
      const double want = (at(x, i) - at(ins[3].tensor, c)) /
                              std::sqrt(static_cast<double>(at(ins[4].tensor, c)) + 1e-3) *
                              at(ins[1].tensor, c) +
                          at(ins[2].tensor, c);
      ASSERT_NEAR(at((*out)[0], i), want, 1e-5) << s.to_string() << " at " << i;
    }
  }
}

TEST(BatchNormalization, RejectsTrainingAndBadShapes) {
  const Tensor x = random_tensor(Shape{1, 3, 4}, 1);
  auto ins = bn_inputs(x, 3);
  const std::string two = run_error(OpKind::kBatchNormalization, {}, ins, 3);
  EXPECT_TRUE(contains(two, "only inference mode")) << two;
  EXPECT_EQ(run_op(OpKind::kBatchNormalization, {}, ins, 5).status().code(),
            StatusCode::kUnimplemented);
  Attributes t;
  t.set("training_mode", int64_t{1});
  EXPECT_TRUE(contains(run_error(OpKind::kBatchNormalization, t, ins), "training_mode"));
  auto bad = ins;
  bad[3] = in(random_tensor(Shape{4}, 2));
  EXPECT_TRUE(contains(run_error(OpKind::kBatchNormalization, {}, bad), "input_mean"));
  bad = bn_inputs(random_tensor(Shape{3}, 3), 3);
  EXPECT_TRUE(contains(run_error(OpKind::kBatchNormalization, {}, bad), "rank >= 2"));
  Attributes e;
  e.set("epsilon", -1.f);
  EXPECT_TRUE(contains(run_error(OpKind::kBatchNormalization, e, ins), "epsilon"));
  EXPECT_TRUE(contains(run_error(OpKind::kBatchNormalization, {}, {in(x)}), "inputs"));
}

TEST(BatchNormalization, CostAndFusedActivation) {
  const Tensor x = random_tensor(Shape{2, 3, 5}, 4);
  auto ins = bn_inputs(x, 3);
  EXPECT_EQ(testing::op_cost(OpKind::kBatchNormalization, {}, ins).value().flops, 60.0);
  Attributes a;
  a.set("activation", std::string("relu"));
  auto out = run_op(OpKind::kBatchNormalization, a, ins).value();
  auto plain = run_op(OpKind::kBatchNormalization, {}, ins).value();
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(at(out[0], i), std::max(0.f, at(plain[0], i)));
}

// LRN from the ONNX definition, in double.
Tensor naive_lrn(const Tensor& x, int64_t size, double alpha, double beta, double bias) {
  Tensor y = testing::zeros(x.shape());
  const int64_t n = x.dim(0), c = x.dim(1), plane = x.numel() / (n * c);
  const int64_t lo_off = (size - 1) / 2;               // floor((size - 1) / 2)
  const int64_t hi_off = (size - 1) - (size - 1) / 2;  // ceil((size - 1) / 2)
  for (int64_t b = 0; b < n; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t i = 0; i < plane; ++i) {
        double sq = 0;
        for (int64_t cc = ch - lo_off; cc <= ch + hi_off; ++cc) {
          if (cc < 0 || cc >= c) continue;
          const double v = at(x, (b * c + cc) * plane + i);
          sq += v * v;
        }
        const int64_t idx = (b * c + ch) * plane + i;
        y.data<float>()[idx] =
            static_cast<float>(at(x, idx) / std::pow(bias + alpha / size * sq, beta));
      }
  return y;
}

TEST(LRN, HandComputed) {
  // size 2: window [c, c + 1]. x = [1, 2] over channels; alpha 2, beta 1, bias 1.
  Tensor x = tensor(Shape{1, 2, 1}, {1, 2});
  Attributes a;
  a.set("size", int64_t{2});
  a.set("alpha", 2.f);
  a.set("beta", 1.f);
  a.set("bias", 1.f);
  auto out = run_op(OpKind::kLRN, a, {in(x)}).value();
  EXPECT_FLOAT_EQ(at(out[0], 0), 1.f / (1 + 1 * (1 + 4)));  // channels 0 and 1
  EXPECT_FLOAT_EQ(at(out[0], 1), 2.f / (1 + 1 * 4));        // channel 1 only
}

TEST(LRN, MatchesOracle) {
  for (int64_t size : {1, 2, 3, 5, 6}) {
    const Tensor x = random_tensor(Shape{2, 13, 3, 5}, 30 + static_cast<uint32_t>(size), -3, 3);
    Attributes a;
    a.set("size", size);
    a.set("alpha", 0.3f);
    a.set("beta", 0.6f);
    a.set("bias", 1.5f);
    auto out = run_op(OpKind::kLRN, a, {in(x)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_near((*out)[0], naive_lrn(x, size, 0.3, 0.6, 1.5), 1e-5f, 1e-5f);
  }
  // Defaults: alpha 1e-4, beta 0.75, bias 1.
  const Tensor x = random_tensor(Shape{1, 7, 4}, 40, -10, 10);
  Attributes a;
  a.set("size", int64_t{3});
  testing::expect_near(run_op(OpKind::kLRN, a, {in(x)}).value()[0],
                       naive_lrn(x, 3, 1e-4, 0.75, 1.0));
}

TEST(LRN, Errors) {
  const Tensor x = random_tensor(Shape{1, 3, 4}, 1);
  EXPECT_TRUE(contains(run_error(OpKind::kLRN, {}, {in(x)}), "'size'"));
  Attributes a;
  a.set("size", int64_t{0});
  EXPECT_TRUE(contains(run_error(OpKind::kLRN, a, {in(x)}), "'size' = 0"));
  a.set("size", int64_t{3});
  EXPECT_TRUE(contains(run_error(OpKind::kLRN, a, {in(random_tensor(Shape{3}, 1))}), "rank"));
}

// Softmax along one axis, in double.
Tensor naive_softmax(const Tensor& x, int axis) {
  Tensor y = testing::zeros(x.shape());
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  const int64_t len = x.dim(axis);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double sum = 0;
      for (int64_t a = 0; a < len; ++a)
        sum += std::exp(static_cast<double>(at(x, (o * len + a) * inner + i)));
      for (int64_t a = 0; a < len; ++a) {
        const int64_t idx = (o * len + a) * inner + i;
        y.data<float>()[idx] = static_cast<float>(std::exp(static_cast<double>(at(x, idx))) / sum);
      }
    }
  return y;
}

// zero_dim_softmax1.onnx: [0, 2^31, 2^31, 2^31] is now refused by Shape::validate, but the
// product of the dims after the axis must not overflow int64 (UB) in Softmax itself either; and
// an empty input within the limits ([0, 2, 2^31]) needs no scratch sized by its inner block.
TEST(Softmax, ProductsAreCheckedAndEmptyInputsNeedNoScratch) {
  const int64_t big = int64_t{1} << 31;
  Attributes a;
  a.set("axis", int64_t{0});
  std::vector<TensorInfo> out;
  Status s =
      testing::infer_unvalidated(OpKind::kSoftmax, a, {DType::kF32, Shape{0, big, big, big}}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange) << s.to_string();
  EXPECT_NE(s.message().find("test_node"), std::string::npos) << s.message();

  a.set("axis", int64_t{1});
  const Tensor empty = Tensor::create(DType::kF32, Shape{0, 2, kMaxDim}).value();
  auto r = run_op(OpKind::kSoftmax, a, {in(empty)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].shape(), (Shape{0, 2, kMaxDim}));
}

TEST(Softmax, HandComputedAndStable) {
  // Large logits: without the max subtraction exp overflows to inf.
  Tensor x = tensor(Shape{2, 3}, {1000, 1001, 1002, 1, 2, 200});
  auto out = run_op(OpKind::kSoftmax, {}, {in(x)}).value();
  EXPECT_NEAR(at(out[0], 3), 0.f, 1e-6);
  EXPECT_NEAR(at(out[0], 5), 1.f, 1e-6);
  const double e1 = std::exp(-1.0), e2 = std::exp(-2.0), s = 1 + e1 + e2;
  EXPECT_NEAR(at(out[0], 0), e2 / s, 1e-6);
  EXPECT_NEAR(at(out[0], 1), e1 / s, 1e-6);
  EXPECT_NEAR(at(out[0], 2), 1 / s, 1e-6);
  // The same along a strided axis (axis 0 of [3, 2]); column 0 overflows exp unless the max of
  // the whole axis is subtracted.
  Tensor xt = tensor(Shape{3, 2}, {1, -1000, 2, -999, 200, -998});
  Attributes a;
  a.set("axis", int64_t{0});
  out = run_op(OpKind::kSoftmax, a, {in(xt)}).value();
  EXPECT_NEAR(at(out[0], 0), 0.f, 1e-6);
  EXPECT_NEAR(at(out[0], 2), 0.f, 1e-6);
  EXPECT_NEAR(at(out[0], 4), 1.f, 1e-6);
  EXPECT_NEAR(at(out[0], 1), e2 / s, 1e-6);
  EXPECT_NEAR(at(out[0], 3), e1 / s, 1e-6);
  EXPECT_NEAR(at(out[0], 5), 1 / s, 1e-6);
}

TEST(Softmax, EveryAxisMatchesOracle) {
  const Tensor x = random_tensor(Shape{3, 13, 5, 7}, 50, -4, 4);
  for (int64_t axis = -4; axis < 4; ++axis) {
    Attributes a;
    a.set("axis", axis);
    auto out = run_op(OpKind::kSoftmax, a, {in(x)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    testing::expect_near((*out)[0], naive_softmax(x, static_cast<int>(axis < 0 ? axis + 4 : axis)),
                         1e-6f, 1e-5f);
  }
  // Default axis is the last (opset-13 semantics), not 1 with coercion to 2-D.
  auto def = run_op(OpKind::kSoftmax, {}, {in(x)}).value();
  testing::expect_near(def[0], naive_softmax(x, 3), 1e-6f, 1e-5f);
}

TEST(Softmax, CostAndErrors) {
  EXPECT_EQ(testing::op_cost(OpKind::kSoftmax, {}, {in(testing::zeros(Shape{2, 5}))}).value().flops,
            50.0);
  Attributes a;
  a.set("axis", int64_t{2});
  const std::string e = run_error(OpKind::kSoftmax, a, {in(testing::zeros(Shape{2, 5}))});
  EXPECT_TRUE(contains(e, "axis") && contains(e, "test_node")) << e;
  EXPECT_TRUE(contains(run_error(OpKind::kSoftmax, {}, {in(Tensor::scalar_f32(1.f))}), "axis"));
}

}  // namespace
}  // namespace tessera
