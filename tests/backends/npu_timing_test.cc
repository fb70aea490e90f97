// Timing on the `npu` device: layers timed inside a run (a timed NpuProgram::run over HAL 1.1
// execute_profiled), the fallback for HAL 1.0 drivers, drivers that report bad node counts, the
// boundary conversion the profiler fits as the NPU's transfer cost, and a profile of npu:0.
//
// Needs the reference driver; skips without it unless TESSERA_REQUIRE_NPU is set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/npu/npu_device.h"
#include "scheduler/profiler.h"
#include "tests/backends/npu_test_util.h"
#include "tests/ops/op_test_util.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::random_tensor;

using testing::has;
using testing::reference_options;

// x[1,8,12,12] -> Conv 3x3 + relu -> MaxPool 2x2 -> Conv 1x1 -> y[1,16,6,6]: three layers.
Graph three_layers() {
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 8, 12, 12}});
  g.inputs().push_back(x);
  const ValueId w1 = g.add_constant("w1", random_tensor(Shape{12, 8, 3, 3}, 1, -0.3f, 0.3f));
  const ValueId w2 = g.add_constant("w2", random_tensor(Shape{16, 12, 1, 1}, 2, -0.3f, 0.3f));
  const ValueId a = g.add_value("a", TensorInfo{DType::kF32, Shape{1, 12, 12, 12}});
  const ValueId p = g.add_value("p", TensorInfo{DType::kF32, Shape{1, 12, 6, 6}});
  const ValueId y = g.add_value("y", TensorInfo{DType::kF32, Shape{1, 16, 6, 6}});
  Attributes conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  conv.set("activation", std::string("relu"));
  Attributes pool;
  pool.set("kernel_shape", std::vector<int64_t>{2, 2});
  pool.set("strides", std::vector<int64_t>{2, 2});
  g.add_node(Node{"conv1", OpKind::kConv, conv, {x, w1}, {a}});
  g.add_node(Node{"pool", OpKind::kMaxPool, pool, {a}, {p}});
  g.add_node(Node{"conv2", OpKind::kConv, {}, {p, w2}, {y}});
  g.outputs().push_back(y);
  return g;
}

const std::vector<NodeId> kAll = {0, 1, 2};

struct Compiled {
  std::unique_ptr<NpuDevice> device;
  std::unique_ptr<Program> program;
};

Compiled compile_on(const std::string& driver_path, const Graph& g) {
  NpuOptions o = reference_options();
  o.driver_path = driver_path;
  Compiled c;
  auto d = NpuDevice::open(0, o);
  EXPECT_TRUE(d.ok()) << d.status().to_string();
  if (!d.ok()) return c;
  c.device = std::move(*d);
  auto p = c.device->compile(g, kAll);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  if (p.ok()) c.program = std::move(*p);
  return c;
}

TEST(NpuRunTimed, TimesEveryLayerInsideTheRun) {
  REQUIRE_REFERENCE_DRIVER();
  const Graph g = three_layers();
  Compiled c = compile_on(NpuDriver::reference_driver_path(), g);
  ASSERT_NE(c.program, nullptr);
  const std::vector<Tensor> in = {random_tensor(Shape{1, 8, 12, 12}, 5)};
  std::vector<Tensor> plain(1), timed(1);
  ASSERT_TRUE(c.program->run(in, plain).ok());
  std::vector<double> ms = {42.0};  // replaced, not appended to
  const Status st = c.program->run(in, timed, RunOptions::timed(&ms));
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(ms.size(), 3u);
  for (double t : ms) EXPECT_GT(t, 0.0);
  ASSERT_EQ(plain[0].numel(), timed[0].numel());
  for (int64_t i = 0; i < plain[0].numel(); ++i)
    ASSERT_EQ(plain[0].data<float>()[i], timed[0].data<float>()[i]) << "same outputs as run()";
  const NpuRunStats& s = static_cast<NpuProgram*>(c.program.get())->last_run();
  ASSERT_TRUE(s.driver_counters);
  ASSERT_EQ(s.node_ns.size(), 3u);
  double sum_ns = 0;
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_DOUBLE_EQ(ms[i], static_cast<double>(s.node_ns[i]) / 1e6);
    sum_ns += static_cast<double>(s.node_ns[i]);
  }
  // The layers add up to the driver's compute time; the boundary conversions are outside them.
  EXPECT_LE(sum_ns, static_cast<double>(s.compute_ns));
  EXPECT_GT(s.input_conversion_ns, 0u);
  EXPECT_GT(s.output_conversion_ns, 0u);
  EXPECT_GE(s.total_ns, s.input_conversion_ns + s.compute_ns + s.output_conversion_ns);
  EXPECT_EQ(s.host_conversion_ns, s.host_input_ns + s.host_output_ns);
  EXPECT_EQ(s.bytes_in, 8u * 12 * 12 * 2);
  EXPECT_EQ(s.bytes_out, 16u * 6 * 6 * 2);
}

