#include "scheduler/simulator.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

#include "scheduler/pricer.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::line;
using testing::make_model;
using testing::matmul_chain;
using testing::two_devices;

// Layer l takes (l + 1) ms on cpu:0-1 at 2000 MHz, twice that at 1000 MHz, and 0.5 + l / 4 ms
// on npu:0; transfers cost 0.01 ms each way.
Profile linear_profile(const LayerGraph& lg) {
  Profile p;
  p.model_name = "chain";
  p.model_hash = "h";
  p.describe_model(lg);
  p.platform = two_devices(1000000000);
  DeviceProfile cpu{};
  cpu.device = "cpu:0-1";
  for (int mhz : {1000, 2000}) {
    LevelProfile lv;
    lv.mhz = mhz;
    for (int l = 0; l < lg.num_layers(); ++l) lv.layer_ms.push_back((l + 1) * 2000.0 / mhz);
    lv.upload = lv.download = line(0, 0.01);
    cpu.levels.push_back(lv);
  }
  DeviceProfile npu{};
  npu.device = "npu:0";
  LevelProfile lv;
  for (int l = 0; l < lg.num_layers(); ++l) lv.layer_ms.push_back(0.5 + l / 4.0);
  lv.upload = lv.download = line(0, 0.01);
  npu.levels.push_back(lv);
  p.devices = {cpu, npu};
  return p;
}

double stage_ms(const Plan& priced, size_t i) {
  return priced.stages[i].estimate.exec_ms + priced.stages[i].estimate.transfer_ms;
}

struct Fixture {
  testing::TestModel m = make_model(matmul_chain(6));
  CostModel cm = CostModel::build(linear_profile(*m.lg), *m.lg).value();
};

TEST(SimulatorTest, SequentialPlanRunsOneFrameAtATime) {
  Fixture fx;
  Plan p = plan_from_slices(6, {{0, "cpu:0-1@2000"}, {3, "npu:0"}}).value();
  Plan priced = p;
  ASSERT_TRUE(price_plan(fx.cm, *fx.m.lg, &priced).ok());
  auto r = simulate_plan(fx.cm, *fx.m.lg, p, {.frames = 10, .warmup = 2});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->slots, 1);
  EXPECT_NEAR(r->period_ms, priced.estimated_latency_ms, 1e-9);
  EXPECT_NEAR(r->latency_max_ms, priced.estimated_latency_ms, 1e-9);
  EXPECT_NEAR(r->makespan_ms, 10 * priced.estimated_latency_ms, 1e-9);
  EXPECT_NEAR(r->energy_per_frame_mj, priced.estimated_energy_mj, 1e-9);
}

// The priced period of a pipeline is reached when there are slots enough: the busiest device
// (a device hosting two stages pays both) or actor.
TEST(SimulatorTest, SteadyStateMatchesThePricersPeriod) {
  Fixture fx;
  for (const char* devices : {"cpu,npu", "npu,cpu", "cpu,cpu-low", "cpu,npu,cpu-low"}) {
    std::vector<std::pair<int, std::string>> starts;
    const std::string d = devices;
    if (d == "cpu,npu") starts = {{0, "cpu:0-1@2000"}, {3, "npu:0"}};
    if (d == "npu,cpu") starts = {{0, "npu:0"}, {4, "cpu:0-1@2000"}};
    if (d == "cpu,cpu-low") starts = {{0, "cpu:0-1@2000"}, {2, "cpu:0-1@1000"}};
    if (d == "cpu,npu,cpu-low") starts = {{0, "cpu:0-1@2000"}, {2, "npu:0"}, {5, "cpu:0-1@1000"}};
    Plan p = plan_from_slices(6, starts).value();
    p.mode = PlanMode::kStreaming;
    p.queue_capacity = 4;
    Plan priced = p;
    ASSERT_TRUE(price_plan(fx.cm, *fx.m.lg, &priced).ok());
    auto r = simulate_plan(fx.cm, *fx.m.lg, p, {.frames = 200, .warmup = 20});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    // Where a device hosts two stages, which of two ready stages it serves first shifts single
    // departures by up to one cycle (first come, first served; ties by actor), so over the 180
    // steady frames the period is the priced one to within one period / 179.
    const bool shared = d.find("cpu-low") != std::string::npos;
    const double tol = shared ? 1.0 / 179 : 1e-6;
    EXPECT_NEAR(r->period_ms, priced.estimated_period_ms, tol * priced.estimated_period_ms)
        << devices;
    if (shared) {
      // Frame 0's second cpu stage may wait for frame 1's first: never faster than the pricer.
      EXPECT_GE(r->leave_ms[0], priced.estimated_latency_ms - 1e-9) << devices;
    } else {
      EXPECT_NEAR(r->leave_ms[0], priced.estimated_latency_ms, 1e-9) << devices;
    }
    // The busiest device is busy all the time.
    double top = 0;
    for (const SimulatedDevice& sd : r->devices) top = std::max(top, sd.utilisation);
    EXPECT_NEAR(top, 1.0, tol) << devices;
    // Energy: the pricer's stage energy plus static power over idle time, per frame.
    EXPECT_NEAR(r->energy_per_frame_mj, priced.estimated_energy_mj,
                tol * priced.estimated_energy_mj)
        << devices;
  }
}

