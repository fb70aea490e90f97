// The cpu device's kernel choices against the reference, on all cores and on one core: which
// kernel a node gets (optimised, chunked over threads, aliasing its input, fused), fed in logical
// order and in the device's NHWC. Plain op-by-op correctness on every device, cpu included, is
// the op case list's (tests/backends/op_cases_test.cc).
#include <cmath>
#include <limits>

#include "backends/cpu/topology.h"
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
  bool is_bf16() const { return dev().find("#bf16") != std::string::npos; }
  bool is_int8() const { return dev().find("#int8") != std::string::npos; }
};

// A 2-D conv runs on an optimised kernel (which one: cpu_conv_variants_test.cc), not the
// reference fallback.
TEST_P(CpuDiffTest, TwoDConvRunsAnOptimisedKernel) {
  DiffResult r = diff_op(dev(), OpKind::kConv, attrs_of({}),
                         {act({1, 3, 13, 13}, 9), weight({4, 3, 3, 3}, 10)});
  EXPECT_EQ(r.kernel.find("reference"), std::string::npos) << r.kernel;
  EXPECT_FALSE(r.kernel.empty());
}

// Outputs large enough to be cut into chunks that run side by side (one XNNPACK operator each):
// same shapes, operands broadcast along the cut axis or others, constants, both layouts.
TEST_P(CpuDiffTest, LargeElementwiseRunsInChunks) {
  const bool threads = (dev() == "cpu" || dev() == "cpu#bf16" || dev() == "cpu#int8") &&
                       cpu::process_affinity().size() > 1;
  for (OpKind k : {OpKind::kAdd, OpKind::kSub, OpKind::kMul, OpKind::kDiv}) {
    SCOPED_TRACE(op_name(k));
    for (bool nhwc : {false, true}) {
      SCOPED_TRACE(nhwc ? "fed NHWC" : "fed NCHW");
      DiffResult r =
          diff_op(dev(), k, attrs_of({}), {act({1, 37, 41, 23}, 1), act({1, 37, 41, 23}, 2)}, 1,
                  1e-6f, 1e-6f, false, nhwc);
      EXPECT_EQ(r.kernel.find("chunks") != std::string::npos, threads) << r.kernel;
      diff_op(dev(), k, attrs_of({}), {act({2, 19, 33, 37}, 3), weight({1, 19, 1, 1}, 4)}, 1, 1e-6f,
              1e-6f, false, nhwc);
      diff_op(dev(), k, attrs_of({}), {act({1, 127, 17, 19}, 5), act({1, 1, 17, 19}, 6)}, 1, 1e-6f,
              1e-6f, false, nhwc);
      diff_op(dev(), k, attrs_of({}), {weight({1, 37, 41, 23}, 7), act({1, 37, 41, 23}, 8)}, 1,
              1e-6f, 1e-6f, false, nhwc);
    }
    diff_op(dev(), k, attrs_of({}), {act({3, 20011}, 9), act({20011}, 10)}, 1, 1e-6f, 1e-6f);
    diff_op(dev(), k, attrs_of({}), {act({1, 40009}, 11), weight({1}, 12)}, 1, 1e-6f, 1e-6f);
  }
  diff_op(dev(), OpKind::kAdd, attrs_of({{"activation", std::string("relu")}}),
          {act({1, 37, 41, 23}, 13), act({1, 37, 41, 23}, 14)}, 1, 1e-6f, 1e-6f);
  diff_op(dev(), OpKind::kMul, attrs_of({{"activation", std::string("sigmoid")}}),
          {act({1, 37, 41, 23}, 15), act({1, 37, 41, 23}, 16)});
}

