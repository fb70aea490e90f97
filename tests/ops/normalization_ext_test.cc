// LayerNormalization, InstanceNormalization, GroupNormalization, DepthToSpace and SpaceToDepth
// against formulas evaluated per element from coordinates (double precision), on odd shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/ops/naive_index.h"
#include "tests/ops/nn_test_util.h"

namespace tessera {
namespace {

using testing::contains;
using testing::in;
using testing::random_tensor;
using testing::ravel;
using testing::run_error;
using testing::run_op;
using testing::unravel;

// Mean and 1/sqrt(var + eps) of the elements of x whose flat index satisfies `member`.
template <typename F>
std::pair<double, double> moments(const Tensor& x, float eps, F&& member) {
  double s = 0, n = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (member(i)) {
      s += x.data<float>()[i];
      ++n;
    }
  }
  const double mean = s / n;
  double q = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (member(i)) q += (x.data<float>()[i] - mean) * (x.data<float>()[i] - mean);
  }
  return {mean, 1.0 / std::sqrt(q / n + eps)};
}

TEST(LayerNormalization, MatchesTheFormulaForEveryAxisAndBroadcastScale) {
  const Shape s{3, 5, 13};
  const Tensor x = random_tensor(s, 1, -3.f, 3.f);
  for (int axis = 0; axis < 3; ++axis) {
    // Scale full-size over the normalised dims; bias broadcast along all but the last.
    Shape norm(std::vector<int64_t>(s.dims().begin() + axis, s.dims().end()));
    const Tensor scale = random_tensor(norm, 2);
    const Tensor bias = random_tensor(Shape{s[2]}, 3);
    Attributes a;
    a.set("axis", int64_t{axis - (axis == 2 ? 3 : 0)});
    a.set("epsilon", 1e-3f);
    auto out = run_op(OpKind::kLayerNormalization, a, {in(x), in(scale), in(bias)}, 3);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const int64_t row = norm.numel();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t r = i / row;
      auto [mean, inv] = moments(x, 1e-3f, [&](int64_t j) { return j / row == r; });
      const double want = (x.data<float>()[i] - mean) * inv * scale.data<float>()[i % row] +
                          bias.data<float>()[i % s[2]];
      ASSERT_NEAR((*out)[0].data<float>()[i], want, 1e-4) << "axis " << axis << " at " << i;
      ASSERT_NEAR((*out)[1].data<float>()[r], mean, 1e-5);
      ASSERT_NEAR((*out)[2].data<float>()[r], inv, 1e-4 * inv);
    }
    Shape stat = s;
    for (int d = axis; d < 3; ++d) stat[d] = 1;
    EXPECT_EQ((*out)[1].shape(), stat);
  }
}

TEST(LayerNormalization, RejectsAScaleThatDoesNotBroadcast) {
  const Tensor x = random_tensor(Shape{2, 6}, 1);
  const std::string msg =
      run_error(OpKind::kLayerNormalization, {}, {in(x), in(random_tensor(Shape{5}, 2))});
  EXPECT_TRUE(contains(msg, "does not broadcast")) << msg;
}

