// Model-level differential tests: each foundation model, exported from PyTorch with seeded random
// weights by scripts/export_models.py, is converted (import + passes + .tsr round trip), run on a
// device, and compared with PyTorch's output:
//     max |tessera - torch| <= 1e-4 * max(1, max |torch|)   on the reference device,
//                               1e-3 * max(1, max |torch|)   on any other device.
// TESSERA_TEST_DEVICE picks the device (default reference). A device that cannot hold or run a
// model (e.g. lavapipe's 128 MiB buffer limit against VGG16's first FC weight) reports it as
// unsupported: the test is skipped with the reason, not failed. A device that does not exist
// skips too, unless TESSERA_REQUIRE_VULKAN is set for a vulkan device.
// The model directory comes from TESSERA_MODEL_DIR (ctest sets it; the export runs as a fixture).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "api/internal.h"
#include "core/npy.h"
#include "graph/format/model_file.h"
#include "graph/layer_graph.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"

namespace tessera {
namespace {

std::string model_dir() {
  const char* d = std::getenv("TESSERA_MODEL_DIR");
  return d ? d : "";
}

struct ModelCase {
  const char* name;
};

// Every model runs on the reference device, on `cpu` (all cores) and on `cpu:0` (one thread),
// within 1e-4 * max(1, max|torch|).
const char* const kDevices[] = {"reference", "cpu", "cpu:0"};
// The foundation models also run on the GPU backends, within 1e-3 * max(1, max|torch|). Where the
// device is absent they are skipped, unless TESSERA_REQUIRE_<KIND> is set (CI sets it, having
// installed lavapipe and PoCL).
const char* const kGpuDevices[] = {"vulkan:0", "opencl:0"};

// The bf16 precision level (docs/precision.md) on the foundation models: relative L2 against
// f32 PyTorch within this bound. These models carry seeded random weights, rescaled so that
// activations keep unit scale through the depth: they amplify rounding far more than trained
// weights do. PyTorch's own bf16 (the model cast to bfloat16, same input) is off by 0.13
// (ResNet-18), 0.13 (MobileNetV2), 0.35 (ResNet-50) on them; Tessera's bf16 rounds less
// often (f32 between fused operations, f32 accumulation) and stays below that (docs/precision.md).
constexpr double kBf16ModelBound = 0.3;
// How many root-mean-square logit errors may separate, in PyTorch's f32 output, the class a
// reduced precision ranks first from PyTorch's top-1. The difference of two logit errors has
// about sqrt(2) times the rms; 6 rms is over 4 of its standard deviations.
constexpr double kTop1ErrorReach = 6.0;

bool is_gpu(const std::string& device) {
  return device.rfind("vulkan", 0) == 0 || device.rfind("opencl", 0) == 0;
}

bool device_required(const std::string& device) {
  std::string kind = device.substr(0, device.find(':'));
  for (char& c : kind) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return std::getenv(("TESSERA_REQUIRE_" + kind).c_str()) != nullptr;
}

class ModelTest : public ::testing::TestWithParam<std::tuple<ModelCase, const char*>> {
 protected:
  const ModelCase& model_case() const { return std::get<0>(GetParam()); }
  std::string test_device() const { return std::get<1>(GetParam()); }
};

std::string case_name(const ::testing::TestParamInfo<ModelTest::ParamType>& p) {
  std::string d = std::get<1>(p.param);
  for (char& c : d) {
    if (c == ':' || c == '#') c = '_';
  }
  return std::string(std::get<0>(p.param).name) + "_" + d;
}

TEST_P(ModelTest, MatchesPyTorch) {
  const std::string dir = model_dir();
  ASSERT_FALSE(dir.empty()) << "TESSERA_MODEL_DIR is not set (run through ctest)";
  const std::string base = dir + "/" + model_case().name;
  ASSERT_TRUE(std::filesystem::exists(base + ".onnx"))
      << base << ".onnx is missing: scripts/export_models.py did not produce it";

  PassStats stats;
  auto imported = convert_onnx(base + ".onnx", {}, &stats);
  ASSERT_TRUE(imported.ok()) << imported.status().to_string();
  // After the passes no shape arithmetic, Identity or Dropout remains, and a BatchNormalization
  // remains only where no layer precedes it to fold into (DenseNet's pre-activation blocks).
  const Graph& opt = imported->graph;
  for (const Node& n : opt.nodes()) {
    if (n.kind == OpKind::kBatchNormalization) {
      const NodeId p = opt.value(n.inputs[0]).producer;
      EXPECT_TRUE(p == kNoNode || opt.node(p).kind != OpKind::kConv) << n.name;
    }
    EXPECT_NE(n.kind, OpKind::kShape) << n.name;
    EXPECT_NE(n.kind, OpKind::kIdentity) << n.name;
    EXPECT_NE(n.kind, OpKind::kDropout) << n.name;
  }

  // A name of this case and process: ctest runs the devices' cases of one model at once.
  std::string device_part = test_device();
  for (char& c : device_part) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  const std::string tsr = ::testing::TempDir() + model_case().name + "_" + device_part + "_" +
                          std::to_string(::getpid()) + ".tsr";
  ASSERT_TRUE(save_model(imported->graph, tsr, ModelMetadata{"model_test", {}}).ok());
  auto model = Model::load(tsr);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  std::remove(tsr.c_str());
  auto lg = LayerGraph::build(model_graph(**model));
  ASSERT_TRUE(lg.ok());
  EXPECT_GT(lg->total_flops(), 1e7);

  auto input = read_npy(base + ".input.npy");
  ASSERT_TRUE(input.ok()) << input.status().to_string();
  auto expected = read_npy(base + ".output.npy");
  ASSERT_TRUE(expected.ok()) << expected.status().to_string();

  auto session = Session::create(*model, test_device());
  if (!session.ok() && is_gpu(test_device()) && session.status().code() == StatusCode::kNotFound &&
      !device_required(test_device())) {
    GTEST_SKIP() << test_device() << " is not available here: " << session.status().message();
  }
  ASSERT_TRUE(session.ok()) << session.status().to_string();
  auto outputs = (*session)->run({*input});
  ASSERT_TRUE(outputs.ok()) << outputs.status().to_string();
  ASSERT_EQ(outputs->size(), 1u);
  const Tensor& got = (*outputs)[0];
  ASSERT_EQ(got.shape(), expected->shape());

  double max_ref = 0, max_err = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const float g = got.data<float>()[i], e = expected->data<float>()[i];
    ASSERT_TRUE(std::isfinite(g)) << "non-finite output at " << i;
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(e)));
    max_err = std::max(max_err, static_cast<double>(std::fabs(g - e)));
  }
  if (test_device().find('#') != std::string::npos) {
    // A reduced precision: the relative L2 error against PyTorch's f32 output, bounded by
    // kBf16ModelBound (see there), and a top-1 decision the error can account for. With seeded
    // random weights the logits behave like 1000 near-Gaussian values, so PyTorch's top-1 often
    // leads the runner-up by a few hundredths of a logit std (ResNet-50: 0.089 at a std of 1.1)
    // and any reduced precision may swap them. Asserted: the class Tessera ranks first scores,
    // in PyTorch's f32 output, within kTop1ErrorReach root-mean-square errors of PyTorch's top-1;
    // a reference margin above that reach makes it the same class.
    double err2 = 0, ref2 = 0;
    int64_t arg = 0, arg_ref = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const double g = got.data<float>()[i], e = expected->data<float>()[i];
      err2 += (g - e) * (g - e);
      ref2 += e * e;
      if (g > got.data<float>()[arg]) arg = i;
      if (e > expected->data<float>()[arg_ref]) arg_ref = i;
    }
    const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
    const double rms_err = std::sqrt(err2 / static_cast<double>(got.numel()));
    const double ref_top = expected->data<float>()[arg_ref];
    const double ref_at_arg = expected->data<float>()[arg];
    std::printf(
        "[ model ] %-14s device %-10s relative L2 %.3g  bound %.3g  top-1 %s (f32 %.4g vs "
        "%.4g, rms error %.3g)\n",
        model_case().name, test_device().c_str(), rel, kBf16ModelBound,
        arg == arg_ref ? "same" : "differs", ref_at_arg, ref_top, rms_err);
    EXPECT_LE(rel, kBf16ModelBound);
    EXPECT_GE(ref_at_arg, ref_top - kTop1ErrorReach * rms_err)
        << "Tessera's top-1 class " << arg << " scores " << ref_at_arg
        << " in f32, PyTorch's top-1 " << arg_ref << " scores " << ref_top << "; the rms error "
        << rms_err << " does not account for the swap";
    return;
  }
  const double tol = (is_gpu(test_device()) ? 1e-3 : 1e-4) * std::max(1.0, max_ref);
  std::printf(
      "[ model ] %-14s device %-10s max|err| %.3g  tolerance %.3g  (max|ref| %.3g, %d layers, "
      "%s)\n",
      model_case().name, test_device().c_str(), max_err, tol, max_ref, lg->num_layers(),
      stats.to_string().c_str());
  EXPECT_LE(max_err, tol);
}