// Sizes above the kernels' serial thresholds, so that the copies are split over the threads:
// many short rows (an NHWC channel concat), few long rows cut into ranges (NCHW, batch 1), odd
// lengths everywhere.
TEST_P(CpuDiffTest, LargeDataMovementSplitsOverThreads) {
  for (bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "fed NHWC" : "fed NCHW");
    DiffResult r =
        diff_op(dev(), OpKind::kConcat, attrs_of({{"axis", int64_t{1}}}),
                {act({1, 13, 67, 61}, 1), act({1, 127, 67, 61}, 2)}, 1, 0.f, 0.f, false, nhwc);
    EXPECT_NE(r.kernel.find(is_int8()   ? "tessera int8 concat"
                            : is_bf16() ? "tessera bf16 concat"
                                        : "tessera concat"),
              std::string::npos)
        << r.kernel;
    r = diff_op(dev(), OpKind::kSplit, attrs_of({{"axis", int64_t{1}}}), {act({2, 26, 61, 67}, 3)},
                2, 0.f, 0.f, false, nhwc);
    EXPECT_NE(r.kernel.find("tessera split"), std::string::npos) << r.kernel;
    r = diff_op(dev(), OpKind::kGlobalMaxPool, attrs_of({}), {act({1, 131, 13, 11}, 4)}, 1, 0.f,
                0.f, false, nhwc);
    EXPECT_NE(r.kernel.find("global maxpool"), std::string::npos) << r.kernel;
    diff_op(dev(), OpKind::kGlobalMaxPool, attrs_of({}), {act({2, 67, 17, 19}, 5)}, 1, 0.f, 0.f,
            false, nhwc);
  }
  diff_op(dev(), OpKind::kConcat, attrs_of({{"axis", int64_t{-1}}}),
          {act({2, 3, 20011}, 6), act({2, 3, 7}, 7), act({2, 3, 9001}, 8)}, 1, 0.f, 0.f);
  diff_op(dev(), OpKind::kSplit, attrs_of({{"axis", int64_t{-1}}}), {act({3, 40010}, 9)}, 2, 0.f,
          0.f);
}

DiffInput ints(std::initializer_list<int64_t> v) {
  const Ints values(v);
  return {Tensor::from_int64s(Shape{static_cast<int64_t>(values.size())}, values), true};
}
DiffInput floats(std::initializer_list<float> v) {
  const std::vector<float> values(v);
  return {Tensor::from_floats(Shape{static_cast<int64_t>(values.size())}, values), true};
}
DiffInput none() {
  return {Tensor::create(DType::kF32, Shape{0}).value(), true};
}

// Runs diff_op fed in logical order and (through a no-op Pad) in the cpu device's NHWC, and
// checks the device ran its own kernel, not the reference fallback.
void diff_native(const std::string& dev, OpKind kind, const Attributes& a,
                 const std::vector<DiffInput>& in, const char* kernel, int num_outputs = 1) {
  for (bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc ? "fed NHWC" : "fed NCHW");
    DiffResult r = diff_op(dev, kind, a, in, num_outputs, 1e-5f, 1e-5f, false, nhwc);
    EXPECT_NE(r.kernel.find(kernel), std::string::npos) << r.kernel;
    EXPECT_EQ(r.kernel.find("reference"), std::string::npos) << r.kernel;
  }
}

TEST_P(CpuDiffTest, SliceVariants) {
  const Shape s{2, 13, 9, 7};
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // Channel slice (the NHWC case), spatial steps, negative axes, steps and clamped ends.
  diff_native(dev(), OpKind::kSlice, {}, {act(s, 1), ints({3}), ints({11}), ints({1})}, "slice");
  diff_native(dev(), OpKind::kSlice, {},
              {act(s, 2), ints({1, 0}), ints({kMax, -1}), ints({-2, -1}), ints({2, 3})}, "slice");
  diff_native(dev(), OpKind::kSlice, {},
              {act(s, 3), ints({-1, 12}), ints({-kMax, 0}), ints({2, 1}), ints({-2, -3})}, "slice");
  diff_native(dev(), OpKind::kSlice, {}, {act({3, 127, 5}, 4), ints({0, 5}), ints({2, 100})},
              "slice");
  diff_native(dev(), OpKind::kSlice, {}, {act(s, 5), ints({4}), ints({4}), ints({1})}, "slice");
}

