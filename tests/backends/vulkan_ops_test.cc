// Differential tests of the Vulkan backend: single ops on vulkan:0 against the reference kernels,
// on odd shapes (13, 127: tails of every tile and workgroup) with attribute variants and fused
// activations, plus the failure paths (missing device, missing loader, oversized tensors, out of
// memory, device loss).
//
// Without a Vulkan device the tests skip, unless TESSERA_REQUIRE_VULKAN is set (CI installs
// lavapipe and sets it): then a missing device fails.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "backends/registry.h"
#include "tests/ops/op_test_util.h"

#ifdef TESSERA_HAVE_VULKAN
#include "backends/vulkan/pipelines/kernel.h"
#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_program.h"
#endif

namespace tessera {
namespace {

using testing::constant;
using testing::in;
using testing::OpInput;
using testing::random_tensor;

bool vulkan_required() {
  return std::getenv("TESSERA_REQUIRE_VULKAN") != nullptr;
}

#ifdef TESSERA_HAVE_VULKAN
constexpr bool kBuiltWithVulkan = true;
#else
constexpr bool kBuiltWithVulkan = false;
#endif

// Opens vulkan:0, or skips/fails the test as the environment asks.
#define OPEN_VULKAN_OR_SKIP(dev)                                               \
  if (!kBuiltWithVulkan) GTEST_SKIP() << "built without the Vulkan backend";   \
  auto dev##_result = open_device("vulkan:0");                                 \
  if (!dev##_result.ok()) {                                                    \
    if (vulkan_required()) FAIL() << dev##_result.status().to_string();        \
    GTEST_SKIP() << "no Vulkan device: " << dev##_result.status().to_string(); \
  }                                                                            \
  std::unique_ptr<Device> dev = std::move(*dev##_result)

// A one-node graph (testing::single_node_graph) whose outputs are graph outputs, shape-inferred.
Graph one_node_graph(OpKind kind, const Attributes& attrs, const std::vector<OpInput>& inputs,
                     int num_outputs) {
  Graph g = testing::single_node_graph(kind, attrs, inputs, num_outputs);
  for (ValueId v : g.node(0).outputs) g.outputs().push_back(v);
  EXPECT_TRUE(g.infer_shapes().ok());
  return g;
}

// Compiles the one-node graph of `kind` on `dev` and runs it on the non-constant inputs.
Result<std::vector<Tensor>> run_on(Device& dev, OpKind kind, const Attributes& attrs,
                                   const std::vector<OpInput>& inputs, int num_outputs) {
  Graph g = one_node_graph(kind, attrs, inputs, num_outputs);
  Capability cap = dev.capabilities(g, g.node(0));
  if (!cap.supported) return unimplemented("unsupported: " + cap.reason);
  NodeId layers[] = {0};
  ASSIGN_OR_RETURN(std::unique_ptr<Program> program, dev.compile(g, layers));
  std::vector<Tensor> ins;
  for (ValueId v : program->input_values()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (g.node(0).inputs[i] == v) {
        ins.push_back(inputs[i].tensor);
        break;
      }
    }
  }
  std::vector<Tensor> outs(program->output_values().size());
  RETURN_IF_ERROR(program->run(ins, outs));
  return outs;
}

// Runs the op on `dev` and on the reference kernels; expects every output within
// tol * max(1, max|ref|) and finite where the reference is.
void check_op(Device& dev, OpKind kind, const Attributes& attrs, const std::vector<OpInput>& inputs,
              float tol = 1e-4f, int num_outputs = 1) {
  SCOPED_TRACE(op_name(kind));
  auto expected = testing::run_op(kind, attrs, inputs, num_outputs);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  auto got_outs = run_on(dev, kind, attrs, inputs, num_outputs);
  ASSERT_TRUE(got_outs.ok()) << got_outs.status().to_string();
  const std::vector<Tensor>& outs = *got_outs;
  ASSERT_EQ(outs.size(), expected->size());
  for (size_t o = 0; o < outs.size(); ++o) {
    const Tensor& got = outs[o];
    const Tensor& want = (*expected)[o];
    ASSERT_EQ(got.shape(), want.shape());
    ASSERT_EQ(got.dtype(), want.dtype());
    if (want.dtype() != DType::kF32) {  // integer, bool and f16 results match bit for bit
      for (int64_t i = 0; i < want.numel(); ++i) {
        ASSERT_EQ(std::memcmp(static_cast<const char*>(got.raw()) + i * dtype_size(got.dtype()),
                              static_cast<const char*>(want.raw()) + i * dtype_size(want.dtype()),
                              dtype_size(want.dtype())),
                  0)
            << "output " << o << " (" << dtype_name(want.dtype()) << ") at " << i << ": "
            << got.float_at(i) << " vs " << want.float_at(i);
      }
      continue;
    }
    double max_ref = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (std::isfinite(want.float_at(i)))
        max_ref = std::max(max_ref, static_cast<double>(std::fabs(want.float_at(i))));
    }
    const double bound = tol * std::max(1.0, max_ref);
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float x = got.float_at(i), y = want.float_at(i);
      if (std::isnan(y)) {
        ASSERT_TRUE(std::isnan(x)) << "output " << o << " at " << i;
        continue;
      }
      ASSERT_TRUE(std::isfinite(x) || x == y) << "output " << o << " at " << i << ": " << x;
      if (x == y) continue;  // equal infinities
      ASSERT_NEAR(x, y, bound) << "output " << o << " at flat index " << i;
    }
  }
}