// The six foundation models.
INSTANTIATE_TEST_SUITE_P(
    Foundation, ModelTest,
    ::testing::Combine(::testing::Values(ModelCase{"mobilenet_v2"}, ModelCase{"resnet18"},
                                         ModelCase{"resnet50"}, ModelCase{"squeezenet1_1"},
                                         ModelCase{"vgg16"}, ModelCase{"alexnet"}),
                       ::testing::ValuesIn(kDevices)),
    case_name);
INSTANTIATE_TEST_SUITE_P(
    Gpu, ModelTest,
    ::testing::Combine(::testing::Values(ModelCase{"mobilenet_v2"}, ModelCase{"resnet18"},
                                         ModelCase{"resnet50"}, ModelCase{"squeezenet1_1"},
                                         ModelCase{"vgg16"}, ModelCase{"alexnet"}),
                       ::testing::ValuesIn(kGpuDevices)),
    case_name);
#ifdef TESSERA_HAVE_ONEDNN
// The foundation models at the bf16 precision level of the cpu device, 2 threads and 1, and
// ShuffleNet (its channel shuffles and splits move bf16 bytes).
INSTANTIATE_TEST_SUITE_P(
    Bf16, ModelTest,
    ::testing::Combine(::testing::Values(ModelCase{"mobilenet_v2"}, ModelCase{"resnet18"},
                                         ModelCase{"resnet50"}, ModelCase{"squeezenet1_1"},
                                         ModelCase{"vgg16"}, ModelCase{"alexnet"},
                                         ModelCase{"shufflenet_v2_x0_5"}),
                       ::testing::Values("cpu#bf16", "cpu:0#bf16")),
    case_name);