TEST_P(CpuDiffTest, PadVariants) {
  const Shape s{1, 13, 7, 9};
  diff_native(dev(), OpKind::kPad, {}, {act(s, 1), ints({0, 0, 1, 2, 0, 0, 3, 1})}, "pad");
  diff_native(dev(), OpKind::kPad, {},
              {act(s, 2), ints({0, 2, 1, 0, 0, 1, -2, 1}), {Tensor::scalar_f32(1.5f), true}},
              "pad");
  for (const char* mode : {"reflect", "edge"}) {
    SCOPED_TRACE(mode);
    diff_native(dev(), OpKind::kPad, attrs_of({{"mode", std::string(mode)}}),
                {act(s, 3), ints({0, 0, 2, 3, 0, 0, 1, 4})}, "pad");
  }
  diff_native(dev(), OpKind::kPad, attrs_of({{"mode", std::string("reflect")}}),
              {act(s, 4), ints({1, 2, 2, 1}), none(), ints({-1, 2})}, "pad");
  diff_native(dev(), OpKind::kPad, {}, {act({2, 127}, 5), ints({1, 3, 0, 2})}, "pad");
}

TEST_P(CpuDiffTest, TransposeVariants) {
  for (const Ints& perm :
       {Ints{0, 2, 3, 1}, Ints{0, 3, 1, 2}, Ints{3, 2, 1, 0}, Ints{1, 0, 2, 3}, Ints{0, 1, 3, 2}}) {
    SCOPED_TRACE(Shape(perm).to_string());
    diff_native(dev(), OpKind::kTranspose, attrs_of({{"perm", perm}}), {act({2, 13, 7, 9}, 1)},
                "transpose");
  }
  // The ShuffleNet channel shuffle: [N, groups, C / groups, H, W] -> [N, C / groups, groups, ...].
  diff_native(dev(), OpKind::kTranspose, attrs_of({{"perm", Ints{0, 2, 1, 3, 4}}}),
              {act({1, 2, 58, 7, 7}, 2)}, "transpose");
  diff_native(dev(), OpKind::kTranspose, {}, {act({13, 127}, 3)}, "transpose");
}

TEST_P(CpuDiffTest, GatherVariants) {
  diff_native(dev(), OpKind::kGather, attrs_of({{"axis", int64_t{1}}}),
              {act({2, 13, 5, 7}, 1), ints({0, 12, -1, 3})}, "gather");
  diff_native(dev(), OpKind::kGather, attrs_of({{"axis", int64_t{-1}}}),
              {act({2, 13, 5, 7}, 2), {Tensor::from_int64s(Shape{}, Ints{-2}), true}}, "gather");
  diff_native(dev(), OpKind::kGather, {}, {act({127, 3}, 3), ints({5, 5, 126})}, "gather");
  // Indices of rank 2 are not per-dimension maps: the reference kernel runs them.
  DiffResult r =
      diff_op(dev(), OpKind::kGather, {},
              {act({13, 3}, 4), {Tensor::from_int64s(Shape{2, 2}, Ints{1, 2, 3, 4}), true}});
  EXPECT_NE(r.kernel.find("reference"), std::string::npos) << r.kernel;
}

TEST_P(CpuDiffTest, ResizeVariants) {
  const Shape s{1, 13, 7, 9};
  for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                            "tf_half_pixel_for_nn"}) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      SCOPED_TRACE(std::string(coord) + " " + nearest);
      diff_native(dev(), OpKind::kResize,
                  attrs_of({{"coordinate_transformation_mode", std::string(coord)},
                            {"nearest_mode", std::string(nearest)}}),
                  {act(s, 1), none(), floats({1.f, 1.f, 2.f, 1.5f})}, "resize nearest");
    }
  }
  for (const char* coord : {"half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"}) {
    SCOPED_TRACE(coord);
    const Attributes a = attrs_of(
        {{"mode", std::string("linear")}, {"coordinate_transformation_mode", std::string(coord)}});
    diff_native(dev(), OpKind::kResize, a, {act(s, 2), none(), floats({1.f, 1.f, 2.f, 2.f})},
                "resize linear");
    diff_native(dev(), OpKind::kResize, a, {act(s, 3), none(), none(), ints({1, 13, 13, 4})},
                "resize linear");
    diff_native(dev(), OpKind::kResize, a, {act(s, 4), none(), none(), ints({1, 13, 7, 17})},
                "resize linear");
  }
}

