// int8 calibration of the reference NPU driver: the activation range each method picks on known
// distributions (with and without outliers), and the per-node error report. Runs through the
// HAL (set_device_option, prepare, the tnpu_ref_* extensions), like a vendor toolchain's user.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backends/npu/hal.h"
#include "backends/npu/npu_driver.h"

namespace tessera {
namespace {

using RangeFn = tnpu_status (*)(tnpu_prepared, uint32_t, float*, float*);
using NodeErrorFn = tnpu_status (*)(tnpu_prepared, uint32_t, double*, double*);

// y = x + x over a 1 x 16 x 64 x 64 input: x is a model input that is not an output, so its range
// is calibrated by the method under test (model outputs keep their full observed range).
struct AddGraph {
  static constexpr int64_t kNumel = 16 * 64 * 64;
  std::vector<tnpu_tensor_desc> tensors;
  std::vector<uint32_t> node_in{0, 0}, node_out{1}, in{0}, out{1};
  tnpu_node node{};
  tnpu_graph graph{};
  AddGraph() {
    tensors.resize(2);
    for (int i = 0; i < 2; ++i) {
      tnpu_tensor_desc& t = tensors[static_cast<size_t>(i)];
      t = tnpu_tensor_desc{};
      t.name = i == 0 ? "x" : "y";
      t.dtype = TNPU_DTYPE_F32;
      t.rank = 4;
      const int64_t dims[4] = {1, 16, 64, 64};
      for (int k = 0; k < 4; ++k) t.dims[k] = dims[k];
    }
    node.name = "add";
    node.op_type = "Add";
    node.inputs = node_in.data(), node.num_inputs = 2;
    node.outputs = node_out.data(), node.num_outputs = 1;
    graph.struct_size = sizeof(graph);
    graph.tensors = tensors.data(), graph.num_tensors = 2;
    graph.nodes = &node, graph.num_nodes = 1;
    graph.inputs = in.data(), graph.num_inputs = 1;
    graph.outputs = out.data(), graph.num_outputs = 1;
  }
};

std::vector<float> gaussian(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(AddGraph::kNumel);
  for (float& x : v) x = d(rng);
  return v;
}

std::vector<float> uniform(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.f, 3.f);
  std::vector<float> v(AddGraph::kNumel);
  for (float& x : v) x = d(rng);
  return v;
}

class NpuCalibration : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = NpuDriver::reference_driver_path();
    if (path.empty()) {
      const char* r = std::getenv("TESSERA_REQUIRE_NPU");
      if (r != nullptr && *r != '\0' && std::string(r) != "0")
        FAIL() << "TESSERA_REQUIRE_NPU is set but no reference NPU driver was built";
      GTEST_SKIP() << "reference NPU driver not built";
    }
    auto d = NpuDriver::load(path);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    driver_ = *d;
    api_ = &driver_->api();
    ASSERT_EQ(api_->open_device(0, &dev_), TNPU_OK) << api_->driver_last_error();
    range_ = reinterpret_cast<RangeFn>(api_->get_proc_address("tnpu_ref_tensor_range"));
    node_error_ = reinterpret_cast<NodeErrorFn>(api_->get_proc_address("tnpu_ref_node_error"));
    ASSERT_NE(range_, nullptr);
    ASSERT_NE(node_error_, nullptr);
  }
  void TearDown() override {
    if (api_ != nullptr && dev_ != nullptr) api_->close_device(dev_);
  }

  // Prepares y = x + x in int8 with `method`, calibrated on `samples`.
  tnpu_prepared prepare(const char* method, const std::vector<std::vector<float>>& samples) {
    EXPECT_EQ(api_->set_device_option(dev_, "int8_calibration", method), TNPU_OK)
        << api_->device_last_error(dev_);
    std::vector<const float*> ptrs;
    for (const auto& s : samples) ptrs.push_back(s.data());
    tnpu_calibration cal{};
    cal.num_samples = static_cast<uint32_t>(ptrs.size());
    cal.inputs = ptrs.data();
    tnpu_prepare_options o{};
    o.struct_size = sizeof(o);
    o.precision = TNPU_PRECISION_INT8;
    o.calibration = &cal;
    tnpu_prepared p = nullptr;
    EXPECT_EQ(api_->prepare(dev_, &graph_.graph, &o, &p), TNPU_OK) << api_->device_last_error(dev_);
    return p;
  }

  std::pair<float, float> range_of(tnpu_prepared p, uint32_t tensor) {
    float lo = NAN, hi = NAN;
    EXPECT_EQ(range_(p, tensor, &lo, &hi), TNPU_OK) << api_->prepared_last_error(p);
    return {lo, hi};
  }

  // Mean squared error of quantising `x` to the input boundary's int8 scale and zero point.
  double input_mse(tnpu_prepared p, const std::vector<float>& x) {
    tnpu_io_desc d{};
    d.struct_size = sizeof(d);
    EXPECT_EQ(api_->get_io_desc(p, 0, 0, &d), TNPU_OK);
    EXPECT_EQ(d.dtype, TNPU_DTYPE_I8);
    double e = 0;
    for (float v : x) {
      const float q =
          std::clamp(std::nearbyint(v / d.scale) + static_cast<float>(d.zero_point), -128.f, 127.f);
      const float back = d.scale * (q - static_cast<float>(d.zero_point));
      e += static_cast<double>(back - v) * (back - v);
    }
    return e / static_cast<double>(x.size());
  }

  AddGraph graph_;
  std::shared_ptr<const NpuDriver> driver_;
  const tnpu_driver_api* api_ = nullptr;
  tnpu_device dev_ = nullptr;
  RangeFn range_ = nullptr;
  NodeErrorFn node_error_ = nullptr;
};