TEST(NpuRunTimed, Hal10DriverRunsButDoesNotTimeLayers) {
  REQUIRE_REFERENCE_DRIVER();
  auto drv = NpuDriver::load(TESSERA_NPU_FORWARD_V1_0);
  ASSERT_TRUE(drv.ok()) << drv.status().to_string();
  EXPECT_EQ(TNPU_VERSION_MINOR((*drv)->api().api_version), 0u);
  EXPECT_FALSE(TNPU_HAS_SLOT(&(*drv)->api(), execute_profiled))
      << "the slot lies beyond a 1.0 table's struct_size";
  const Graph g = three_layers();
  Compiled c = compile_on(TESSERA_NPU_FORWARD_V1_0, g);
  ASSERT_NE(c.program, nullptr);
  const std::vector<Tensor> in = {random_tensor(Shape{1, 8, 12, 12}, 5)};
  std::vector<Tensor> out(1);
  ASSERT_TRUE(c.program->run(in, out).ok());
  std::vector<double> ms;
  const Status st = c.program->run(in, out, RunOptions::timed(&ms));
  EXPECT_EQ(st.code(), StatusCode::kUnimplemented);
  EXPECT_TRUE(has(st.message(), "execute_profiled")) << st.message();
  EXPECT_TRUE(has(st.message(), "1.0")) << st.message();
  // The boundary is still timed, from get_perf_counters.
  auto runs = c.device->time_boundary(16384, 0, 2);
  ASSERT_TRUE(runs.ok()) << runs.status().to_string();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_GT((*runs)[0].in_ms, 0.0);
}

TEST(NpuRunTimed, BadNodeCountIsAnError) {
  REQUIRE_REFERENCE_DRIVER();
  const Graph g = three_layers();
  Compiled c = compile_on(TESSERA_NPU_FORWARD_BAD_COUNT, g);
  ASSERT_NE(c.program, nullptr);
  const std::vector<Tensor> in = {random_tensor(Shape{1, 8, 12, 12}, 5)};
  std::vector<Tensor> out(1);
  std::vector<double> ms;
  const Status st = c.program->run(in, out, RunOptions::timed(&ms));
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_TRUE(has(st.message(), "timed 4 nodes of a subgraph of 3")) << st.message();
  EXPECT_TRUE(has(st.message(), "npu:0")) << st.message();
  EXPECT_TRUE(c.program->run(in, out).ok()) << "plain runs are unaffected";
}

TEST(NpuBoundary, GrowsWithTheBytesConverted) {
  REQUIRE_REFERENCE_DRIVER();
  auto least = [](const std::vector<NpuBoundaryRun>& r, bool in) {
    double m = 1e30;
    for (const NpuBoundaryRun& x : r) m = std::min(m, in ? x.in_ms : x.out_ms);
    return m;
  };
  for (uint32_t precision : {TNPU_PRECISION_F16, TNPU_PRECISION_INT8}) {
    SCOPED_TRACE(npu_precision_name(precision));
    auto d = NpuDevice::open(0, reference_options(precision));
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    auto small = (*d)->time_boundary(4096, 1, 3);
    auto big = (*d)->time_boundary(4u << 20, 1, 3);
    ASSERT_TRUE(small.ok()) << small.status().to_string();
    ASSERT_TRUE(big.ok()) << big.status().to_string();
    ASSERT_EQ(small->size(), 3u);
    EXPECT_GT(least(*small, true), 0.0);
    EXPECT_GT(least(*small, false), 0.0);
    // 1024 times the bytes: far more than the noise of a loaded machine.
    EXPECT_GT(least(*big, true), 4 * least(*small, true));
    EXPECT_GT(least(*big, false), 4 * least(*small, false));
    EXPECT_EQ((*d)->time_boundary(4096, 0, 0).status().code(), StatusCode::kInvalidArgument);
  }
}

