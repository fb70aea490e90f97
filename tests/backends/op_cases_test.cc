// The differential harness: every case of tests/backends/op_cases.cc on every device this build
// can open, against the reference device (ggml's test-backend-ops in Tessera's terms).
//
// One test per (device, op): MatchesReference/<device>_<Op>. For each case of the op the test
// builds the one-node graph, asks the device's own capability check, and either
//   - runs the node twice (the runs must agree) and compares every output with the reference
//     (op_cases.h: compare_outputs, at the case's tolerance loosened to the device's precision),
//   - or lists the case as declined with the device's reason (printed as "[ DECLINED ]"; not a
//     failure, except for a device held to run it: cpu runs every case, opencl every case of the
//     foundation ops, vulkan at least one case of each foundation op).
// opencl:0 also runs each case of a foundation op with its constant inputs fed at run time (each
// alone, then all), since a slice can be cut anywhere: wherever shapes still infer and the
// reference runs the node, the device must run it too.
//
// A device that does not open here (no OpenCL platform, no Vulkan driver) skips, unless its
// TESSERA_REQUIRE_* variable is set (CI), which makes it fail.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "backends/reference/reference_device.h"
#include "backends/registry.h"
#include "scheduler/calibrate.h"
#include "tests/backends/backend_test_util.h"
#include "tests/backends/op_cases.h"
#include "tests/scoped_env.h"

