// Data-movement ops: Transpose, Slice, Concat, Split, Gather.
#include <gtest/gtest.h>

#include <limits>

#include "ops/data_movement.h"
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
using testing::typed_tensor;

constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

const DType kAllDTypes[] = {DType::kF32, DType::kF16, DType::kI8,  DType::kU8,
                            DType::kI32, DType::kI64, DType::kBool};

// out[i] = in[source(i)] element by element, comparing raw bytes (works for every dtype).
template <typename SourceFn>
void expect_gathered(const Tensor& out, const Tensor& in, SourceFn source) {
  const size_t e = dtype_size(in.dtype());
  ASSERT_EQ(out.dtype(), in.dtype());
  const uint8_t* s = static_cast<const uint8_t*>(in.raw());
  const uint8_t* o = static_cast<const uint8_t*>(out.raw());
  for (int64_t i = 0; i < out.numel(); ++i) {
    const int64_t src = source(i);
    ASSERT_EQ(std::memcmp(o + i * e, s + src * e, e), 0)
        << "output " << i << " should be input " << src;
  }
}

// ---- Transpose -------------------------------------------------------------------------------

TEST(Transpose, HandComputed) {
  const Tensor x = f32s(Shape{2, 3}, {1, 2, 3, 4, 5, 6});
  auto y = run_op(OpKind::kTranspose, {}, {in(x)}).value();  // default: reverse
  EXPECT_TRUE(same_bytes(y[0], f32s(Shape{3, 2}, {1, 4, 2, 5, 3, 6})));
}

TEST(Transpose, RandomPermutationsAllDTypes) {
  std::mt19937 rng(3);
  int iter = 0;
  for (DType dt : kAllDTypes) {
    for (int rep = 0; rep < 12; ++rep, ++iter) {
      std::uniform_int_distribution<int> rank_d(1, 5);
      const int rank = rank_d(rng);
      Shape shape = testing::random_shape(rng, rank, {1, 2, 3, 5, 7});
      if (rep == 0 && rank >= 2) shape[rank - 1] = 127;
      if (rep == 1 && rank >= 2) shape[0] = 13;
      std::vector<int64_t> perm(static_cast<size_t>(rank));
      for (int i = 0; i < rank; ++i) perm[static_cast<size_t>(i)] = i;
      std::shuffle(perm.begin(), perm.end(), rng);
      const Tensor x = testing::random_int_tensor(dt, shape, static_cast<uint32_t>(iter), 0, 120);
      Attributes a;
      a.set("perm", perm);
      auto r = run_op(OpKind::kTranspose, a, {in(x)});
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      const Tensor& y = (*r)[0];
      for (int d = 0; d < rank; ++d) ASSERT_EQ(y.dim(d), shape[static_cast<int>(perm[d])]);
      expect_gathered(y, x, [&](int64_t i) {
        const std::vector<int64_t> o = testing::unravel(i, y.shape());
        std::vector<int64_t> src(static_cast<size_t>(rank));
        for (int d = 0; d < rank; ++d) src[static_cast<size_t>(perm[d])] = o[d];
        return testing::ravel(src, shape);
      });
    }
  }
}

TEST(Transpose, LargeMatrixAndChannelShuffle) {
  // A 2-D transpose with odd sides, and NCHW -> NHWC.
  const Tensor m = testing::random_tensor(Shape{127, 131}, 1);
  auto t = run_op(OpKind::kTranspose, {}, {in(m)}).value();
  expect_gathered(t[0], m, [](int64_t i) { return (i % 127) * 131 + i / 127; });
  const Tensor x = testing::random_tensor(Shape{1, 13, 9, 11}, 2);
  Attributes a;
  a.set("perm", std::vector<int64_t>{0, 2, 3, 1});
  auto y = run_op(OpKind::kTranspose, a, {in(x)}).value();
  expect_gathered(y[0], x, [](int64_t i) {
    const int64_t c = i % 13, w = (i / 13) % 11, h = i / (13 * 11);
    return (c * 9 + h) * 11 + w;
  });
}

