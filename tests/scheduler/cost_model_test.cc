#include "scheduler/cost_model.h"

#include <cmath>

#include <gtest/gtest.h>

#include "energy/power_model.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::line;
using testing::two_devices;

LevelProfile level(int mhz, std::vector<std::optional<double>> ms, TransferFit up,
                   TransferFit down) {
  LevelProfile l;
  l.mhz = mhz;
  l.layer_ms = std::move(ms);
  l.upload = up;
  l.download = down;
  return l;
}

class CostModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = testing::make_model(testing::skip_graph());
    p_.model_name = "skip";
    p_.model_hash = "h";
    p_.describe_model(*m_.lg);
    p_.platform = two_devices(1000000);
    DeviceProfile cpu;
    cpu.device = "cpu:0-1";
    // Transfers are free on the CPU (host memory); layer totals at 1000 and 2000 MHz.
    cpu.levels.push_back(level(1000, {4.0, 1.0, 1.0, 2.0}, line(0, 0), line(0, 0)));
    cpu.levels.push_back(level(2000, {2.5, 0.5, 0.6, 1.0}, line(0, 0), line(0, 0)));
    cpu.levels[1].layer_dynamic_w = {2.0, std::nullopt, std::nullopt, std::nullopt};
    DeviceProfile npu;
    npu.device = "npu:0";
    npu.unsupported[3] = "Sigmoid is not on the NPU's op list";
    // eq. 1-2: upload 1e-5 ms/B + 0.1 ms, download 2e-5 ms/B + 0.2 ms.
    npu.levels.push_back(level(0, {3.0, 1.0, 1.0, std::nullopt}, line(1e-5, 0.1), line(2e-5, 0.2)));
    p_.devices = {cpu, npu};
    auto cm = CostModel::build(p_, *m_.lg);
    ASSERT_TRUE(cm.ok()) << cm.status().to_string();
    cm_ = std::make_unique<CostModel>(std::move(*cm));
  }
  testing::TestModel m_;
  Profile p_;
  std::unique_ptr<CostModel> cm_;
};

TEST_F(CostModelTest, VirtualDevicesAreDvfsLevels) {
  // Eq. 6: one per device at its top level; eq. 7: every level.
  ASSERT_EQ(cm_->virtual_devices().size(), 4u);
  EXPECT_EQ(cm_->latency_devices(), (std::vector<int>{2, 3}));
  EXPECT_EQ(cm_->energy_devices().size(), 4u);
  EXPECT_EQ(cm_->virtual_devices()[0].label, "cpu:0-1@1000");
  EXPECT_TRUE(cm_->virtual_devices()[0].measured);
  EXPECT_FALSE(cm_->virtual_devices()[1].measured);  // 1500 MHz: estimated with eq. 3
  EXPECT_EQ(cm_->virtual_devices()[3].label, "npu:0");
  EXPECT_EQ(*cm_->find("cpu:0-1"), 2);
  EXPECT_EQ(*cm_->find("cpu:0-1@1500"), 1);
  EXPECT_EQ(*cm_->find("npu:0"), 3);
  auto missing = cm_->find("gpu:0");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cpu:0-1@1000"), std::string::npos);
}

TEST_F(CostModelTest, BoundaryBytesFollowTheLiveTensors) {
  const uint64_t t = 4 * 32 * 4;  // every tensor is f32[4, 32]
  // Layer 0 (matmul) reads x; writes mm, read by relu.
  EXPECT_EQ(cm_->slice_input_bytes(0, 1), t);
  EXPECT_EQ(cm_->slice_output_bytes(0, 1), t);
  // Slice [1, 3) = relu, add: reads mm and the skip x; produces a.
  EXPECT_EQ(cm_->slice_input_count(1, 3), 2);
  EXPECT_EQ(cm_->slice_input_bytes(1, 3), 2 * t);
  EXPECT_EQ(cm_->slice_output_count(1, 3), 1);
  // Slice [0, 2) produces r for add, and x must still be there for add: x is not its output
  // (a graph input lives on the host), r is.
  EXPECT_EQ(cm_->slice_output_count(0, 2), 1);
  EXPECT_EQ(cm_->slice_input_bytes(0, 4), t);
  EXPECT_EQ(cm_->slice_output_bytes(0, 4), t);
  // Memory: weights of the matmul (32 x 32 f32) + the largest live set.
  EXPECT_EQ(cm_->slice_memory_bytes(0, 1), 32u * 32 * 4 + 2 * t);
}

