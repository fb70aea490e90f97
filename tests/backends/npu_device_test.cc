// The `npu` device over the reference driver: loading failures, the registry, capabilities
// (whitelist, attribute limits), constraints (memory cap, unsupported ops) and single ops in
// fp16 and int8 against the reference device or a naive oracle, on odd shapes.
//
// Needs the reference driver; skips without it unless TESSERA_REQUIRE_NPU is set.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

#include "api/tessera.h"
#include "backends/npu/npu_device.h"
#include "backends/npu/npu_driver.h"
#include "backends/reference/reference_device.h"
#include "backends/registry.h"
#include "tests/backends/npu_test_util.h"
#include "tests/ops/op_test_util.h"

namespace tessera {
namespace {

using testing::random_tensor;

using testing::has;
using testing::npu_required;
using testing::reference_options;

// ---- loading ---------------------------------------------------------------------------------

Status load_status(const std::string& path) {
  return NpuDriver::load(path).status();
}

// A driver's message is untrusted text: it may echo a hostile model's names.
TEST(NpuDriverLoad, DriverMessagesAreEscapedAndCapped) {
  EXPECT_EQ(driver_text(nullptr), "(the driver gave no message)");
  EXPECT_EQ(driver_text(""), "(the driver gave no message)");
  EXPECT_EQ(driver_text("node 'a\x1b[2Jb' (Conv): bad\npad"),
            "node 'a\\x1b[2Jb' (Conv): bad\\npad");
  const std::string long_message(5000, 'm');
  EXPECT_EQ(driver_text(long_message.c_str()), std::string(1024, 'm') + "...");
  const Status st = npu_status(TNPU_ERR_UNSUPPORTED, "prepare", "tensor 'x\ry'");
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_EQ(st.message(), "prepare: tensor 'x\\ry'");
}

TEST(NpuDriverLoad, MissingOrForeignLibrariesAreClearErrors) {
  Status s = load_status("/nonexistent/libnpu.so");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_TRUE(has(s.message(), "/nonexistent/libnpu.so")) << s.message();
  EXPECT_TRUE(has(s.message(), "TESSERA_NPU_DRIVER")) << s.message();

  const std::string text = ::testing::TempDir() + "not_a_library.so";
  std::ofstream(text) << "hello";
  s = load_status(text);
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_TRUE(has(s.message(), "cannot be loaded")) << s.message();

  s = load_status("");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
}

TEST(NpuDriverLoad, IncompatibleDriversAreRefused) {
  Status s = load_status(TESSERA_NPU_FAKE_NO_ENTRY);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(has(s.message(), "tessera_npu_get_driver")) << s.message();

  s = load_status(TESSERA_NPU_FAKE_RETURNS_NULL);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(has(s.message(), "does not implement HAL API 1.x")) << s.message();

  s = load_status(TESSERA_NPU_FAKE_WRONG_VERSION);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(has(s.message(), "implements HAL API 2.3")) << s.message();

  s = load_status(TESSERA_NPU_FAKE_NULL_SLOT);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(has(s.message(), "prepare, execute")) << s.message();

  s = load_status(TESSERA_NPU_FAKE_SHORT_TABLE);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(has(s.message(), "smaller than")) << s.message();
}

TEST(NpuDriverLoad, DeviceThatFailsToOpenIsAnError) {
  NpuOptions o;
  o.driver_path = TESSERA_NPU_FAKE_DEVICE_FAILS;
  auto d = NpuDevice::open(0, o);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), StatusCode::kInternal);
  EXPECT_TRUE(has(d.status().message(), "open_device")) << d.status().message();
  d = NpuDevice::open(3, o);
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
}