TEST(Transpose, TiledPlanesAcrossTileEdges) {
  // Shapes whose transposed plane spans several 32x32 tiles, with a dimension walked outside it.
  struct Case {
    Shape shape;
    std::vector<int64_t> perm;
  };
  const Case cases[] = {{Shape{5, 37, 41}, {0, 2, 1}},
                        {Shape{37, 3, 41}, {2, 1, 0}},
                        {Shape{2, 33, 3, 65}, {0, 3, 2, 1}},
                        {Shape{65, 1, 33}, {2, 1, 0}}};
  int seed = 0;
  for (const Case& c : cases) {
    for (DType dt : {DType::kU8, DType::kF16, DType::kF32, DType::kI64}) {
      const Tensor x =
          testing::random_int_tensor(dt, c.shape, static_cast<uint32_t>(++seed), 0, 100);
      Attributes a;
      a.set("perm", c.perm);
      auto r = run_op(OpKind::kTranspose, a, {in(x)});
      ASSERT_TRUE(r.ok());
      const Tensor& y = (*r)[0];
      expect_gathered(y, x, [&](int64_t i) {
        const std::vector<int64_t> o = testing::unravel(i, y.shape());
        std::vector<int64_t> src(o.size());
        for (size_t d = 0; d < o.size(); ++d) src[static_cast<size_t>(c.perm[d])] = o[d];
        return testing::ravel(src, c.shape);
      });
    }
  }
}

TEST(Transpose, BadPerm) {
  const Tensor x = f32s(Shape{2, 3}, std::vector<float>(6));
  for (const std::vector<int64_t>& perm :
       std::vector<std::vector<int64_t>>{{0}, {0, 0}, {0, 2}, {-1, 0}, {0, 1, 2}}) {
    Attributes a;
    a.set("perm", perm);
    auto r = run_op(OpKind::kTranspose, a, {in(x)});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("perm"), std::string::npos);
  }
}

// ---- Slice -----------------------------------------------------------------------------------

Result<std::vector<Tensor>> slice(const Tensor& x, std::vector<int64_t> starts,
                                  std::vector<int64_t> ends, std::vector<int64_t> axes = {},
                                  std::vector<int64_t> steps = {}) {
  std::vector<testing::OpInput> ins = {in(x), constant(i64s(starts)), constant(i64s(ends))};
  ins.push_back(axes.empty() ? omitted() : constant(i64s(axes)));
  if (!steps.empty()) ins.push_back(constant(i64s(steps)));
  return run_op(OpKind::kSlice, {}, ins);
}

