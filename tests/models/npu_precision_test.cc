// Whole models on the reference NPU: precision of fp16 and int8 against the fp32 reference
// device, and the NPU's refusals at model scale.
//
// For each foundation model, `samples` seeded N(0, 1) inputs run on the reference device (fp32),
// then on npu in fp16 and in int8 (calibrated on 8 other seeded inputs). Reported per model and
// precision: the mean relative L2 error of the logits, ||y - y_ref|| / ||y_ref||, its maximum,
// top-1 agreement, and the fp32 top-1/top-2 margin against the error the reduced precision puts
// on it, both in logit stds. The foundation models carry seeded *random* weights; their logits for
// noise inputs behave like 1000 near-Gaussian values, so the fp32 top-1 margin is often a few
// hundredths of a std, while the classifier amplifies the fp16 error of the pooled features about
// 5-20x (docs/backend-npu.md). Asserted: finite outputs, mean error bounds, every decisive input
// (fp32 margin >= kDecisiveMargin) keeps its top-1 in fp16, and, from kMinSamplesForRate inputs
// on, top-1 agreement rates; the bounds are the measured 50-input figures with margin.
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

int env_count(const char* name, int def) {
  const char* s = std::getenv(name);
  const int n = s ? std::atoi(s) : def;
  return std::clamp(n, 1, 1000);
}
int sample_count() {
  return env_count("TESSERA_NPU_PRECISION_SAMPLES", 3);
}