TEST_F(CostModelTest, ExecutionSubtractsTransfersAndFollowsEquation3) {
  const int npu = 3;
  // Eq. 1-2 on the NPU.
  EXPECT_NEAR(cm_->upload_ms(npu, 1000), 1e-5 * 1000 + 0.1, 1e-12);
  EXPECT_NEAR(cm_->download_ms(npu, 1000, 2), 2e-5 * 1000 + 0.4, 1e-12);
  const double t = 512;
  // e = total - c_in - c_out for layer 1 (relu: one tensor in, one out).
  EXPECT_NEAR(cm_->exec_ms(npu, 1), 1.0 - (1e-5 * t + 0.1) - (2e-5 * t + 0.2), 1e-12);
  EXPECT_FALSE(cm_->can_run(npu, 3));
  EXPECT_EQ(cm_->exec_ms(npu, 3), kInfiniteCost);
  // Eq. 3 on the CPU from 1000 and 2000 MHz: layer 0 takes 4.0 and 2.5 ms.
  // gamma = (4 - 2.5) / (1/1000 - 1/2000) = 3000 ms*MHz, eps = 2.5 - 3000/2000 = 1.0 ms.
  auto [gamma, eps] = cm_->gamma_eps(0, 0);
  EXPECT_NEAR(gamma, 3000, 1e-9);
  EXPECT_NEAR(eps, 1.0, 1e-12);
  EXPECT_NEAR(cm_->exec_ms(0, 0), 4.0, 1e-12);  // measured
  EXPECT_NEAR(cm_->exec_ms(2, 0), 2.5, 1e-12);  // measured
  EXPECT_NEAR(cm_->exec_ms(1, 0), 3.0, 1e-12);  // 3000/1500 + 1
  // Layer 1 halves exactly with frequency: eps = 0.
  EXPECT_NEAR(cm_->gamma_eps(0, 1).second, 0, 1e-12);
  EXPECT_NEAR(cm_->exec_ms(1, 1), 1000.0 / 1500, 1e-12);
}

TEST_F(CostModelTest, SliceCostIsEquation8) {
  const int npu = 3, cpu = 2;
  const double t = 512;
  const double e0 = cm_->exec_ms(npu, 0), e1 = cm_->exec_ms(npu, 1), e2 = cm_->exec_ms(npu, 2);
  // [1, 3) on the NPU: executes relu and add, uploads mm and x (two tensors), downloads a.
  EXPECT_NEAR(cm_->slice_ms(npu, 1, 3), e1 + e2 + (1e-5 * 2 * t + 2 * 0.1) + (2e-5 * t + 0.2),
              1e-12);
  EXPECT_NEAR(cm_->slice_ms(npu, 0, 3), e0 + e1 + e2 + (1e-5 * t + 0.1) + (2e-5 * t + 0.2), 1e-12);
  // Sigmoid cannot run on the NPU: any slice holding it costs infinity.
  EXPECT_FALSE(cm_->can_run_slice(npu, 2, 4));
  EXPECT_EQ(cm_->slice_ms(npu, 0, 4), kInfiniteCost);
  EXPECT_EQ(cm_->slice_energy_mj(npu, 3, 4), kInfiniteCost);
  // The CPU has free transfers: a slice is the sum of its layers.
  EXPECT_NEAR(cm_->slice_ms(cpu, 0, 4), 2.5 + 0.5 + 0.6 + 1.0, 1e-12);
  EXPECT_FALSE(cm_->can_run_slice(cpu, 2, 2));
}

TEST_F(CostModelTest, PowerAndEnergyFollowEquations4And5) {
  const PlatformDevice& cpu = cm_->devices()[0];
  // Layer 0 has a measured dynamic power of 2 W at the top level; layer 1 uses the platform's 3 W.
  EXPECT_NEAR(cm_->power_w(2, 0), 0.5 + 2.0, 1e-12);
  const double s = dynamic_power_scale(cpu, 0);  // (0.8^2 * 1000) / (1.0^2 * 2000) = 0.32
  EXPECT_NEAR(s, 0.32, 1e-12);
  EXPECT_NEAR(cm_->power_w(0, 0), 0.2 + s * 2.0, 1e-12);
  EXPECT_NEAR(cm_->power_w(0, 1), 0.2 + s * 3.0, 1e-12);
  // Energy of [0, 2) at 1000 MHz: sum of exec x power (transfers are free on the CPU).
  const double expect = 4.0 * cm_->power_w(0, 0) + 1.0 * cm_->power_w(0, 1);
  EXPECT_NEAR(cm_->slice_energy_mj(0, 0, 2), expect, 1e-9);
  // The lower level is slower but cheaper for this layer.
  EXPECT_LT(cm_->slice_energy_mj(0, 1, 2), cm_->slice_energy_mj(2, 1, 2));
}