Attributes attrs_of(std::initializer_list<std::pair<const char*, AttributeValue>> kv) {
  Attributes a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

using Ints = std::vector<int64_t>;

Tensor ints(const Shape& s, std::vector<int64_t> v) {
  return Tensor::from_int64s(s, v);
}

TEST(VulkanOps, Conv) {
  OPEN_VULKAN_OR_SKIP(dev);
  // 3x3 same padding with bias and fused relu: the tiled implicit GEMM.
  check_op(*dev, OpKind::kConv,
           attrs_of({{"pads", Ints{1, 1, 1, 1}}, {"activation", std::string("relu")}}),
           {in(random_tensor({1, 13, 17, 19}, 1)), constant(random_tensor({29, 13, 3, 3}, 2)),
            constant(random_tensor({29}, 3))});
  // Stride 2, dilation 2, asymmetric pads, no bias, batch 2.
  check_op(
      *dev, OpKind::kConv,
      attrs_of({{"strides", Ints{2, 2}}, {"dilations", Ints{2, 1}}, {"pads", Ints{0, 1, 2, 2}}}),
      {in(random_tensor({2, 13, 23, 21}, 4)), constant(random_tensor({67, 13, 3, 5}, 5))});
  // Pointwise 1x1 with 127 output channels.
  check_op(*dev, OpKind::kConv, {},
           {in(random_tensor({2, 64, 13, 13}, 6)), constant(random_tensor({127, 64, 1, 1}, 7)),
            constant(random_tensor({127}, 8))});
  // Depthwise 3x3 stride 2 with clip (relu6): the direct kernel.
  check_op(*dev, OpKind::kConv,
           attrs_of({{"group", int64_t{32}},
                     {"strides", Ints{2, 2}},
                     {"pads", Ints{1, 1, 1, 1}},
                     {"activation", std::string("clip")},
                     {"activation_alpha", 0.f},
                     {"activation_beta", 0.5f}}),
           {in(random_tensor({1, 32, 15, 15}, 9)), constant(random_tensor({32, 1, 3, 3}, 10)),
            constant(random_tensor({32}, 11))});
  // Grouped convolution (4 groups of 16 -> 8 per group... 32 outputs).
  check_op(*dev, OpKind::kConv, attrs_of({{"group", int64_t{4}}, {"pads", Ints{1, 1, 1, 1}}}),
           {in(random_tensor({1, 64, 9, 11}, 12)), constant(random_tensor({128, 16, 3, 3}, 13))});
  // 1-D convolution, SAME_UPPER.
  check_op(*dev, OpKind::kConv, attrs_of({{"auto_pad", std::string("SAME_UPPER")}}),
           {in(random_tensor({1, 13, 127}, 14)), constant(random_tensor({17, 13, 4}, 15))});
  // Weights as a run-time input.
  check_op(*dev, OpKind::kConv, {},
           {in(random_tensor({1, 8, 7, 7}, 16)), in(random_tensor({9, 8, 3, 3}, 17))});
}

TEST(VulkanOps, GemmAndMatMul) {
  OPEN_VULKAN_OR_SKIP(dev);
  // Fully-connected at batch 1 (transB = 1): the gemv kernel.
  check_op(*dev, OpKind::kGemm, attrs_of({{"transB", int64_t{1}}}),
           {in(random_tensor({1, 1027}, 20)), constant(random_tensor({13, 1027}, 21)),
            constant(random_tensor({13}, 22))});
  // Batch 9 with transB: the tiled kernel; alpha, beta and a fused sigmoid.
  check_op(*dev, OpKind::kGemm,
           attrs_of({{"transB", int64_t{1}},
                     {"alpha", 0.5f},
                     {"beta", 2.f},
                     {"activation", std::string("sigmoid")}}),
           {in(random_tensor({9, 127}, 23)), constant(random_tensor({65, 127}, 24)),
            constant(random_tensor({1, 65}, 25))});
  // transA, no transB, a [M, 1] bias.
  check_op(*dev, OpKind::kGemm, attrs_of({{"transA", int64_t{1}}}),
           {in(random_tensor({129, 37}, 26)), in(random_tensor({129, 71}, 27)),
            constant(random_tensor({37, 1}, 28))});
  // No bias.
  check_op(*dev, OpKind::kGemm, {},
           {in(random_tensor({13, 13}, 29)), constant(random_tensor({13, 127}, 30))});
  // MatMul: batched against a shared matrix, and batch against batch.
  check_op(*dev, OpKind::kMatMul, {},
           {in(random_tensor({2, 3, 37, 29}, 31)), constant(random_tensor({29, 41}, 32))});
  check_op(*dev, OpKind::kMatMul, {},
           {in(random_tensor({3, 13, 17}, 33)), in(random_tensor({3, 17, 19}, 34))});
}

TEST(VulkanOps, Pooling) {
  OPEN_VULKAN_OR_SKIP(dev);
  const Tensor x = random_tensor({2, 13, 17, 19}, 40);
  check_op(
      *dev, OpKind::kMaxPool,
      attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}}),
      {in(x)});
  check_op(
      *dev, OpKind::kMaxPool,
      attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}}),
      {in(x)});
  check_op(
      *dev, OpKind::kAveragePool,
      attrs_of({{"kernel_shape", Ints{3, 2}}, {"strides", Ints{2, 1}}, {"pads", Ints{1, 0, 1, 1}}}),
      {in(x)});
  check_op(*dev, OpKind::kAveragePool,
           attrs_of({{"kernel_shape", Ints{3, 3}},
                     {"strides", Ints{2, 2}},
                     {"pads", Ints{1, 1, 1, 1}},
                     {"count_include_pad", int64_t{1}},
                     {"ceil_mode", int64_t{1}}}),
           {in(x)});
  check_op(*dev, OpKind::kMaxPool, attrs_of({{"kernel_shape", Ints{5}}, {"strides", Ints{3}}}),
           {in(random_tensor({1, 7, 127}, 41))});
  check_op(*dev, OpKind::kGlobalAveragePool, {}, {in(x)});
  check_op(*dev, OpKind::kGlobalMaxPool, {}, {in(x)});
  check_op(*dev, OpKind::kReduceMean, attrs_of({{"axes", Ints{2, 3}}}), {in(x)});
  check_op(*dev, OpKind::kReduceMean, attrs_of({{"axes", Ints{1}}, {"keepdims", int64_t{0}}}),
           {in(x)});
}