TEST(Slice, OnnxDocExamples) {
  const Tensor x = f32s(Shape{2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  // starts [1,0], ends [2,3], steps [1,2] -> [[5, 7]]
  auto y = slice(x, {1, 0}, {2, 3}, {0, 1}, {1, 2}).value();
  EXPECT_TRUE(same_bytes(y[0], f32s(Shape{1, 2}, {5, 7})));
  // starts [0,1], ends [-1,1000] -> [[2,3,4]]
  y = slice(x, {0, 1}, {-1, 1000}).value();
  EXPECT_TRUE(same_bytes(y[0], f32s(Shape{1, 3}, {2, 3, 4})));
}

TEST(Slice, NegativeStepsAndExtremeEnds) {
  const Tensor x = i64s({0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  // Reverse everything: start -1, end INT64_MIN, step -1.
  auto y = slice(x, {-1}, {kI64Min}, {0}, {-1}).value();
  EXPECT_TRUE(same_bytes(y[0], i64s({9, 8, 7, 6, 5, 4, 3, 2, 1, 0})));
  // start INT64_MAX with a negative step clamps to the last element.
  y = slice(x, {kI64Max}, {2}, {0}, {-3}).value();
  EXPECT_TRUE(same_bytes(y[0], i64s({9, 6, 3})));
  // Forward to INT64_MAX.
  y = slice(x, {7}, {kI64Max}, {-1}, {1}).value();
  EXPECT_TRUE(same_bytes(y[0], i64s({7, 8, 9})));
  // Start below the range with a positive step clamps to 0; an empty result.
  y = slice(x, {kI64Min}, {2}).value();
  EXPECT_TRUE(same_bytes(y[0], i64s({0, 1})));
  y = slice(x, {5}, {2}).value();
  EXPECT_EQ(y[0].shape(), (Shape{0}));
  // Huge steps select one element.
  y = slice(x, {4}, {kI64Max}, {0}, {kI64Max}).value();
  EXPECT_TRUE(same_bytes(y[0], i64s({4})));
  y = slice(x, {4}, {kI64Min}, {0}, {kI64Min}).value();
  EXPECT_TRUE(same_bytes(y[0], i64s({4})));
  // End -1 with a negative step means "stop before the last element", not "to the start".
  y = slice(x, {9}, {-1}, {0}, {-1}).value();
  EXPECT_EQ(y[0].shape(), (Shape{0}));
}

TEST(Slice, I32Indices) {
  const Tensor x = f32s(Shape{5}, {0, 1, 2, 3, 4});
  const Tensor s = typed_tensor<int32_t>(DType::kI32, Shape{1}, {1});
  const Tensor e =
      typed_tensor<int32_t>(DType::kI32, Shape{1}, {std::numeric_limits<int32_t>::max()});
  auto y = run_op(OpKind::kSlice, {}, {in(x), constant(s), constant(e)}).value();
  EXPECT_TRUE(same_bytes(y[0], f32s(Shape{4}, {1, 2, 3, 4})));
}

// Python's slice.indices(): the indices data[start:end:step] visits, by enumeration.
std::vector<int64_t> oracle_indices(int64_t start, int64_t end, int64_t step, int64_t len) {
  auto fix = [&](int64_t v) {
    const int64_t lower = step > 0 ? 0 : -1, upper = step > 0 ? len : len - 1;
    if (v < 0) v += len;
    return v < lower ? lower : (v > upper ? upper : v);
  };
  std::vector<int64_t> out;
  for (int64_t i = fix(start); step > 0 ? i < fix(end) : i > fix(end); i += step) out.push_back(i);
  return out;
}

TEST(Slice, RandomAgainstOracle) {
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> coin(0, 1);
  for (int iter = 0; iter < 150; ++iter) {
    std::uniform_int_distribution<int> rank_d(1, 4);
    const int rank = rank_d(rng);
    Shape shape = testing::random_shape(rng, rank, {1, 2, 4, 5, 7, 13});
    if (iter % 15 == 0) shape[rank - 1] = 127;
    const DType dt = kAllDTypes[iter % 7];
    const Tensor x = testing::random_int_tensor(dt, shape, static_cast<uint32_t>(iter), 0, 100);
    std::vector<int64_t> starts, ends, axes, steps;
    std::vector<std::vector<int64_t>> picks(static_cast<size_t>(rank));
    for (int d = 0; d < rank; ++d) {
      const int64_t len = shape[d];
      std::vector<int64_t>& p = picks[static_cast<size_t>(d)];
      for (int64_t i = 0; i < len; ++i) p.push_back(i);
      if (coin(rng)) continue;  // axis not sliced
      std::uniform_int_distribution<int64_t> pos(-len - 3, len + 3);
      std::uniform_int_distribution<int64_t> st(-4, 4);
      int64_t step = 0;
      while (step == 0) step = st(rng);
      const int64_t s = pos(rng), e = pos(rng);
      starts.push_back(s);
      ends.push_back(e);
      steps.push_back(step);
      axes.push_back(coin(rng) ? d : d - rank);  // negative axes too
      p = oracle_indices(s, e, step, len);
    }
    if (starts.empty()) continue;
    auto r = slice(x, starts, ends, axes, steps);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0];
    for (int d = 0; d < rank; ++d) {
      ASSERT_EQ(y.dim(d), static_cast<int64_t>(picks[static_cast<size_t>(d)].size()))
          << "dim " << d << " of " << shape.to_string();
    }
    expect_gathered(y, x, [&](int64_t i) {
      std::vector<int64_t> o = testing::unravel(i, y.shape());
      for (int d = 0; d < rank; ++d)
        o[d] = picks[static_cast<size_t>(d)][static_cast<size_t>(o[d])];
      return testing::ravel(o, shape);
    });
  }
}

TEST(Slice, Errors) {
  const Tensor x = f32s(Shape{2, 3}, std::vector<float>(6));
  EXPECT_FALSE(slice(x, {0}, {1}, {0}, {0}).ok());       // zero step
  EXPECT_FALSE(slice(x, {0, 0}, {1}, {}).ok());          // length mismatch
  EXPECT_FALSE(slice(x, {0}, {1}, {2}).ok());            // axis out of range
  EXPECT_FALSE(slice(x, {0, 0}, {1, 1}, {1, -1}).ok());  // repeated axis
  EXPECT_FALSE(slice(x, {0, 0, 0}, {1, 1, 1}).ok());     // more starts than rank
  // Non-constant starts: shapes must be static.
  auto r = run_op(OpKind::kSlice, {}, {in(x), in(i64s({0})), constant(i64s({1}))});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("starts"), std::string::npos);
}

// ---- Concat / Split --------------------------------------------------------------------------

TEST(Concat, HandComputedAndNegativeAxis) {
  const Tensor a = f32s(Shape{2, 2}, {1, 2, 3, 4});
  const Tensor b = f32s(Shape{2, 1}, {5, 6});
  Attributes attrs;
  attrs.set("axis", int64_t{-1});
  auto y = run_op(OpKind::kConcat, attrs, {in(a), in(b)}).value();
  EXPECT_TRUE(same_bytes(y[0], f32s(Shape{2, 3}, {1, 2, 5, 3, 4, 6})));
  attrs.set("axis", int64_t{0});
  auto z = run_op(OpKind::kConcat, attrs, {in(a), in(f32s(Shape{1, 2}, {7, 8}))}).value();
  EXPECT_TRUE(same_bytes(z[0], f32s(Shape{3, 2}, {1, 2, 3, 4, 7, 8})));
}

TEST(Concat, RandomAgainstOracleAndSplitInverts) {
  std::mt19937 rng(29);
  for (int iter = 0; iter < 40; ++iter) {
    std::uniform_int_distribution<int> rank_d(1, 4);
    const int rank = rank_d(rng);
    const Shape base = testing::random_shape(rng, rank, {1, 2, 3, 13});
    std::uniform_int_distribution<int> axis_d(0, rank - 1), count_d(1, 4), len_d(0, 5);
    const int axis = axis_d(rng);
    const DType dt = kAllDTypes[iter % 7];
    std::vector<Tensor> parts;
    std::vector<testing::OpInput> ins;
    std::vector<int64_t> lens;
    const int count = count_d(rng);
    for (int k = 0; k < count; ++k) {
      Shape s = base;
      s[axis] = len_d(rng);
      lens.push_back(s[axis]);
      parts.push_back(
          testing::random_int_tensor(dt, s, static_cast<uint32_t>(iter * 10 + k), 0, 99));
      ins.push_back(in(parts.back()));
    }
    Attributes a;
    a.set("axis", int64_t{axis - (iter % 2) * rank});
    auto r = run_op(OpKind::kConcat, a, ins);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0];
    // Oracle: find the part each output element comes from.
    const size_t e = dtype_size(dt);
    for (int64_t i = 0; i < y.numel(); ++i) {
      std::vector<int64_t> o = testing::unravel(i, y.shape());
      size_t k = 0;
      while (o[axis] >= lens[k]) o[axis] -= lens[k++];
      const int64_t src = testing::ravel(o, parts[k].shape());
      ASSERT_EQ(std::memcmp(static_cast<const uint8_t*>(y.raw()) + i * e,
                            static_cast<const uint8_t*>(parts[k].raw()) + src * e, e),
                0);
    }
    // Split with the same sizes gives the parts back.
    Attributes sa;
    sa.set("axis", int64_t{axis});
    auto s = run_op(OpKind::kSplit, sa, {in(y), constant(i64s(lens))}, count);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    for (int k = 0; k < count; ++k) EXPECT_TRUE(same_bytes((*s)[k], parts[k]));
  }
}

TEST(Concat, Errors) {
  const Tensor a = f32s(Shape{2, 2}, std::vector<float>(4));
  Attributes attrs;
  attrs.set("axis", int64_t{0});
  EXPECT_FALSE(
      run_op(OpKind::kConcat, attrs, {in(a), in(f32s(Shape{2, 3}, std::vector<float>(6)))}).ok());
  EXPECT_FALSE(run_op(OpKind::kConcat, attrs, {in(a), in(i64s(Shape{2, 2}, {1, 2, 3, 4}))}).ok());
  EXPECT_FALSE(
      run_op(OpKind::kConcat, attrs, {in(a), in(f32s(Shape{4}, std::vector<float>(4)))}).ok());
  EXPECT_FALSE(run_op(OpKind::kConcat, {}, {in(a)}).ok());  // axis is required
  attrs.set("axis", int64_t{2});
  EXPECT_FALSE(run_op(OpKind::kConcat, attrs, {in(a)}).ok());
}

TEST(Split, EqualAttributeAndErrors) {
  const Tensor x = f32s(Shape{2, 6}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Attributes a;
  a.set("axis", int64_t{1});
  auto eq = run_op(OpKind::kSplit, a, {in(x)}, 3).value();
  EXPECT_TRUE(same_bytes(eq[0], f32s(Shape{2, 2}, {0, 1, 6, 7})));
  EXPECT_TRUE(same_bytes(eq[2], f32s(Shape{2, 2}, {4, 5, 10, 11})));
  // Opset-11 attribute form.
  a.set("split", std::vector<int64_t>{1, 5});
  auto at = run_op(OpKind::kSplit, a, {in(x)}, 2).value();
  EXPECT_TRUE(same_bytes(at[0], f32s(Shape{2, 1}, {0, 6})));
  EXPECT_EQ(at[1].shape(), (Shape{2, 5}));
  // Errors: uneven equal split, bad sums, count mismatch, both forms, non-constant split.
  Attributes b;
  b.set("axis", int64_t{-1});
  EXPECT_FALSE(run_op(OpKind::kSplit, b, {in(x)}, 4).ok());
  EXPECT_FALSE(run_op(OpKind::kSplit, b, {in(x), constant(i64s({2, 3}))}, 2).ok());
  EXPECT_FALSE(run_op(OpKind::kSplit, b, {in(x), constant(i64s({2, 2, 2}))}, 2).ok());
  EXPECT_FALSE(run_op(OpKind::kSplit, b, {in(x), constant(i64s({-1, 7}))}, 2).ok());
  EXPECT_FALSE(run_op(OpKind::kSplit, a, {in(x), constant(i64s({1, 5}))}, 2).ok());
  auto nc = run_op(OpKind::kSplit, b, {in(x), in(i64s({3, 3}))}, 2);
  EXPECT_EQ(nc.status().code(), StatusCode::kUnimplemented);
}

// ---- Gather ----------------------------------------------------------------------------------

TEST(Gather, OnnxDocExamples) {
  // axis 0: data [3,2], indices [2,2] -> [2,2,2]
  const Tensor data = f32s(Shape{3, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 4.5f, 5.7f});
  auto y = run_op(OpKind::kGather, {}, {in(data), in(i64s(Shape{2, 2}, {0, 1, 1, 2}))}).value();
  EXPECT_TRUE(
      same_bytes(y[0], f32s(Shape{2, 2, 2}, {1.0f, 1.2f, 2.3f, 3.4f, 2.3f, 3.4f, 4.5f, 5.7f})));
  // axis 1 with a negative index: data [3,3], indices [1,2] -> [3,1,2]
  const Tensor d2 = f32s(Shape{3, 3}, {1.0f, 1.2f, 1.9f, 2.3f, 3.4f, 3.9f, 4.5f, 5.7f, 5.9f});
  Attributes a;
  a.set("axis", int64_t{1});
  auto z = run_op(OpKind::kGather, a, {in(d2), in(i64s(Shape{1, 2}, {0, -1}))}).value();
  EXPECT_TRUE(same_bytes(z[0], f32s(Shape{3, 1, 2}, {1.0f, 1.9f, 2.3f, 3.9f, 4.5f, 5.9f})));
}

TEST(Gather, ShapeSubgraphScalarIndex) {
  // Shape -> Gather(axis 0, scalar index) -> a scalar i64, as in exported Flatten patterns.
  const Tensor shape = i64s({1, 512, 7, 7});
  const Tensor idx = typed_tensor<int32_t>(DType::kI32, Shape{}, {1});
  auto y = run_op(OpKind::kGather, {}, {in(shape), constant(idx)}).value();
  EXPECT_EQ(y[0].shape(), Shape{});
  EXPECT_EQ(y[0].data<int64_t>()[0], 512);
}

TEST(Gather, RandomAgainstOracle) {
  std::mt19937 rng(41);
  for (int iter = 0; iter < 40; ++iter) {
    std::uniform_int_distribution<int> rank_d(1, 4), irank_d(0, 2);
    const int rank = rank_d(rng);
    const Shape shape = testing::random_shape(rng, rank, {1, 2, 3, 5, 13});
    std::uniform_int_distribution<int> axis_d(0, rank - 1);
    const int axis = axis_d(rng);
    const Shape ishape = testing::random_shape(rng, irank_d(rng), {1, 2, 4});
    const int64_t dim = shape[axis];
    const DType dt = kAllDTypes[iter % 7];
    const Tensor x = testing::random_int_tensor(dt, shape, static_cast<uint32_t>(iter), 0, 99);
    const Tensor idx = testing::random_int_tensor(iter % 2 ? DType::kI64 : DType::kI32, ishape,
                                                  static_cast<uint32_t>(iter + 500), -dim, dim - 1);
    Attributes a;
    a.set("axis", int64_t{axis - (iter % 3 == 0 ? rank : 0)});
    auto r = run_op(OpKind::kGather, a, {in(x), in(idx)});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = (*r)[0];
    ASSERT_EQ(y.rank(), rank - 1 + ishape.rank());
    expect_gathered(y, x, [&](int64_t i) {
      const std::vector<int64_t> o = testing::unravel(i, y.shape());
      std::vector<int64_t> src(o.begin(), o.begin() + axis);
      const std::vector<int64_t> io(o.begin() + axis, o.begin() + axis + ishape.rank());
      int64_t v = idx.int_at(testing::ravel(io, ishape));
      src.push_back(v < 0 ? v + dim : v);
      src.insert(src.end(), o.begin() + axis + ishape.rank(), o.end());
      return testing::ravel(src, shape);
    });
  }
}

TEST(Gather, IndexOutOfRange) {
  const Tensor data = f32s(Shape{3, 2}, std::vector<float>(6));
  // At run time for a non-constant index...
  auto r = run_op(OpKind::kGather, {}, {in(data), in(i64s({0, 3}))});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("out of range"), std::string::npos);
  EXPECT_FALSE(run_op(OpKind::kGather, {}, {in(data), in(i64s({-4}))}).ok());
  // ...and already at shape inference for a constant one.
  EXPECT_FALSE(run_op(OpKind::kGather, {}, {in(data), constant(i64s({7}))}).ok());
  // Float indices and bad axes are rejected.
  EXPECT_FALSE(run_op(OpKind::kGather, {}, {in(data), in(f32s(Shape{1}, {0}))}).ok());
  Attributes a;
  a.set("axis", int64_t{2});
  EXPECT_FALSE(run_op(OpKind::kGather, a, {in(data), in(i64s({0}))}).ok());
}

// zero_dim_slice.onnx, within the limits: tensors that hold nothing used to get index maps sized
// by their other dimensions (16 GiB for a 2^31 one). Now their maps are empty and the kernels
// copy nothing.
TEST(IndexMaps, EmptyOutputsNeedNoMaps) {
  const Tensor x = Tensor::create(DType::kF32, Shape{0, kMaxDim}).value();
  auto expect_empty = [](const Result<IndexMaps>& maps) {
    ASSERT_TRUE(maps.ok()) << maps.status().to_string();
    for (const std::vector<int64_t>& m : maps->index) EXPECT_TRUE(m.empty());
  };

  const std::vector<testing::OpInput> slice_in = {in(x), constant(i64s({0})),
                                                  constant(i64s({kMaxDim})), constant(i64s({1})),
                                                  constant(i64s({2}))};
  auto sliced = run_op(OpKind::kSlice, {}, slice_in);
  ASSERT_TRUE(sliced.ok()) << sliced.status().to_string();
  EXPECT_EQ(sliced.value()[0].shape(), (Shape{0, int64_t{1} << 30}));
  Graph sg = testing::single_node_graph(OpKind::kSlice, {}, slice_in, 1);
  expect_empty(slice_index_maps(NodeContext(sg, sg.node(0)).ctx()));

  auto transposed = run_op(OpKind::kTranspose, {}, {in(x)});
  ASSERT_TRUE(transposed.ok()) << transposed.status().to_string();
  EXPECT_EQ(transposed.value()[0].shape(), (Shape{kMaxDim, 0}));
  Graph tg = testing::single_node_graph(OpKind::kTranspose, {}, {in(x)}, 1);
  expect_empty(transpose_index_maps(NodeContext(tg, tg.node(0)).ctx()));

  // Gather along the first axis of [2, 2^31, 0]: the output [1, 2^31, 0] is empty too.
  const Tensor data = Tensor::create(DType::kF32, Shape{2, kMaxDim, 0}).value();
  const std::vector<testing::OpInput> gather_in = {in(data), constant(i64s({1}))};
  auto gathered = run_op(OpKind::kGather, {}, gather_in);
  ASSERT_TRUE(gathered.ok()) << gathered.status().to_string();
  EXPECT_EQ(gathered.value()[0].shape(), (Shape{1, kMaxDim, 0}));
  Graph gg = testing::single_node_graph(OpKind::kGather, {}, gather_in, 1);
  expect_empty(gather_index_maps(NodeContext(gg, gg.node(0)).ctx()));
}

}  // namespace
}  // namespace tessera