TEST(NpuDriverLoad, EnvironmentNamesTheDriver) {
  const char* old = std::getenv("TESSERA_NPU_DRIVER");
  const std::string saved = old ? old : "";
  setenv("TESSERA_NPU_DRIVER", "/nonexistent/vendor_npu.so", 1);
  auto d = open_device("npu:0");
  EXPECT_EQ(d.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(has(d.status().message(), "vendor_npu.so")) << d.status().message();
  for (const DeviceListing& l : list_devices()) EXPECT_NE(l.name.rfind("npu", 0), 0u) << l.name;
  if (old) {
    setenv("TESSERA_NPU_DRIVER", saved.c_str(), 1);
  } else {
    unsetenv("TESSERA_NPU_DRIVER");
  }
}

// ---- registry and device info ----------------------------------------------------------------

TEST(NpuDevice, OpensThroughTheRegistry) {
  REQUIRE_REFERENCE_DRIVER();
  if (std::getenv("TESSERA_NPU_DRIVER")) GTEST_SKIP() << "TESSERA_NPU_DRIVER overrides the default";
  auto d = open_device("npu:0");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ((*d)->name(), "npu:0");
  EXPECT_TRUE(has((*d)->description(), "tessera-reference-npu")) << (*d)->description();
  EXPECT_EQ((*d)->memory_capacity(), 100u * 1000 * 1000);
  EXPECT_EQ(open_device("npu:1").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(open_device("npu:0@800").status().code(), StatusCode::kUnimplemented);
  bool listed = false;
  for (const DeviceListing& l : list_devices()) listed = listed || l.name == "npu:0";
  EXPECT_TRUE(listed);
}

// ---- graphs of one node ----------------------------------------------------------------------

struct OneNode {
  Graph g;
  std::vector<Tensor> inputs;
};

// One node reading `acts` (graph inputs, seeded random) then `consts`, producing `out`.
OneNode one_node(OpKind kind, Attributes attrs, const std::vector<Shape>& acts,
                 const std::vector<Tensor>& consts, const Shape& out, uint32_t seed = 1) {
  OneNode o;
  Node n;
  n.name = "the_node";
  n.kind = kind;
  n.attrs = std::move(attrs);
  for (size_t i = 0; i < acts.size(); ++i) {
    const ValueId v = o.g.add_value("x" + std::to_string(i), TensorInfo{DType::kF32, acts[i]});
    o.g.inputs().push_back(v);
    n.inputs.push_back(v);
    o.inputs.push_back(random_tensor(acts[i], seed + static_cast<uint32_t>(i), -2.f, 2.f));
  }
  for (size_t i = 0; i < consts.size(); ++i) {
    n.inputs.push_back(consts[i].raw() == nullptr && consts[i].numel() == 0
                           ? kNoValue
                           : o.g.add_constant("c" + std::to_string(i), consts[i]));
  }
  const ValueId y = o.g.add_value("y", TensorInfo{DType::kF32, out});
  n.outputs.push_back(y);
  o.g.add_node(n);
  o.g.outputs().push_back(y);
  return o;
}

Result<std::vector<Tensor>> run_on(Device& d, const Graph& g, const std::vector<Tensor>& inputs) {
  std::vector<NodeId> all;
  for (NodeId n = 0; n < g.num_nodes(); ++n) all.push_back(n);
  ASSIGN_OR_RETURN(std::unique_ptr<Program> p, d.compile(g, all));
  std::vector<Tensor> outs(p->output_values().size());
  RETURN_IF_ERROR(p->run(inputs, outs));
  return outs;
}

// max|got - want| / max(1, max|want|), failing on non-finite values.
double relative_max_error(const Tensor& got, const Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  double max_ref = 0, max_err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const float g = got.data<float>()[i], w = want.data<float>()[i];
    if (!std::isfinite(g)) {
      ADD_FAILURE() << "non-finite output at " << i;
      return 1e9;
    }
    max_ref = std::max(max_ref, std::fabs(static_cast<double>(w)));
    max_err = std::max(max_err, std::fabs(static_cast<double>(g - w)));
  }
  return max_err / std::max(1.0, max_ref);
}

// Runs the node on npu in fp16 and int8 and compares with `want` (or the reference device).
void expect_matches(OneNode o, const char* what, Tensor want = Tensor()) {
  SCOPED_TRACE(what);
  if (!want.defined() || want.raw() == nullptr) {
    ReferenceDevice ref;
    auto r = run_on(ref, o.g, o.inputs);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    want = (*r)[0];
  }
  for (uint32_t precision : {TNPU_PRECISION_F16, TNPU_PRECISION_INT8}) {
    NpuOptions opt = reference_options(precision);
    // Calibration: the test input itself plus three seeded others.
    for (uint32_t s = 0; s < 4; ++s) {
      std::vector<Tensor> sample;
      for (size_t i = 0; i < o.inputs.size(); ++i)
        sample.push_back(s == 0 ? o.inputs[i]
                                : random_tensor(o.inputs[i].shape(),
                                                50 + s * 7 + static_cast<uint32_t>(i), -2.f, 2.f));
      opt.calibration.push_back(std::move(sample));
    }
    auto d = NpuDevice::open(0, opt);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    auto got = run_on(**d, o.g, o.inputs);
    ASSERT_TRUE(got.ok()) << npu_precision_name(precision) << ": " << got.status().to_string();
    const double err = relative_max_error((*got)[0], want);
    const double tol = precision == TNPU_PRECISION_F16 ? 5e-3 : 2e-2;
    EXPECT_LE(err, tol) << npu_precision_name(precision);
    std::printf("[ npu op ] %-58s %s max rel err %.2e\n", what, npu_precision_name(precision), err);
  }
}

Attributes attrs_of(std::initializer_list<std::pair<const char*, AttributeValue>> kv) {
  Attributes a;
  for (const auto& [k, v] : kv) a.set(k, v);
  return a;
}

TEST(NpuOps, ConvVariants) {
  REQUIRE_REFERENCE_DRIVER();
  using V = std::vector<int64_t>;
  // Odd channel counts (13, 127), strides, dilation, asymmetric pads, groups, depthwise.
  expect_matches(
      one_node(OpKind::kConv, attrs_of({{"pads", V{1, 1, 1, 1}}}), {Shape{1, 13, 17, 15}},
               {random_tensor(Shape{7, 13, 3, 3}, 3, -0.3f, 0.3f), random_tensor(Shape{7}, 4)},
               Shape{1, 7, 17, 15}),
      "3x3 pad 1");
  expect_matches(
      one_node(
          OpKind::kConv,
          attrs_of(
              {{"strides", V{2, 2}}, {"pads", V{0, 1, 2, 0}}, {"activation", std::string("relu")}}),
          {Shape{2, 5, 13, 13}}, {random_tensor(Shape{127, 5, 3, 3}, 5, -0.3f, 0.3f)},
          Shape{2, 127, 7, 6}),
      "stride 2, asymmetric pads, fused relu, no bias, batch 2");
  expect_matches(
      one_node(OpKind::kConv,
               attrs_of({{"dilations", V{2, 2}}, {"pads", V{2, 2, 2, 2}}, {"group", int64_t{3}}}),
               {Shape{1, 9, 11, 13}},
               {random_tensor(Shape{6, 3, 3, 3}, 6, -0.3f, 0.3f), random_tensor(Shape{6}, 7)},
               Shape{1, 6, 11, 13}),
      "dilation 2, group 3");
  expect_matches(
      one_node(OpKind::kConv,
               attrs_of({{"pads", V{1, 1, 1, 1}},
                         {"group", int64_t{13}},
                         {"activation", std::string("clip")},
                         {"activation_alpha", 0.f},
                         {"activation_beta", 6.f}}),
               {Shape{1, 13, 15, 15}},
               {random_tensor(Shape{13, 1, 3, 3}, 8, -1.f, 1.f), random_tensor(Shape{13}, 9)},
               Shape{1, 13, 15, 15}),
      "depthwise, fused relu6");
  expect_matches(
      one_node(OpKind::kConv, attrs_of({{"strides", V{4, 4}}}), {Shape{1, 3, 35, 35}},
               {random_tensor(Shape{16, 3, 11, 11}, 10, -0.1f, 0.1f)}, Shape{1, 16, 7, 7}),
      "11x11 stride 4 (AlexNet's first layer)");
}

TEST(NpuOps, GemmVariants) {
  REQUIRE_REFERENCE_DRIVER();
  expect_matches(
      one_node(OpKind::kGemm, attrs_of({{"transB", int64_t{1}}}), {Shape{3, 127}},
               {random_tensor(Shape{13, 127}, 11, -0.2f, 0.2f), random_tensor(Shape{13}, 12)},
               Shape{3, 13}),
      "transB=1 with bias");
  expect_matches(
      one_node(OpKind::kGemm,
               attrs_of({{"alpha", 0.5f}, {"beta", 2.f}, {"activation", std::string("relu")}}),
               {Shape{2, 19}},
               {random_tensor(Shape{19, 33}, 13, -0.3f, 0.3f), random_tensor(Shape{1, 33}, 14)},
               Shape{2, 33}),
      "transB=0, alpha, beta, fused relu");
}

TEST(NpuOps, Pooling) {
  REQUIRE_REFERENCE_DRIVER();
  using V = std::vector<int64_t>;
  expect_matches(
      one_node(OpKind::kMaxPool, attrs_of({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}}),
               {Shape{1, 13, 17, 17}}, {}, Shape{1, 13, 8, 8}),
      "max 3x3 s2");
  expect_matches(
      one_node(
          OpKind::kMaxPool,
          attrs_of({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"ceil_mode", int64_t{1}}}),
          {Shape{1, 13, 16, 16}}, {}, Shape{1, 13, 8, 8}),
      "max ceil mode (SqueezeNet)");
  expect_matches(
      one_node(OpKind::kMaxPool,
               attrs_of({{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}}),
               {Shape{2, 9, 15, 15}}, {}, Shape{2, 9, 8, 8}),
      "max padded (ResNet)");
  expect_matches(
      one_node(OpKind::kAveragePool, attrs_of({{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}}),
               {Shape{1, 127, 9, 9}}, {}, Shape{1, 127, 4, 4}),
      "average 2x2");
  expect_matches(one_node(OpKind::kAveragePool,
                          attrs_of({{"kernel_shape", V{3, 3}},
                                    {"pads", V{1, 1, 1, 1}},
                                    {"count_include_pad", int64_t{1}}}),
                          {Shape{1, 5, 7, 7}}, {}, Shape{1, 5, 7, 7}),
                 "average padded, count_include_pad");
  expect_matches(
      one_node(OpKind::kGlobalAveragePool, {}, {Shape{2, 13, 7, 9}}, {}, Shape{2, 13, 1, 1}),
      "global average");
  {
    // Positive features (after a ReLU) over 56x56: the running sum reaches ~3000, where an fp16
    // accumulator's step is 2, so it must be kept in fp32 as an NPU's pooling unit does.
    OneNode o =
        one_node(OpKind::kGlobalAveragePool, {}, {Shape{1, 13, 56, 56}}, {}, Shape{1, 13, 1, 1});
    o.inputs[0] = random_tensor(Shape{1, 13, 56, 56}, 21, 0.f, 2.f);
    expect_matches(std::move(o), "global average of 3136 positive values");
  }
}