// 8 x 65536 N(0, 1) values and one outlier at +30: min/max stretches the range to the outlier;
// percentile clips it to the Gaussian's 0.005% quantile; MSE clips it part way (one value's
// clipping error against every value's rounding noise: the optimum is near 16); the model output
// keeps its full range.
TEST_F(NpuCalibration, OutlierIsClippedByPercentileAndMse) {
  std::vector<std::vector<float>> samples;
  for (uint32_t s = 0; s < 8; ++s) samples.push_back(gaussian(10 + s));
  samples[3][1234] = 30.f;
  float observed_lo = 0;
  for (const auto& s : samples)
    for (float v : s) observed_lo = std::min(observed_lo, v);
  const std::vector<float> held_out = gaussian(99);

  tnpu_prepared mm = prepare("minmax", samples);
  tnpu_prepared pc = prepare("percentile", samples);
  tnpu_prepared ms = prepare("mse", samples);
  ASSERT_TRUE(mm && pc && ms);
  const auto [mm_lo, mm_hi] = range_of(mm, 0);
  EXPECT_FLOAT_EQ(mm_hi, 30.f);
  EXPECT_FLOAT_EQ(mm_lo, observed_lo);
  const auto [pc_lo, pc_hi] = range_of(pc, 0);
  // The 0.005% quantiles of N(0, 1) are at +-3.9.
  EXPECT_GT(pc_hi, 3.5f);
  EXPECT_LT(pc_hi, 4.5f);
  EXPECT_LT(pc_lo, -3.5f);
  EXPECT_GT(pc_lo, -4.5f);
  const auto [ms_lo, ms_hi] = range_of(ms, 0);
  EXPECT_GT(ms_hi, 8.0f);
  EXPECT_LT(ms_hi, 24.0f);
  // Below zero the Gaussian tail alone: clipped near 4 std, inside the observed minimum.
  EXPECT_LT(ms_lo, -3.0f);
  EXPECT_GT(ms_lo, observed_lo);
  // The output is never clipped: 2 x the largest input.
  EXPECT_FLOAT_EQ(range_of(ms, 1).second, 60.f);
  // On held-out values the clipped ranges quantise far better.
  const double e_mm = input_mse(mm, held_out), e_ms = input_mse(ms, held_out);
  EXPECT_LT(e_ms, e_mm / 2) << e_ms << " vs " << e_mm;
  EXPECT_LT(input_mse(pc, held_out), e_mm / 10);
  std::printf(
      "[ npu calibration ] x: minmax [%.2f, %.2f] mse [%.2f, %.2f] percentile [%.2f, %.2f]\n",
      mm_lo, mm_hi, ms_lo, ms_hi, pc_lo, pc_hi);
  for (tnpu_prepared p : {mm, pc, ms}) api_->release(p);
}

// A uniform distribution has no tail worth clipping: every method keeps (nearly) all of it.
TEST_F(NpuCalibration, UniformKeepsItsRange) {
  std::vector<std::vector<float>> samples;
  for (uint32_t s = 0; s < 2; ++s) samples.push_back(uniform(20 + s));
  for (const char* method : {"minmax", "percentile", "mse"}) {
    tnpu_prepared p = prepare(method, samples);
    ASSERT_NE(p, nullptr) << method;
    const auto [lo, hi] = range_of(p, 0);
    EXPECT_NEAR(hi, 3.f, 0.06f) << method;
    EXPECT_NEAR(lo, -3.f, 0.06f) << method;
    api_->release(p);
  }
}

TEST_F(NpuCalibration, OptionsAndLayerReportRefuseBadInput) {
  EXPECT_EQ(api_->set_device_option(dev_, "int8_calibration", "kl"), TNPU_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(api_->device_last_error(dev_)).find("minmax, percentile or mse"),
            std::string::npos)
      << api_->device_last_error(dev_);
  EXPECT_EQ(api_->set_device_option(dev_, "int8_layer_report", "yes"), TNPU_ERR_INVALID_ARGUMENT);

  const std::vector<std::vector<float>> samples{gaussian(1), gaussian(2)};
  tnpu_prepared plain = prepare("mse", samples);
  ASSERT_NE(plain, nullptr);
  double total = 0, own = 0;
  EXPECT_EQ(node_error_(plain, 0, &total, &own), TNPU_ERR_NOT_FOUND);
  EXPECT_NE(std::string(api_->prepared_last_error(plain)).find("int8_layer_report=1"),
            std::string::npos);
  EXPECT_EQ(node_error_(plain, 0, nullptr, &own), TNPU_ERR_INVALID_ARGUMENT);
  api_->release(plain);

  ASSERT_EQ(api_->set_device_option(dev_, "int8_layer_report", "1"), TNPU_OK);
  tnpu_prepared rep = prepare("mse", samples);
  ASSERT_NE(rep, nullptr);
  ASSERT_EQ(node_error_(rep, 0, &total, &own), TNPU_OK);
  // y = 2x quantised over [-2 max, 2 max] with 256 levels: about 0.3% relative error, most of it
  // the input's own quantisation carried through.
  EXPECT_GT(total, 1e-4);
  EXPECT_LT(total, 3e-2);
  EXPECT_GT(own, 1e-4);
  EXPECT_LT(own, total + 1e-3);
  EXPECT_EQ(node_error_(rep, 1, &total, &own), TNPU_ERR_NOT_FOUND);
  api_->release(rep);
}

}  // namespace
}  // namespace tessera
