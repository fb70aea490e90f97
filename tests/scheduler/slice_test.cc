#include "scheduler/planners/slice.h"
#include "scheduler/pricer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::line;
using testing::two_devices;

// A synthetic instance of eq. 8, independent of the CostModel: per-layer execution per option,
// transfer lines alpha*bytes + beta, live bytes at every cut (skip connections make them
// arbitrary), unsupported layers and per-option memory caps against weights + largest live set.
struct RandomCosts : SliceCosts {
  int L = 0, D = 0;
  std::vector<std::vector<double>> exec;       // [o][l]
  std::vector<std::vector<char>> unsupported;  // [o][l]
  std::vector<double> alpha, beta;
  std::vector<double> live;        // L + 1 cuts
  std::vector<double> weights;     // per layer
  std::vector<double> activation;  // per layer
  std::vector<double> memory;      // per option

  int num_layers() const override { return L; }
  int num_options() const override { return D; }
  bool feasible(int o, int f, int l) const {
    double w = 0, act = 0;
    for (int k = f; k < l; ++k) {
      if (unsupported[o][k]) return false;
      w += weights[k];
      act = std::max(act, activation[k]);
    }
    return w + act <= memory[o];
  }
  double exec_cost(int o, int f, int l) const override {
    if (!feasible(o, f, l)) return kInfiniteCost;
    double e = 0;
    for (int k = f; k < l; ++k) e += exec[o][k];
    return e;
  }
  double cost(int o, int f, int l) const override {
    const double e = exec_cost(o, f, l);
    if (!(e < kInfiniteCost)) return e;
    return e + alpha[o] * live[f] + beta[o] + alpha[o] * live[l] + beta[o];
  }
};

RandomCosts random_costs(std::mt19937& rng, int L, int D) {
  std::uniform_real_distribution<double> u(0, 1);
  RandomCosts c;
  c.L = L;
  c.D = D;
  c.exec.assign(D, std::vector<double>(L));
  c.unsupported.assign(D, std::vector<char>(L, 0));
  const double p_unsupported = u(rng) * 0.3;
  for (int o = 0; o < D; ++o) {
    const double speed = 0.2 + 5 * u(rng);
    for (int l = 0; l < L; ++l) {
      c.exec[o][l] = speed * (0.05 + 10 * u(rng) * u(rng));
      c.unsupported[o][l] = u(rng) < p_unsupported;
    }
    c.alpha.push_back(u(rng) < 0.2 ? 0 : 1e-3 * u(rng));
    c.beta.push_back(u(rng) < 0.2 ? 0 : 2 * u(rng));
  }
  for (int k = 0; k <= L; ++k) c.live.push_back(std::floor(5000 * u(rng)));
  double total = 0;
  for (int l = 0; l < L; ++l) {
    c.weights.push_back(std::floor(1000 * u(rng)));
    c.activation.push_back(std::floor(500 * u(rng)));
    total += c.weights.back();
  }
  for (int o = 0; o < D; ++o) {
    // Sometimes unlimited, sometimes binding.
    c.memory.push_back(u(rng) < 0.4 ? 1e18 : 500 + total * u(rng));
  }
  return c;
}

void expect_valid(const RandomCosts& c, const Slicing& s, const char* who) {
  ASSERT_TRUE(s.feasible()) << who;
  int next = 0;
  for (const Slice& sl : s.slices) {
    ASSERT_EQ(sl.first, next) << who;
    ASSERT_GT(sl.last, sl.first) << who;
    ASSERT_TRUE(sl.option >= 0 && sl.option < c.D) << who;
    // Constraints: every layer supported, the slice fits the option's memory.
    EXPECT_TRUE(c.feasible(sl.option, sl.first, sl.last)) << who;
    next = sl.last;
  }
  ASSERT_EQ(next, c.L) << who;
  EXPECT_NEAR(slicing_cost(c, s.slices), s.cost, 1e-9 * std::max(1.0, s.cost)) << who;
}