TEST(VulkanOps, ElementwiseBroadcast) {
  OPEN_VULKAN_OR_SKIP(dev);
  const Tensor a = random_tensor({2, 13, 7, 9}, 50);
  check_op(*dev, OpKind::kAdd, attrs_of({{"activation", std::string("relu")}}),
           {in(a), in(random_tensor({2, 13, 7, 9}, 51))});
  check_op(*dev, OpKind::kSub, {}, {in(a), constant(random_tensor({1, 13, 1, 1}, 52))});
  check_op(*dev, OpKind::kMul, {}, {in(a), constant(random_tensor({9}, 53))});
  check_op(*dev, OpKind::kMul, {}, {in(random_tensor({2, 13, 1, 1}, 54)), in(a)});
  check_op(*dev, OpKind::kDiv, {}, {in(a), constant(random_tensor({}, 55, 1.f, 2.f))});
  check_op(*dev, OpKind::kAdd, {},
           {in(random_tensor({13, 1, 5}, 56)), in(random_tensor({1, 7, 5}, 57))});
}

TEST(VulkanOps, Activations) {
  OPEN_VULKAN_OR_SKIP(dev);
  const Tensor x = random_tensor({3, 127, 13}, 60, -8.f, 8.f);
  for (OpKind k : {OpKind::kRelu, OpKind::kSigmoid, OpKind::kHardSwish, OpKind::kTanh}) {
    check_op(*dev, k, {}, {in(x)});
  }
  check_op(*dev, OpKind::kLeakyRelu, attrs_of({{"alpha", 0.13f}}), {in(x)});
  check_op(*dev, OpKind::kHardSigmoid, attrs_of({{"alpha", 0.3f}, {"beta", 0.4f}}), {in(x)});
  check_op(*dev, OpKind::kClip, {},
           {in(x), constant(Tensor::scalar_f32(-1.f)), constant(Tensor::scalar_f32(6.f))});
  // Clip-13: min > max makes every value max.
  check_op(*dev, OpKind::kClip, {},
           {in(x), constant(Tensor::scalar_f32(1.f)), constant(Tensor::scalar_f32(-1.f))});
  // NaN and infinities pass through as the reference passes them.
  Tensor special =
      Tensor::from_floats({5}, std::vector<float>{NAN, INFINITY, -INFINITY, 0.f, -2.f});
  check_op(*dev, OpKind::kRelu, {}, {in(special)});
  check_op(*dev, OpKind::kSigmoid, {}, {in(special)});
}

// Errors from planning a node name it once: "vulkan: node 's' (Softmax): axis out of range".
TEST(VulkanOps, PlanErrorNamesTheNodeOnce) {
  OPEN_VULKAN_OR_SKIP(dev);
  Graph g = one_node_graph(OpKind::kSoftmax, attrs_of({{"axis", int64_t{1}}}),
                           {in(random_tensor({2, 13}, 1))}, 1);
  g.node(0).attrs.set("axis", int64_t{5});  // after inference: only planning sees it
  NodeId layers[] = {0};
  auto program = dev->compile(g, layers);
  ASSERT_FALSE(program.ok());
  const std::string& m = program.status().message();
  EXPECT_NE(m.find("axis out of range"), std::string::npos) << m;
  const size_t first = m.find("node 'test_node' (Softmax)");
  ASSERT_NE(first, std::string::npos) << m;
  EXPECT_EQ(m.find("node 'test_node'", first + 1), std::string::npos) << m;
}

TEST(VulkanOps, Normalization) {
  OPEN_VULKAN_OR_SKIP(dev);
  check_op(*dev, OpKind::kBatchNormalization,
           attrs_of({{"epsilon", 1e-3f}, {"activation", std::string("hard_swish")}}),
           {in(random_tensor({2, 13, 7, 9}, 70)), constant(random_tensor({13}, 71)),
            constant(random_tensor({13}, 72)), constant(random_tensor({13}, 73)),
            constant(random_tensor({13}, 74, 0.5f, 2.f))});
  check_op(*dev, OpKind::kSoftmax, attrs_of({{"axis", int64_t{-1}}}),
           {in(random_tensor({3, 1000}, 75, -10.f, 10.f))});
  check_op(*dev, OpKind::kSoftmax, attrs_of({{"axis", int64_t{1}}}),
           {in(random_tensor({2, 13, 5}, 76))});
  check_op(*dev, OpKind::kLRN,
           attrs_of({{"size", int64_t{5}}, {"alpha", 1e-3f}, {"beta", 0.75f}, {"bias", 2.f}}),
           {in(random_tensor({1, 13, 7, 9}, 77))});
  check_op(*dev, OpKind::kLRN, attrs_of({{"size", int64_t{4}}}),
           {in(random_tensor({2, 7, 5}, 78))});
}

