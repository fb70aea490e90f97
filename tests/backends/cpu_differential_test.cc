// The cpu device against the reference, op by op, on odd shapes (13, 127: vector tails) and
// attribute variants, on all cores and on one core.
#include <limits>

#include "tests/backends/backend_test_util.h"

namespace tessera {
namespace {

using Ints = std::vector<int64_t>;
using testing::random_tensor;

Attributes attrs_of(std::initializer_list<std::pair<const char*, AttributeValue>> kv) {
  Attributes a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

DiffInput act(const Shape& s, uint32_t seed) {
  return {random_tensor(s, seed), false};
}
DiffInput weight(const Shape& s, uint32_t seed, float scale = 0.5f) {
  return {random_tensor(s, seed, -scale, scale), true};
}

class CpuDiffTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::string dev() const { return GetParam(); }
};

TEST_P(CpuDiffTest, ConvVariants) {
  struct Case {
    Shape x;
    Shape w;
    Attributes a;
  };
  const std::vector<Case> cases = {
      {{1, 3, 13, 13}, {8, 3, 3, 3}, attrs_of({{"pads", Ints{1, 1, 1, 1}}})},
      {{2, 5, 17, 13},
       {7, 5, 3, 3},
       attrs_of({{"strides", Ints{2, 2}}, {"pads", Ints{0, 1, 2, 1}}})},
      {{1, 16, 13, 13},
       {16, 1, 3, 3},
       attrs_of({{"group", int64_t{16}}, {"pads", Ints{1, 1, 1, 1}}})},
      {{1, 12, 15, 15}, {24, 1, 5, 5}, attrs_of({{"group", int64_t{12}}, {"strides", Ints{2, 2}}})},
      {{1, 12, 13, 13}, {6, 4, 3, 3}, attrs_of({{"group", int64_t{3}}, {"dilations", Ints{2, 2}}})},
      {{1, 127, 7, 7}, {13, 127, 1, 1}, attrs_of({})},
      {{1, 8, 13, 13},
       {5, 8, 3, 3},
       attrs_of({{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}})},
      {{1, 4, 9, 11}, {3, 4, 3, 3}, attrs_of({{"activation", std::string("relu")}})},
      {{1, 4, 9, 11},
       {3, 4, 3, 3},
       attrs_of({{"activation", std::string("clip")},
                 {"activation_alpha", 0.f},
                 {"activation_beta", 0.3f}})},
      {{1, 4, 9, 11}, {3, 4, 3, 3}, attrs_of({{"activation", std::string("hard_swish")}})},
      {{1, 4, 9, 11}, {3, 4, 3, 3}, attrs_of({{"activation", std::string("sigmoid")}})},
      {{1, 4, 9, 11}, {3, 4, 3, 3}, attrs_of({{"activation", std::string("tanh")}})},
      {{1, 4, 9, 11},
       {3, 4, 3, 3},
       attrs_of({{"activation", std::string("leaky_relu")}, {"activation_alpha", 0.1f}})},
      {{1, 3, 10}, {4, 3, 3}, attrs_of({})},  // 1-D: reference fallback
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    DiffResult r =
        diff_op(dev(), OpKind::kConv, c.a,
                {act(c.x, seed), weight(c.w, seed + 1), weight(Shape{c.w[0]}, seed + 2)});
    ++seed;
    EXPECT_FALSE(r.kernel.empty());
  }
  // A 2-D conv must run on an optimised kernel (which one: cpu_conv_variants_test.cc), not the
  // fallback.
  DiffResult r = diff_op(dev(), OpKind::kConv, attrs_of({}),
                         {act({1, 3, 13, 13}, 9), weight({4, 3, 3, 3}, 10)});
  EXPECT_EQ(r.kernel.find("reference"), std::string::npos) << r.kernel;
  EXPECT_FALSE(r.kernel.empty());
}

TEST_P(CpuDiffTest, GemmAndMatMul) {
  diff_op(dev(), OpKind::kGemm, attrs_of({{"transB", int64_t{1}}}),
          {act({1, 127}, 1), weight({13, 127}, 2), weight({13}, 3)});
  diff_op(dev(), OpKind::kGemm, attrs_of({{"alpha", 0.5f}, {"beta", 2.f}}),
          {act({3, 13}, 4), weight({13, 127}, 5), weight({1, 127}, 6)});
  diff_op(dev(), OpKind::kGemm, attrs_of({{"activation", std::string("relu")}}),
          {act({2, 13}, 7), weight({13, 5}, 8)});
  diff_op(dev(), OpKind::kGemm, attrs_of({{"transA", int64_t{1}}}),
          {act({13, 2}, 9), weight({13, 5}, 10), weight({2, 5}, 11)});
  diff_op(dev(), OpKind::kMatMul, attrs_of({}), {act({2, 3, 13}, 12), weight({13, 127}, 13)});
  DiffResult r =
      diff_op(dev(), OpKind::kMatMul, attrs_of({}), {act({2, 13, 17}, 14), act({2, 17, 127}, 15)});
  diff_op(dev(), OpKind::kMatMul, attrs_of({}), {act({13}, 16), weight({13, 7}, 17)});
  EXPECT_FALSE(r.kernel.empty());
}

TEST_P(CpuDiffTest, Pools) {
  diff_op(
      dev(), OpKind::kMaxPool,
      attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {act({1, 13, 15, 17}, 1)});
  diff_op(
      dev(), OpKind::kMaxPool,
      attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
      {act({2, 7, 14, 13}, 2)});
  diff_op(dev(), OpKind::kMaxPool,
          attrs_of({{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}}),
          {act({1, 5, 13, 13}, 3)});
  diff_op(
      dev(), OpKind::kAveragePool,
      attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{1, 1}}, {"pads", Ints{1, 1, 1, 1}}}),
      {act({1, 13, 9, 9}, 4)});
  diff_op(dev(), OpKind::kAveragePool,
          attrs_of({{"kernel_shape", Ints{3, 3}},
                    {"pads", Ints{1, 1, 1, 1}},
                    {"count_include_pad", int64_t{1}}}),
          {act({1, 13, 9, 9}, 5)});
  diff_op(dev(), OpKind::kAveragePool,
          attrs_of({{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}}),
          {act({1, 127, 8, 8}, 6)});
  diff_op(dev(), OpKind::kGlobalAveragePool, attrs_of({}), {act({2, 127, 7, 7}, 7)});
  diff_op(dev(), OpKind::kGlobalMaxPool, attrs_of({}), {act({2, 13, 5, 3}, 8)});
}