TEST(SliceTest, DynamicProgramEqualsExhaustiveOnRandomInstances) {
  std::mt19937 rng(20261121);
  int feasible = 0, multi_slice = 0, infeasible = 0;
  constexpr int kInstances = 4000;
  for (int i = 0; i < kInstances; ++i) {
    const int L = 1 + static_cast<int>(rng() % 8);
    const int D = 1 + static_cast<int>(rng() % 4);
    RandomCosts c = random_costs(rng, L, D);
    Slicing dp = plan_slice_dp(c);
    Slicing ex = plan_slice_exhaustive(c);
    ASSERT_EQ(dp.feasible(), ex.feasible()) << "instance " << i;
    if (!ex.feasible()) {
      ++infeasible;
      EXPECT_TRUE(dp.slices.empty());
      continue;
    }
    ++feasible;
    if (ex.slices.size() > 1) ++multi_slice;
    ASSERT_NEAR(dp.cost, ex.cost, 1e-9 * std::max(1.0, ex.cost))
        << "instance " << i << " L=" << L << " D=" << D;
    expect_valid(c, dp, "slice");
    expect_valid(c, ex, "exhaustive");
    // The baselines obey the constraints and can never beat the optimum.
    Slicing hca = plan_slice_hca(c);
    ASSERT_TRUE(hca.feasible());
    expect_valid(c, hca, "hca");
    EXPECT_GE(hca.cost, dp.cost - 1e-9 * dp.cost);
    std::vector<int> order(static_cast<size_t>(D));
    for (int o = 0; o < D; ++o) order[static_cast<size_t>(o)] = o;
    Slicing pref = plan_slice_preferred(c, order);
    if (pref.feasible()) {
      expect_valid(c, pref, "preferred");
      EXPECT_GE(pref.cost, dp.cost - 1e-9 * dp.cost);
    }
  }
  // The generator exercises every case.
  EXPECT_GT(feasible, kInstances / 2);
  EXPECT_GT(multi_slice, kInstances / 10);
  EXPECT_GT(infeasible, 10);
}

TEST(SliceTest, HcaIgnoresTransfersAndCanLoseToSlice) {
  // Two options; option 1 is slightly faster per layer but every transfer on it is expensive.
  RandomCosts c;
  c.L = 4;
  c.D = 2;
  c.exec = {{1, 1, 1, 1}, {0.9, 0.9, 2, 0.9}};
  c.unsupported.assign(2, std::vector<char>(4, 0));
  c.alpha = {0, 0};
  c.beta = {0, 5};
  c.live = {1, 1, 1, 1, 1};
  c.weights = {0, 0, 0, 0};
  c.activation = {0, 0, 0, 0};
  c.memory = {1, 1};
  Slicing hca = plan_slice_hca(c);
  ASSERT_EQ(hca.slices.size(), 3u);  // 1 | 0 | 1: per-layer best execution
  EXPECT_EQ(hca.slices[1], (Slice{2, 3, 0}));
  Slicing dp = plan_slice_dp(c);
  ASSERT_EQ(dp.slices.size(), 1u);
  EXPECT_EQ(dp.slices[0], (Slice{0, 4, 0}));
  EXPECT_DOUBLE_EQ(dp.cost, 4);
  EXPECT_DOUBLE_EQ(hca.cost, 0.9 + 0.9 + 10 + 1 + 0.9 + 10);
}

TEST(SliceTest, PreferredFallsBackPerLayerInOrder) {
  RandomCosts c;
  c.L = 5;
  c.D = 3;
  c.exec.assign(3, std::vector<double>(5, 1.0));
  c.unsupported.assign(3, std::vector<char>(5, 0));
  c.unsupported[0][2] = 1;  // preferred cannot run layer 2
  c.unsupported[1][2] = 1;  // nor the first fallback
  c.alpha = {0, 0, 0};
  c.beta = {0, 0, 0};
  c.live.assign(6, 0);
  c.weights = {10, 10, 0, 10, 10};
  c.activation.assign(5, 0);
  c.memory = {20, 1e9, 1e9};  // preferred holds two layers' weights at a time
  Slicing s = plan_slice_preferred(c, {0, 1, 2});
  ASSERT_TRUE(s.feasible());
  EXPECT_EQ(s.slices, (std::vector<Slice>{{0, 2, 0}, {2, 3, 2}, {3, 5, 0}}));
  c.unsupported[2][2] = 1;
  EXPECT_FALSE(plan_slice_preferred(c, {0, 1, 2}).feasible());
  EXPECT_FALSE(plan_slice_dp(c).feasible());
}

// ---- on a real model priced by the CostModel ----

