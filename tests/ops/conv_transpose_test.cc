// ConvTranspose: hand-computed cases, randomised comparison against a naive scatter oracle
// (groups, strides, dilations, pads, output_padding, output_shape, auto_pad), cost and errors.
#include <gtest/gtest.h>

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

float at(const Tensor& t, int64_t i) {
  return t.data<float>()[i];
}

struct CtCase {
  int64_t n = 1, c = 1, m = 1, group = 1;  // m: total output channels
  std::vector<int64_t> in, kernel, strides, dilations, pads, output_padding, output_shape;
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

// Output extent and begin pad per dim, from the ONNX spec's equations.
void resolve(const CtCase& p, std::vector<int64_t>* out, std::vector<int64_t>* pb) {
  const size_t r = p.in.size();
  out->resize(r);
  pb->resize(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t ek = (p.kernel[i] - 1) * p.dilations[i] + 1;
    const int64_t full = p.strides[i] * (p.in[i] - 1) + p.output_padding[i] + ek;
    const bool same = p.auto_pad == "SAME_UPPER" || p.auto_pad == "SAME_LOWER";
    if (!p.output_shape.empty() || same) {
      (*out)[i] = p.output_shape.empty() ? p.in[i] * p.strides[i] : p.output_shape[i];
      const int64_t total = full - (*out)[i];
      if (total < 0) {
        // Beyond the full result: no padding; SAME keeps the full result, output_shape pads the
        // end with bias-only outputs.
        (*pb)[i] = 0;
        if (p.output_shape.empty()) (*out)[i] = full;
      } else {
        (*pb)[i] = p.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      }
    } else if (p.auto_pad == "VALID") {
      (*out)[i] = full;
      (*pb)[i] = 0;
    } else {
      (*out)[i] = full - p.pads[i] - p.pads[r + i];
      (*pb)[i] = p.pads[i];
    }
  }
}

// Scatter definition in double.
Tensor naive_conv_transpose(const CtCase& p, const Tensor& x, const Tensor& w, const Tensor* b) {
  const int r = static_cast<int>(p.in.size());
  std::vector<int64_t> out, pb;
  resolve(p, &out, &pb);
  int64_t I[3], O[3], K[3], S[3], D[3], P[3];
  for (int i = 0; i < 3; ++i) {
    const int j = i - (3 - r);
    I[i] = j >= 0 ? p.in[j] : 1;
    O[i] = j >= 0 ? out[j] : 1;
    K[i] = j >= 0 ? p.kernel[j] : 1;
    S[i] = j >= 0 ? p.strides[j] : 1;
    D[i] = j >= 0 ? p.dilations[j] : 1;
    P[i] = j >= 0 ? pb[j] : 0;
  }
  const int64_t osp = O[0] * O[1] * O[2];
  std::vector<double> acc(static_cast<size_t>(p.n * p.m * osp), 0.0);
  const int64_t cg = p.c / p.group, mg = p.m / p.group;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t iz = 0; iz < I[0]; ++iz)
        for (int64_t iy = 0; iy < I[1]; ++iy)
          for (int64_t ix = 0; ix < I[2]; ++ix) {
            const double xv = at(x, (((n * p.c + c) * I[0] + iz) * I[1] + iy) * I[2] + ix);
            const int64_t g = c / cg;
            for (int64_t ml = 0; ml < mg; ++ml)
              for (int64_t kz = 0; kz < K[0]; ++kz)
                for (int64_t ky = 0; ky < K[1]; ++ky)
                  for (int64_t kx = 0; kx < K[2]; ++kx) {
                    const int64_t oz = iz * S[0] + kz * D[0] - P[0];
                    const int64_t oy = iy * S[1] + ky * D[1] - P[1];
                    const int64_t ox = ix * S[2] + kx * D[2] - P[2];
                    if (oz < 0 || oz >= O[0] || oy < 0 || oy >= O[1] || ox < 0 || ox >= O[2])
                      continue;
                    const double wv = at(w, (((c * mg + ml) * K[0] + kz) * K[1] + ky) * K[2] + kx);
                    acc[static_cast<size_t>((n * p.m + g * mg + ml) * osp +
                                            (oz * O[1] + oy) * O[2] + ox)] += xv * wv;
                  }
          }
  std::vector<int64_t> ydims = {p.n, p.m};
  ydims.insert(ydims.end(), out.begin(), out.end());
  Tensor y = testing::zeros(Shape(ydims));
  for (int64_t i = 0; i < y.numel(); ++i) {
    const int64_t m = (i / osp) % p.m;
    y.data<float>()[i] = static_cast<float>(acc[static_cast<size_t>(i)] + (b ? at(*b, m) : 0.0));
  }
  return y;
}