TEST_P(CpuDiffTest, ElementwiseBroadcasts) {
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    SCOPED_TRACE(op_name(k));
    diff_op(dev(), k, attrs_of({}), {act({1, 13, 7, 9}, 1), act({1, 13, 7, 9}, 2)});
    diff_op(dev(), k, attrs_of({}), {act({2, 13, 7, 9}, 3), weight({13, 1, 1}, 4)});
    diff_op(dev(), k, attrs_of({}), {act({2, 13, 7, 9}, 5), weight({1, 13, 7, 9}, 6)});
    diff_op(dev(), k, attrs_of({}), {act({127}, 7), act({3, 127}, 8)});
    diff_op(dev(), k, attrs_of({}), {act({2, 13, 1, 1}, 9), act({2, 13, 5, 5}, 10)});
  }
  diff_op(dev(), OpKind::kAdd, attrs_of({{"activation", std::string("relu")}}),
          {act({1, 13, 7, 9}, 11), act({1, 13, 7, 9}, 12)});
  diff_op(dev(), OpKind::kMul,
          attrs_of({{"activation", std::string("hard_sigmoid")},
                    {"activation_alpha", 0.2f},
                    {"activation_beta", 0.5f}}),
          {act({1, 13, 7, 9}, 13), act({1, 13, 7, 9}, 14)});
}