Profile random_profile(const LayerGraph& lg, std::mt19937& rng, uint64_t npu_memory) {
  std::uniform_real_distribution<double> u(0.1, 3.0);
  Profile p;
  p.model_name = "chain";
  p.model_hash = "h";
  p.describe_model(lg);
  p.platform = two_devices(npu_memory);
  const int L = lg.num_layers();
  DeviceProfile cpu;
  cpu.device = "cpu:0-1";
  for (int mhz : {1000, 2000}) {
    LevelProfile lv;
    lv.mhz = mhz;
    for (int l = 0; l < L; ++l) lv.layer_ms.push_back(u(rng) * 2000.0 / mhz);
    lv.upload = line(0, 0.01);
    lv.download = line(0, 0.01);
    cpu.levels.push_back(lv);
  }
  DeviceProfile npu;
  npu.device = "npu:0";
  LevelProfile lv;
  for (int l = 0; l < L; ++l) lv.layer_ms.push_back(u(rng) * 0.5 + 0.3);
  lv.upload = line(1e-4 * u(rng), 0.1 * u(rng));
  lv.download = line(1e-4 * u(rng), 0.1 * u(rng));
  npu.levels.push_back(lv);
  if (rng() % 2) npu.unsupported[static_cast<int>(rng() % static_cast<unsigned>(L))] = "op";
  p.devices = {cpu, npu};
  return p;
}

TEST(SliceTest, CostModelPlansMatchExhaustiveOnRealModels) {
  std::mt19937 rng(7);
  for (int n : {4, 6, 9}) {
    auto m = testing::make_model(testing::matmul_chain(n));
    for (int trial = 0; trial < 20; ++trial) {
      const uint64_t mem = trial % 3 == 0 ? 6000 : 1000000000;
      Profile p = random_profile(*m.lg, rng, mem);
      auto cm = CostModel::build(p, *m.lg);
      ASSERT_TRUE(cm.ok()) << cm.status().to_string();
      for (Objective obj : {Objective::kLatency, Objective::kEnergy}) {
        SlicePlanRequest req;
        req.objective = obj;
        auto dp = make_slice_plan(*cm, req);
        req.planner = "exhaustive";
        auto ex = make_slice_plan(*cm, req);
        ASSERT_EQ(dp.ok(), ex.ok());
        if (!dp.ok()) continue;
        const double a =
            obj == Objective::kLatency ? dp->estimated_latency_ms : dp->estimated_energy_mj;
        const double b =
            obj == Objective::kLatency ? ex->estimated_latency_ms : ex->estimated_energy_mj;
        EXPECT_NEAR(a, b, 1e-9 * b) << dp->notation() << " vs " << ex->notation();
        EXPECT_TRUE(dp->validate(n, {"cpu:0-1", "npu:0"}, true).ok());
        // Re-pricing the plan gives the planner's estimate.
        Plan again = *dp;
        ASSERT_TRUE(price_plan(*cm, *m.lg, &again).ok());
        EXPECT_NEAR(again.estimated_latency_ms, dp->estimated_latency_ms, 1e-9);
        EXPECT_NEAR(again.estimated_energy_mj, dp->estimated_energy_mj, 1e-9);
        if (obj == Objective::kLatency) {
          for (const Stage& s : dp->stages) {
            // Eq. 6: latency uses top levels only.
            EXPECT_TRUE(s.placement.devices[0].mhz == 2000 || s.placement.devices[0].mhz == 0);
          }
        }
        for (const char* base : {"hca", "preferred"}) {
          req.planner = base;
          req.preference = {"npu:0", "cpu:0-1"};
          auto b2 = make_slice_plan(*cm, req);
          if (!b2.ok()) continue;
          const double c2 =
              obj == Objective::kLatency ? b2->estimated_latency_ms : b2->estimated_energy_mj;
          EXPECT_GE(c2, a - 1e-9 * a) << base;
        }
      }
    }
  }
}

// ---- the SliceTable against the per-query CostModel ----