Attributes ct_attrs(const CtCase& p) {
  Attributes a;
  a.set("group", p.group);
  a.set("strides", p.strides);
  a.set("dilations", p.dilations);
  a.set("output_padding", p.output_padding);
  if (!p.pads.empty()) a.set("pads", p.pads);
  if (!p.output_shape.empty()) a.set("output_shape", p.output_shape);
  if (p.auto_pad != "NOTSET") a.set("auto_pad", p.auto_pad);
  return a;
}

void check_conv_transpose(const CtCase& p, uint32_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "seed " << seed << " rank " << p.in.size() << " group " << p.group << " auto_pad "
               << p.auto_pad << " output_shape " << p.output_shape.size());
  std::vector<int64_t> xdims = {p.n, p.c}, wdims = {p.c, p.m / p.group};
  xdims.insert(xdims.end(), p.in.begin(), p.in.end());
  wdims.insert(wdims.end(), p.kernel.begin(), p.kernel.end());
  const Tensor x = random_tensor(Shape(xdims), seed);
  const Tensor w = random_tensor(Shape(wdims), seed + 1);
  const Tensor b = random_tensor(Shape{p.m}, seed + 2);
  std::vector<testing::OpInput> inputs = {in(x), in(w)};
  if (p.bias) inputs.push_back(in(b));
  auto out = run_op(OpKind::kConvTranspose, ct_attrs(p), inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  testing::expect_near((*out)[0], naive_conv_transpose(p, x, w, p.bias ? &b : nullptr), 1e-4f,
                       1e-4f);
}

TEST(ConvTranspose, HandComputed1D) {
  // x = [1, 2], w = [1, 1, 1], stride 1: full output [1, 3, 3, 2]; stride 2: [1, 1, 3, 2, 2].
  Tensor x = tensor(Shape{1, 1, 2}, {1, 2});
  Tensor w = tensor(Shape{1, 1, 3}, {1, 1, 1});
  auto out = run_op(OpKind::kConvTranspose, {}, {in(x), in(w)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 4}));
  const float want1[] = {1, 3, 3, 2};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at(out[0], i), want1[i]);
  Attributes a;
  a.set("strides", std::vector<int64_t>{2});
  out = run_op(OpKind::kConvTranspose, a, {in(x), in(w)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 5}));
  const float want2[] = {1, 1, 3, 2, 2};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(at(out[0], i), want2[i]);
  // SAME_UPPER asks for in * stride = 6 outputs, more than the full result (kernel 1, stride 3:
  // 4 outputs); the padding clamps at zero and the output is the full result.
  Tensor w1 = tensor(Shape{1, 1, 1}, {2});
  a.set("strides", std::vector<int64_t>{3});
  a.set("auto_pad", std::string("SAME_UPPER"));
  out = run_op(OpKind::kConvTranspose, a, {in(x), in(w1)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 1, 4}));
  const float want3[] = {2, 0, 0, 4};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at(out[0], i), want3[i]);
  // output_shape 6: no padding, the extra outputs at the end hold the bias.
  a.erase("auto_pad");
  a.set("output_shape", std::vector<int64_t>{6});
  out = run_op(OpKind::kConvTranspose, a, {in(x), in(w1), in(tensor(Shape{1}, {0.5f}))}).value();
  const float want4[] = {2.5f, 0.5f, 0.5f, 4.5f, 0.5f, 0.5f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(at(out[0], i), want4[i]);
}

