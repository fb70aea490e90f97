// Resize: nearest (four rounding modes) and linear, every supported coordinate transform,
// scales and sizes.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/kernel_params.h"
#include "tests/ops/naive_index.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using testing::constant;
using testing::f32s;
using testing::i64s;
using testing::in;
using testing::omitted;
using testing::run_op;

Attributes resize_attrs(const std::string& mode, const std::string& coord = "half_pixel",
                        const std::string& nearest = "round_prefer_floor") {
  Attributes a;
  a.set("mode", mode);
  a.set("coordinate_transformation_mode", coord);
  a.set("nearest_mode", nearest);
  return a;
}

Result<std::vector<Tensor>> with_scales(const Attributes& a, const Tensor& x,
                                        std::vector<float> scales) {
  const Tensor s = f32s(Shape{static_cast<int64_t>(scales.size())}, scales);
  return run_op(OpKind::kResize, a, {in(x), omitted(), constant(s)});
}

Result<std::vector<Tensor>> with_sizes(const Attributes& a, const Tensor& x,
                                       std::vector<int64_t> sizes) {
  // Opset-11 form: empty roi and scales tensors before sizes.
  return run_op(
      OpKind::kResize, a,
      {in(x), constant(f32s(Shape{0}, {})), constant(f32s(Shape{0}, {})), constant(i64s(sizes))});
}

// ---- hand-computed (ONNX operator doc cases) ----------------------------------------------------