// An independent oracle: a chain of stages on distinct devices and actors with frames entering
// as slots free is a tandem queue, whose departure times follow the recurrence
//   start(f, i) = max(finish(f, i-1), finish(f-1, i), enter(f)),  enter(f) = leave(f - slots).
TEST(SimulatorTest, JitteredChainFollowsTheTandemQueueRecurrence) {
  Fixture fx;
  for (int capacity : {1, 2, 5}) {
    for (uint64_t seed : {1u, 2u, 3u}) {
      Plan p = plan_from_slices(6, {{0, "cpu:0-1@2000"}, {3, "npu:0"}}).value();
      p.mode = PlanMode::kStreaming;
      p.queue_capacity = capacity;
      SimulationOptions o{.frames = 300, .warmup = 10, .jitter_cv = 0.4, .seed = seed};
      auto r = simulate_plan(fx.cm, *fx.m.lg, p, o);
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      // The same factors, drawn the same way (one per frame and stage, frame-major).
      Plan priced = p;
      ASSERT_TRUE(price_plan(fx.cm, *fx.m.lg, &priced).ok());
      const double sigma2 = std::log1p(0.4 * 0.4);
      std::mt19937_64 rng(seed);
      std::normal_distribution<double> normal(-sigma2 / 2, std::sqrt(sigma2));
      const size_t slots = static_cast<size_t>(std::max(2, capacity + 2));
      ASSERT_EQ(r->slots, static_cast<int>(slots));
      std::vector<std::array<double, 2>> fin(300);
      for (size_t f = 0; f < 300; ++f) {
        const double t0 = stage_ms(priced, 0) * std::exp(normal(rng));
        const double t1 = stage_ms(priced, 1) * std::exp(normal(rng));
        const double enter = f >= slots ? fin[f - slots][1] : 0;
        const double s0 = std::max(enter, f ? fin[f - 1][0] : 0.0);
        fin[f][0] = s0 + t0;
        const double s1 = std::max(fin[f][0], f ? fin[f - 1][1] : 0.0);
        fin[f][1] = s1 + t1;
        ASSERT_NEAR(r->leave_ms[f], fin[f][1], 1e-9 * fin[f][1])
            << "capacity " << capacity << " seed " << seed << " frame " << f;
      }
    }
  }
}

TEST(SimulatorTest, LoadFactorSlowsItsDeviceAndArrivalsPaceTheStream) {
  Fixture fx;
  Plan p = plan_from_slices(6, {{0, "cpu:0-1@2000"}, {3, "npu:0"}}).value();
  p.mode = PlanMode::kStreaming;
  Plan priced = p;
  ASSERT_TRUE(price_plan(fx.cm, *fx.m.lg, &priced).ok());
  const double a = stage_ms(priced, 0), b = stage_ms(priced, 1);
  auto loaded = simulate_plan(fx.cm, *fx.m.lg, p, {.load = {{"npu:0", 10.0}}});
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_NEAR(loaded->period_ms, std::max(a, 10 * b), 1e-6);
  EXPECT_NEAR(loaded->stage_busy_ms[1], 10 * b, 1e-9);

  // Frames arriving slower than the bottleneck: the period is the interval, latency a + b.
  const double interval = 2 * std::max(a, b);
  auto paced = simulate_plan(fx.cm, *fx.m.lg, p, {.arrival_interval_ms = interval});
  ASSERT_TRUE(paced.ok());
  EXPECT_NEAR(paced->period_ms, interval, 1e-6);
  EXPECT_NEAR(paced->latency_p99_ms, a + b, 1e-6);
  for (const SimulatedActor& sa : paced->actors) EXPECT_EQ(sa.mean_frames_waiting, 0);

  // Saturated: the slower stage's actor always finds frames waiting.
  auto sat = simulate_plan(fx.cm, *fx.m.lg, p, {});
  ASSERT_TRUE(sat.ok());
  const size_t slow = a > b ? 0 : 1;
  EXPECT_GT(
      sat->actors[slow == 0 ? 1 : 0].mean_frames_waiting + sat->actors[slow].mean_frames_waiting,
      0);
}

TEST(SimulatorTest, BadOptionsNameWhatIsWrong) {
  Fixture fx;
  Plan p = plan_from_slices(6, {{0, "cpu:0-1@2000"}, {3, "npu:0"}}).value();
  auto msg = [&](SimulationOptions o) {
    auto r = simulate_plan(fx.cm, *fx.m.lg, p, o);
    return r.ok() ? std::string() : r.status().to_string();
  };
  EXPECT_NE(msg({.frames = 0}).find("frames"), std::string::npos);
  EXPECT_NE(msg({.frames = 5, .warmup = 5}).find("warm-up"), std::string::npos);
  EXPECT_NE(msg({.arrival_interval_ms = -1}).find("interval"), std::string::npos);
  EXPECT_NE(msg({.load = {{"gpu:7", 2.0}}}).find("gpu:7"), std::string::npos);
  EXPECT_NE(msg({.load = {{"npu:0", 0.0}}}).find("npu:0"), std::string::npos);
  EXPECT_NE(msg({.jitter_cv = -0.5}).find("jitter"), std::string::npos);
  Plan unknown = plan_from_slices(6, {{0, "vulkan:0"}}).value();
  auto r = simulate_plan(fx.cm, *fx.m.lg, unknown, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("stage 0"), std::string::npos) << r.status().to_string();
}

}  // namespace
}  // namespace tessera
