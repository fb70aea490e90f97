// Tests of the Vulkan backend beyond the op case list (which tests/backends/op_cases_test.cc runs
// on vulkan:0 as on every device): error messages, run-time index checks, the kernel table, and the
// failure paths (missing device, missing loader, oversized tensors, out of memory, device loss).
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
#include "tests/backends/op_cases.h"
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

// Runs the one-node graph of `kind` on `dev` and on the reference device (the harness's builder,
// tests/backends/op_cases.h); expects every output within tol * max(1, max|ref|) and finite where
// the reference is.
void check_op(Device& dev, OpKind kind, const Attributes& attrs, const std::vector<OpInput>& inputs,
              float tol = 1e-4f, int num_outputs = 1) {
  SCOPED_TRACE(op_name(kind));
  Result<Graph> g = testing::one_node_graph(kind, attrs, inputs, num_outputs);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const auto feed = testing::graph_feeds(*g, inputs);
  auto ref = open_device("reference");
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  auto want = testing::run_layers(**ref, *g, {0}, feed);
  ASSERT_TRUE(want.ok()) << want.status().to_string();
  auto got = testing::run_layers(dev, *g, {0}, feed);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), want->size());
  for (size_t o = 0; o < got->size(); ++o) {
    const std::string diff = testing::compare_outputs((*got)[o], (*want)[o], {tol, 0});
    EXPECT_TRUE(diff.empty()) << "output " << o << ": " << diff;
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

TEST(VulkanOps, PlanErrorNamesTheNodeOnce) {
  OPEN_VULKAN_OR_SKIP(dev);
  Graph g = testing::one_node_graph(OpKind::kSoftmax, attrs_of({{"axis", int64_t{1}}}),
                                    {in(random_tensor({2, 13}, 1))}, 1)
                .value();
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

// Run-time Gather indices out of range fail the run with a Status naming the node and the index
// (the in-range cases are in the op case list).
TEST(VulkanOps, GatherIndexOutOfRangeIsAStatus) {
  OPEN_VULKAN_OR_SKIP(dev);
  const Tensor x = random_tensor({2, 13, 7, 9}, 120);
  auto run_on = [&](const Attributes& a, const std::vector<OpInput>& inputs) {
    Result<Graph> g = testing::one_node_graph(OpKind::kGather, a, inputs, 1);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return testing::run_layers(*dev, *g, {0}, testing::graph_feeds(*g, inputs));
  };
  auto bad = run_on(attrs_of({{"axis", int64_t{1}}}), {in(x), in(ints({3}, {0, 13, 1}))});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("Gather"), std::string::npos) << bad.status().to_string();
  EXPECT_NE(bad.status().message().find("is 13"), std::string::npos) << bad.status().to_string();
  auto huge = run_on({}, {in(x), in(ints({1}, {int64_t{1} << 40}))});
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find(std::to_string(int64_t{1} << 40)), std::string::npos)
      << huge.status().to_string();
}

#ifdef TESSERA_HAVE_VULKAN

TEST(VulkanOps, EveryKernelNamesItsOp) {
  for (int k = 0; k < kNumOpKinds; ++k) {
    const VulkanKernel* kernel = find_vulkan_kernel(static_cast<OpKind>(k));
    // Every op of the foundation set has a kernel; ops added after it may have none (declined).
    if (testing::is_foundation_op(static_cast<OpKind>(k))) {
      EXPECT_NE(kernel, nullptr) << op_name(static_cast<OpKind>(k));
    }
    if (kernel == nullptr) continue;
    EXPECT_EQ(static_cast<int>(kernel->kind), k);
  }
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
  Graph g = testing::one_node_graph(OpKind::kRelu, {}, {in(random_tensor({13}, 91))}, 1).value();
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
  Graph g = testing::one_node_graph(OpKind::kRelu, {}, {in(random_tensor({4096}, 92))}, 1).value();
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