TEST(NpuOps, ClampOps) {
  REQUIRE_REFERENCE_DRIVER();
  expect_matches(one_node(OpKind::kRelu, {}, {Shape{1, 13, 5, 7}}, {}, Shape{1, 13, 5, 7}), "relu");
  expect_matches(
      one_node(OpKind::kClip, {}, {Shape{1, 13, 5, 7}},
               {Tensor::scalar_f32(-0.5f), Tensor::scalar_f32(1.25f)}, Shape{1, 13, 5, 7}),
      "clip");
}

// Add, Concat and Flatten against naive oracles (independent of the reference kernels).
TEST(NpuOps, AddConcatFlatten) {
  REQUIRE_REFERENCE_DRIVER();
  {
    OneNode o = one_node(OpKind::kAdd, attrs_of({{"activation", std::string("relu")}}),
                         {Shape{1, 13, 7, 9}, Shape{1, 13, 7, 9}}, {}, Shape{1, 13, 7, 9});
    Tensor want = Tensor::create(DType::kF32, Shape{1, 13, 7, 9}).value();
    for (int64_t i = 0; i < want.numel(); ++i)
      want.data<float>()[i] =
          std::max(0.f, o.inputs[0].data<float>()[i] + o.inputs[1].data<float>()[i]);
    expect_matches(std::move(o), "add + relu", want);
  }
  {
    OneNode o = one_node(OpKind::kConcat, attrs_of({{"axis", int64_t{1}}}),
                         {Shape{1, 5, 6, 7}, Shape{1, 13, 6, 7}, Shape{1, 3, 6, 7}}, {},
                         Shape{1, 21, 6, 7});
    Tensor want = Tensor::create(DType::kF32, Shape{1, 21, 6, 7}).value();
    int64_t c0 = 0;
    for (const Tensor& t : o.inputs) {
      std::copy(t.data<float>(), t.data<float>() + t.numel(), want.data<float>() + c0 * 42);
      c0 += t.dim(1);
    }
    expect_matches(std::move(o), "concat channels", want);
  }
  {
    OneNode o = one_node(OpKind::kFlatten, attrs_of({{"axis", int64_t{1}}}), {Shape{2, 13, 3, 5}},
                         {}, Shape{2, 195});
    Tensor want = o.inputs[0].clone().value();
    want = want.reshaped(Shape{2, 195}).value();
    expect_matches(std::move(o), "flatten (NCHW order)", want);
  }
}