TEST(VulkanOps, TensorManipulation) {
  OPEN_VULKAN_OR_SKIP(dev);
  const Tensor x = random_tensor({2, 13, 7, 9}, 80);
  check_op(*dev, OpKind::kConcat, attrs_of({{"axis", int64_t{1}}}),
           {in(x), in(random_tensor({2, 3, 7, 9}, 81)), constant(random_tensor({2, 1, 7, 9}, 82))});
  check_op(*dev, OpKind::kConcat, attrs_of({{"axis", int64_t{-1}}}),
           {in(x), in(random_tensor({2, 13, 7, 4}, 83))});
  check_op(*dev, OpKind::kSplit, attrs_of({{"axis", int64_t{1}}}),
           {in(x), constant(ints({2}, {3, 10}))}, 1e-6f, 2);
  check_op(*dev, OpKind::kSlice, {},
           {in(x), constant(ints({2}, {-1, 1})), constant(ints({2}, {-100, 8})),
            constant(ints({2}, {3, 2})), constant(ints({2}, {-2, 1}))});
  check_op(*dev, OpKind::kTranspose, attrs_of({{"perm", Ints{0, 2, 3, 1}}}), {in(x)});
  for (const char* mode : {"constant", "reflect", "edge"}) {
    check_op(*dev, OpKind::kPad, attrs_of({{"mode", std::string(mode)}}),
             {in(x), constant(ints({8}, {0, 0, 1, 2, 0, 0, 3, 1})),
              constant(Tensor::scalar_f32(0.25f))});
  }
  check_op(*dev, OpKind::kGather, attrs_of({{"axis", int64_t{1}}}),
           {in(x), constant(ints({4}, {12, 0, -1, 5}))});
  check_op(*dev, OpKind::kResize, attrs_of({{"mode", std::string("nearest")}}),
           {in(x), testing::omitted(),
            constant(Tensor::from_floats({4}, std::vector<float>{1, 1, 2, 1.5f}))});
  check_op(*dev, OpKind::kResize,
           attrs_of({{"mode", std::string("linear")},
                     {"coordinate_transformation_mode", std::string("align_corners")}}),
           {in(x), testing::omitted(), testing::omitted(), constant(ints({4}, {2, 13, 13, 17}))});
  check_op(*dev, OpKind::kFlatten, attrs_of({{"axis", int64_t{1}}}), {in(x)});
  check_op(*dev, OpKind::kReshape, {}, {in(x), constant(ints({3}, {26, -1, 9}))});
}

TEST(VulkanOps, ConvTransposeAnd3D) {
  OPEN_VULKAN_OR_SKIP(dev);
  // 2-D, stride 2, pads, output_padding, bias and a fused relu (the DCGAN/U-Net upsampler).
  check_op(*dev, OpKind::kConvTranspose,
           attrs_of({{"strides", Ints{2, 2}},
                     {"pads", Ints{1, 1, 1, 1}},
                     {"output_padding", Ints{1, 1}},
                     {"activation", std::string("relu")}}),
           {in(random_tensor({2, 13, 7, 9}, 100)), constant(random_tensor({13, 11, 3, 3}, 101)),
            constant(random_tensor({11}, 102))});
  // Groups, dilation, asymmetric stride, weights as a run-time input.
  check_op(*dev, OpKind::kConvTranspose,
           attrs_of({{"group", int64_t{2}}, {"strides", Ints{3, 1}}, {"dilations", Ints{1, 2}}}),
           {in(random_tensor({1, 8, 5, 6}, 103)), in(random_tensor({8, 3, 2, 3}, 104))});
  // 1-D with output_shape (SAME-like pads derived by the op).
  check_op(*dev, OpKind::kConvTranspose,
           attrs_of({{"strides", Ints{2}}, {"output_shape", Ints{26}}}),
           {in(random_tensor({1, 5, 13}, 105)), constant(random_tensor({5, 7, 4}, 106))});
  // 3-D.
  check_op(*dev, OpKind::kConvTranspose,
           attrs_of({{"strides", Ints{2, 1, 2}}, {"pads", Ints{0, 1, 1, 1, 0, 0}}}),
           {in(random_tensor({1, 3, 4, 5, 6}, 107)), constant(random_tensor({3, 4, 3, 3, 2}, 108)),
            constant(random_tensor({4}, 109))});
  // 3-D convolution and pooling.
  const Tensor v = random_tensor({2, 5, 7, 9, 11}, 110);
  check_op(
      *dev, OpKind::kConv,
      attrs_of({{"strides", Ints{1, 2, 2}},
                {"pads", Ints{1, 1, 0, 1, 1, 1}},
                {"dilations", Ints{2, 1, 1}},
                {"activation", std::string("relu")}}),
      {in(v), constant(random_tensor({6, 5, 3, 3, 3}, 111)), constant(random_tensor({6}, 112))});
  check_op(
      *dev, OpKind::kMaxPool,
      attrs_of(
          {{"kernel_shape", Ints{2, 3, 3}}, {"strides", Ints{2, 2, 2}}, {"ceil_mode", int64_t{1}}}),
      {in(v)});
  check_op(*dev, OpKind::kAveragePool,
           attrs_of({{"kernel_shape", Ints{3, 3, 3}},
                     {"strides", Ints{1, 2, 2}},
                     {"pads", Ints{1, 1, 1, 1, 1, 1}},
                     {"count_include_pad", int64_t{1}}}),
           {in(v)});
  check_op(*dev, OpKind::kAveragePool,
           attrs_of({{"kernel_shape", Ints{3, 3, 3}}, {"pads", Ints{1, 0, 1, 0, 1, 1}}}), {in(v)});
}

