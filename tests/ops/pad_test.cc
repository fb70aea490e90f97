// Pad: constant, reflect and edge modes, negative pads, the opset-18 axes input.
#include <gtest/gtest.h>

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
using testing::same_bytes;

Attributes mode(const char* m) {
  Attributes a;
  a.set("mode", std::string(m));
  return a;
}

const Tensor& doc_data() {
  static const Tensor t = f32s(Shape{3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  return t;
}

TEST(Pad, OnnxDocExamples) {
  const Tensor pads = i64s({0, 2, 0, 0});
  auto cr = run_op(OpKind::kPad, mode("constant"),
                   {in(doc_data()), constant(pads), constant(Tensor::scalar_f32(0.f))});
  ASSERT_TRUE(cr.ok()) << cr.status().to_string();
  auto c = cr.value();
  EXPECT_TRUE(
      same_bytes(c[0], f32s(Shape{3, 4}, {0, 0, 1.0f, 1.2f, 0, 0, 2.3f, 3.4f, 0, 0, 4.5f, 5.7f})));
  auto rr = run_op(OpKind::kPad, mode("reflect"), {in(doc_data()), constant(pads)});
  ASSERT_TRUE(rr.ok()) << rr.status().to_string();
  auto r = rr.value();
  EXPECT_TRUE(same_bytes(r[0], f32s(Shape{3, 4}, {1.0f, 1.2f, 1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f,
                                                  4.5f, 5.7f, 4.5f, 5.7f})));
  auto e = run_op(OpKind::kPad, mode("edge"), {in(doc_data()), constant(pads)}).value();
  EXPECT_TRUE(same_bytes(e[0], f32s(Shape{3, 4}, {1.0f, 1.0f, 1.0f, 1.2f, 2.3f, 2.3f, 2.3f, 3.4f,
                                                  4.5f, 4.5f, 4.5f, 5.7f})));
}

TEST(Pad, ConstantValueDefaultsAndDTypes) {
  const Tensor x = i64s(Shape{1, 2}, {5, 6});
  // Default mode is constant, default value 0.
  auto y = run_op(OpKind::kPad, {}, {in(x), constant(i64s({1, 1, 0, 2}))}).value();
  EXPECT_TRUE(same_bytes(y[0], i64s(Shape{2, 5}, {0, 0, 0, 0, 0, 0, 5, 6, 0, 0})));
  // A non-zero i64 constant; an omitted constant_value before axes.
  auto z = run_op(OpKind::kPad, {}, {in(x), constant(i64s({0, 1, 0, 0})), in(i64s(Shape{}, {-7}))})
               .value();
  EXPECT_TRUE(same_bytes(z[0], i64s(Shape{1, 3}, {-7, 5, 6})));
  auto w =
      run_op(OpKind::kPad, {}, {in(x), constant(i64s({2, 0})), omitted(), constant(i64s({-1}))})
          .value();
  EXPECT_TRUE(same_bytes(w[0], i64s(Shape{1, 4}, {0, 0, 5, 6})));
}

TEST(Pad, ReflectLongerThanTheData) {
  // numpy.pad keeps mirroring: [1,2,3] with 5 in front -> [2,1,2,3,2, 1,2,3].
  auto r =
      run_op(OpKind::kPad, mode("reflect"), {in(f32s(Shape{3}, {1, 2, 3})), constant(i64s({5, 0}))})
          .value();
  EXPECT_TRUE(same_bytes(r[0], f32s(Shape{8}, {2, 1, 2, 3, 2, 1, 2, 3})));
  // A single element reflects onto itself.
  auto one =
      run_op(OpKind::kPad, mode("reflect"), {in(f32s(Shape{1}, {5})), constant(i64s({2, 1}))})
          .value();
  EXPECT_TRUE(same_bytes(one[0], f32s(Shape{4}, {5, 5, 5, 5})));
}

TEST(Pad, EmptyInput) {
  const Tensor x = f32s(Shape{2, 0}, {});
  auto y =
      run_op(OpKind::kPad, {}, {in(x), constant(i64s({0, 2, 0, 1})), in(Tensor::scalar_f32(3))})
          .value();
  EXPECT_TRUE(same_bytes(y[0], f32s(Shape{2, 3}, {3, 3, 3, 3, 3, 3})));
  EXPECT_FALSE(run_op(OpKind::kPad, mode("edge"), {in(x), constant(i64s({0, 2, 0, 1}))}).ok());
  EXPECT_FALSE(run_op(OpKind::kPad, mode("reflect"), {in(x), constant(i64s({0, 0, 0, 1}))}).ok());
  // Nothing to add: an empty result is fine in every mode.
  EXPECT_EQ(
      run_op(OpKind::kPad, mode("edge"), {in(x), constant(i64s({1, 0, 0, 0}))}).value()[0].shape(),
      (Shape{3, 0}));
}

TEST(Pad, NegativePadsCropThenPad) {
  const Tensor x = f32s(Shape{6}, {0, 1, 2, 3, 4, 5});
  // Crop 2 at the start, pad 1 at the end: [2,3,4,5,c].
  auto c =
      run_op(OpKind::kPad, {}, {in(x), constant(i64s({-2, 1})), constant(Tensor::scalar_f32(9.f))})
          .value();
  EXPECT_TRUE(same_bytes(c[0], f32s(Shape{5}, {2, 3, 4, 5, 9})));
  // Reflect applies to the cropped data [0,1,2]: pads (2, -3) -> [2,1,0,1,2].
  auto r = run_op(OpKind::kPad, mode("reflect"), {in(x), constant(i64s({2, -3}))}).value();
  EXPECT_TRUE(same_bytes(r[0], f32s(Shape{5}, {2, 1, 0, 1, 2})));
  // Edge on the cropped data [1,2,3,4,5]: pads (-1, 2) -> [1,2,3,4,5,5,5].
  auto e = run_op(OpKind::kPad, mode("edge"), {in(x), constant(i64s({-1, 2}))}).value();
  EXPECT_TRUE(same_bytes(e[0], f32s(Shape{7}, {1, 2, 3, 4, 5, 5, 5})));
  // Over-cropped in constant mode: everything is the constant.
  auto o =
      run_op(OpKind::kPad, {}, {in(x), constant(i64s({-8, 4})), constant(Tensor::scalar_f32(1.f))})
          .value();
  EXPECT_TRUE(same_bytes(o[0], f32s(Shape{2}, {1, 1})));
}

// numpy.pad after cropping, written with a periodic reflection (valid for any distance).
int64_t oracle_source(const char* m, int64_t o, int64_t dim, int64_t b, int64_t e) {
  const int64_t lo = b < 0 ? -b : 0;
  const int64_t len = dim - lo - (e < 0 ? -e : 0);
  int64_t p = o - (b > 0 ? b : 0);
  if (p >= 0 && p < len) return lo + p;
  if (std::string(m) == "constant") return -1;
  if (std::string(m) == "edge") return lo + (p < 0 ? 0 : len - 1);
  if (len == 1) return lo;
  const int64_t period = 2 * (len - 1);
  p = ((p % period) + period) % period;
  return lo + (p < len ? p : period - p);
}

// Whether ONNX (its reference implementation) accepts the padding of one dimension.
bool oracle_valid(const char* m, int64_t dim, int64_t b, int64_t e) {
  if (dim + b + e < 0) return false;
  const int64_t crop = (b < 0 ? -b : 0) + (e < 0 ? -e : 0);
  const int64_t len = dim - crop;
  const int64_t pb = b > 0 ? b : 0, pe = e > 0 ? e : 0;
  if (std::string(m) == "constant") return true;
  if (len < 0) return false;  // over-cropped
  if (pb == 0 && pe == 0) return true;
  return len >= 1;  // edge and reflect need something to repeat
}

TEST(Pad, RandomAgainstOracle) {
  std::mt19937 rng(53);
  const char* const modes[] = {"constant", "reflect", "edge"};
  const DType dts[] = {DType::kF32, DType::kI64, DType::kU8, DType::kF16};
  int ok_runs = 0, error_runs = 0;
  for (int iter = 0; iter < 240; ++iter) {
    const char* m = modes[iter % 3];
    const DType dt = dts[(iter / 3) % 4];
    std::uniform_int_distribution<int> rank_d(1, 4);
    const int rank = rank_d(rng);
    Shape shape = testing::random_shape(rng, rank, {1, 2, 3, 5, 13});
    if (iter % 20 == 0) shape[rank - 1] = 127;
    std::uniform_int_distribution<int64_t> pad_d(-3, 4);
    std::vector<int64_t> pads(static_cast<size_t>(2 * rank));
    for (int64_t& p : pads) p = pad_d(rng);
    bool valid = true;
    for (int d = 0; d < rank; ++d) {
      valid = valid && oracle_valid(m, shape[d], pads[d], pads[d + rank]);
    }
    const Tensor x = testing::random_int_tensor(dt, shape, static_cast<uint32_t>(iter), 0, 99);
    const Tensor cv = testing::random_int_tensor(dt, Shape{}, 1000u + iter, 100, 120);
    auto r = run_op(OpKind::kPad, mode(m), {in(x), constant(i64s(pads)), in(cv)});
    if (!valid) {
      ASSERT_FALSE(r.ok()) << m << " " << shape.to_string() << " pads " << Shape(pads).to_string();
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
      ++error_runs;
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ++ok_runs;
    const Tensor& y = (*r)[0];
    const size_t e = dtype_size(dt);
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> o = testing::unravel(i, y.shape());
      bool fill = false;
      for (int d = 0; d < rank; ++d) {
        o[d] = oracle_source(m, o[d], shape[d], pads[d], pads[d + rank]);
        fill = fill || o[d] < 0;
      }
      const uint8_t* want =
          fill ? static_cast<const uint8_t*>(cv.raw())
               : static_cast<const uint8_t*>(x.raw()) + testing::ravel(o, shape) * e;
      ASSERT_EQ(std::memcmp(static_cast<const uint8_t*>(y.raw()) + i * e, want, e), 0)
          << m << " " << shape.to_string() << " pads " << Shape(pads).to_string() << " at " << i;
    }
  }
  EXPECT_GT(ok_runs, 100);
  EXPECT_GT(error_runs, 5);
}

TEST(Pad, Errors) {
  const Tensor x = f32s(Shape{2, 3}, std::vector<float>(6));
  EXPECT_FALSE(run_op(OpKind::kPad, {}, {in(x), constant(i64s({1, 1}))}).ok());  // wrong count
  EXPECT_FALSE(run_op(OpKind::kPad, {}, {in(x), constant(i64s({0, -4, 0, 0}))}).ok());
  auto r = run_op(OpKind::kPad, mode("reflect"), {in(x), constant(i64s({0, -3, 0, 1}))});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("reflect"), std::string::npos);
  EXPECT_EQ(
      run_op(OpKind::kPad, mode("wrap"), {in(x), constant(i64s({0, 1, 0, 0}))}).status().code(),
      StatusCode::kUnimplemented);
  EXPECT_FALSE(run_op(OpKind::kPad, mode("mirror"), {in(x), constant(i64s({0, 1, 0, 0}))}).ok());
  // Non-constant pads, a constant of another dtype, a repeated axis.
  EXPECT_EQ(run_op(OpKind::kPad, {}, {in(x), in(i64s({0, 1, 0, 0}))}).status().code(),
            StatusCode::kUnimplemented);
  EXPECT_FALSE(
      run_op(OpKind::kPad, {}, {in(x), constant(i64s({0, 1, 0, 0})), in(i64s(Shape{}, {1}))}).ok());
  EXPECT_FALSE(run_op(OpKind::kPad, {},
                      {in(x), constant(i64s({0, 1, 0, 0})), omitted(), constant(i64s({1, -1}))})
                   .ok());
}

// pad_index_map_bomb.onnx: 2^31 - 1 elements of padding at the end of a [1, 1, 1, 1] input.
// Shape inference used to build every dimension's index map (16 GiB for the last one) just to
// learn the output shape; it now computes the shape alone. pad_index_map_bomb4.onnx pads every
// dimension by 2^31 - 2: the element limit now refuses it before anything is sized from it.
TEST(Pad, ShapeInferenceBuildsNoIndexMaps) {
  const Tensor x = Tensor::create(DType::kF32, Shape{1, 1, 1, 1}).value();
  auto infer = [&](const std::vector<int64_t>& pads) -> Result<Shape> {
    Graph g =
        testing::single_node_graph(OpKind::kPad, Attributes(), {in(x), constant(i64s(pads))}, 1);
    NodeContext nc(g, g.node(0));
    std::vector<TensorInfo> out;
    RETURN_IF_ERROR(infer_node(nc.ctx(), 1, &out));
    return out[0].shape;
  };
  Result<Shape> one = infer({0, 0, 0, 0, 0, 0, 0, kMaxDim - 1});
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(*one, (Shape{1, 1, 1, kMaxDim}));

  Result<Shape> all = infer({0, 0, 0, 0, kMaxDim - 2, kMaxDim - 2, kMaxDim - 2, kMaxDim - 2});
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.status().message().find("test_node"), std::string::npos) << all.status().message();
  EXPECT_NE(all.status().message().find("element count"), std::string::npos)
      << all.status().message();

  Result<Shape> over = infer({0, 0, 0, 0, 0, 0, 0, kMaxDim});
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("larger than the limit"), std::string::npos)
      << over.status().message();
}

// zero_dim_pad0.onnx, within the limits: a [0, 2^31] input holds nothing, but its index maps
// used to be sized by its dimensions (16 GiB for the second one).
TEST(Pad, EmptyOutputNeedsNoIndexMaps) {
  const Tensor x = Tensor::create(DType::kF32, Shape{0, kMaxDim}).value();
  const Tensor pads = i64s({0, 0, 0, 0});
  auto r = run_op(OpKind::kPad, mode("constant"), {in(x), constant(pads)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].shape(), (Shape{0, kMaxDim}));

  Graph g = testing::single_node_graph(OpKind::kPad, mode("edge"), {in(x), constant(pads)}, 1);
  NodeContext nc(g, g.node(0));
  Result<IndexMaps> maps = pad_index_maps(nc.ctx());
  ASSERT_TRUE(maps.ok()) << maps.status().to_string();
  ASSERT_EQ(maps->index.size(), 2u);
  for (const std::vector<int64_t>& m : maps->index) EXPECT_TRUE(m.empty());
}

}  // namespace
}  // namespace tessera