#endif
// More torchvision architectures: squeeze-excite and hard-swish (mobilenet_v3_small), inception
// branches and ceil-mode pooling (googlenet), channel shuffle through run-time shape arithmetic
// (shufflenet_v2_x0_5), dense concatenation with Pad (densenet121), SiLU (efficientnet_b0).
INSTANTIATE_TEST_SUITE_P(
    Extra, ModelTest,
    ::testing::Combine(::testing::Values(ModelCase{"mobilenet_v3_small"}, ModelCase{"googlenet"},
                                         ModelCase{"shufflenet_v2_x0_5"}, ModelCase{"densenet121"},
                                         ModelCase{"efficientnet_b0"}),
                       ::testing::ValuesIn(kDevices)),
    case_name);
// The extra architectures on the emulated GPUs too.
INSTANTIATE_TEST_SUITE_P(
    ExtraGpu, ModelTest,
    ::testing::Combine(::testing::Values(ModelCase{"mobilenet_v3_small"}, ModelCase{"googlenet"},
                                         ModelCase{"shufflenet_v2_x0_5"}, ModelCase{"densenet121"},
                                         ModelCase{"efficientnet_b0"}),
                       ::testing::Values("vulkan:0", "opencl:0")),
    case_name);

}  // namespace
}  // namespace tessera