TEST(VulkanOps, GatherWithRunTimeIndices) {
  OPEN_VULKAN_OR_SKIP(dev);
  const Tensor x = random_tensor({2, 13, 7, 9}, 120);
  // i64 indices, negative ones, a 2-D index tensor, each axis.
  for (int64_t axis : {0, 1, 3, -2}) {
    check_op(*dev, OpKind::kGather, attrs_of({{"axis", axis}}),
             {in(x), in(ints({2, 2}, {1, 0, -1, -2}))});
  }
  // i32 indices.
  check_op(*dev, OpKind::kGather, attrs_of({{"axis", int64_t{1}}}),
           {in(x), in(testing::run_op(OpKind::kCast, attrs_of({{"to", int64_t{6}}}),
                                      {in(ints({3}, {12, 0, -13}))})
                          .value()[0])});
  // 64-bit data (a shape vector gathered with a run-time index).
  check_op(*dev, OpKind::kGather, {}, {in(ints({4}, {1, 3, 224, -7})), in(ints({2}, {-1, 2}))});
  // An index out of range fails the run with a Status naming the node and the index.
  auto bad = run_on(*dev, OpKind::kGather, attrs_of({{"axis", int64_t{1}}}),
                    {in(x), in(ints({3}, {0, 13, 1}))}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("Gather"), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("is 13"), std::string::npos) << bad.status().to_string();
  auto huge = run_on(*dev, OpKind::kGather, {}, {in(x), in(ints({1}, {int64_t{1} << 40}))}, 1);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find(std::to_string(int64_t{1} << 40)), std::string::npos)
      << huge.status().to_string();
}

TEST(VulkanOps, CastBetweenEveryDtypePair) {
  OPEN_VULKAN_OR_SKIP(dev);
  // ONNX `to` codes of f32, f16, i8, u8, i32, i64, bool.
  const int64_t codes[] = {1, 10, 3, 2, 6, 7, 9};
  // Rounding, truncation, saturation, NaN and infinities, f16 subnormals and overflow.
  const Tensor floats = Tensor::from_floats(
      {23},
      std::vector<float>{0.f,     -0.f,    0.5f,  -1.7f, 127.9f, 128.5f,    -129.f,   255.5f,
                         300.f,   -3e9f,   3e9f,  1e19f, -1e19f, NAN,       INFINITY, -INFINITY,
                         65504.f, 65520.f, 6e-8f, 3e-5f, 2049.f, 1.f / 3.f, -65519.f});
  // Wrapping, sign extension, large magnitudes (i64 -> f32 rounds once).
  const Tensor int64s =
      ints({17}, {0, 1, -1, 127, 128, 255, 256, -129, 2147483648LL, -2147483649LL, 16777217,
                  (1LL << 53) + 1, 9007199791611905LL, INT64_MAX, INT64_MIN, -16777219, 70000});
  for (int64_t from : codes) {
    for (const Tensor* base : {&floats, &int64s}) {
      // The source tensor in dtype `from`, made by the reference Cast.
      auto src = testing::run_op(OpKind::kCast, attrs_of({{"to", from}}), {in(*base)});
      ASSERT_TRUE(src.ok()) << src.status().to_string();
      for (int64_t to : codes) {
        SCOPED_TRACE("cast " + std::string(dtype_name((*src)[0].dtype())) +
                     " -> to=" + std::to_string(to));
        check_op(*dev, OpKind::kCast, attrs_of({{"to", to}}), {in((*src)[0])}, 0.f);
      }
    }
  }
}

// A representative single-node case for every registered OpKind. Adding an op to
// ops/registry.cc without a case here fails EveryOpKindRunsOnVulkan.
struct OpCase {
  Attributes attrs;
  std::vector<OpInput> inputs;
  int num_outputs = 1;
};