TEST(InstanceNormalization, MatchesTheFormulaOnOddShapes) {
  for (const Shape& s : {Shape{2, 3, 13}, Shape{1, 5, 7, 9}, Shape{2, 2, 3, 1, 5}}) {
    const Tensor x = random_tensor(s, 4, -2.f, 5.f);
    const Tensor scale = random_tensor(Shape{s[1]}, 5), bias = random_tensor(Shape{s[1]}, 6);
    auto out = run_op(OpKind::kInstanceNormalization, {}, {in(x), in(scale), in(bias)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const int64_t plane = s.numel() / (s[0] * s[1]);
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t nc = i / plane;
      auto [mean, inv] = moments(x, 1e-5f, [&](int64_t j) { return j / plane == nc; });
      const int64_t c = nc % s[1];
      const double want =
          (x.data<float>()[i] - mean) * inv * scale.data<float>()[c] + bias.data<float>()[c];
      ASSERT_NEAR((*out)[0].data<float>()[i], want, 1e-4) << s.to_string() << " at " << i;
    }
  }
  const std::string msg =
      run_error(OpKind::kInstanceNormalization, {},
                {in(random_tensor(Shape{1, 3, 4}, 1)), in(random_tensor(Shape{2}, 1)),
                 in(random_tensor(Shape{3}, 1))});
  EXPECT_TRUE(contains(msg, "scale")) << msg;
}

TEST(GroupNormalization, PerChannelAndPerGroupParameters) {
  const Shape s{2, 6, 5, 3};
  const Tensor x = random_tensor(s, 7, -1.f, 4.f);
  for (int64_t groups : {1, 2, 3, 6}) {
    for (bool per_channel : {true, false}) {
      const int64_t np = per_channel ? s[1] : groups;
      const Tensor scale = random_tensor(Shape{np}, 8), bias = random_tensor(Shape{np}, 9);
      Attributes a;
      a.set("num_groups", groups);
      auto out = run_op(OpKind::kGroupNormalization, a, {in(x), in(scale), in(bias)});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const int64_t plane = s[2] * s[3], per = s[1] / groups;
      for (int64_t i = 0; i < x.numel(); ++i) {
        const std::vector<int64_t> c = unravel(i, s);
        const int64_t g = c[1] / per;
        auto [mean, inv] = moments(x, 1e-5f, [&](int64_t j) {
          const std::vector<int64_t> cj = unravel(j, s);
          return cj[0] == c[0] && cj[1] / per == g;
        });
        const int64_t at = per_channel ? c[1] : g;
        const double want =
            (x.data<float>()[i] - mean) * inv * scale.data<float>()[at] + bias.data<float>()[at];
        ASSERT_NEAR((*out)[0].data<float>()[i], want, 1e-4) << groups << " groups at " << i;
      }
      (void)plane;
    }
  }
  Attributes bad;
  bad.set("num_groups", int64_t{4});
  const std::string msg =
      run_error(OpKind::kGroupNormalization, bad,
                {in(x), in(random_tensor(Shape{6}, 1)), in(random_tensor(Shape{6}, 1))});
  EXPECT_TRUE(contains(msg, "num_groups = 4")) << msg;
}

TEST(DepthToSpace, DcrAndCrdMatchTheirFormulasAndSpaceToDepthInvertsDcr) {
  const Shape s{2, 12, 3, 5};
  const Tensor x = random_tensor(s, 10);
  const int64_t b = 2, c = s[1] / (b * b);
  for (const char* mode : {"DCR", "CRD"}) {
    Attributes a;
    a.set("blocksize", b);
    a.set("mode", std::string(mode));
    auto out = run_op(OpKind::kDepthToSpace, a, {in(x)});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0];
    ASSERT_EQ(y.shape(), (Shape{2, c, 6, 10}));
    for (int64_t o = 0; o < y.numel(); ++o) {
      const std::vector<int64_t> q = unravel(o, y.shape());
      const int64_t i = q[2] % b, j = q[3] % b;
      const int64_t ch =
          std::string(mode) == "DCR" ? (i * b + j) * c + q[1] : q[1] * b * b + i * b + j;
      ASSERT_EQ(y.data<float>()[o], x.data<float>()[ravel({q[0], ch, q[2] / b, q[3] / b}, s)]);
    }
    if (std::string(mode) == "DCR") {
      Attributes sa;
      sa.set("blocksize", b);
      auto back = run_op(OpKind::kSpaceToDepth, sa, {in(y)});
      ASSERT_TRUE(back.ok()) << back.status().to_string();
      testing::expect_near((*back)[0], x, 0, 0);
    }
  }
  Attributes a;
  a.set("blocksize", int64_t{5});
  EXPECT_TRUE(contains(run_error(OpKind::kDepthToSpace, a, {in(x)}), "divisible"));
  EXPECT_TRUE(contains(run_error(OpKind::kSpaceToDepth, a, {in(x)}), "divisible"));
}

}  // namespace
}  // namespace tessera