// ---- capabilities and constraints --------------------------------------------------------------

TEST(NpuConstraints, WhitelistRefusesMobileUnfriendlyOps) {
  REQUIRE_REFERENCE_DRIVER();
  auto d = NpuDevice::open(0, reference_options());
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  for (OpKind k : {OpKind::kSoftmax, OpKind::kLRN, OpKind::kResize, OpKind::kSigmoid,
                   OpKind::kHardSwish, OpKind::kLeakyRelu, OpKind::kConvTranspose}) {
    OneNode o = one_node(k, {}, {Shape{1, 8, 4, 4}}, {}, Shape{1, 8, 4, 4});
    const Capability c = (*d)->capabilities(o.g, o.g.node(0));
    EXPECT_FALSE(c.supported) << op_name(k);
    EXPECT_TRUE(has(c.reason, std::string("does not run ") + op_name(k))) << c.reason;
    auto p = (*d)->compile(o.g, std::vector<NodeId>{0});
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented);
    EXPECT_TRUE(has(p.status().message(), "the_node")) << p.status().message();
  }
}

// A driver's refusal already names the node; compile's error must not name it twice.
TEST(NpuConstraints, DriverRefusalNamesTheNodeOnce) {
  REQUIRE_REFERENCE_DRIVER();
  auto d = NpuDevice::open(0, reference_options());
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  OneNode o = one_node(OpKind::kClip, {}, {Shape{1, 4, 8, 8}},
                       {Tensor::scalar_f32(1.f), Tensor::scalar_f32(-1.f)}, Shape{1, 4, 8, 8});
  auto p = (*d)->compile(o.g, std::vector<NodeId>{0});
  ASSERT_FALSE(p.ok());
  const std::string& m = p.status().message();
  EXPECT_TRUE(has(m, "min must be below max")) << m;
  const size_t first = m.find("node 'the_node' (Clip)");
  ASSERT_NE(first, std::string::npos) << m;
  EXPECT_EQ(m.find("node 'the_node'", first + 1), std::string::npos) << m;
}