TEST(Resize, UpsampleNearest) {
  const Tensor x = f32s(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  auto y = with_scales(resize_attrs("nearest"), x, {1, 1, 2, 3}).value();
  testing::expect_near(y[0], f32s(Shape{1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2,
                                                      3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4}));
}

TEST(Resize, DownsampleNearest) {
  const Tensor x = f32s(Shape{1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto y = with_scales(resize_attrs("nearest"), x, {1, 1, 0.6f, 0.6f}).value();
  testing::expect_near(y[0], f32s(Shape{1, 1, 1, 2}, {1, 3}));
}

TEST(Resize, UpsampleLinearHalfPixel) {
  const Tensor x = f32s(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  auto y = with_scales(resize_attrs("linear"), x, {1, 1, 2, 2}).value();
  testing::expect_near(
      y[0], f32s(Shape{1, 1, 4, 4}, {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f,
                                     3.25f, 3.5f, 3, 3.25f, 3.75f, 4}));
}

TEST(Resize, UpsampleLinearAlignCorners) {
  const Tensor x = f32s(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  auto y = with_scales(resize_attrs("linear", "align_corners"), x, {1, 1, 2, 2}).value();
  const float t = 1.f / 3.f;
  testing::expect_near(
      y[0], f32s(Shape{1, 1, 4, 4}, {1, 1 + t, 2 - t, 2, 1 + 2 * t, 2, 2 + t, 3 - t, 3 - 2 * t,
                                     3 - t, 3, 3 + t, 3, 3 + t, 4 - t, 4}));
}

TEST(Resize, DownsampleLinear) {
  const Tensor x = f32s(Shape{1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto y = with_scales(resize_attrs("linear"), x, {1, 1, 0.6f, 0.6f}).value();
  testing::expect_near(y[0], f32s(Shape{1, 1, 1, 2}, {2.6666665f, 4.3333331f}));
}

TEST(Resize, SizesAsymmetricFloorAndPytorchHalfPixel) {
  const Tensor x = f32s(Shape{4}, {1, 2, 3, 4});
  auto y = with_sizes(resize_attrs("nearest", "asymmetric", "floor"), x, {8}).value();
  testing::expect_near(y[0], f32s(Shape{8}, {1, 1, 2, 2, 3, 3, 4, 4}));
  // Output length 1: pytorch_half_pixel samples coordinate 0, half_pixel the middle.
  auto p = with_sizes(resize_attrs("linear", "pytorch_half_pixel"), x, {1}).value();
  testing::expect_near(p[0], f32s(Shape{1}, {1}));
  auto h = with_sizes(resize_attrs("linear", "half_pixel"), x, {1}).value();
  testing::expect_near(h[0], f32s(Shape{1}, {2.5f}));
}

TEST(Resize, NearestRoundingModesAtHalf) {
  // asymmetric, scale 2: coordinates 0, 0.5, 1, 1.5, ... hit the .5 ties.
  const Tensor x = f32s(Shape{3}, {10, 20, 30});
  auto fl =
      with_scales(resize_attrs("nearest", "asymmetric", "round_prefer_floor"), x, {2}).value();
  testing::expect_near(fl[0], f32s(Shape{6}, {10, 10, 20, 20, 30, 30}));
  auto ce = with_scales(resize_attrs("nearest", "asymmetric", "round_prefer_ceil"), x, {2}).value();
  testing::expect_near(ce[0], f32s(Shape{6}, {10, 20, 20, 30, 30, 30}));
  auto c = with_scales(resize_attrs("nearest", "asymmetric", "ceil"), x, {2}).value();
  testing::expect_near(c[0], f32s(Shape{6}, {10, 20, 20, 30, 30, 30}));
}

TEST(Resize, NearestAnyDType) {
  const Tensor x = i64s(Shape{1, 2}, {7, -9});
  auto y = with_scales(resize_attrs("nearest"), x, {2, 2}).value();
  EXPECT_TRUE(testing::same_bytes(y[0], i64s(Shape{2, 4}, {7, 7, -9, -9, 7, 7, -9, -9})));
}

// ---- randomised against a direct oracle --------------------------------------------------------

float oracle_coord(const std::string& mode, int64_t o, float scale, int64_t in_len,
                   int64_t out_len) {
  const float x = static_cast<float>(o);
  if (mode == "half_pixel") return (x + 0.5f) / scale - 0.5f;
  if (mode == "pytorch_half_pixel") return out_len > 1 ? (x + 0.5f) / scale - 0.5f : 0.f;
  if (mode == "align_corners") {
    return out_len == 1 ? 0.f
                        : x * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
  }
  if (mode == "asymmetric") return x / scale;
  return (x + 0.5f) / scale;  // tf_half_pixel_for_nn
}

int64_t oracle_nearest(const std::string& mode, float x, int64_t in_len) {
  int64_t i;
  const float f = std::floor(x);
  if (mode == "floor") {
    i = static_cast<int64_t>(f);
  } else if (mode == "ceil") {
    i = static_cast<int64_t>(std::ceil(x));
  } else if (x - f == 0.5f) {  // a tie
    i = static_cast<int64_t>(mode == "round_prefer_floor" ? f : f + 1);
  } else {
    i = static_cast<int64_t>(std::round(x));
  }
  return std::min(std::max<int64_t>(i, 0), in_len - 1);
}

TEST(Resize, RandomAgainstOracle) {
  std::mt19937 rng(71);
  const std::string coords[] = {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                                "tf_half_pixel_for_nn"};
  const std::string nearests[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  const float scale_choices[] = {0.5f, 0.6f, 1.f, 1.5f, 2.f, 3.f, 0.35f, 2.7f};
  for (int iter = 0; iter < 200; ++iter) {
    const bool linear = iter % 2 == 1;
    const std::string& coord = coords[(iter / 2) % 5];
    const std::string& nearest = nearests[(iter / 10) % 4];
    std::uniform_int_distribution<int> rank_d(1, 4), pick(0, 7), coin(0, 3);
    const int rank = rank_d(rng);
    Shape shape = testing::random_shape(rng, rank, {1, 2, 3, 5, 13});
    if (iter % 25 == 0) shape[rank - 1] = 127;
    // Resize the last two dimensions usually, any dimension sometimes (N-D).
    std::vector<float> scales(static_cast<size_t>(rank), 1.f);
    std::vector<int64_t> sizes = shape.dims();
    const bool use_sizes = coin(rng) == 0;
    for (int d = 0; d < rank; ++d) {
      if (d < rank - 2 && coin(rng) != 0) continue;
      if (use_sizes) {
        std::uniform_int_distribution<int64_t> len(1, 2 * shape[d] + 3);
        sizes[static_cast<size_t>(d)] = len(rng);
      } else {
        scales[static_cast<size_t>(d)] = scale_choices[pick(rng)];
      }
    }
    const Tensor x = testing::random_tensor(shape, static_cast<uint32_t>(iter));
    const Attributes a = resize_attrs(linear ? "linear" : "nearest", coord, nearest);
    auto r = use_sizes ? with_sizes(a, x, sizes) : with_scales(a, x, scales);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0];
    ASSERT_EQ(y.rank(), rank);
    std::vector<float> used(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      const size_t ud = static_cast<size_t>(d);
      const int64_t want =
          use_sizes ? sizes[ud]
                    : static_cast<int64_t>(std::floor(static_cast<double>(shape[d]) * scales[ud]));
      ASSERT_EQ(y.dim(d), want) << "dim " << d;
      used[ud] =
          use_sizes ? static_cast<float>(sizes[ud]) / static_cast<float>(shape[d]) : scales[ud];
    }
    for (int64_t i = 0; i < y.numel(); ++i) {
      const std::vector<int64_t> o = testing::unravel(i, y.shape());
      float want = 0;
      if (!linear) {
        std::vector<int64_t> src(static_cast<size_t>(rank));
        for (int d = 0; d < rank; ++d) {
          const float c = oracle_coord(coord, o[d], used[d], shape[d], y.dim(d));
          src[d] = oracle_nearest(nearest, c, shape[d]);
        }
        want = x.data<float>()[testing::ravel(src, shape)];
      } else {
        // Sum over the 2^rank corners of the cell around the (clamped) coordinate.
        std::vector<int64_t> lo(static_cast<size_t>(rank)), hi(static_cast<size_t>(rank));
        std::vector<float> frac(static_cast<size_t>(rank));
        for (int d = 0; d < rank; ++d) {
          float c = oracle_coord(coord, o[d], used[d], shape[d], y.dim(d));
          c = std::min(std::max(c, 0.f), static_cast<float>(shape[d] - 1));
          lo[d] = static_cast<int64_t>(std::floor(c));
          hi[d] = std::min(lo[d] + 1, shape[d] - 1);
          frac[d] = c - static_cast<float>(lo[d]);
        }
        double sum = 0;
        for (int corner = 0; corner < (1 << rank); ++corner) {
          std::vector<int64_t> src(static_cast<size_t>(rank));
          double w = 1;
          for (int d = 0; d < rank; ++d) {
            const bool upper = (corner >> d) & 1;
            src[d] = upper ? hi[d] : lo[d];
            w *= upper ? frac[d] : 1.0 - frac[d];
          }
          sum += w * x.data<float>()[testing::ravel(src, shape)];
        }
        want = static_cast<float>(sum);
      }
      ASSERT_NEAR(y.data<float>()[i], want, 1e-5f)
          << (linear ? "linear " : "nearest ") << coord << " " << nearest << " "
          << shape.to_string() << " -> " << y.shape().to_string() << " at " << i;
    }
  }
}

// ---- errors -------------------------------------------------------------------------------------

TEST(Resize, Errors) {
  const Tensor x = f32s(Shape{1, 1, 2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(with_scales(resize_attrs("cubic"), x, {1, 1, 2, 2}).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(
      with_scales(resize_attrs("linear", "tf_crop_and_resize"), x, {1, 1, 2, 2}).status().code(),
      StatusCode::kUnimplemented);
  EXPECT_FALSE(with_scales(resize_attrs("bilinear"), x, {1, 1, 2, 2}).ok());
  EXPECT_FALSE(with_scales(resize_attrs("nearest", "centre"), x, {1, 1, 2, 2}).ok());
  EXPECT_FALSE(with_scales(resize_attrs("nearest", "asymmetric", "up"), x, {1, 1, 2, 2}).ok());
  EXPECT_FALSE(with_scales(resize_attrs("nearest"), x, {2, 2}).ok());        // wrong length
  EXPECT_FALSE(with_scales(resize_attrs("nearest"), x, {1, 1, 0, 2}).ok());  // zero scale
  EXPECT_FALSE(with_scales(resize_attrs("nearest"), x, {1, 1, -2, 2}).ok());
  EXPECT_FALSE(with_sizes(resize_attrs("nearest"), x, {1, 1, 0, 4}).ok());
  // Both scales and sizes, neither, a non-constant sizes, and linear on integers.
  const Tensor s = f32s(Shape{4}, {1, 1, 2, 2});
  EXPECT_FALSE(run_op(OpKind::kResize, resize_attrs("nearest"),
                      {in(x), omitted(), constant(s), constant(i64s({1, 1, 4, 4}))})
                   .ok());
  EXPECT_FALSE(run_op(OpKind::kResize, resize_attrs("nearest"), {in(x)}).ok());
  EXPECT_EQ(run_op(OpKind::kResize, resize_attrs("nearest"),
                   {in(x), omitted(), omitted(), in(i64s({1, 1, 4, 4}))})
                .status()
                .code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(with_scales(resize_attrs("linear"), i64s(Shape{1, 2}, {1, 2}), {1, 2}).status().code(),
            StatusCode::kUnimplemented);
}

// resize_linear_scratch_bomb.onnx: [1, 1, 1, 65536] to [1, 1, 65536, 1], 256 KiB in and out.
// Resizing H before W used to go through a [1, 1, 65536, 65536] scratch (16 GiB); the shrinking
// W pass now comes first, so the scratch holds one element.
TEST(Resize, LinearScratchIsBoundedByInputAndOutput) {
  const int64_t n = 65536;
  const Tensor x = testing::random_tensor(Shape{1, 1, 1, n}, 28);
  auto r = with_sizes(resize_attrs("linear"), x, {1, 1, n, 1});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0];
  ASSERT_EQ(y.shape(), (Shape{1, 1, n, 1}));
  // Half-pixel: the one output column samples x at 32767.5, which every output row repeats.
  const float* xs = x.data<float>();
  const float want = 0.5f * xs[n / 2 - 1] + 0.5f * xs[n / 2];
  for (int64_t i = 0; i < n; ++i) ASSERT_FLOAT_EQ(y.data<float>()[i], want) << "at " << i;
}

// zero_dim_resize.onnx, within the limits: a [0, 2^31] input holds nothing, but its nearest maps
// or linear taps used to be sized by its dimensions (16 and 48 GiB for the second one).
TEST(Resize, EmptyOutputNeedsNoMapsOrTaps) {
  const Tensor x = Tensor::create(DType::kF32, Shape{0, kMaxDim}).value();
  for (const char* mode : {"nearest", "linear"}) {
    SCOPED_TRACE(mode);
    const std::vector<testing::OpInput> ins = {in(x), omitted(), constant(f32s(Shape{2}, {1, 1}))};
    auto r = run_op(OpKind::kResize, resize_attrs(mode), ins);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value()[0].shape(), (Shape{0, kMaxDim}));
    Graph g = testing::single_node_graph(OpKind::kResize, resize_attrs(mode), ins, 1);
    Result<ResizeKernelParams> p = resize_kernel_params(NodeContext(g, g.node(0)).ctx());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    for (const std::vector<int64_t>& m : p->maps.index) EXPECT_TRUE(m.empty());
    for (const LinearTaps& t : p->taps) EXPECT_TRUE(t.i0.empty() && t.identity);
  }
}

}  // namespace
}  // namespace tessera