TEST_P(CpuDiffTest, Activations) {
  const Shape s{1, 13, 9, 127};
  diff_op(dev(), OpKind::kRelu, attrs_of({}), {act(s, 1)});
  diff_op(dev(), OpKind::kSigmoid, attrs_of({}), {act(s, 2)});
  diff_op(dev(), OpKind::kTanh, attrs_of({}), {act(s, 3)});
  diff_op(dev(), OpKind::kHardSwish, attrs_of({}), {act(s, 4)});
  diff_op(dev(), OpKind::kHardSigmoid, attrs_of({}), {act(s, 5)});
  diff_op(dev(), OpKind::kLeakyRelu, attrs_of({{"alpha", 0.2f}}), {act(s, 6)});
  diff_op(dev(), OpKind::kClip, attrs_of({}),
          {act(s, 7), {Tensor::scalar_f32(-0.5f), true}, {Tensor::scalar_f32(0.25f), true}});
  diff_op(dev(), OpKind::kSoftmax, attrs_of({{"axis", int64_t{-1}}}), {act({3, 1000}, 8)});
  diff_op(dev(), OpKind::kSoftmax, attrs_of({{"axis", int64_t{1}}}), {act({2, 13, 5, 7}, 9)});
  diff_op(dev(), OpKind::kSoftmax, attrs_of({{"axis", int64_t{2}}}), {act({2, 13, 5, 7}, 10)});
  Tensor var = random_tensor({13}, 11, 0.5f, 2.f);
  diff_op(
      dev(), OpKind::kBatchNormalization, attrs_of({}),
      {act({2, 13, 5, 7}, 12), weight({13}, 13), weight({13}, 14), weight({13}, 15), {var, true}});
}

TEST_P(CpuDiffTest, NanAndInfPropagate) {
  Tensor x = random_tensor({1, 13, 5, 5}, 1);
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[7] = std::numeric_limits<float>::infinity();
  x.data<float>()[11] = -std::numeric_limits<float>::infinity();
  // Tessera's own kernels propagate NaN exactly; XNNPACK's output clamp turns it into a bound
  // (documented in docs/performance.md), so for those only the other elements must match.
  diff_op(dev(), OpKind::kGlobalMaxPool, attrs_of({}), {{x, false}});
  diff_op(dev(), OpKind::kTanh, attrs_of({}), {{x, false}});
  for (OpKind k : {OpKind::kRelu, OpKind::kSigmoid, OpKind::kGlobalAveragePool}) {
    SCOPED_TRACE(op_name(k));
    diff_op(dev(), k, attrs_of({}), {{x, false}}, 1, 1e-4f, 1e-4f, /*nan_may_clamp=*/true);
  }
  for (OpKind k : {OpKind::kAdd, OpKind::kMul}) {
    SCOPED_TRACE(op_name(k));
    diff_op(dev(), k, attrs_of({}), {{x, false}, act({1, 13, 5, 5}, 2)}, 1, 1e-4f, 1e-4f, true);
  }
}

TEST_P(CpuDiffTest, TensorOps) {
  diff_op(dev(), OpKind::kConcat, attrs_of({{"axis", int64_t{1}}}),
          {act({1, 13, 5, 7}, 1), act({1, 3, 5, 7}, 2), act({1, 127, 5, 7}, 3)});
  diff_op(dev(), OpKind::kConcat, attrs_of({{"axis", int64_t{-1}}}),
          {act({2, 3, 13}, 4), act({2, 3, 5}, 5)});
  diff_op(dev(), OpKind::kConcat, attrs_of({{"axis", int64_t{2}}}),
          {act({1, 3, 5, 7}, 6), weight({1, 3, 2, 7}, 7)});
  diff_op(dev(), OpKind::kSplit, attrs_of({{"axis", int64_t{1}}}), {act({1, 14, 5, 7}, 8)}, 2);
  diff_op(dev(), OpKind::kFlatten, attrs_of({{"axis", int64_t{1}}}), {act({2, 13, 3, 3}, 9)});
  diff_op(dev(), OpKind::kTranspose, attrs_of({{"perm", Ints{0, 2, 3, 1}}}),
          {act({2, 13, 3, 5}, 10)});
  diff_op(dev(), OpKind::kReshape, attrs_of({}),
          {act({2, 13, 3, 5}, 11), {Tensor::from_int64s(Shape{2}, Ints{26, 15}), true}});
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuDiffTest, ::testing::Values("cpu", "cpu:0"), [](const auto& p) {
  return std::string(p.param) == "cpu" ? "all_cores" : "one_core";
});

}  // namespace
}  // namespace tessera