// int8 calibration: TESSERA_NPU_CALIBRATION_SAMPLES seeded inputs (default 8, seeds disjoint from
// the evaluation inputs), ranges picked by the driver's int8_calibration option
// (TESSERA_NPU_INT8_CALIBRATION = minmax | percentile | mse; unset: the driver's default, mse).
// TESSERA_NPU_INT8_LAYER_REPORT=1 prints each layer's int8 error against fp16 over the
// calibration inputs (its output with everything before it, and its own quantisation alone).
int calibration_count() {
  return env_count("TESSERA_NPU_CALIBRATION_SAMPLES", 8);
}
bool layer_report() {
  const char* r = std::getenv("TESSERA_NPU_INT8_LAYER_REPORT");
  return r != nullptr && std::string(r) == "1";
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

// Standard deviation of the logits: the scale that margins and errors are measured in.
double logit_std(const Tensor& t) {
  double s = 0, s2 = 0;
  for (int64_t i = 0; i < t.numel(); ++i) s += t.data<float>()[i];
  const double mean = s / static_cast<double>(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    s2 += (t.data<float>()[i] - mean) * (t.data<float>()[i] - mean);
  return std::sqrt(s2 / static_cast<double>(t.numel()));
}

// Index of the second-largest logit.
int runner_up(const Tensor& ref) {
  const float* z = ref.data<float>();
  const int a = argmax(ref);
  int b = a == 0 ? 1 : 0;
  for (int64_t i = 0; i < ref.numel(); ++i)
    if (i != a && z[i] > z[b]) b = static_cast<int>(i);
  return b;
}

// fp32 top-1 minus top-2 logit, in units of the logit std.
double top_margin(const Tensor& ref) {
  const float* z = ref.data<float>();
  return (z[argmax(ref)] - z[runner_up(ref)]) / logit_std(ref);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

// A top-1 decision counts as decisive when the fp32 margin is at least this many logit stds. fp16
// moved the margin by at most 0.047 std on MobileNetV2, ResNet18 and SqueezeNet (50 inputs each);
// the bound keeps headroom for the deeper models not yet measured at 50 inputs
// (docs/backend-npu.md).
constexpr double kDecisiveMargin = 0.25;

// Asserted bounds: the measured 50-input figures with margin, and above the pre-fix 10-input
// figures of the models not yet measured at 50 (ResNet50: 6.0e-2, 90%; VGG16: 90%). Agreement
// rates are asserted only from kMinSamplesForRate inputs on: with CI's 3 inputs one near-tie is
// 33%.
constexpr double kFp16MeanRelErr = 0.08;
constexpr double kFp16Agreement = 0.80;
// int8 bounds per model: the measured 20-input mean relative error (MSE calibration, 8 calibration
// inputs; docs/backend-npu.md) with margin for CI's 3 inputs, and top-1 agreement where it is
// meaningful. ResNet50 and VGG16 are not measured yet and keep the loose bound.
struct Int8Bound {
  const char* model;
  double mean_rel_err, agreement;
};
constexpr Int8Bound kInt8Bounds[] = {{"mobilenet_v2", 0.60, 0.25},  {"resnet18", 0.55, 0.0},
                                     {"squeezenet1_1", 0.12, 0.75}, {"alexnet", 0.20, 0.65},
                                     {"resnet50", 1.2, 0.0},        {"vgg16", 1.2, 0.0}};
Int8Bound int8_bound(const std::string& model) {
  for (const Int8Bound& b : kInt8Bounds)
    if (model == b.model) return b;
  return {"", 1.2, 0.0};
}
constexpr int kMinSamplesForRate = 20;

struct Figures {
  std::vector<double> rel, margin_err;
  int agree = 0, decisive = 0, decisive_agree = 0;
  double seconds = 0;
  // `got` against `ref`: relative L2 error, top-1 agreement, and how much the reduced precision
  // moved the fp32 top-1 margin (the error that decides a flip), in logit stds.
  void add(const Tensor& got, const Tensor& ref) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const double g = got.data<float>()[i], r = ref.data<float>()[i];
      EXPECT_TRUE(std::isfinite(g)) << "non-finite logit " << i;
      num += (g - r) * (g - r);
      den += r * r;
    }
    rel.push_back(std::sqrt(num / std::max(den, 1e-30)));
    const int a = argmax(ref), b = runner_up(ref);
    const float* z = ref.data<float>();
    const float* y = got.data<float>();
    margin_err.push_back(std::fabs((y[a] - y[b]) - (z[a] - z[b])) / logit_std(ref));
    const bool same = argmax(got) == a;
    agree += same;
    if (top_margin(ref) >= kDecisiveMargin) {
      ++decisive;
      decisive_agree += same;
    }
  }
  int count() const { return static_cast<int>(rel.size()); }
  double mean_rel() const {
    double s = 0;
    for (double r : rel) s += r;
    return rel.empty() ? 0 : s / static_cast<double>(rel.size());
  }
  double max_rel() const { return rel.empty() ? 0 : *std::max_element(rel.begin(), rel.end()); }
  double agreement() const { return count() ? static_cast<double>(agree) / count() : 0; }
};

// The driver's per-layer int8 errors (extension tnpu_ref_node_error), one line per layer.
void print_layer_report(const Graph& g, const std::vector<NodeId>& layers, const NpuProgram& np) {
  using NodeErrorFn = tnpu_status (*)(tnpu_prepared, uint32_t, double*, double*);
  const tnpu_driver_api& api = np.driver_api();
  auto fn = reinterpret_cast<NodeErrorFn>(
      api.get_proc_address ? api.get_proc_address("tnpu_ref_node_error") : nullptr);
  ASSERT_NE(fn, nullptr) << "the driver has no tnpu_ref_node_error extension";
  for (size_t i = 0; i < layers.size(); ++i) {
    double total = 0, own = 0;
    ASSERT_EQ(fn(np.prepared_handle(), static_cast<uint32_t>(i), &total, &own), TNPU_OK)
        << api.prepared_last_error(np.prepared_handle());
    EXPECT_TRUE(std::isfinite(total) && std::isfinite(own));
    const Node& n = g.node(layers[i]);
    std::printf("[ int8 layer ] %3zu %-40s %-18s total %.3e  own %.3e\n", i, n.name.c_str(),
                op_name(n.kind), total, own);
  }
}

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
  std::vector<double> margins;
  for (const Tensor& z : want) margins.push_back(top_margin(z));
  std::printf(
      "[ npu precision ] %-14s fp32  top-1 margin / logit std over %d inputs: min %.4f  p10 %.4f  "
      "median %.4f  (%d below %.2f)\n",
      GetParam(), n, percentile(margins, 0), percentile(margins, 0.1), percentile(margins, 0.5),
      static_cast<int>(std::count_if(margins.begin(), margins.end(),
                                     [](double v) { return v < kDecisiveMargin; })),
      kDecisiveMargin);

  for (uint32_t precision : {TNPU_PRECISION_F16, TNPU_PRECISION_INT8}) {
    NpuOptions opt;
    opt.driver_path = NpuDriver::reference_driver_path();
    opt.precision = precision;
    opt.driver_options = {{"memory_capacity_mb", "400"}};
    std::string method = "mse (default)";
    if (precision == TNPU_PRECISION_INT8) {
      for (int c = 0; c < calibration_count(); ++c)
        opt.calibration.push_back({seeded_image(in_shape, 50000 + static_cast<uint32_t>(c))});
      if (const char* env = std::getenv("TESSERA_NPU_INT8_CALIBRATION")) {
        opt.driver_options.push_back({"int8_calibration", env});
        method = env;
      }
      if (layer_report()) opt.driver_options.push_back({"int8_layer_report", "1"});
    }
    auto d = NpuDevice::open(0, opt);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    auto p = (*d)->compile(g, m.all);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    auto* np = dynamic_cast<NpuProgram*>(p->get());
    ASSERT_NE(np, nullptr);
    if (precision == TNPU_PRECISION_INT8) {
      std::printf("[ npu precision ] %-14s int8 calibration: %s over %d inputs\n", GetParam(),
                  method.c_str(), calibration_count());
      if (layer_report()) print_layer_report(g, m.all, *np);
    }
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
        "agreement %5.1f%%  decisive %d/%d  margin error / logit std: median %.4f max %.4f  "
        "(weights %.1f MB + activations %.1f MB; %.3f s/run, fp32 reference %.3f s/run)\n",
        GetParam(), npu_precision_name(precision), f.count(), f.mean_rel(), f.max_rel(),
        100 * f.agreement(), f.decisive_agree, f.decisive, percentile(f.margin_err, 0.5),
        percentile(f.margin_err, 1), info.weight_bytes / 1e6, info.activation_bytes / 1e6,
        f.seconds, ref_seconds);
    if (precision == TNPU_PRECISION_F16) {
      EXPECT_LE(f.mean_rel(), kFp16MeanRelErr);
      // Every decisive top-1 survives fp16; the flips are near-ties (margin below 0.1 std).
      EXPECT_EQ(f.decisive_agree, f.decisive);
      if (f.count() >= kMinSamplesForRate) {
        EXPECT_GE(f.agreement(), kFp16Agreement);
      }
    } else {
      // int8 top-1 agreement is 20-90% on these models (docs/backend-npu.md): asserted only
      // where the measured figure leaves a margin.
      const Int8Bound b = int8_bound(GetParam());
      EXPECT_LE(f.mean_rel(), b.mean_rel_err);
      if (f.count() >= kMinSamplesForRate) {
        EXPECT_GE(f.agreement(), b.agreement);
      }
    }
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
