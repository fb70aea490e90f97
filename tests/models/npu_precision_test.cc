// Whole models on the reference NPU: precision of fp16 and int8 against the fp32 reference
// device, and the NPU's refusals at model scale.
//
// For each foundation model, `samples` seeded N(0, 1) inputs run on the reference device (fp32),
// then on npu in fp16 and in int8 (calibrated on 8 other seeded inputs). Reported per model and
// precision: the mean relative L2 error of the logits, ||y - y_ref|| / ||y_ref||, its maximum,
// and top-1 agreement (printed; the figures are in docs/backend-npu.md). Asserted: finite
// outputs, fp16 mean error <= 0.1 and int8 mean error <= 1.5. These foundation models carry
// seeded *random* weights: their logits are small differences of large features, so the
// per-layer rounding of fp16 operands (a few 1e-3) grows ~20x in the classifier and top-1
// margins are tiny. Top-1 agreement is therefore reported, not asserted: it falls short of the
// 99% target (see the docs).
//
// The number of samples is TESSERA_NPU_PRECISION_SAMPLES (default 3 to keep CI short; the
// documented figures use 50:
//   TESSERA_NPU_PRECISION_SAMPLES=50 ctest --test-dir build -R NpuPrecision -V).
// The NPU here is emulated with 400 MB per subgraph so that VGG16 and AlexNet fit whole; the
// default 100 MB cap is exercised by NpuModelConstraints.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "backends/npu/npu_device.h"
#include "backends/reference/reference_device.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"

namespace tessera {
namespace {

bool npu_required() {
  const char* r = std::getenv("TESSERA_REQUIRE_NPU");
  return r != nullptr && *r != '\0' && std::string(r) != "0";
}

int sample_count() {
  const char* s = std::getenv("TESSERA_NPU_PRECISION_SAMPLES");
  const int n = s ? std::atoi(s) : 3;
  return std::clamp(n, 1, 1000);
}

Tensor seeded_image(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, shape).value();
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

struct Loaded {
  Graph graph;
  std::vector<NodeId> all;
};

// Imports, infers and optimises a model as tessera convert does.
void load_model(const std::string& name, Loaded* out) {
  const char* dir = std::getenv("TESSERA_MODEL_DIR");
  ASSERT_NE(dir, nullptr) << "TESSERA_MODEL_DIR is not set (run through ctest)";
  const std::string path = std::string(dir) + "/" + name + ".onnx";
  ASSERT_TRUE(std::filesystem::exists(path)) << path << " is missing";
  auto imported = convert_onnx(path);
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  out->graph = std::move(imported->graph);
  for (NodeId n = 0; n < out->graph.num_nodes(); ++n) out->all.push_back(n);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

int argmax(const Tensor& t) {
  return static_cast<int>(std::max_element(t.data<float>(), t.data<float>() + t.numel()) -
                          t.data<float>());
}

struct Figures {
  double sum_rel = 0, max_rel = 0;
  int agree = 0, count = 0;
  double seconds = 0;
  void add(const Tensor& got, const Tensor& ref) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double g = got.data<float>()[i], r = ref.data<float>()[i];
      EXPECT_TRUE(std::isfinite(g)) << "non-finite logit " << i;
      num += (g - r) * (g - r);
      den += r * r;
    }
    const double rel = std::sqrt(num / std::max(den, 1e-30));
    sum_rel += rel;
    max_rel = std::max(max_rel, rel);
    agree += argmax(got) == argmax(ref);
    ++count;
  }
  double mean_rel() const { return count ? sum_rel / count : 0; }
  double agreement() const { return count ? static_cast<double>(agree) / count : 0; }
};

class NpuPrecision : public ::testing::TestWithParam<const char*> {};

TEST_P(NpuPrecision, Fp16AndInt8AgainstFp32) {
  if (NpuDriver::reference_driver_path().empty()) {
    if (npu_required())
      FAIL() << "TESSERA_REQUIRE_NPU is set but no reference NPU driver was built";
    GTEST_SKIP() << "reference NPU driver not built";
  }
  Loaded m;
  load_model(GetParam(), &m);
  if (HasFatalFailure()) return;
  const Graph& g = m.graph;
  ASSERT_EQ(g.inputs().size(), 1u);
  const Shape in_shape = g.value(g.inputs()[0]).info.shape;
  const int n = sample_count();

  // fp32 reference outputs.
  ReferenceDevice ref;
  auto rp = ref.compile(g, m.all);
  ASSERT_TRUE(rp.ok()) << rp.status().to_string();
  std::vector<Tensor> inputs, want;
  auto t0 = std::chrono::steady_clock::now();
  for (int s = 0; s < n; ++s) {
    inputs.push_back(seeded_image(in_shape, 1000 + static_cast<uint32_t>(s)));
    std::vector<Tensor> out(1);
    ASSERT_TRUE((*rp)->run(std::vector<Tensor>{inputs.back()}, out).ok());
    want.push_back(out[0]);
  }
  const double ref_seconds = seconds_since(t0) / n;

  for (uint32_t precision : {TNPU_PRECISION_F16, TNPU_PRECISION_INT8}) {
    NpuOptions opt;
    opt.driver_path = NpuDriver::reference_driver_path();
    opt.precision = precision;
    opt.driver_options = {{"memory_capacity_mb", "400"}};
    if (precision == TNPU_PRECISION_INT8) {
      for (uint32_t c = 0; c < 8; ++c)
        opt.calibration.push_back({seeded_image(in_shape, 50000 + c)});
    }
    auto d = NpuDevice::open(0, opt);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    auto p = (*d)->compile(g, m.all);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto* np = dynamic_cast<NpuProgram*>(p->get());
    Figures f;
    t0 = std::chrono::steady_clock::now();
    for (int s = 0; s < n; ++s) {
      std::vector<Tensor> out(1);
      Status st = (*p)->run(std::vector<Tensor>{inputs[static_cast<size_t>(s)]}, out);
      ASSERT_TRUE(st.ok()) << st.to_string();
      f.add(out[0], want[static_cast<size_t>(s)]);
    }
    f.seconds = seconds_since(t0) / n;
    const tnpu_prepared_info info = np->prepared_info();
    std::printf(
        "[ npu precision ] %-14s %s  samples %3d  mean rel err %.3e  max rel err %.3e  top-1 "
        "agreement %5.1f%%  (weights %.1f MB + activations %.1f MB; %.3f s/run, fp32 reference "
        "%.3f s/run)\n",
        GetParam(), npu_precision_name(precision), f.count, f.mean_rel(), f.max_rel,
        100 * f.agreement(), info.weight_bytes / 1e6, info.activation_bytes / 1e6, f.seconds,
        ref_seconds);
    EXPECT_LE(f.mean_rel(), precision == TNPU_PRECISION_F16 ? 0.1 : 1.5);
  }
}

INSTANTIATE_TEST_SUITE_P(Foundation, NpuPrecision,
                         ::testing::Values("mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1",
                                           "vgg16", "alexnet"),
                         [](const auto& p) { return std::string(p.param); });

// The default 100 MB cap at model scale: VGG16 does not fit whole in either precision; AlexNet's
// 61M parameters fit in int8 but not in fp16.
TEST(NpuModelConstraints, MemoryCapAtModelScale) {
  if (NpuDriver::reference_driver_path().empty()) {
    if (npu_required())
      FAIL() << "TESSERA_REQUIRE_NPU is set but no reference NPU driver was built";
    GTEST_SKIP() << "reference NPU driver not built";
  }
  for (const char* name : {"vgg16", "alexnet"}) {
    Loaded m;
    load_model(name, &m);
    if (HasFatalFailure()) return;
    NpuOptions opt;
    opt.driver_path = NpuDriver::reference_driver_path();
    auto d = NpuDevice::open(0, opt);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ((*d)->memory_capacity(), 100u * 1000 * 1000);
    auto p = (*d)->compile(m.graph, m.all);
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.status().code(), StatusCode::kResourceExhausted) << p.status().to_string();
    EXPECT_NE(p.status().message().find("over the NPU memory cap of 100.0 MB"), std::string::npos)
        << p.status().message();
    std::printf("[ npu constraint ] %s fp16: %s\n", name, p.status().message().c_str());
    if (std::string(name) == "alexnet") {
      opt.precision = TNPU_PRECISION_INT8;
      opt.calibration = {{seeded_image(m.graph.value(m.graph.inputs()[0]).info.shape, 7)}};
      auto d8 = NpuDevice::open(0, opt);
      ASSERT_TRUE(d8.ok());
      auto p8 = (*d8)->compile(m.graph, m.all);
      EXPECT_TRUE(p8.ok()) << p8.status().to_string();
    }
  }
}