std::optional<OpCase> representative(OpKind kind) {
  const Tensor x = random_tensor({1, 6, 9, 11}, 130);
  const auto unary = [&] { return OpCase{{}, {in(x)}}; };
  switch (kind) {
    case OpKind::kConv:
      return OpCase{attrs_of({{"pads", Ints{1, 1, 1, 1}}}),
                    {in(x), constant(random_tensor({8, 6, 3, 3}, 131))}};
    case OpKind::kConvTranspose:
      return OpCase{attrs_of({{"strides", Ints{2, 2}}}),
                    {in(x), constant(random_tensor({6, 4, 3, 3}, 132))}};
    case OpKind::kGemm:
      return OpCase{attrs_of({{"transB", int64_t{1}}}),
                    {in(random_tensor({2, 37}, 133)), constant(random_tensor({13, 37}, 134)),
                     constant(random_tensor({13}, 135))}};
    case OpKind::kMatMul:
      return OpCase{{}, {in(random_tensor({3, 5, 7}, 136)), in(random_tensor({7, 4}, 137))}};
    case OpKind::kBatchNormalization:
      return OpCase{
          {},
          {in(x), constant(random_tensor({6}, 138)), constant(random_tensor({6}, 139)),
           constant(random_tensor({6}, 140)), constant(random_tensor({6}, 141, 0.5f, 2.f))}};
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
      return OpCase{attrs_of({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}}), {in(x)}};
    case OpKind::kLRN:
      return OpCase{attrs_of({{"size", int64_t{3}}}), {in(x)}};
    case OpKind::kSoftmax:
    case OpKind::kGlobalAveragePool:
    case OpKind::kGlobalMaxPool:
    case OpKind::kRelu:
    case OpKind::kLeakyRelu:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kTanh:
    case OpKind::kIdentity:
    case OpKind::kDropout:
    case OpKind::kShape:
      return unary();
    case OpKind::kClip:
      return OpCase{
          {}, {in(x), constant(Tensor::scalar_f32(-0.5f)), constant(Tensor::scalar_f32(0.5f))}};
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
      return OpCase{{}, {in(x), in(random_tensor({6, 1, 11}, 142, 0.5f, 1.f))}};
    case OpKind::kConcat:
      return OpCase{attrs_of({{"axis", int64_t{1}}}), {in(x), in(x)}};
    case OpKind::kSplit:
      return OpCase{attrs_of({{"axis", int64_t{1}}}), {in(x), constant(ints({2}, {2, 4}))}, 2};
    case OpKind::kSlice:
      return OpCase{{}, {in(x), constant(ints({1}, {1})), constant(ints({1}, {5}))}};
    case OpKind::kFlatten:
      return OpCase{attrs_of({{"axis", int64_t{2}}}), {in(x)}};
    case OpKind::kReshape:
      return OpCase{{}, {in(x), constant(ints({2}, {6, -1}))}};
    case OpKind::kTranspose:
      return OpCase{attrs_of({{"perm", Ints{0, 3, 1, 2}}}), {in(x)}};
    case OpKind::kSqueeze:
      return OpCase{{}, {in(x), constant(ints({1}, {0}))}};
    case OpKind::kUnsqueeze:
      return OpCase{{}, {in(x), constant(ints({1}, {2}))}};
    case OpKind::kPad:
      return OpCase{{}, {in(x), constant(ints({8}, {0, 0, 1, 1, 0, 0, 2, 0}))}};
    case OpKind::kReduceMean:
      return OpCase{attrs_of({{"axes", Ints{2, 3}}}), {in(x)}};
    case OpKind::kResize:
      return OpCase{attrs_of({{"mode", std::string("linear")}}),
                    {in(x), testing::omitted(),
                     constant(Tensor::from_floats({4}, std::vector<float>{1, 1, 2, 2}))}};
    case OpKind::kGather:
      return OpCase{attrs_of({{"axis", int64_t{1}}}), {in(x), in(ints({2}, {5, -6}))}};
    case OpKind::kConstant:
      return OpCase{attrs_of({{"value_ints", Ints{3, -1, 4}}}), {}};
    case OpKind::kCast:
      return OpCase{attrs_of({{"to", int64_t{10}}}), {in(x)}};
    default:
      return std::nullopt;
  }
}

TEST(VulkanOps, EveryOpKindRunsOnVulkan) {
  OPEN_VULKAN_OR_SKIP(dev);
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    // Issue 26's ops (from LayerNormalization on) have no Vulkan pipelines yet.
    if (!op_is_registered(kind) || kind >= OpKind::kLayerNormalization) continue;
    SCOPED_TRACE(op_name(kind));
    std::optional<OpCase> c = representative(kind);
    ASSERT_TRUE(c.has_value()) << "no representative case for " << op_name(kind);
    // Supported and equal to the reference: no op of the set is refused on vulkan (refusals
    // left are device limits, such as a tensor over maxStorageBufferRange, tested below).
    check_op(*dev, kind, c->attrs, c->inputs, 1e-4f, c->num_outputs);
  }
}

#ifdef TESSERA_HAVE_VULKAN

TEST(VulkanOps, EveryKernelNamesItsOp) {
  int served = 0;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const VulkanKernel* kernel = find_vulkan_kernel(static_cast<OpKind>(k));
    if (kernel == nullptr) continue;
    EXPECT_EQ(static_cast<int>(kernel->kind), k);
    ++served;
  }
  EXPECT_EQ(served, static_cast<int>(OpKind::kLayerNormalization));
}

TEST(VulkanDevice, NamesAndLimits) {
  OPEN_VULKAN_OR_SKIP(dev);
  EXPECT_EQ(dev->name(), "vulkan:0");
  EXPECT_NE(dev->description().find("max buffer"), std::string::npos) << dev->description();
  EXPECT_GT(dev->memory_capacity(), 0u);
  bool listed = false;
  for (const DeviceListing& d : list_devices()) listed = listed || d.name == "vulkan:0";
  EXPECT_TRUE(listed);
  auto missing = open_device("vulkan:99");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  auto dvfs = open_device("vulkan:0@800");
  ASSERT_FALSE(dvfs.ok());
  EXPECT_EQ(dvfs.status().code(), StatusCode::kUnimplemented);
}