TEST(CostModelMemoryTest, SlicesThatDoNotFitAreInfinite) {
  auto m = testing::make_model(testing::skip_graph());
  Profile p;
  p.model_hash = "h";
  p.describe_model(*m.lg);
  p.platform = two_devices(3000);  // smaller than the matmul weights (4 KiB)
  DeviceProfile npu;
  npu.device = "npu:0";
  npu.levels.push_back(level(0, {1.0, 1.0, 1.0, 1.0}, line(0, 0), line(0, 0)));
  p.devices = {npu};
  auto cm = CostModel::build(p, *m.lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  EXPECT_FALSE(cm->can_run_slice(0, 0, 1));
  EXPECT_EQ(cm->slice_ms(0, 0, 2), kInfiniteCost);
  EXPECT_TRUE(cm->can_run_slice(0, 1, 2));  // relu holds no weights: 2 x 512 B live
}

TEST(CostModelRegressionTest, EstimatesUnmeasuredLayersAndReportsItsError) {
  auto m = testing::make_model(testing::matmul_chain(16));
  Profile p;
  p.model_hash = "h";
  p.describe_model(*m.lg);
  p.platform = two_devices(1000000);
  // Exact law: ms = 1e-4 * MFLOPs-ish + 0.01; every fourth layer is not measured.
  DeviceProfile cpu;
  cpu.device = "cpu:0-1";
  std::vector<std::optional<double>> ms;
  std::vector<double> truth;
  for (int i = 0; i < m.lg->num_layers(); ++i) {
    const double t = 2e-6 * m.lg->layer(i).cost.flops + 0.01;
    truth.push_back(t);
    ms.push_back(i % 4 == 3 ? std::optional<double>() : std::optional<double>(t));
  }
  cpu.levels.push_back(level(2000, ms, line(0, 0), line(0, 0)));
  p.devices = {cpu};
  auto cm = CostModel::build(p, *m.lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  const int vd = *cm->find("cpu:0-1");
  for (int i = 0; i < m.lg->num_layers(); ++i) {
    EXPECT_EQ(cm->estimated(vd, i), i % 4 == 3) << i;
    EXPECT_NEAR(cm->exec_ms(vd, i), truth[static_cast<size_t>(i)],
                1e-6 * truth[static_cast<size_t>(i)] + 1e-9)
        << i;
  }
  // Unmeasured layers at a level that was not profiled scale with 1/f.
  const int low = *cm->find("cpu:0-1@1000");
  EXPECT_NEAR(cm->exec_ms(low, 3), 2 * truth[3], 1e-6);
  // The regression found the law, so its cross-validated error is ~0; fits are listed.
  EXPECT_LT(cm->regression_error(0), 1e-6);
  ASSERT_FALSE(cm->regression(0).empty());
  EXPECT_EQ(cm->regression(0).back().op, "");  // pooled fit last
  EXPECT_EQ(cm->regression(0).front().op, "MatMul");
  EXPECT_NEAR(cm->regression(0).front().a_ms_per_flop, 2e-6, 1e-12);

  // A noisy law: the error is reported, not hidden.
  for (size_t i = 0; i < ms.size(); ++i) {
    if (ms[i]) *ms[i] *= (i % 2 ? 1.3 : 0.8);
  }
  p.devices[0].levels[0].layer_ms = ms;
  auto noisy = CostModel::build(p, *m.lg);
  ASSERT_TRUE(noisy.ok());
  EXPECT_GT(noisy->regression_error(0), 0.05);
}

// ---- per-slice overhead ----

// A profile of a six-MatMul chain on "npu:0" with the given per-layer times, and calibration
// runs over `slices` whose measured ms `truth(first, last, boundary bytes)` says.
class SliceOverheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = testing::make_model(testing::matmul_chain(6));
    p_.model_name = "chain";
    p_.model_hash = "h";
    p_.describe_model(*m_.lg);
    p_.platform = two_devices(1000000000);
    DeviceProfile npu;
    npu.device = "npu:0";
    npu.levels.push_back(
        level(0, std::vector<std::optional<double>>(6), line(1e-6, 0.01), line(2e-6, 0.02)));
    p_.devices = {npu};
  }
  LevelProfile& lp() { return p_.devices[0].levels[0]; }
  // Bytes crossing the boundary of [first, last), from a model without calibration runs.
  uint64_t boundary(int first, int last) {
    auto cm = CostModel::build(p_, *m_.lg).value();
    return cm.slice_input_bytes(first, last) + cm.slice_output_bytes(first, last);
  }
  double transfers(const CostModel& cm, int first, int last) {
    return cm.upload_ms(0, cm.slice_input_bytes(first, last), cm.slice_input_count(first, last)) +
           cm.download_ms(0, cm.slice_output_bytes(first, last),
                          cm.slice_output_count(first, last));
  }
  // A calibration run per slice of slices_: its chained layers at `factor` x their in-chain
  // time, its transfers, `fixed` and `per_byte` per boundary byte; with `record`, the run also
  // records its layer sum.
  void add_chained_runs(double fixed, double per_byte, double factor, bool record) {
    const CostModel bare = CostModel::build(p_, *m_.lg).value();
    for (const auto& [a, b] : slices_) {
      const double layers = factor * bare.slice_exec_ms(0, a, b);
      const double ms =
          layers + transfers(bare, a, b) + fixed + per_byte * static_cast<double>(boundary(a, b));
      lp().slice_runs.push_back(SliceRun{a, b, ms, record ? layers : 0.0});
    }
  }
  static void expect_fit(const SliceOverhead& o, double fixed, double per_byte) {
    EXPECT_EQ(o.samples, 6);
    EXPECT_NEAR(o.chain_scale, 1.0, 1e-12);
    EXPECT_NEAR(o.fixed_ms, fixed, 1e-9);
    EXPECT_NEAR(o.ms_per_byte, per_byte, 1e-12);
  }
  const std::vector<std::pair<int, int>> slices_ = {{0, 1}, {2, 3}, {1, 4}, {0, 6}, {3, 5}, {5, 6}};
  testing::TestModel m_;
  Profile p_;
};

