// QuantizeLinear / DequantizeLinear (per tensor and per axis, u8 / i8 / i32) against the ONNX
// formulas, with hand-picked rounding ties, and QLinearConv / QLinearMatMul against integer
// brute force (int32 accumulation, then requantisation, as an integer kernel computes them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
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
using testing::tensor;
using testing::typed_tensor;
using testing::unravel;

Tensor u8s(const Shape& s, const std::vector<uint8_t>& v) {
  return typed_tensor<uint8_t>(DType::kU8, s, v);
}
Tensor i8s(const Shape& s, const std::vector<int8_t>& v) {
  return typed_tensor<int8_t>(DType::kI8, s, v);
}

TEST(QuantizeLinear, RoundsHalfToEvenAndSaturates) {
  // x / 0.5 = 1, 3, 5, -1, 0.5 -> 0 (tie to even), 1.5 -> 2, 2.5 -> 2, big, -big.
  const Tensor x =
      tensor(Shape{9}, {0.5f, 1.5f, 2.5f, -0.5f, 0.25f, 0.75f, 1.25f, 1000.f, -1000.f});
  const Tensor scale = Tensor::scalar_f32(0.5f);
  auto u = run_op(OpKind::kQuantizeLinear, {}, {in(x), in(scale), in(u8s(Shape{}, {10}))});
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  ASSERT_EQ((*u)[0].dtype(), DType::kU8);
  const uint8_t want_u[] = {11, 13, 15, 9, 10, 12, 12, 255, 0};
  for (int i = 0; i < 9; ++i) EXPECT_EQ((*u)[0].data<uint8_t>()[i], want_u[i]) << i;
  auto s = run_op(OpKind::kQuantizeLinear, {}, {in(x), in(scale), in(i8s(Shape{}, {-3}))});
  ASSERT_TRUE(s.ok());
  ASSERT_EQ((*s)[0].dtype(), DType::kI8);
  const int8_t want_s[] = {-2, 0, 2, -4, -3, -1, -1, 127, -128};
  for (int i = 0; i < 9; ++i) EXPECT_EQ((*s)[0].data<int8_t>()[i], want_s[i]) << i;
  // No zero point: u8 with zero point 0.
  auto d = run_op(OpKind::kQuantizeLinear, {}, {in(x), in(scale)});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[0].dtype(), DType::kU8);
  EXPECT_EQ((*d)[0].data<uint8_t>()[3], 0);
}

TEST(QuantizeDequantize, PerAxisMatchesTheFormulaOnEveryAxis) {
  const Shape s{3, 4, 5};
  const Tensor x = random_tensor(s, 5, -4.f, 4.f);
  for (int axis = 0; axis < 3; ++axis) {
    const int64_t n = s[axis];
    const Tensor scale = random_tensor(Shape{n}, 6, 0.01f, 0.1f);
    std::vector<int8_t> zp;
    for (int64_t k = 0; k < n; ++k) zp.push_back(static_cast<int8_t>(k * 7 - 10));
    const Tensor zpt = i8s(Shape{n}, zp);
    Attributes a;
    a.set("axis", int64_t{axis - (axis == 2 ? 3 : 0)});
    auto qv = run_op(OpKind::kQuantizeLinear, a, {in(x), in(scale), in(zpt)});
    ASSERT_TRUE(qv.ok()) << qv.status().to_string();
    auto dq = run_op(OpKind::kDequantizeLinear, a, {in((*qv)[0]), in(scale), in(zpt)});
    ASSERT_TRUE(dq.ok()) << dq.status().to_string();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const int64_t k = unravel(i, s)[static_cast<size_t>(axis)];
      const float sc = scale.data<float>()[k];
      const double qq = std::clamp(
          static_cast<double>(std::nearbyint(x.data<float>()[i] / sc)) + zp[static_cast<size_t>(k)],
          -128.0, 127.0);
      ASSERT_EQ((*qv)[0].data<int8_t>()[i], static_cast<int8_t>(qq))
          << "axis " << axis << " at " << i;
      ASSERT_FLOAT_EQ((*dq)[0].data<float>()[i],
                      static_cast<float>(qq - zp[static_cast<size_t>(k)]) * sc);
    }
  }
}