// A chain of `n` operators of one width where Adds read an earlier tensor (skip connections of
// random length), so the tensors crossing a cut depend on both ends of a slice.
Graph skip_chain(std::mt19937& rng, int n) {
  Graph g;
  const int64_t w = 8 + 8 * static_cast<int64_t>(rng() % 4);
  ValueId cur = g.add_value("x", TensorInfo{DType::kF32, Shape{2, w}});
  g.inputs().push_back(cur);
  std::vector<ValueId> earlier = {cur};
  for (int i = 0; i < n; ++i) {
    const std::string name = "n" + std::to_string(i);
    ValueId out = g.add_value(name);
    const unsigned kind = i == 0 ? 0 : rng() % 3;
    if (kind == 0) {
      std::vector<float> wt(static_cast<size_t>(w * w), 0.01f);
      ValueId wv = g.add_constant("w" + std::to_string(i), Tensor::from_floats(Shape{w, w}, wt));
      g.add_node(Node{name, OpKind::kMatMul, {}, {cur, wv}, {out}});
    } else if (kind == 1) {
      g.add_node(Node{name, OpKind::kSigmoid, {}, {cur}, {out}});
    } else {
      const ValueId skip = earlier[rng() % earlier.size()];
      g.add_node(Node{name, OpKind::kAdd, {}, {cur, skip}, {out}});
    }
    cur = out;
    earlier.push_back(out);
  }
  g.outputs() = {cur};
  return g;
}

// random_profile plus calibration runs, so the per-slice overhead (fixed, per byte, clamped at
// 0) takes part, and an NPU memory cap that binds on some slices.
Profile overhead_profile(const LayerGraph& lg, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  uint64_t weights = 0;
  for (int l = 0; l < lg.num_layers(); ++l) weights += lg.layer(l).cost.weight_bytes;
  const uint64_t mem = rng() % 2 ? 1000000000 : 2000 + static_cast<uint64_t>(u(rng) * weights);
  Profile p = random_profile(lg, rng, mem);
  const int L = lg.num_layers();
  for (DeviceProfile& dp : p.devices) {
    for (LevelProfile& lv : dp.levels) {
      // Half the levels time their layers in a chain, and their calibration runs record their
      // own layers 1-1.5x slower than in the chain (a cold_scale above 1).
      const bool chained = rng() % 2;
      if (chained) lv.layer_chain_ms = lv.layer_ms;
      const double cold = 1 + 0.5 * u(rng);
      for (int r = 0; r < 6; ++r) {
        const int first = static_cast<int>(rng() % static_cast<unsigned>(L));
        const int last = first + 1 + static_cast<int>(rng() % static_cast<unsigned>(L - first));
        double layers = 0;
        for (int l = first; l < last && chained; ++l) {
          layers += cold * *lv.layer_chain_ms[static_cast<size_t>(l)];
        }
        lv.slice_runs.push_back(
            SliceRun{first, last, layers + 0.2 + 4 * u(rng) * (last - first), layers});
      }
    }
  }
  return p;
}

TEST(SliceTableTest, AgreesWithThePerQueryCostModel) {
  std::mt19937 rng(11);
  int64_t feasible = 0, infeasible = 0, clamped = 0, cold = 0;
  for (int trial = 0; trial < 60; ++trial) {
    auto m = testing::make_model(skip_chain(rng, 3 + static_cast<int>(rng() % 20)));
    Profile p = overhead_profile(*m.lg, rng);
    auto cm = CostModel::build(p, *m.lg);
    ASSERT_TRUE(cm.ok()) << cm.status().to_string();
    const int L = cm->num_layers();
    for (Objective obj : {Objective::kLatency, Objective::kEnergy}) {
      const std::vector<int> vds =
          obj == Objective::kLatency ? cm->latency_devices() : cm->energy_devices();
      const SliceTable t = cm->slice_table(vds, obj);
      const CostModelSlices q(*cm, obj, vds);
      ASSERT_EQ(t.num_layers(), L);
      ASSERT_EQ(t.num_options(), static_cast<int>(vds.size()));
      for (int o = 0; o < t.num_options(); ++o) {
        const int vd = vds[static_cast<size_t>(o)];
        EXPECT_EQ(t.virtual_device(o), vd);
        if (cm->slice_overhead(vd).fixed_ms < 0) ++clamped;
        if (cm->slice_overhead(vd).cold_scale > 1.01) ++cold;
        for (int k = 0; k <= L; ++k) {
          for (int l = k + 1; l <= L; ++l) {
            const bool ok = cm->can_run_slice(vd, k, l);
            ASSERT_EQ(ok, l <= t.reach(o, k)) << "o " << o << " [" << k << ", " << l << ")";
            const double want =
                obj == Objective::kLatency ? cm->slice_ms(vd, k, l) : cm->slice_energy_mj(vd, k, l);
            const double got = t.cost(o, k, l);
            if (!ok) {
              ++infeasible;
              EXPECT_EQ(got, kInfiniteCost);
              EXPECT_EQ(t.exec_cost(o, k, l), kInfiniteCost);
              continue;
            }
            ++feasible;
            EXPECT_NEAR(got, want, 1e-12 * std::max(1.0, std::abs(want)))
                << "o " << o << " [" << k << ", " << l << ")";
            if (obj == Objective::kEnergy) {
              EXPECT_EQ(got, want);  // the same operations in the same order
            }
            EXPECT_NEAR(t.exec_cost(o, k, l), q.exec_cost(o, k, l),
                        1e-12 * std::max(1.0, q.exec_cost(o, k, l)));
          }
        }
      }
    }
  }
  EXPECT_GT(feasible, 1000);
  EXPECT_GT(infeasible, 1000);
  EXPECT_GT(clamped, 0);
  EXPECT_GT(cold, 0);
}