TEST_F(SliceOverheadTest, FitsTheFixedAndPerByteCostOfChainedSlices) {
  lp().layer_chain_ms = {1.0, 0.5, 0.25, 2.0, 0.125, 0.75};
  const double fixed = 0.3, per_byte = 2e-5;
  {
    const CostModel bare = CostModel::build(p_, *m_.lg).value();
    EXPECT_EQ(bare.slice_overhead(0).samples, 0);  // no calibration runs: no overhead
    EXPECT_EQ(bare.slice_overhead_ms(0, 0, 6), 0);
    EXPECT_NEAR(bare.exec_ms(0, 3), 2.0, 1e-12);  // chained times are used as they are
  }
  add_chained_runs(fixed, per_byte, 1.0, false);
  const CostModel cm = CostModel::build(p_, *m_.lg).value();
  const SliceOverhead& o = cm.slice_overhead(0);
  expect_fit(o, fixed, per_byte);
  EXPECT_LT(o.error, 1e-9);
  // A slice that was not a calibration run is priced by the same law.
  const double expect = 0.5 + 0.25 + transfers(cm, 1, 3) + fixed + per_byte * boundary(1, 3);
  EXPECT_NEAR(cm.slice_ms(0, 1, 3), expect, 1e-9);
  EXPECT_NEAR(cm.slice_overhead_ms(0, 1, 3), fixed + per_byte * boundary(1, 3), 1e-9);
  // The overhead is paid at the transfer power.
  const double exec_mj =
      cm.slice_energy_mj(0, 1, 3) -
      (transfers(cm, 1, 3) + fixed + per_byte * boundary(1, 3)) * power_w(cm.devices()[0], 0);
  EXPECT_NEAR(exec_mj, (0.5 + 0.25) * cm.power_w(0, 1), 1e-9);
}