TEST(NpuConstraints, AttributeLimitsAreCapabilities) {
  REQUIRE_REFERENCE_DRIVER();
  using V = std::vector<int64_t>;
  auto d = NpuDevice::open(0, reference_options());
  ASSERT_TRUE(d.ok());
  auto refused = [&](OneNode o, const std::string& why) {
    const Capability c = (*d)->capabilities(o.g, o.g.node(0));
    EXPECT_FALSE(c.supported) << why;
    EXPECT_TRUE(has(c.reason, why)) << c.reason;
  };
  refused(one_node(OpKind::kConv, attrs_of({{"activation", std::string("hard_swish")}}),
                   {Shape{1, 4, 8, 8}}, {random_tensor(Shape{4, 4, 1, 1}, 1)}, Shape{1, 4, 8, 8}),
          "hard_swish");
  // Clip with min >= max (valid ONNX: every value becomes max) is no XNNPACK clamp: the host
  // runs it, standalone or fused.
  refused(one_node(OpKind::kClip, {}, {Shape{1, 4, 8, 8}},
                   {Tensor::scalar_f32(1.f), Tensor::scalar_f32(-1.f)}, Shape{1, 4, 8, 8}),
          "min must be below max");
  refused(one_node(OpKind::kConv,
                   attrs_of({{"activation", std::string("clip")},
                             {"activation_alpha", 0.5f},
                             {"activation_beta", 0.5f}}),
                   {Shape{1, 4, 8, 8}}, {random_tensor(Shape{4, 4, 1, 1}, 1)}, Shape{1, 4, 8, 8}),
          "min must be below max");
  refused(one_node(OpKind::kConv, {}, {Shape{1, 2, 16, 16}},
                   {random_tensor(Shape{2, 2, 13, 13}, 1)}, Shape{1, 2, 4, 4}),
          "kernel");
  refused(
      one_node(OpKind::kAveragePool, attrs_of({{"kernel_shape", V{3, 3}}, {"pads", V{1, 1, 1, 1}}}),
               {Shape{1, 4, 8, 8}}, {}, Shape{1, 4, 8, 8}),
      "count_include_pad");
  refused(one_node(OpKind::kConcat, attrs_of({{"axis", int64_t{2}}}),
                   {Shape{1, 4, 3, 3}, Shape{1, 4, 5, 3}}, {}, Shape{1, 4, 8, 3}),
          "channels only");
  refused(one_node(OpKind::kAdd, {}, {Shape{1, 4, 3, 3}, Shape{1, 4, 1, 1}}, {}, Shape{1, 4, 3, 3}),
          "broadcasting");
}