// Every planner over the table gives the plan of the same planner over per-query costs (to
// rounding), never breaks a constraint, and the slice plan is optimal against the exhaustive
// search on the small models.
TEST(SliceTableTest, PlannersMatchThePerQueryPlannersAndKeepTheConstraints) {
  std::mt19937 rng(12);
  int exhausted = 0, multi_slice = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const int n = 2 + static_cast<int>(rng() % (trial % 4 == 0 ? 10 : 40));
    auto m = testing::make_model(skip_chain(rng, n));
    Profile p = overhead_profile(*m.lg, rng);
    auto cm = CostModel::build(p, *m.lg);
    ASSERT_TRUE(cm.ok()) << cm.status().to_string();
    for (Objective obj : {Objective::kLatency, Objective::kEnergy}) {
      const std::vector<int> vds =
          obj == Objective::kLatency ? cm->latency_devices() : cm->energy_devices();
      const SliceTable t = cm->slice_table(vds, obj);
      const CostModelSlices q(*cm, obj, vds);
      auto check = [&](const Slicing& fast, const Slicing& slow, const char* who) {
        ASSERT_EQ(fast.feasible(), slow.feasible()) << who;
        if (!fast.feasible()) return;
        EXPECT_NEAR(fast.cost, slow.cost, 1e-9 * std::max(1.0, slow.cost)) << who;
        EXPECT_NEAR(slicing_cost(q, fast.slices), fast.cost, 1e-9 * std::max(1.0, fast.cost))
            << who;
        int next = 0;
        for (const Slice& sl : fast.slices) {
          ASSERT_EQ(sl.first, next) << who;
          EXPECT_TRUE(cm->can_run_slice(vds[static_cast<size_t>(sl.option)], sl.first, sl.last))
              << who << " [" << sl.first << ", " << sl.last << ") on option " << sl.option;
          next = sl.last;
        }
        EXPECT_EQ(next, cm->num_layers()) << who;
      };
      const Slicing dp = plan_slice_dp(t);
      check(dp, plan_slice_dp(q), "slice");
      if (dp.slices.size() > 1) ++multi_slice;
      const Slicing hca = plan_slice_hca(t);
      check(hca, plan_slice_hca(q), "hca");
      if (hca.feasible()) {
        EXPECT_GE(hca.cost, dp.cost - 1e-9 * dp.cost);
      }
      const std::vector<int> order = {static_cast<int>(vds.size()) - 1, 0};
      const Slicing pref = plan_slice_preferred(t, order);
      const Slicing pref_q = plan_slice_preferred(q, order);
      check(pref, pref_q, "preferred");
      EXPECT_EQ(pref.slices, pref_q.slices);
      if (cm->num_layers() <= 7) {
        check(dp, plan_slice_exhaustive(q), "slice vs exhaustive");
        ++exhausted;
      }
    }
  }
  EXPECT_GT(exhausted, 10);
  EXPECT_GT(multi_slice, 20);
}