TEST_P(CpuDiffTest, ReduceMeanVariants) {
  const Shape s{2, 13, 7, 9};
  for (const Ints& axes : {Ints{2, 3}, Ints{-1, -2}, Ints{1}, Ints{0}, Ints{3}, Ints{1, 2, 3}}) {
    for (int64_t keep : {0, 1}) {
      SCOPED_TRACE(Shape(axes).to_string() + " keepdims " + std::to_string(keep));
      diff_native(dev(), OpKind::kReduceMean, attrs_of({{"axes", axes}, {"keepdims", keep}}),
                  {act(s, 1)}, "reducemean");
    }
  }
  diff_native(dev(), OpKind::kReduceMean, {}, {act({3, 127}, 2)}, "reducemean");
}

TEST_P(CpuDiffTest, LrnVariants) {
  for (float beta : {0.75f, 0.6f}) {
    for (int64_t size : {1, 3, 4, 5}) {
      SCOPED_TRACE(std::to_string(size) + " beta " + std::to_string(beta));
      diff_native(dev(), OpKind::kLRN,
                  attrs_of({{"size", size}, {"alpha", 1e-2f}, {"beta", beta}, {"bias", 2.f}}),
                  {act({2, 13, 5, 7}, 1)}, "lrn");
    }
  }
}