TEST_F(SliceOverheadTest, MeasuresTheOverheadBeyondTheRunsOwnLayers) {
  // Compiled alone, a slice's layers run 0.7x their time in the whole chain (hot caches); the
  // run also reports that layer sum, so the overhead is fitted on ms - layers_ms and is not
  // pulled down by the difference.
  lp().layer_chain_ms = {1.0, 0.5, 0.25, 2.0, 0.125, 0.75};
  const double fixed = 0.3, per_byte = 2e-5;
  add_chained_runs(fixed, per_byte, 0.7, true);
  const CostModel cm = CostModel::build(p_, *m_.lg).value();
  const SliceOverhead& o = cm.slice_overhead(0);
  expect_fit(o, fixed, per_byte);
  // The reported error is that of the slice prices, which use the chained times.
  EXPECT_GT(o.error, 0.01);
  EXPECT_NEAR(cm.slice_ms(0, 1, 3),
              0.5 + 0.25 + transfers(cm, 1, 3) + fixed + per_byte * boundary(1, 3), 1e-9);
}

TEST_F(SliceOverheadTest, PricesSlicesColdByTheShareOfTheModelRunInBetween) {
  // Run after the rest of the model, a slice's layers take 1.3x their in-chain times (evicted
  // caches). As a stage of a plan, only the rest of the model runs between two of its runs: the
  // slowdown is priced by the share of the model's touched bytes outside the slice, which is
  // none for the whole model (a single-stage plan runs after itself, as the chains were timed).
  lp().layer_chain_ms = {1.0, 0.5, 0.25, 2.0, 0.125, 0.75};
  const double fixed = 0.3, per_byte = 2e-5, cold = 1.3;
  add_chained_runs(fixed, per_byte, cold, true);
  const CostModel cm = CostModel::build(p_, *m_.lg).value();
  const SliceOverhead& o = cm.slice_overhead(0);
  expect_fit(o, fixed, per_byte);
  EXPECT_NEAR(o.cold_scale, cold, 1e-9);
  EXPECT_LT(o.error, 1e-9);  // the calibration runs are priced as they ran: after the model
  double touched[7] = {0};
  for (int l = 0; l < 6; ++l) {
    const OpCost& c = m_.lg->layer(l).cost;
    touched[l + 1] =
        touched[l] + static_cast<double>(c.input_bytes + c.weight_bytes + c.output_bytes);
  }
  const double evicted = 1 - (touched[3] - touched[1]) / touched[6];
  ASSERT_GT(evicted, 0.2);
  ASSERT_LT(evicted, 0.95);
  EXPECT_NEAR(cm.evicted_share(1, 3), evicted, 1e-12);
  EXPECT_NEAR(cm.evicted_share(0, 6), 0, 1e-12);
  EXPECT_NEAR(cm.cold_scale(0, 1, 3), 1 + (cold - 1) * evicted, 1e-12);
  EXPECT_NEAR(cm.cold_scale(0, 0, 6), 1, 1e-12);
  EXPECT_NEAR(cm.slice_exec_ms(0, 1, 3), (1 + (cold - 1) * evicted) * 0.75, 1e-9);
  EXPECT_NEAR(cm.slice_exec_ms(0, 0, 6), 4.625, 1e-9);
  const double overhead = transfers(cm, 1, 3) + fixed + per_byte * boundary(1, 3);
  EXPECT_NEAR(cm.slice_ms(0, 1, 3), (1 + (cold - 1) * evicted) * 0.75 + overhead, 1e-9);
  // Right after the whole model (as the check times slices) and right after itself.
  EXPECT_NEAR(cm.slice_ms(0, 1, 3, 1.0), cold * 0.75 + overhead, 1e-9);
  EXPECT_NEAR(cm.slice_ms(0, 1, 3, 0.0), 0.75 + overhead, 1e-9);
  EXPECT_NEAR(cm.exec_ms(0, 3), 2.0, 1e-12);  // per layer: the in-chain time
  // The cold part of the execution is paid at the layers' power.
  const double exec_mj = cm.slice_energy_mj(0, 1, 3) - overhead * power_w(cm.devices()[0], 0);
  EXPECT_NEAR(exec_mj, cm.cold_scale(0, 1, 3) * 0.75 * cm.power_w(0, 1), 1e-9);
  // The same table for a planner.
  const SliceTable t = cm.slice_table({0}, Objective::kLatency);
  EXPECT_NEAR(t.cost(0, 1, 3), cm.slice_ms(0, 1, 3), 1e-12);
  EXPECT_NEAR(t.cost(0, 0, 6), cm.slice_ms(0, 0, 6), 1e-12);
}