TEST(SliceTest, RequestErrors) {
  std::mt19937 rng(3);
  auto m = testing::make_model(testing::matmul_chain(4));
  Profile p = random_profile(*m.lg, rng, 1000000000);
  auto cm = CostModel::build(p, *m.lg).value();
  SlicePlanRequest req;
  req.devices = {"opencl:0"};
  auto r = make_slice_plan(cm, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("no device 'opencl:0'"), std::string::npos)
      << r.status().to_string();
  req.devices = {};
  req.planner = "greedy";
  EXPECT_FALSE(make_slice_plan(cm, req).ok());
  req.planner = "preferred";
  EXPECT_FALSE(make_slice_plan(cm, req).ok());
  EXPECT_FALSE(parse_objective("throughput").ok());
  // Restricting to one device at one level.
  req.planner = "slice";
  req.objective = Objective::kEnergy;
  req.devices = {"cpu:0-1@1000"};
  auto one = make_slice_plan(cm, req);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(one->notation(), "cpu:0-1@1000[0]");
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// The pricer on streaming plans: the period is the busiest device or actor, the latency one
// frame's critical path, the energy adds each device's static power over its idle time.
TEST(PricerTest, StreamingPeriodLatencyAndEnergy) {
  std::mt19937 rng(21);
  auto m = testing::make_model(testing::matmul_chain(6));
  Profile p = random_profile(*m.lg, rng, 1000000000);
  p.devices[1].unsupported.clear();
  auto cm = CostModel::build(p, *m.lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  auto two = plan_from_slices(6, {{0, "cpu:0-1@2000"}, {3, "npu:0"}}).value();
  ASSERT_TRUE(price_plan(*cm, *m.lg, &two).ok());
  const double a = two.stages[0].estimate.exec_ms + two.stages[0].estimate.transfer_ms;
  const double b = two.stages[1].estimate.exec_ms + two.stages[1].estimate.transfer_ms;
  EXPECT_NEAR(two.estimated_latency_ms, a + b, 1e-12);
  const double seq_energy = two.estimated_energy_mj;
  ASSERT_EQ(two.device_load.size(), 2u);
  EXPECT_EQ(two.device_load[0].device, "cpu:0-1");
  EXPECT_NEAR(two.device_load[1].busy_ms, b, 1e-12);

  two.mode = PlanMode::kStreaming;
  ASSERT_TRUE(price_plan(*cm, *m.lg, &two).ok());
  EXPECT_NEAR(two.estimated_period_ms, std::max(a, b), 1e-12);
  EXPECT_NEAR(two.estimated_latency_ms, a + b, 1e-12);  // stage 1 waits for stage 0
  const double idle_energy = (std::max(a, b) - a) * 0.5 + (std::max(a, b) - b) * 0.1;
  EXPECT_NEAR(two.estimated_energy_mj, seq_energy + idle_energy, 1e-9);

  // One device hosting two stages (at two levels) pays both.
  auto same = plan_from_slices(6, {{0, "cpu:0-1@2000"}, {3, "cpu:0-1@1000"}}).value();
  same.mode = PlanMode::kStreaming;
  ASSERT_TRUE(price_plan(*cm, *m.lg, &same).ok());
  const double s0 = same.stages[0].estimate.exec_ms + same.stages[0].estimate.transfer_ms;
  const double s1 = same.stages[1].estimate.exec_ms + same.stages[1].estimate.transfer_ms;
  EXPECT_NEAR(same.estimated_period_ms, s0 + s1, 1e-12);
  ASSERT_EQ(same.device_load.size(), 1u);

  // Stages 0 and 2 on one actor: the actor's summed load bounds the period.
  auto csdf = plan_from_slices(6, {{0, "npu:0"}, {2, "cpu:0-1@2000"}, {4, "npu:0"}}).value();
  csdf.mode = PlanMode::kStreaming;
  csdf.stages[0].actor = 0;
  csdf.stages[2].actor = 0;
  ASSERT_TRUE(price_plan(*cm, *m.lg, &csdf).ok());
  double actor0 = 0;
  for (int i : {0, 2}) {
    actor0 += csdf.stages[static_cast<size_t>(i)].estimate.exec_ms +
              csdf.stages[static_cast<size_t>(i)].estimate.transfer_ms;
  }
  EXPECT_GE(csdf.estimated_period_ms, actor0 - 1e-12);

  // A split placement or an unprofiled device is refused, naming the stage.
  auto bad = plan_from_slices(6, {{0, "opencl:0"}}).value();
  const Status st = price_plan(*cm, *m.lg, &bad);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("stage 0"), std::string::npos) << st.to_string();
}

}  // namespace
}  // namespace tessera