TEST(NpuConstraints, SliceOverTheMemoryCapIsRefused) {
  REQUIRE_REFERENCE_DRIVER();
  // A 4096 x 2048 fully connected layer: 16.8 MB of fp16 weights, 8.4 MB in int8.
  OneNode o = one_node(OpKind::kGemm, attrs_of({{"transB", int64_t{1}}}), {Shape{1, 2048}},
                       {random_tensor(Shape{4096, 2048}, 1, -0.01f, 0.01f)}, Shape{1, 4096});
  NpuOptions opt = reference_options();
  opt.memory_limit = 10 * 1000 * 1000;
  auto d = NpuDevice::open(0, opt);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->memory_capacity(), 10u * 1000 * 1000);
  auto p = (*d)->compile(o.g, std::vector<NodeId>{0});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(has(p.status().message(), "over the NPU memory cap of 10.0 MB"))
      << p.status().message();
  EXPECT_TRUE(has(p.status().message(), "weights 16.8 MB")) << p.status().message();
  // The same layer fits in int8.
  opt.precision = TNPU_PRECISION_INT8;
  opt.calibration = {{o.inputs[0]}};
  auto d8 = NpuDevice::open(0, opt);
  ASSERT_TRUE(d8.ok());
  auto p8 = (*d8)->compile(o.g, std::vector<NodeId>{0});
  ASSERT_TRUE(p8.ok()) << p8.status().to_string();
  auto* np = dynamic_cast<NpuProgram*>(p8->get());
  ASSERT_NE(np, nullptr);
  EXPECT_LT(np->prepared_info().weight_bytes, 10u * 1000 * 1000);
}

TEST(NpuConstraints, Int8NeedsCalibration) {
  REQUIRE_REFERENCE_DRIVER();
  OneNode o = one_node(OpKind::kRelu, {}, {Shape{1, 3, 4, 4}}, {}, Shape{1, 3, 4, 4});
  auto d = NpuDevice::open(0, reference_options(TNPU_PRECISION_INT8));
  ASSERT_TRUE(d.ok());
  auto p = (*d)->compile(o.g, std::vector<NodeId>{0});
  ASSERT_FALSE(p.ok());
  EXPECT_TRUE(has(p.status().message(), "calibration")) << p.status().message();
  EXPECT_EQ(NpuDevice::open(0, reference_options(TNPU_PRECISION_F32)).status().code(),
            StatusCode::kUnimplemented);
}