TEST(VulkanDevice, UploadDownloadRoundTrip) {
  OPEN_VULKAN_OR_SKIP(dev);
  const Tensor t = random_tensor({3, 127, 13}, 90);
  auto b = dev->upload(t);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  Tensor back;
  ASSERT_TRUE(dev->download(**b, &back).ok());
  testing::expect_near(back, t, 0.f, 0.f);
}

TEST(VulkanDevice, TensorsBeyondTheBufferLimit) {
  OPEN_VULKAN_OR_SKIP(dev);
  auto* vk = dynamic_cast<VulkanDevice*>(dev.get());
  const uint64_t limit = vk->gpu().max_buffer_bytes();
  if (limit > (1ull << 28)) GTEST_SKIP() << "this device binds buffers of over 256 MiB";
  // A fully-connected weight one row larger than the limit.
  const int64_t k = 1024;
  const int64_t n = static_cast<int64_t>(limit / (k * 4)) + 1;
  const Tensor x = random_tensor({1, k}, 93);
  const Tensor w = random_tensor({n, k}, 94);
  // N x K (transB = 1) at batch 1: split into row chunks, and still exact.
  check_op(*dev, OpKind::kGemm, attrs_of({{"transB", int64_t{1}}}),
           {in(x), constant(w), constant(random_tensor({n}, 95))});
  // The same bytes as K x N: not splittable, so unsupported, naming the tensor and the limit.
  Graph g;
  ValueId xv = g.add_value("x", TensorInfo{DType::kF32, Shape{1, n}});
  g.inputs().push_back(xv);
  ValueId wv = g.add_constant("fc.weight", w.reshaped(Shape{n, k}).value());
  ValueId y = g.add_value("y");
  g.outputs().push_back(y);
  Node node;
  node.name = "fc";
  node.kind = OpKind::kGemm;
  node.inputs = {xv, wv};
  node.outputs = {y};
  g.add_node(node);
  ASSERT_TRUE(g.infer_shapes().ok());
  Capability c = dev->capabilities(g, g.node(0));
  EXPECT_FALSE(c.supported);
  EXPECT_NE(c.reason.find("fc.weight"), std::string::npos) << c.reason;
  EXPECT_NE(c.reason.find("maxStorageBufferRange"), std::string::npos) << c.reason;
  NodeId layers[] = {0};
  auto p = dev->compile(g, layers);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("'fc'"), std::string::npos);
}

TEST(VulkanDevice, OutOfMemoryIsAStatus) {
  OPEN_VULKAN_OR_SKIP(dev);
  auto* vk = dynamic_cast<VulkanDevice*>(dev.get());
  auto huge = vk->gpu().create_buffer(uint64_t{1} << 44, true);  // 16 TiB of staging
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted) << huge.status().to_string();
}

// A chain whose values die early: later values reuse their memory, and a value written over a
// dead one's bytes must wait for that one's readers (write-after-read barriers).
TEST(VulkanDevice, ActivationsShareMemoryByLifetime) {
  OPEN_VULKAN_OR_SKIP(dev);
  Graph g;
  const Shape shape{1, 32, 28, 28};
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, shape});
  g.inputs().push_back(x);
  auto add = [&](OpKind kind, std::vector<ValueId> ins, const std::string& name) {
    ValueId y = g.add_value(name);
    Node n;
    n.name = name;
    n.kind = kind;
    n.inputs = std::move(ins);
    n.outputs = {y};
    g.add_node(n);
    return y;
  };
  ValueId a = add(OpKind::kSigmoid, {x}, "a");
  ValueId b = add(OpKind::kTanh, {a}, "b");
  ValueId c = add(OpKind::kMul, {b, a}, "c");
  ValueId d = add(OpKind::kRelu, {c}, "d");
  ValueId e = add(OpKind::kSub, {d, c}, "e");
  ValueId f = add(OpKind::kSigmoid, {e}, "f");
  ValueId h = add(OpKind::kAdd, {f, d}, "h");
  g.outputs().push_back(h);
  ASSERT_TRUE(g.infer_shapes().ok());
  std::vector<NodeId> layers;
  for (NodeId i = 0; i < g.num_nodes(); ++i) layers.push_back(i);
  auto p = dev->compile(g, layers);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto* vp = dynamic_cast<VulkanProgram*>(p->get());
  ASSERT_NE(vp, nullptr);
  const uint64_t bytes = shape.numel() * 4;
  EXPECT_EQ(vp->memory().separate_bytes, 8 * bytes);
  // At most three values are live at once (c, d and e while e is computed); greedy placement
  // may need one more.
  EXPECT_LE(vp->memory().arena_bytes, 4 * bytes) << vp->memory().arena_bytes;
  auto ref = open_device("reference");
  ASSERT_TRUE(ref.ok());
  auto rp = (*ref)->compile(g, layers);
  ASSERT_TRUE(rp.ok()) << rp.status().to_string();
  std::vector<Tensor> ins = {random_tensor(shape, 150, -3.f, 3.f)}, want(1), got(1);
  ASSERT_TRUE((*rp)->run(ins, want).ok());
  for (int rep = 0; rep < 2; ++rep) {
    ASSERT_TRUE((*p)->run(ins, got).ok());
    testing::expect_near(got[0], want[0], 1e-5f, 1e-5f);
  }
}