TEST_P(CpuDiffTest, ConvTransposeVariants) {
  struct Case {
    Shape x, w;
    Attributes a;
  };
  const std::vector<Case> cases = {
      {{1, 13, 5, 7}, {13, 8, 3, 3}, attrs_of({{"strides", Ints{2, 2}}})},
      {{2, 6, 7, 5},
       {6, 4, 4, 4},
       attrs_of({{"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{2}}})},
      {{1, 5, 6, 6},
       {5, 3, 3, 3},
       attrs_of({{"strides", Ints{2, 2}},
                 {"pads", Ints{1, 1, 1, 1}},
                 {"output_padding", Ints{1, 1}},
                 {"activation", std::string("relu")}})},
      {{1, 4, 5, 5}, {4, 3, 3, 3}, attrs_of({{"dilations", Ints{2, 2}}})},
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.x.to_string() + " * " + c.w.to_string());
    const int64_t group = c.a.has("group") ? c.a.get_int("group").value() : 1;
    DiffResult r =
        diff_op(dev(), OpKind::kConvTranspose, c.a,
                {act(c.x, seed), weight(c.w, seed + 1), weight({c.w[1] * group}, seed + 2)});
    seed += 3;
    EXPECT_NE(r.kernel.find("xnnpack deconv"), std::string::npos) << r.kernel;
  }
}

TEST_P(CpuDiffTest, DataMovementPassesNanAndInf) {
  Tensor x = random_tensor({1, 13, 5, 5}, 1);
  x.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  x.data<float>()[70] = std::numeric_limits<float>::infinity();
  x.data<float>()[111] = -std::numeric_limits<float>::infinity();
  const DiffInput in{x, false};
  diff_native(dev(), OpKind::kSlice, {}, {in, ints({0, 1}), ints({13, 4}), ints({1, 2})}, "slice");
  diff_native(dev(), OpKind::kPad, {}, {in, ints({0, 1, 1, 0, 0, 0, 1, 2})}, "pad");
  diff_native(dev(), OpKind::kTranspose, attrs_of({{"perm", Ints{0, 3, 2, 1}}}), {in}, "transpose");
  diff_native(dev(), OpKind::kResize, {}, {in, none(), floats({1.f, 1.f, 2.f, 2.f})}, "resize");
  diff_native(dev(), OpKind::kResize, attrs_of({{"mode", std::string("linear")}}),
              {in, none(), floats({1.f, 1.f, 2.f, 2.f})}, "resize linear");
  diff_native(dev(), OpKind::kReduceMean, attrs_of({{"axes", Ints{2, 3}}}), {in}, "reducemean");
  diff_native(dev(), OpKind::kLRN, attrs_of({{"size", int64_t{3}}}), {in}, "lrn");
}

// A 1x1 pool with stride 1 and no padding (torchvision's adaptive average pool at the target
// size) is the identity and aliases its input; other 1x1 pools are not.
TEST_P(CpuDiffTest, IdentityPoolsAlias) {
  for (OpKind k : {OpKind::kAveragePool, OpKind::kMaxPool}) {
    SCOPED_TRACE(op_name(k));
    DiffResult r = diff_op(dev(), k, attrs_of({{"kernel_shape", Ints{1, 1}}}),
                           {act({1, 13, 6, 6}, 1)}, 1, 0.f, 0.f, false, true);
    EXPECT_NE(r.kernel.find("1x1 pool (alias"), std::string::npos) << r.kernel;
    r = diff_op(dev(), k, attrs_of({{"kernel_shape", Ints{1, 1}}, {"strides", Ints{2, 2}}}),
                {act({1, 13, 6, 6}, 2)}, 1, 0.f, 0.f, false, true);
    EXPECT_EQ(r.kernel.find("1x1 pool"), std::string::npos) << r.kernel;
  }
}

// Reshape-like layers share their input's storage: the program copies nothing, and a reshape
// of an NHWC tensor reads it after one conversion to logical order.
TEST_P(CpuDiffTest, ReshapesAlias) {
  for (bool nhwc : {false, true}) {
    SCOPED_TRACE(nhwc);
    DiffResult r = diff_op(dev(), OpKind::kReshape, {}, {act({2, 13, 3, 5}, 1), ints({26, -1})}, 1,
                           1e-5f, 1e-5f, false, nhwc);
    EXPECT_NE(r.kernel.find("alias"), std::string::npos) << r.kernel;
    r = diff_op(dev(), OpKind::kFlatten, {}, {act({2, 13, 3, 5}, 2)}, 1, 1e-5f, 1e-5f, false, nhwc);
    EXPECT_NE(r.kernel.find("alias"), std::string::npos) << r.kernel;
    r = diff_op(dev(), OpKind::kUnsqueeze, {}, {act({2, 13, 3, 5}, 3), ints({-1})}, 1, 1e-5f, 1e-5f,
                false, nhwc);
    EXPECT_NE(r.kernel.find("alias"), std::string::npos) << r.kernel;
    r = diff_op(dev(), OpKind::kIdentity, {}, {act({2, 13, 3, 5}, 4)}, 1, 1e-5f, 1e-5f, false,
                nhwc);
    EXPECT_NE(r.kernel.find("alias"), std::string::npos) << r.kernel;
  }
}

// Compiles every node of `g` on `device`, runs it on `feeds`, returns the outputs and (through
// *kernels) the program's description.
std::vector<Tensor> run_graph(const std::string& device, const Graph& g,
                              const std::vector<Tensor>& feeds, std::string* kernels) {
  auto dev = open_device(device);
  EXPECT_TRUE(dev.ok()) << dev.status().to_string();
  if (!dev.ok()) return {};
  std::vector<NodeId> layers;
  for (NodeId i = 0; i < g.num_nodes(); ++i) layers.push_back(i);
  auto prog = (*dev)->compile(g, layers);
  EXPECT_TRUE(prog.ok()) << prog.status().to_string();
  if (!prog.ok()) return {};
  if (kernels != nullptr) *kernels = (*prog)->describe();
  std::vector<Tensor> out(g.outputs().size());
  Status st = (*prog)->run(feeds, out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

// The ShuffleNet channel shuffle (Reshape, Transpose, Reshape) between two NHWC layers runs as
// one fused NHWC kernel, with no layout conversion, and matches the reference exactly.
TEST_P(CpuDiffTest, ChannelShuffleIsFused) {
  // run_graph compiles without calibration; int8 programs are checked in cpu_int8_test.cc.
  if (is_int8()) GTEST_SKIP() << "int8 needs a calibration table";
  for (int64_t groups : {2, 3}) {
    SCOPED_TRACE(groups);
    const int64_t c = 12 * groups + (groups == 3 ? 3 : 0);  // 24 and 39 channels
    Graph g;
    const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, c, 13, 7}});
    g.inputs().push_back(x);
    auto add = [&](OpKind kind, std::vector<ValueId> in, Attributes a = {}) {
      Node n;
      n.name = std::string(op_name(kind)) + std::to_string(g.num_nodes());
      n.kind = kind;
      n.attrs = std::move(a);
      n.inputs = std::move(in);
      n.outputs = {g.add_value(n.name + "_out")};
      const ValueId v = n.outputs[0];
      g.add_node(std::move(n));
      return v;
    };
    auto shape = [&](Ints v) {
      return g.add_constant("shape" + std::to_string(g.num_nodes()),
                            Tensor::from_int64s(Shape{static_cast<int64_t>(v.size())}, v));
    };
    const ValueId nhwc = add(OpKind::kPad, {x, shape({0, 0, 0, 0, 0, 0, 0, 0})});
    const ValueId r1 = add(OpKind::kReshape, {nhwc, shape({1, groups, c / groups, 13, 7})});
    const ValueId t = add(OpKind::kTranspose, {r1}, attrs_of({{"perm", Ints{0, 2, 1, 3, 4}}}));
    const ValueId r2 = add(OpKind::kReshape, {t, shape({1, c, 13, 7})});
    const ValueId y = add(OpKind::kMaxPool, {r2},
                          attrs_of({{"kernel_shape", Ints{3, 3}}, {"pads", Ints{1, 1, 1, 1}}}));
    g.outputs().push_back(y);
    ASSERT_TRUE(g.infer_shapes().ok());
    const std::vector<Tensor> feeds = {random_tensor({1, c, 13, 7}, 5)};
    std::string kernels;
    const std::vector<Tensor> got = run_graph(dev(), g, feeds, &kernels);
    const std::vector<Tensor> want = run_graph("reference", g, feeds, nullptr);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_NE(kernels.find("channel shuffle nhwc"), std::string::npos) << kernels;
    if (is_bf16()) {
      // The pool runs in bf16: one conversion into it, in the same (NHWC) layout, and the
      // maximum of bf16-rounded values (round to nearest: half an ulp, within 2^-8 relative).
      EXPECT_NE(kernels.find("convert NHWC f32->NHWC bf16"), std::string::npos) << kernels;
      EXPECT_EQ(kernels.find("convert NCHW"), std::string::npos) << kernels;
      for (int64_t i = 0; i < got[0].numel(); ++i) {
        const float w = want[0].data<float>()[i];
        ASSERT_NEAR(got[0].data<float>()[i], w, std::ldexp(std::fabs(w), -8)) << i;
      }
      continue;
    }
    EXPECT_EQ(kernels.find("convert"), std::string::npos) << kernels;
    for (int64_t i = 0; i < got[0].numel(); ++i) {
      ASSERT_EQ(got[0].data<float>()[i], want[0].data<float>()[i]) << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Cpu, CpuDiffTest, ::testing::Values("cpu", "cpu:0"), [](const auto& p) {
  return std::string(p.param) == "cpu" ? "all_cores" : "one_core";
});

#ifdef TESSERA_HAVE_ONEDNN
// The same case list at the bf16 precision level (docs/precision.md): oneDNN's bf16 kernels
// where they take a node, f32 kernels with conversions at their edges elsewhere; held to
// kBf16Tolerance.
INSTANTIATE_TEST_SUITE_P(CpuBf16, CpuDiffTest, ::testing::Values("cpu#bf16", "cpu:0#bf16"),
                         [](const auto& p) {
                           return std::string(p.param) == "cpu#bf16" ? "all_cores" : "one_core";
                         });
// The int8 level: oneDNN's int8 kernels where a node has a calibrated range (diff_op calibrates
// each case on its own inputs), f32 elsewhere; held to kInt8Tolerance.
INSTANTIATE_TEST_SUITE_P(CpuInt8, CpuDiffTest, ::testing::Values("cpu#int8", "cpu:0#int8"),
                         [](const auto& p) {
                           return std::string(p.param) == "cpu#int8" ? "all_cores" : "one_core";
                         });
#endif

}  // namespace
}  // namespace tessera