TEST(ConvTranspose, OnnxPadsExample) {
  // The ONNX operator test "convtranspose_pads": strides [3, 2], pads [1, 2, 1, 2].
  Tensor x = tensor(Shape{1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  Tensor w = tensor(Shape{1, 2, 3, 3}, std::vector<float>(18, 1.f));
  Attributes a;
  a.set("strides", std::vector<int64_t>{3, 2});
  a.set("pads", std::vector<int64_t>{1, 2, 1, 2});
  auto out = run_op(OpKind::kConvTranspose, a, {in(x), in(w)}).value();
  ASSERT_EQ(out[0].shape(), (Shape{1, 2, 7, 3}));
  const float rows[7][3] = {{1, 1, 3}, {1, 1, 3},   {7, 4, 9},  {7, 4, 9},
                            {7, 4, 9}, {13, 7, 15}, {13, 7, 15}};
  for (int ch = 0; ch < 2; ++ch)
    for (int i = 0; i < 7; ++i)
      for (int j = 0; j < 3; ++j) EXPECT_EQ(at(out[0], ch * 21 + i * 3 + j), rows[i][j]);
}

TEST(ConvTranspose, NamedCasesMatchOracle) {
  std::vector<CtCase> cases;
  // 2-D, groups, stride 2, asymmetric pads, output_padding.
  cases.push_back({1, 4, 6, 2, {5, 7}, {3, 3}, {2, 2}, {1, 1}, {1, 0, 0, 1}, {1, 0}});
  // Dilation 2, stride 3, odd sizes.
  cases.push_back({2, 3, 5, 1, {13, 7}, {2, 3}, {3, 1}, {2, 2}, {0, 1, 2, 0}, {0, 0}});
  // Depthwise-style groups.
  cases.push_back({1, 6, 6, 6, {7, 7}, {4, 4}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {0, 0}});
  // output_shape with NOTSET (odd pad first) and SAME_UPPER (odd pad last).
  {
    CtCase p{1, 2, 3, 1, {5, 5}, {3, 3}, {2, 2}, {1, 1}, {}, {0, 0}, {10, 9}};
    cases.push_back(p);
    p.auto_pad = "SAME_UPPER";
    cases.push_back(p);
    // output_shape larger than the full result: extra outputs at the end.
    p.output_shape = {13, 12};
    cases.push_back(p);
  }
  // auto_pad SAME_LOWER / SAME_UPPER (output = input * stride) and VALID.
  cases.push_back({1, 2, 4, 2, {7}, {4}, {2}, {1}, {}, {0}, {}, "SAME_LOWER"});
  cases.push_back({1, 2, 4, 2, {7}, {5}, {3}, {1}, {}, {0}, {}, "SAME_UPPER"});
  cases.push_back({1, 2, 4, 1, {7, 3}, {2, 3}, {2, 1}, {1, 2}, {}, {1, 0}, {}, "VALID"});
  // 3-D without bias.
  {
    CtCase p{1, 3, 2, 1, {3, 4, 5}, {2, 3, 2}, {2, 1, 2}, {1, 2, 1}, {0, 1, 0, 1, 0, 1}, {1, 0, 0}};
    p.bias = false;
    cases.push_back(p);
  }
  // Enough input channels and output rows to take the blocked GEMM path.
  cases.push_back({1, 37, 9, 1, {13, 13}, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, {1, 1}});
  uint32_t seed = 500;
  for (const CtCase& p : cases) check_conv_transpose(p, seed += 5);
}

TEST(ConvTranspose, RandomisedAgainstOracle) {
  std::mt19937 rng(4321);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int done = 0;
  while (done < 40) {
    CtCase p;
    const int r = static_cast<int>(pick(1, 3));
    const int64_t max_in = r == 1 ? 13 : r == 2 ? 7 : 4;
    p.group = pick(1, 3);
    p.c = p.group * pick(1, 3);
    p.m = p.group * pick(1, 3);
    p.n = pick(1, 2);
    p.bias = pick(0, 1) == 1;
    for (int i = 0; i < r; ++i) {
      p.in.push_back(pick(1, max_in));
      p.kernel.push_back(pick(1, 4));
      p.strides.push_back(pick(1, 3));
      p.dilations.push_back(pick(1, 2));
      p.output_padding.push_back(pick(0, p.strides.back() - 1));
    }
    const int64_t mode = pick(0, 3);
    if (mode == 0) p.auto_pad = pick(0, 1) ? "SAME_UPPER" : "SAME_LOWER";
    if (mode == 1) {
      for (int i = 0; i < r; ++i) p.output_shape.push_back(p.in[i] * p.strides[i] + pick(-2, 2));
    }
    if (mode >= 2) {
      for (int i = 0; i < 2 * r; ++i) p.pads.push_back(pick(0, 2));
    }
    std::vector<int64_t> out, pb;
    resolve(p, &out, &pb);
    bool ok = true;
    for (int64_t o : out) ok = ok && o >= 1;
    if (!ok) continue;  // pads larger than the output: an error case, tested below
    check_conv_transpose(p, 9000 + done);
    if (::testing::Test::HasFatalFailure()) return;
    ++done;
  }
}

TEST(ConvTranspose, CostAndErrors) {
  // 2 * N * C * H * W * (M / group) * kH * kW.
  Attributes g2;
  g2.set("group", int64_t{2});
  auto cost = testing::op_cost(
                  OpKind::kConvTranspose, g2,
                  {in(testing::zeros(Shape{1, 4, 5, 5})), in(testing::zeros(Shape{4, 3, 2, 2}))})
                  .value();
  EXPECT_EQ(cost.flops, 2.0 * 4 * 25 * 3 * 4);

  const Tensor x = testing::zeros(Shape{1, 4, 5, 5});
  const Tensor w = testing::zeros(Shape{4, 3, 3, 3});
  auto err = [&](const Attributes& a, const Tensor& wt) {
    return run_error(OpKind::kConvTranspose, a, {in(x), in(wt)});
  };
  EXPECT_TRUE(contains(err({}, testing::zeros(Shape{3, 3, 3, 3})), "input channels"));
  Attributes g3;
  g3.set("group", int64_t{3});
  EXPECT_TRUE(contains(err(g3, w), "not divisible"));
  Attributes a;
  a.set("pads", std::vector<int64_t>{4, 4, 4, 4});
  EXPECT_TRUE(contains(err(a, w), "exceed the transposed output"));
  a = {};
  a.set("output_shape", std::vector<int64_t>{10});
  EXPECT_TRUE(contains(err(a, w), "'output_shape' has 1 values"));
  a = {};
  a.set("output_shape", std::vector<int64_t>{1, 6, 10, 10});  // [N, C, spatial] is accepted
  auto ok = run_op(OpKind::kConvTranspose, a, {in(x), in(w)});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ((*ok)[0].shape(), (Shape{1, 3, 10, 10}));
  a = {};
  a.set("output_padding", std::vector<int64_t>{-1, 0});
  EXPECT_TRUE(contains(err(a, w), "'output_padding'[0] = -1"));
  a = {};
  a.set("strides", std::vector<int64_t>{int64_t{1} << 31, int64_t{1} << 31});
  a.set("dilations", std::vector<int64_t>{int64_t{1} << 31, 1});
  // Output extents beyond the dimension limit are caught by shape validation.
  EXPECT_FALSE(run_op(OpKind::kConvTranspose, a, {in(x), in(w)}).ok());
  EXPECT_TRUE(contains(
      run_error(OpKind::kConvTranspose, {}, {in(x), in(w), in(testing::zeros(Shape{4}))}), "bias"));
}

}  // namespace
}  // namespace tessera