TEST_F(SliceOverheadTest, FitsTheColdScaleOnTheChainRunsRightBeforeEachSlice) {
  // The machine ran 20% slower during the calibration runs than when the chains were timed:
  // against the profile's chains the runs' layers look 1.56x slower, against the chain runs
  // right before them (chain_ms) 1.3x, which is the cold slowdown.
  lp().layer_chain_ms = {1.0, 0.5, 0.25, 2.0, 0.125, 0.75};
  const double drift = 1.2, cold = 1.3;
  add_chained_runs(0.3, 2e-5, drift * cold, true);
  for (SliceRun& r : lp().slice_runs) {
    for (int l = r.first; l < r.last; ++l) r.chain_ms += drift * *lp().layer_chain_ms[l];
  }
  const CostModel cm = CostModel::build(p_, *m_.lg).value();
  EXPECT_NEAR(cm.slice_overhead(0).cold_scale, cold, 1e-9);
  for (SliceRun& r : lp().slice_runs) r.chain_ms = 0;
  const CostModel without = CostModel::build(p_, *m_.lg).value();
  EXPECT_NEAR(without.slice_overhead(0).cold_scale, drift * cold, 1e-9);
}

TEST_F(SliceOverheadTest, RunsFasterThanTheChainDoNotMakeSlicesWarm) {
  lp().layer_chain_ms = {1.0, 0.5, 0.25, 2.0, 0.125, 0.75};
  add_chained_runs(0.3, 2e-5, 0.8, true);
  const CostModel cm = CostModel::build(p_, *m_.lg).value();
  EXPECT_EQ(cm.slice_overhead(0).cold_scale, 1.0);
  EXPECT_NEAR(cm.slice_exec_ms(0, 1, 3), 0.75, 1e-12);
}

TEST_F(SliceOverheadTest, ScalesLayersTimedAloneToTheirChainedCost) {
  // Totals of layers timed alone; chained they run 1.25x slower, plus 0.2 ms per slice.
  lp().layer_ms = {1.5, 0.75, 0.5, 2.5, 0.3, 1.0};
  const double scale = 1.25, fixed = 0.2;
  {
    const CostModel bare = CostModel::build(p_, *m_.lg).value();
    for (const auto& [a, b] : slices_) {
      const double ms = scale * bare.slice_exec_ms(0, a, b) + transfers(bare, a, b) + fixed;
      lp().slice_runs.push_back(SliceRun{a, b, ms});
    }
  }
  const CostModel cm = CostModel::build(p_, *m_.lg).value();
  const SliceOverhead& o = cm.slice_overhead(0);
  EXPECT_NEAR(o.chain_scale, scale, 1e-9);
  EXPECT_NEAR(o.fixed_ms, fixed, 1e-9);
  EXPECT_NEAR(o.ms_per_byte, 0, 1e-12);
  // exec_ms is the scaled time alone (transfers of the layer removed first).
  const double alone = 2.5 - transfers(cm, 3, 4);
  EXPECT_NEAR(cm.exec_ms(0, 3), scale * alone, 1e-9);
}

TEST_F(SliceOverheadTest, NoisyRunsAreFittedAndTheirErrorReported) {
  lp().layer_chain_ms = {1.0, 0.5, 0.25, 2.0, 0.125, 0.75};
  {
    const CostModel bare = CostModel::build(p_, *m_.lg).value();
    int i = 0;
    for (const auto& [a, b] : slices_) {
      const double ms =
          (bare.slice_exec_ms(0, a, b) + transfers(bare, a, b) + 0.4) * (i++ % 2 ? 1.05 : 0.95);
      lp().slice_runs.push_back(SliceRun{a, b, ms});
    }
  }
  const CostModel cm = CostModel::build(p_, *m_.lg).value();
  const SliceOverhead& o = cm.slice_overhead(0);
  EXPECT_GT(o.error, 0.01);
  EXPECT_LT(o.error, 0.1);
  EXPECT_GE(o.ms_per_byte, 0);
  EXPECT_GT(cm.slice_overhead_ms(0, 0, 6), 0.1);
}

TEST(CostModelBuildTest, RefusesAProfileOfAnotherModel) {
  auto a = testing::make_model(testing::skip_graph());
  auto b = testing::make_model(testing::matmul_chain(3));
  Profile p;
  p.describe_model(*a.lg);
  p.platform = two_devices(1000);
  auto cm = CostModel::build(p, *b.lg);
  ASSERT_FALSE(cm.ok());
  EXPECT_NE(cm.status().message().find("layers"), std::string::npos);
}

}  // namespace
}  // namespace tessera
