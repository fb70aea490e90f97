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

// Runs the op on `dev` and on the reference kernels; expects every output within
// tol * max(1, max|ref|) and finite where the reference is.
void check_op(Device& dev, OpKind kind, const Attributes& attrs, const std::vector<OpInput>& inputs,
              float tol = 1e-4f, int num_outputs = 1) {
  SCOPED_TRACE(op_name(kind));
  auto expected = testing::run_op(kind, attrs, inputs, num_outputs);
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();
  Graph g = one_node_graph(kind, attrs, inputs, num_outputs);
  Capability cap = dev.capabilities(g, g.node(0));
  ASSERT_TRUE(cap.supported) << cap.reason;
  NodeId layers[] = {0};
  auto program = dev.compile(g, layers);
  ASSERT_TRUE(program.ok()) << program.status().to_string();
  std::vector<Tensor> ins;
  for (ValueId v : (*program)->input_values()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (g.node(0).inputs[i] == v) {
        ins.push_back(inputs[i].tensor);
        break;
      }
    }
  }
  std::vector<Tensor> outs((*program)->output_values().size());
  Status st = (*program)->run(ins, outs);
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(outs.size(), expected->size());
  for (size_t o = 0; o < outs.size(); ++o) {
    const Tensor& got = outs[o];
    const Tensor& want = (*expected)[o];
    ASSERT_EQ(got.shape(), want.shape());
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
  // NaN and infinities pass through as the reference passes them.
  Tensor special =
      Tensor::from_floats({5}, std::vector<float>{NAN, INFINITY, -INFINITY, 0.f, -2.f});
  check_op(*dev, OpKind::kRelu, {}, {in(special)});
  check_op(*dev, OpKind::kSigmoid, {}, {in(special)});
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

#ifdef TESSERA_HAVE_VULKAN

TEST(VulkanOps, EveryKernelNamesItsOp) {
  int served = 0;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const VulkanKernel* kernel = find_vulkan_kernel(static_cast<OpKind>(k));
    if (kernel == nullptr) continue;
    EXPECT_EQ(static_cast<int>(kernel->kind), k);
    ++served;
  }
  EXPECT_GE(served, kNumOpKinds - 3);  // all but ConvTranspose, Shape, Constant
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

TEST(VulkanDevice, DeviceLossFailsCleanly) {
  // A private device: marking it lost must not affect the other tests' devices.
  OPEN_VULKAN_OR_SKIP(dev);
  Graph g = one_node_graph(OpKind::kRelu, {}, {in(random_tensor({13}, 91))}, 1);
  NodeId layers[] = {0};
  auto p = dev->compile(g, layers);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  dynamic_cast<VulkanDevice*>(dev.get())->gpu().mark_lost();
  std::vector<Tensor> ins = {random_tensor({13}, 91)}, outs(1);
  Status st = (*p)->run(ins, outs);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("lost"), std::string::npos) << st.to_string();
  auto again = dev->compile(g, layers);
  EXPECT_FALSE(again.ok());
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