TEST(DequantizeLinear, I32WithoutZeroPointAndErrors) {
  const Tensor q =
      typed_tensor<int32_t>(DType::kI32, Shape{3}, std::vector<int32_t>{-5, 0, 1 << 20});
  auto d = run_op(OpKind::kDequantizeLinear, {}, {in(q), in(Tensor::scalar_f32(0.25f))});
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_FLOAT_EQ((*d)[0].data<float>()[0], -1.25f);
  EXPECT_FLOAT_EQ((*d)[0].data<float>()[2], 262144.f);
  // A per-tensor pair may be a [1] scale with a scalar zero point (quantize_static's biases).
  auto mixed =
      run_op(OpKind::kDequantizeLinear, {},
             {in(u8s(Shape{2}, {3, 7})), in(tensor(Shape{1}, {0.5f})), in(u8s(Shape{}, {1}))});
  ASSERT_TRUE(mixed.ok()) << mixed.status().to_string();
  EXPECT_FLOAT_EQ((*mixed)[0].data<float>()[1], 3.f);
  // Scale with the wrong length for the axis; zero point of another dtype; blocked scales.
  const Tensor x = u8s(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  std::string msg = run_error(OpKind::kDequantizeLinear, {}, {in(x), in(tensor(Shape{2}, {1, 2}))});
  EXPECT_TRUE(contains(msg, "dimension 1 (axis)")) << msg;
  msg = run_error(OpKind::kDequantizeLinear, {},
                  {in(x), in(Tensor::scalar_f32(1.f)), in(i8s(Shape{}, {0}))});
  EXPECT_TRUE(contains(msg, "zero point is i8 but input 0 is u8")) << msg;
  msg = run_error(OpKind::kDequantizeLinear, {}, {in(x), in(tensor(Shape{2, 1}, {1, 2}))});
  EXPECT_TRUE(contains(msg, "blocked")) << msg;
}

// ---- QLinearConv / QLinearMatMul against integer arithmetic -----------------------------------

// y = clamp(round(acc * (sa * sb / sy)) + zy), the integer-kernel result for one output.
int32_t requantize(int64_t acc, double scale, int32_t zy) {
  return static_cast<int32_t>(
      std::clamp(std::nearbyint(static_cast<double>(acc) * scale) + zy, 0.0, 255.0));
}

TEST(QLinearConv, MatchesIntegerConvolutionPerChannel) {
  std::mt19937 rng(9);
  const int64_t n = 1, c = 4, h = 7, w = 9, m = 6, k = 3, groups = 2;
  std::vector<uint8_t> xv(static_cast<size_t>(n * c * h * w));
  for (auto& v : xv) v = static_cast<uint8_t>(rng() % 256);
  std::vector<int8_t> wv(static_cast<size_t>(m * (c / groups) * k * k));
  for (auto& v : wv) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<int32_t> bv(static_cast<size_t>(m));
  for (auto& v : bv) v = static_cast<int32_t>(rng() % 2001) - 1000;
  std::vector<float> ws;
  for (int64_t o = 0; o < m; ++o) ws.push_back(0.002f + 0.001f * static_cast<float>(o));
  const float xs = 0.02f, ys = 0.15f;
  const uint8_t zx = 120, zy = 128;
  Attributes a;
  a.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  a.set("strides", std::vector<int64_t>{2, 1});
  a.set("group", groups);
  auto out =
      run_op(OpKind::kQLinearConv, a,
             {in(u8s(Shape{n, c, h, w}, xv)), in(Tensor::scalar_f32(xs)), in(u8s(Shape{}, {zx})),
              in(i8s(Shape{m, c / groups, k, k}, wv)), in(tensor(Shape{m}, ws)),
              in(i8s(Shape{m}, std::vector<int8_t>(m, 0))), in(Tensor::scalar_f32(ys)),
              in(u8s(Shape{}, {zy})), in(typed_tensor<int32_t>(DType::kI32, Shape{m}, bv))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0];
  ASSERT_EQ(y.dtype(), DType::kU8);
  ASSERT_EQ(y.shape(), (Shape{1, m, 4, 9}));
  int off_by_one = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    const std::vector<int64_t> q = unravel(i, y.shape());
    const int64_t o = q[1], g = o / (m / groups);
    int64_t acc = bv[static_cast<size_t>(o)];
    for (int64_t ci = 0; ci < c / groups; ++ci) {
      for (int64_t ky = 0; ky < k; ++ky) {
        for (int64_t kx = 0; kx < k; ++kx) {
          const int64_t iy = q[2] * 2 + ky - 1, ix = q[3] + kx - 1;
          if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
          const int64_t xi =
              xv[static_cast<size_t>(ravel({0, g * (c / groups) + ci, iy, ix}, Shape{n, c, h, w}))];
          const int64_t wi =
              wv[static_cast<size_t>(ravel({o, ci, ky, kx}, Shape{m, c / groups, k, k}))];
          acc += (xi - zx) * wi;
        }
      }
    }
    const int32_t want =
        requantize(acc, static_cast<double>(xs) * ws[static_cast<size_t>(o)] / ys, zy);
    const int got = y.data<uint8_t>()[i];
    ASSERT_LE(std::abs(got - want), 1) << "at " << i;
    off_by_one += got != want;
  }
  // Float and integer arithmetic disagree only at rounding ties, which are rare.
  EXPECT_LE(off_by_one, y.numel() / 50);
}

TEST(QLinearMatMul, MatchesIntegerMatMulPerColumn) {
  std::mt19937 rng(4);
  const int64_t b = 2, mm = 5, kk = 13, nn = 7;
  std::vector<uint8_t> av(static_cast<size_t>(b * mm * kk));
  for (auto& v : av) v = static_cast<uint8_t>(rng() % 256);
  std::vector<int8_t> bv(static_cast<size_t>(kk * nn));
  for (auto& v : bv) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<float> bs;
  std::vector<int8_t> bz;
  for (int64_t j = 0; j < nn; ++j) {
    bs.push_back(0.003f * static_cast<float>(j + 1));
    bz.push_back(static_cast<int8_t>(j - 3));
  }
  const float as = 0.01f, ys = 0.3f;
  const uint8_t za = 100, zy = 90;
  auto out = run_op(OpKind::kQLinearMatMul, {},
                    {in(u8s(Shape{b, mm, kk}, av)), in(Tensor::scalar_f32(as)),
                     in(u8s(Shape{}, {za})), in(i8s(Shape{kk, nn}, bv)), in(tensor(Shape{nn}, bs)),
                     in(i8s(Shape{nn}, bz)), in(Tensor::scalar_f32(ys)), in(u8s(Shape{}, {zy}))});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0];
  ASSERT_EQ(y.shape(), (Shape{b, mm, nn}));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const std::vector<int64_t> q = unravel(i, y.shape());
    int64_t acc = 0;
    for (int64_t t = 0; t < kk; ++t) {
      acc += (int64_t{av[static_cast<size_t>((q[0] * mm + q[1]) * kk + t)]} - za) *
             (int64_t{bv[static_cast<size_t>(t * nn + q[2])]} - bz[static_cast<size_t>(q[2])]);
    }
    const int32_t want =
        requantize(acc, static_cast<double>(as) * bs[static_cast<size_t>(q[2])] / ys, zy);
    ASSERT_LE(std::abs(static_cast<int>(y.data<uint8_t>()[i]) - want), 1) << "at " << i;
  }
  // A per-row a_scale is refused, naming the input.
  const std::string msg = run_error(
      OpKind::kQLinearMatMul, {},
      {in(u8s(Shape{b, mm, kk}, av)), in(tensor(Shape{mm}, {1, 1, 1, 1, 1})),
       in(u8s(Shape{mm}, {0, 0, 0, 0, 0})), in(i8s(Shape{kk, nn}, bv)), in(tensor(Shape{nn}, bs)),
       in(i8s(Shape{nn}, bz)), in(Tensor::scalar_f32(ys)), in(u8s(Shape{}, {zy}))});
  EXPECT_TRUE(contains(msg, "input 1 (scale) must be per tensor")) << msg;
  EXPECT_TRUE(contains(msg, "test_node")) << msg;
}

}  // namespace
}  // namespace tessera