// The other torchvision models: whole-model compilation succeeds exactly when every layer is
// supported; otherwise the refusal names the unsupported layers.
TEST(NpuModelConstraints, ExtraModelsRunOrAreRefusedCleanly) {
  if (NpuDriver::reference_driver_path().empty()) {
    if (npu_required())
      FAIL() << "TESSERA_REQUIRE_NPU is set but no reference NPU driver was built";
    GTEST_SKIP() << "reference NPU driver not built";
  }
  for (const char* name : {"mobilenet_v3_small", "googlenet", "shufflenet_v2_x0_5", "densenet121",
                           "efficientnet_b0"}) {
    Loaded m;
    load_model(name, &m);
    if (HasFatalFailure()) return;
    NpuOptions opt;
    opt.driver_path = NpuDriver::reference_driver_path();
    auto d = NpuDevice::open(0, opt);
    ASSERT_TRUE(d.ok());
    int unsupported = 0;
    std::string first;
    for (NodeId n : m.all) {
      const Capability c = (*d)->capabilities(m.graph, m.graph.node(n));
      if (!c.supported && unsupported++ == 0)
        first = m.graph.node(n).name + " (" + op_name(m.graph.node(n).kind) + "): " + c.reason;
    }
    auto p = (*d)->compile(m.graph, m.all);
    if (unsupported > 0) {
      ASSERT_FALSE(p.ok()) << name;
      EXPECT_EQ(p.status().code(), StatusCode::kUnimplemented) << p.status().to_string();
      std::printf("[ npu constraint ] %-18s refused: %d unsupported layer(s), first %s\n", name,
                  unsupported, first.c_str());
    } else {
      EXPECT_TRUE(p.ok() || p.status().code() == StatusCode::kResourceExhausted)
          << p.status().to_string();
      std::printf("[ npu constraint ] %-18s every layer supported: %s\n", name,
                  p.ok() ? "compiled whole" : p.status().message().c_str());
    }
  }
}

}  // namespace
}  // namespace tessera