namespace tessera::testing {
namespace {

// What a device is held to run: a decline of a case it is held to is a failure.
enum class Held {
  kEveryCase,          // every case of every op
  kFoundationCases,    // every case of the foundation ops (is_foundation_op)
  kOneFoundationCase,  // at least one case of each foundation op; others may be declined for the
                       // reasons the backend documents
  kNothing,            // any case may be declined (a whitelist device, a split device)
};

// One device the harness runs.
struct HarnessDevice {
  const char* name;
  const char* label;        // the name as a gtest identifier
  const char* require_env;  // set (non-empty, not "0"): a device that does not open fails
  Held held = Held::kNothing;
  double tol = 0;  // the device's precision: floor of OpCase::tol
  double rel = 0;  // and a bound relative to each element
  // Also run each case of a foundation op with its constant inputs fed at run time.
  bool runtime_variants = false;
  // Ops whose kernels may turn NaN into a number (XNNPACK's output clamps on cpu,
  // docs/performance.md; GLSL's clamp and tanh, whose NaN result is undefined, on vulkan).
  std::set<OpKind> nan_may_clamp = {};
  // An int8 level: each case is calibrated (min/max) on its own inputs on the reference device
  // before the device compiles it, NaN and infinities (which int8 cannot hold) calibrated as 0.
  bool calibrate = false;
  // An environment variable set while the device runs the cases (NAME=VALUE), or null.
  const char* env = nullptr;
};

const std::set<OpKind> kXnnpackClamps = {
    OpKind::kRelu,       OpKind::kSigmoid,   OpKind::kGlobalAveragePool,
    OpKind::kAdd,        OpKind::kSub,       OpKind::kMul,
    OpKind::kDiv,        OpKind::kConv,      OpKind::kHardSwish,
    OpKind::kClip,       OpKind::kLeakyRelu, OpKind::kMaxPool,
    OpKind::kAveragePool};

// The calibration of `g` on `feed` for an int8 device (HarnessDevice::calibrate).
Result<CompileOptions> calibrated_options(const Graph& g,
                                          const std::vector<std::pair<ValueId, Tensor>>& feed) {
  ReferenceDevice ref;
  std::vector<Tensor> sample;
  for (ValueId v : g.inputs()) {
    for (const auto& [id, t] : feed) {
      if (id != v) continue;
      ASSIGN_OR_RETURN(Tensor c, t.clone());
      if (c.dtype() == DType::kF32) {
        for (float& x : c.span<float>()) {
          if (!std::isfinite(x)) x = 0;
        }
      }
      sample.push_back(std::move(c));
    }
  }
  CompileOptions options;
  ASSIGN_OR_RETURN(CalibrationTable t, calibrate(g, ref, {sample}, CalibrationMethod::kMinMax));
  options.calibration = std::make_shared<const CalibrationTable>(std::move(t));
  return options;
}

const std::vector<HarnessDevice>& harness_devices() {
  static const std::vector<HarnessDevice> devices = {
      {"cpu", "cpu", nullptr, Held::kEveryCase, 0, 0, false, kXnnpackClamps},
      {"cpu:0", "cpu_0", nullptr, Held::kEveryCase, 0, 0, false, kXnnpackClamps},
#ifdef TESSERA_HAVE_ONEDNN
      // bf16 rounds each operand to 8 significant bits and accumulates in f32: an output may be
      // off by about 1% of its own magnitude plus 1% of the output's largest (docs/precision.md).
      {"cpu#bf16", "cpu_bf16", nullptr, Held::kEveryCase, kBf16Tolerance, kBf16Tolerance, false,
       kXnnpackClamps},
      // int8: oneDNN's int8 Conv, pooling and MatMul where a node has a calibrated range, f32
      // elsewhere (docs/precision.md); within kInt8Tolerance of the output's largest magnitude.
      // A NaN or infinity fed to an int8 kernel becomes a number (Tolerance::
      // nonfinite_may_saturate).
      {"cpu#int8", "cpu_int8", nullptr, Held::kEveryCase, kInt8Tolerance, kInt8Tolerance, false,
       kXnnpackClamps, /*calibrate=*/true},
#endif
      // int8 on XNNPACK's operators (Conv, Add, GlobalAveragePool; every tensor s8), as builds
      // without oneDNN run it (kernel_table.h: use_xnnpack_int8).
      {"cpu#int8", "cpu_int8_xnnpack", nullptr, Held::kEveryCase, kInt8Tolerance, kInt8Tolerance,
       false, kXnnpackClamps, /*calibrate=*/true, "TESSERA_CPU_INT8_KERNELS=xnnpack"},
      {"opencl:0", "opencl_0", "TESSERA_REQUIRE_OPENCL", Held::kFoundationCases, 0, 0, true, {}},
      // Declines documented in docs/backend-vulkan.md: arithmetic on non-f32 tensors, 1-D and
      // partially broadcast MatMul, run-time BatchNormalization statistics, ...
      {"vulkan:0",
       "vulkan_0",
       "TESSERA_REQUIRE_VULKAN",
       Held::kOneFoundationCase,
       0,
       0,
       false,
       {OpKind::kClip, OpKind::kTanh}},
      // The reference NPU driver at its default precision, fp16 (11 significant bits, fp32
      // accumulation): a whitelist of ops, the rest declined (docs/backend-npu.md).
      {"npu:0", "npu_0", "TESSERA_REQUIRE_NPU", Held::kNothing, 1e-2, 4e-3, false, kXnnpackClamps},
      // Conv split over two devices by output channel; other nodes are declined.
      {"split:conv-channel:cpu:0=0.5+reference=0.5", "split", nullptr, Held::kNothing, 0, 0, false,
       kXnnpackClamps},
  };
  return devices;
}

bool env_set(const char* name) {
  if (name == nullptr) return false;
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' && std::string(v) != "0";
}

// Variant 0: the case as written; then each constant input alone fed at run time; then all.
std::vector<std::vector<NodeInput>> input_variants(const OpCase& c, bool runtime) {
  std::vector<std::vector<NodeInput>> variants = {c.inputs};
  if (!runtime) return variants;
  std::vector<NodeInput> all_runtime = c.inputs;
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    if (!c.inputs[i].constant) continue;
    variants.push_back(c.inputs);
    variants.back()[i].constant = false;
    all_runtime[i].constant = false;
  }
  if (variants.size() > 2) variants.push_back(all_runtime);
  return variants;
}

using Param = std::tuple<size_t, OpKind>;  // index into harness_devices(), op

class DeviceOpTest : public ::testing::TestWithParam<Param> {};

TEST_P(DeviceOpTest, MatchesReference) {
  const HarnessDevice& hd = harness_devices()[std::get<0>(GetParam())];
  const OpKind kind = std::get<1>(GetParam());
  const std::string setting = hd.env != nullptr ? hd.env : "";
  const std::string env_name = setting.substr(0, setting.find('='));  // outlives `env`
  std::optional<testing::ScopedEnv> env;
  if (!setting.empty()) env.emplace(env_name.c_str(), setting.substr(setting.find('=') + 1));
  Result<std::unique_ptr<Device>> opened = open_device(hd.name);
  if (!opened.ok()) {
    if (env_set(hd.require_env)) {
      FAIL() << hd.require_env << " is set but " << hd.name
             << " does not open: " << opened.status().to_string();
    }
    GTEST_SKIP() << hd.name << " does not open here: " << opened.status().to_string();
  }
  Device& dev = **opened;
  ReferenceDevice ref;
  const bool must_run =
      hd.held == Held::kEveryCase || (hd.held == Held::kFoundationCases && is_foundation_op(kind));
  int ran = 0, declined = 0;
  for (const OpCase& c : all_op_cases()) {
    if (c.kind != kind) continue;
    const auto variants = input_variants(c, hd.runtime_variants && is_foundation_op(kind));
    for (size_t variant = 0; variant < variants.size(); ++variant) {
      const std::vector<NodeInput>& inputs = variants[variant];
      const std::string what = c.name + (variant == 0 ? "" : "/runtime" + std::to_string(variant));
      SCOPED_TRACE(what + " on " + hd.name);
      Result<Graph> g = one_node_graph(kind, c.attrs, inputs, c.num_outputs);
      if (variant == 0) {
        ASSERT_TRUE(g.ok()) << "the case itself is invalid: " << g.status().to_string();
      } else if (!g.ok()) {
        continue;  // shapes depend on the values: a graph question, not a device's
      }
      const auto feed = graph_feeds(*g, inputs);
      Result<std::vector<Tensor>> want = run_layers(ref, *g, {0}, feed);
      if (variant == 0) {
        ASSERT_TRUE(want.ok()) << "reference: " << want.status().to_string();
      } else if (!want.ok()) {
        continue;  // the oracle itself needs these inputs constant
      }
      const Capability cap = dev.capabilities(*g, g->node(0));
      if (!cap.supported) {
        EXPECT_FALSE(must_run) << hd.name << " declined " << what << ": " << cap.reason;
        std::cout << "[ DECLINED ] " << hd.name << " " << what << ": " << cap.reason << "\n";
        ++declined;
        continue;
      }
      CompileOptions options;
      if (hd.calibrate) {
        Result<CompileOptions> calibrated = calibrated_options(*g, feed);
        ASSERT_TRUE(calibrated.ok()) << calibrated.status().to_string();
        options = *std::move(calibrated);
      }
      std::string kernel;
      Result<std::vector<Tensor>> got =
          run_layers(dev, *g, {0}, feed, &kernel, /*runs=*/2, options);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(got->size(), want->size());
      // A reduced-precision device's bound scales with the magnitude the case computes at.
      const Tolerance tol{std::max<double>(c.tol, hd.tol * c.precision_scale),
                          hd.rel * c.precision_scale, hd.nan_may_clamp.count(kind) > 0,
                          /*scale_by_max=*/true, /*nonfinite_may_saturate=*/hd.calibrate};
      for (size_t o = 0; o < got->size(); ++o) {
        const std::string diff = compare_outputs((*got)[o], (*want)[o], tol);
        EXPECT_TRUE(diff.empty()) << "output " << o << ": " << diff << " (kernel: " << kernel
                                  << ")";
      }
      ++ran;
    }
  }
  RecordProperty("ran", ran);
  RecordProperty("declined", declined);
  if (ran == 0 && declined == 0) ADD_FAILURE() << op_name(kind) << " has no case";
  if (hd.held == Held::kOneFoundationCase && is_foundation_op(kind)) {
    EXPECT_GT(ran, 0) << hd.name << " declined every case of " << op_name(kind);
  }
}

std::vector<OpKind> every_op() {
  std::vector<OpKind> ops;
  for (int k = 0; k < kNumOpKinds; ++k) ops.push_back(static_cast<OpKind>(k));
  return ops;
}

std::vector<size_t> every_device() {
  std::vector<size_t> d;
  for (size_t i = 0; i < harness_devices().size(); ++i) d.push_back(i);
  return d;
}

INSTANTIATE_TEST_SUITE_P(OpCases, DeviceOpTest,
                         ::testing::Combine(::testing::ValuesIn(every_device()),
                                            ::testing::ValuesIn(every_op())),
                         [](const ::testing::TestParamInfo<Param>& p) {
                           return std::string(harness_devices()[std::get<0>(p.param)].label) + "_" +
                                  op_name(std::get<1>(p.param));
                         });

// The list covers every op, names each case once, and holds at least the cases of the three
// harnesses it replaced: 183 of the OpenCL harness, 207 node runs of the Vulkan tests and 81
// op-level calls of the cpu harness, 471 in all.
TEST(OpCaseList, EveryOpHasCasesAndNamesAreUnique) {
  const std::vector<OpCase> cases = all_op_cases();
  std::set<std::string> names;
  std::map<OpKind, int> per_op;
  for (const OpCase& c : cases) {
    EXPECT_TRUE(names.insert(c.name).second) << "duplicate case name " << c.name;
    for (char ch : c.name) {
      EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') << c.name;
    }
    ++per_op[c.kind];
  }
  for (int k = 0; k < kNumOpKinds; ++k) {
    EXPECT_GT(per_op[static_cast<OpKind>(k)], 0)
        << op_name(static_cast<OpKind>(k)) << " has no case in tests/backends/op_cases.cc";
  }
  EXPECT_GE(cases.size(), 471u);
}

}  // namespace
}  // namespace tessera::testing