// A slice whose live activations exceed the device's memory: a clear ResourceExhausted at
// compile time, no allocation attempted, no crash.
TEST(VulkanDevice, ProgramBeyondDeviceMemoryIsResourceExhausted) {
  OPEN_VULKAN_OR_SKIP(dev);
  auto* vk = dynamic_cast<VulkanDevice*>(dev.get());
  const uint64_t tensor_bytes = std::min<uint64_t>(vk->gpu().max_buffer_bytes(), 64ull << 20);
  const uint64_t heap = dev->memory_capacity();
  const uint64_t n = heap / tensor_bytes + 2;  // n outputs, all live until the end
  if (n > 4096) GTEST_SKIP() << "device memory too large to exceed with a test graph";
  Graph g;
  std::vector<NodeId> layers;
  for (uint64_t i = 0; i < n; ++i) {
    ValueId x = g.add_value("x" + std::to_string(i),
                            TensorInfo{DType::kF32, Shape{static_cast<int64_t>(tensor_bytes / 4)}});
    g.inputs().push_back(x);
    ValueId y = g.add_value("y" + std::to_string(i));
    g.outputs().push_back(y);
    Node node;
    node.name = "relu" + std::to_string(i);
    node.kind = OpKind::kRelu;
    node.inputs = {x};
    node.outputs = {y};
    layers.push_back(g.add_node(node));
  }
  ASSERT_TRUE(g.infer_shapes().ok());
  auto p = dev->compile(g, layers);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted) << p.status().to_string();
  EXPECT_NE(p.status().message().find("arena"), std::string::npos) << p.status().to_string();
  // The device still works afterwards.
  check_op(*dev, OpKind::kRelu, {}, {in(random_tensor({13}, 151))});
}

TEST(VulkanDevice, DeviceLossFailsCleanly) {
  // A private device: marking it lost must not affect the other tests' devices.
  OPEN_VULKAN_OR_SKIP(dev);
  Graph g = one_node_graph(OpKind::kRelu, {}, {in(random_tensor({13}, 91))}, 1);
  NodeId layers[] = {0};
  auto p = dev->compile(g, layers);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  // The driver reports the loss through a call's result, as a real loss arrives.
  VulkanGpu& gpu = dynamic_cast<VulkanDevice*>(dev.get())->gpu();
  Status reported = gpu.check(VK_ERROR_DEVICE_LOST, "vkQueueSubmit");
  EXPECT_EQ(reported.code(), StatusCode::kInternal);
  EXPECT_NE(reported.message().find("lost"), std::string::npos) << reported.to_string();
  ASSERT_TRUE(gpu.lost());
  std::vector<Tensor> ins = {random_tensor({13}, 91)}, outs(1);
  Status st = (*p)->run(ins, outs);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("lost"), std::string::npos) << st.to_string();
  auto again = dev->compile(g, layers);
  EXPECT_FALSE(again.ok());
  EXPECT_FALSE(dev->upload(ins[0]).ok());
  // No longer offered to planners: every node is refused, with the reason.
  Capability c = dev->capabilities(g, g.node(0));
  EXPECT_FALSE(c.supported);
  EXPECT_NE(c.reason.find("lost"), std::string::npos) << c.reason;
}

TEST(VulkanDevice, TimestampsPerNode) {
  OPEN_VULKAN_OR_SKIP(dev);
  Graph g = one_node_graph(OpKind::kRelu, {}, {in(random_tensor({4096}, 92))}, 1);
  NodeId layers[] = {0};
  auto p = dev->compile(g, layers);
  ASSERT_TRUE(p.ok());
  std::vector<Tensor> ins = {random_tensor({4096}, 92)}, outs(1);
  ASSERT_TRUE((*p)->run(ins, outs).ok());
  auto* vp = dynamic_cast<VulkanProgram*>(p->get());
  ASSERT_NE(vp, nullptr);
  EXPECT_EQ(vp->num_dispatches(), 1);
  auto* vk = dynamic_cast<VulkanDevice*>(dev.get());
  if (vk->gpu().physical().timestamps) {
    ASSERT_EQ(vp->node_times().size(), 1u);
    EXPECT_GE(vp->node_times()[0].ms, 0.0);
  }
}

#endif  // TESSERA_HAVE_VULKAN

// Without a loader or without a driver the CLI still runs, lists no vulkan device and reports a
// clear error for vulkan:0 (a subprocess: the loader is probed once per process).
std::string run_cli(const std::string& env, const std::string& args, int* rc) {
  const std::string cmd = env + " " + std::string(TESSERA_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  return out;
}

TEST(VulkanDevice, NoLoaderOrNoDriverMeansNoDevice) {
  for (const char* env :
       {"TESSERA_VULKAN_LOADER=/nonexistent/libvulkan.so.1",
        "VK_ICD_FILENAMES=/nonexistent/icd.json VK_DRIVER_FILES=/nonexistent/icd.json"}) {
    SCOPED_TRACE(env);
    int rc = 0;
    const std::string out = run_cli(env, "devices", &rc);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_NE(out.find("reference"), std::string::npos) << out;
    EXPECT_EQ(out.find("vulkan:0"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace tessera