// The boundary conversion (vectorised where the CPU allows) rounds exactly as float_to_half:
// every finite f32 bit pattern class (normal, subnormal, overflow, ties), odd counts for the tail.
TEST(NpuBoundary, ConversionRoundsLikeFloatToHalf) {
  REQUIRE_REFERENCE_DRIVER();
  auto d = NpuDevice::open(0, reference_options());
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  std::mt19937 rng(11);
  std::vector<float> v = {0.f,    -0.f,        1.f,         65504.f,  65519.f,  65520.f,
                          1e9f,   -1e9f,       6.1035e-5f,  6.0e-5f,  5.96e-8f, 2.98e-8f,
                          1e-10f, 1.00048828f, 1.00146484f, -2.5e-7f, 0.33333f};
  while (v.size() < 1003) {
    uint32_t bits = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isfinite(f)) v.push_back(f);
  }
  const Tensor x = Tensor::from_floats(Shape{static_cast<int64_t>(v.size())}, v);
  auto b = (*d)->upload(x);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  Tensor back;
  ASSERT_TRUE((*d)->download(**b, &back).ok());
  for (size_t i = 0; i < v.size(); ++i) {
    const float want = half_to_float(float_to_half(v[i]));
    const float got = back.data<float>()[i];
    uint32_t wb, gb;
    std::memcpy(&wb, &want, 4);
    std::memcpy(&gb, &got, 4);
    ASSERT_EQ(gb, wb) << "value " << v[i] << " at " << i;
  }
}

// Profiles three_layers() on npu:0 (the driver TESSERA_NPU_DRIVER names, else the reference).
Result<Profile> profile_npu(const testing::TestModel& m, std::vector<std::string>* warnings) {
  const Platform platform = Platform::from_json_text(
                                R"({"format": "tessera-platform", "version": 1, "name": "t",
      "devices": [{"id": "npu", "kind": "npu", "device": "npu:0", "memory_bytes": 100000000,
                   "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.1}], "dynamic_w": 1.0}]})",
                                "t")
                                .value();
  ProfileOptions o = testing::quick_profile_options(2);
  o.warn = [warnings](const std::string& w) { warnings->push_back(w); };
  return profile_model(*m.lg, platform, o, "three", "h");
}

// npu:0 through the profiler: every layer timed in its chain, and the transfer fits are the
// boundary conversion timed at the profile's sizes up to the model's largest activation.
TEST(NpuProfile, LayersInChainAndBoundaryTransfers) {
  REQUIRE_REFERENCE_DRIVER();
  if (std::getenv("TESSERA_NPU_DRIVER")) GTEST_SKIP() << "TESSERA_NPU_DRIVER overrides the default";
  auto m = testing::make_model(three_layers());
  std::vector<std::string> warnings;
  auto p = profile_npu(m, &warnings);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  ASSERT_EQ(p->devices.size(), 1u);
  const LevelProfile& lp = p->devices[0].levels.at(0);
  ASSERT_EQ(lp.layer_chain_ms.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(lp.layer_chain_ms[static_cast<size_t>(i)].has_value()) << "layer " << i;
    EXPECT_GT(*lp.layer_chain_ms[static_cast<size_t>(i)], 0.0);
    EXPECT_FALSE(lp.layer_ms[static_cast<size_t>(i)].has_value()) << "not timed alone";
  }
  // The sizes below the model's largest activation (conv1's output, 12 x 12 x 12 floats), then
  // that size itself; [1, 32, 1, W] tensors hold whole multiples of 128 bytes.
  ASSERT_EQ(lp.upload.points.size(), 2u);
  ASSERT_EQ(lp.download.points.size(), 2u);
  EXPECT_EQ(lp.upload.points[0].first, 4096u);
  EXPECT_EQ(lp.upload.points[1].first, 12u * 12 * 12 * 4);
  EXPECT_GT(lp.upload.alpha_ms_per_byte, 0.0);
  EXPECT_GT(lp.download.alpha_ms_per_byte, 0.0);
}

// A HAL 1.0 driver: the profiler falls back to timing each layer alone; the boundary is still
// priced from the driver's perf counters.
TEST(NpuProfile, Hal10DriverLayersAreTimedAlone) {
  REQUIRE_REFERENCE_DRIVER();
  const char* before = std::getenv("TESSERA_NPU_DRIVER");
  const std::string saved = before ? before : "";
  setenv("TESSERA_NPU_DRIVER", TESSERA_NPU_FORWARD_V1_0, 1);
  auto m = testing::make_model(three_layers());
  std::vector<std::string> warnings;
  auto p = profile_npu(m, &warnings);
  if (saved.empty()) {
    unsetenv("TESSERA_NPU_DRIVER");
  } else {
    setenv("TESSERA_NPU_DRIVER", saved.c_str(), 1);
  }
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_TRUE(warnings.empty()) << warnings[0];
  const LevelProfile& lp = p->devices.at(0).levels.at(0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(lp.layer_ms[static_cast<size_t>(i)].has_value()) << "layer " << i;
    EXPECT_TRUE(lp.layer_chain_ms.empty() || !lp.layer_chain_ms[static_cast<size_t>(i)]);
  }
  EXPECT_EQ(lp.upload.points.size(), 2u) << "the boundary fit, not upload()";
}

}  // namespace
}  // namespace tessera