// int8 calibration of a slice in the middle of a model: the layers before it run on the
// reference device to give the slice's inputs.
TEST(NpuConstraints, CalibratesSlicesInsideAModel) {
  REQUIRE_REFERENCE_DRIVER();
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 3, 9, 9}});
  g.inputs().push_back(x);
  const ValueId s = g.add_value("s", TensorInfo{DType::kF32, Shape{1, 3, 9, 9}});
  const ValueId w = g.add_constant("w", random_tensor(Shape{5, 3, 3, 3}, 2, -0.5f, 0.5f));
  const ValueId y = g.add_value("y", TensorInfo{DType::kF32, Shape{1, 5, 7, 7}});
  g.add_node(Node{"sig", OpKind::kSigmoid, {}, {x}, {s}});
  g.add_node(Node{"conv", OpKind::kConv, {}, {s, w}, {y}});
  g.outputs().push_back(y);
  NpuOptions opt = reference_options(TNPU_PRECISION_INT8);
  for (uint32_t k = 0; k < 4; ++k)
    opt.calibration.push_back({random_tensor(Shape{1, 3, 9, 9}, 30 + k, -3, 3)});
  auto d = NpuDevice::open(0, opt);
  ASSERT_TRUE(d.ok());
  auto p = (*d)->compile(g, std::vector<NodeId>{1});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ReferenceDevice ref;
  auto rp = ref.compile(g, std::vector<NodeId>{0, 1});
  ASSERT_TRUE(rp.ok());
  const Tensor input = random_tensor(Shape{1, 3, 9, 9}, 99, -3, 3);
  std::vector<Tensor> want(1), mid(1), got(1);
  ASSERT_TRUE((*rp)->run(std::vector<Tensor>{input}, want).ok());
  auto sp = ref.compile(g, std::vector<NodeId>{0});
  ASSERT_TRUE((*sp)->run(std::vector<Tensor>{input}, mid).ok());
  ASSERT_TRUE((*p)->run(mid, got).ok());
  EXPECT_LE(relative_max_error(got[0], want[0]), 6e-2);
}

TEST(NpuDevice, ProgramChecksInputsAndReportsTransfers) {
  REQUIRE_REFERENCE_DRIVER();
  OneNode o = one_node(OpKind::kRelu, {}, {Shape{1, 13, 31, 29}}, {}, Shape{1, 13, 31, 29});
  auto d = NpuDevice::open(0, reference_options());
  ASSERT_TRUE(d.ok());
  auto p = (*d)->compile(o.g, std::vector<NodeId>{0});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  std::vector<Tensor> out(1);
  Tensor wrong = random_tensor(Shape{1, 13, 31, 28}, 1);
  Status st = (*p)->run(std::vector<Tensor>{wrong}, out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(has(st.message(), "f32[1, 13, 31, 28]")) << st.message();
  ASSERT_TRUE((*p)->run(o.inputs, out).ok());
  auto* np = dynamic_cast<NpuProgram*>(p->get());
  ASSERT_NE(np, nullptr);
  const NpuRunStats& s = np->last_run();
  EXPECT_TRUE(s.driver_counters);
  EXPECT_EQ(s.bytes_in, 13u * 31 * 29 * 2);  // fp16 at the boundary
  EXPECT_EQ(s.bytes_out, 13u * 31 * 29 * 2);
  EXPECT_GT(s.input_conversion_ns, 0u);
  EXPECT_EQ(np->io_desc(false, 0).dtype, TNPU_DTYPE_F16);

  auto b = (*d)->upload(o.inputs[0]);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->byte_size(), 13u * 31 * 29 * 2);
  Tensor back;
  ASSERT_TRUE((*d)->download(**b, &back).ok());
  EXPECT_LE(relative_max_error(back, o.inputs[0]), 1e-3);
}

TEST(NpuDevice, SessionRunsAWholeGraph) {
  REQUIRE_REFERENCE_DRIVER();
  if (std::getenv("TESSERA_NPU_DRIVER")) GTEST_SKIP() << "TESSERA_NPU_DRIVER overrides the default";
  using V = std::vector<int64_t>;
  OneNode o = one_node(OpKind::kConv,
                       attrs_of({{"pads", V{1, 1, 1, 1}}, {"activation", std::string("relu")}}),
                       {Shape{1, 3, 16, 16}}, {random_tensor(Shape{8, 3, 3, 3}, 3, -0.5f, 0.5f)},
                       Shape{1, 8, 16, 16});
  ReferenceDevice ref;
  auto want = run_on(ref, o.g, o.inputs);
  ASSERT_TRUE(want.ok());
  auto model = Model::from_graph(std::move(o.g));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto s = Session::create(*model, "npu:0");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto out = (*s)->run(o.inputs);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_LE(relative_max_error((*out)[0], (*want)[0]), 1e-2);
}

}  // namespace
}  // namespace tessera
