// The pipeline planner against an independent brute force: every contiguous partition into k
// stages and every device assignment, each priced from the CostModel's per-slice queries with
// the streaming formulas written out here (summed device loads, the critical path of one frame,
// static power over each device's idle time), themselves checked against price_plan.
#include "scheduler/planners/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "scheduler/pricer.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::line;

// ---- random instances ----

// `n` operators of one width: MatMuls and Sigmoids on the previous tensor, Adds of an earlier
// tensor (skip connections), and side branches (a Sigmoid of an earlier tensor, which does not
// read the layer before it, merged by the next Add) so that stages can run in parallel within a
// frame and the critical path is shorter than the sum of the stages.
Graph random_graph(std::mt19937& rng, int n) {
  Graph g;
  const int64_t w = 8 + 8 * static_cast<int64_t>(rng() % 3);
  ValueId cur = g.add_value("x", TensorInfo{DType::kF32, Shape{2, w}});
  g.inputs().push_back(cur);
  std::vector<ValueId> earlier = {cur};
  ValueId side = -1;
  for (int i = 0; i < n; ++i) {
    const std::string name = "n" + std::to_string(i);
    ValueId out = g.add_value(name);
    unsigned kind = i == 0 ? 0 : rng() % 4;
    if (side >= 0) kind = 4;                // merge the side branch
    if (kind == 3 && i == n - 1) kind = 1;  // no branch left open at the end
    if (kind == 0) {
      std::vector<float> wt(static_cast<size_t>(w * w), 0.01f);
      ValueId wv = g.add_constant("w" + std::to_string(i), Tensor::from_floats(Shape{w, w}, wt));
      g.add_node(Node{name, OpKind::kMatMul, {}, {cur, wv}, {out}});
    } else if (kind == 1) {
      g.add_node(Node{name, OpKind::kSigmoid, {}, {cur}, {out}});
    } else if (kind == 2) {
      g.add_node(Node{name, OpKind::kAdd, {}, {cur, earlier[rng() % earlier.size()]}, {out}});
    } else if (kind == 3) {
      g.add_node(Node{name, OpKind::kSigmoid, {}, {earlier[rng() % earlier.size()]}, {out}});
      side = out;
      earlier.push_back(out);
      continue;  // `cur` stays: the next layer adds it to the branch
    } else {
      g.add_node(Node{name, OpKind::kAdd, {}, {cur, side}, {out}});
      side = -1;
    }
    cur = out;
    earlier.push_back(out);
  }
  g.outputs() = {cur};
  return g;
}

// `devices` devices: "cpu:0" with levels 1000 and 2000 MHz, then npu:0, npu:1... with one.
Platform platform(int devices, const std::vector<uint64_t>& memory, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  std::string json = R"({"format": "tessera-platform", "version": 1, "name": "t", "devices": [)";
  for (int d = 0; d < devices; ++d) {
    const bool cpu = d == 0;
    const std::string name = cpu ? "cpu:0" : "npu:" + std::to_string(d - 1);
    json += std::string(d ? "," : "") + R"({"id": "d)" + std::to_string(d) + R"(", "kind": ")" +
            (cpu ? "cpu" : "npu") + R"(", "device": ")" + name + R"(", "memory_bytes": )" +
            std::to_string(memory[static_cast<size_t>(d)]) + R"(, "dynamic_w": )" +
            std::to_string(0.5 + 3 * u(rng)) + R"(, "dvfs": [)";
    if (cpu) {
      json += R"({"mhz": 1000, "mv": 800, "static_w": )" + std::to_string(0.5 * u(rng)) +
              R"(}, {"mhz": 2000, "mv": 1000, "static_w": )" + std::to_string(u(rng)) + "}";
    } else {
      json += R"({"mhz": 0, "mv": 0, "static_w": )" + std::to_string(0.5 * u(rng)) + "}";
    }
    json += "]}";
  }
  return Platform::from_json_text(json + "]}", "t").value();
}

Profile random_profile(const LayerGraph& lg, std::mt19937& rng, int devices) {
  std::uniform_real_distribution<double> u(0, 1);
  const int L = lg.num_layers();
  uint64_t weights = 0;
  for (int l = 0; l < L; ++l) weights += lg.layer(l).cost.weight_bytes;
  std::vector<uint64_t> memory;
  for (int d = 0; d < devices; ++d) {
    // Sometimes a cap that binds on some slices.
    memory.push_back(d > 0 && rng() % 4 == 0 ? 2000 + static_cast<uint64_t>(u(rng) * weights)
                                             : 1000000000);
  }
  Profile p;
  p.model_name = "random";
  p.model_hash = "h";
  p.describe_model(lg);
  p.platform = platform(devices, memory, rng);
  for (int d = 0; d < devices; ++d) {
    DeviceProfile dp;
    dp.device = p.platform.devices[static_cast<size_t>(d)].device;
    const double speed = 0.2 + 3 * u(rng);
    for (int mhz : d == 0 ? std::vector<int>{1000, 2000} : std::vector<int>{0}) {
      LevelProfile lv;
      lv.mhz = mhz;
      const double slow = mhz > 0 ? 2000.0 / mhz : 1.0;
      for (int l = 0; l < L; ++l) lv.layer_ms.push_back(speed * slow * (0.05 + 2 * u(rng)));
      lv.upload = line(1e-5 * u(rng), 0.2 * u(rng));
      lv.download = line(1e-5 * u(rng), 0.2 * u(rng));
      // Half the levels time their layers in a chain too, with calibration runs that make them
      // slower in a plan than in the chain (the cold factor) and add a per-slice overhead.
      if (rng() % 2) {
        lv.layer_chain_ms = lv.layer_ms;
        const double cold = 1 + 0.5 * u(rng);
        for (int r = 0; r < 4; ++r) {
          const int first = static_cast<int>(rng() % static_cast<unsigned>(L));
          const int last = first + 1 + static_cast<int>(rng() % static_cast<unsigned>(L - first));
          double layers = 0;
          for (int l = first; l < last; ++l)
            layers += cold * *lv.layer_chain_ms[static_cast<size_t>(l)];
          lv.slice_runs.push_back(SliceRun{first, last, layers + 0.1 + u(rng), layers});
        }
      }
      dp.levels.push_back(lv);
    }
    if (d > 0 && rng() % 3 == 0) dp.unsupported[static_cast<int>(rng() % L)] = "op";
    // Often a co-run factor: the device runs slower while another one runs too.
    if (rng() % 2) dp.corun_scale = 1 + 0.6 * u(rng);
    p.devices.push_back(dp);
  }
  return p;
}

// ---- the brute force ----

struct Candidate {
  std::vector<PipelineStage> stages;  // vd = virtual device
  double period = 0, latency = 0, energy = 0;
};

// Every layer's producer layers, from the graph (not from the planner).
std::vector<std::vector<int>> layer_producers(const LayerGraph& lg) {
  std::map<ValueId, int> made_by;
  for (int l = 0; l < lg.num_layers(); ++l) {
    for (ValueId v : lg.layer(l).outputs) made_by[v] = l;
  }
  std::vector<std::vector<int>> out(static_cast<size_t>(lg.num_layers()));
  for (int l = 0; l < lg.num_layers(); ++l) {
    for (ValueId v : lg.layer(l).inputs) {
      auto it = made_by.find(v);
      if (it != made_by.end()) out[static_cast<size_t>(l)].push_back(it->second);
    }
  }
  return out;
}

// Prices one candidate from the CostModel's per-slice queries; false when a stage cannot run.
bool price(const CostModel& cm, const std::vector<std::vector<int>>& producers, Candidate* c) {
  const size_t k = c->stages.size();
  std::vector<double> busy(k), finish(k);
  std::vector<double> load(cm.devices().size(), 0);    // by physical device
  std::vector<int> level_vd(cm.devices().size(), -1);  // physical device -> its virtual device
  double energy = 0;
  for (size_t i = 0; i < k; ++i) {
    const PipelineStage& s = c->stages[i];
    if (!cm.can_run_slice(s.vd, s.first, s.last)) return false;
    busy[i] = cm.slice_ms(s.vd, s.first, s.last);
    energy += cm.slice_energy_mj(s.vd, s.first, s.last);
  }
  // Over two or more physical devices every stage runs at its device's co-run factor.
  std::set<int> physical;
  for (const PipelineStage& s : c->stages) {
    physical.insert(cm.virtual_devices()[static_cast<size_t>(s.vd)].device_index);
  }
  for (size_t i = 0; i < k; ++i) {
    const PipelineStage& s = c->stages[i];
    if (physical.size() >= 2) busy[i] *= cm.corun_scale(s.vd);
    const size_t d =
        static_cast<size_t>(cm.virtual_devices()[static_cast<size_t>(s.vd)].device_index);
    load[d] += busy[i];
    level_vd[d] = s.vd;
    double start = 0;
    for (int l = s.first; l < s.last; ++l) {
      for (int p : producers[static_cast<size_t>(l)]) {
        for (size_t j = 0; j < i; ++j) {
          if (p >= c->stages[j].first && p < c->stages[j].last) start = std::max(start, finish[j]);
        }
      }
    }
    finish[i] = start + busy[i];
  }
  double period = *std::max_element(busy.begin(), busy.end());
  for (size_t d = 0; d < load.size(); ++d) {
    if (level_vd[d] >= 0) period = std::max(period, load[d]);
  }
  for (size_t d = 0; d < load.size(); ++d) {
    if (level_vd[d] < 0) continue;
    const VirtualDevice& v = cm.virtual_devices()[static_cast<size_t>(level_vd[d])];
    energy += cm.devices()[d].dvfs[static_cast<size_t>(v.level)].static_w * (period - load[d]);
  }
  c->period = period;
  c->latency = *std::max_element(finish.begin(), finish.end());
  c->energy = energy;
  return true;
}

// All feasible pipelines of 1..k_max stages over `options`: every cut set, every sequence of
// options (repeats allowed, one level per physical device).
std::vector<std::vector<Candidate>> enumerate(const CostModel& cm, const LayerGraph& lg,
                                              const std::vector<int>& options, int k_max) {
  const auto producers = layer_producers(lg);
  const int L = cm.num_layers();
  const int D = static_cast<int>(options.size());
  std::vector<std::vector<Candidate>> by_k(static_cast<size_t>(k_max) + 1);
  for (int k = 1; k <= std::min(k_max, L); ++k) {
    // Cut sets: 0 < c_1 < ... < c_{k-1} < L, by counting in base L over the k-1 cuts.
    std::vector<int> cuts(static_cast<size_t>(k) + 1);
    std::function<void(int, int)> cut = [&](int i, int from) {
      if (i == k) {
        cuts[0] = 0;
        cuts[static_cast<size_t>(k)] = L;
        int seqs = 1;
        for (int s = 0; s < k; ++s) seqs *= D;
        for (int code = 0; code < seqs; ++code) {
          int x = code;
          Candidate c;
          std::vector<int> level(cm.devices().size(), -1);
          bool ok = true;
          for (int s = 0; s < k; ++s) {
            const int vd = options[static_cast<size_t>(x % D)];
            x /= D;
            const size_t d =
                static_cast<size_t>(cm.virtual_devices()[static_cast<size_t>(vd)].device_index);
            if (level[d] >= 0 && level[d] != vd) ok = false;
            level[d] = vd;
            c.stages.push_back(
                PipelineStage{cuts[static_cast<size_t>(s)], cuts[static_cast<size_t>(s) + 1], vd});
          }
          if (ok && price(cm, producers, &c)) by_k[static_cast<size_t>(k)].push_back(c);
        }
        return;
      }
      for (int c = from; c <= L - (k - i); ++c) {
        cuts[static_cast<size_t>(i)] = c;
        cut(i + 1, c + 1);
      }
    };
    cut(1, 1);
  }
  return by_k;
}

double value(const Candidate& c, PipelineObjective o) {
  return o == PipelineObjective::kThroughput ? c.period
         : o == PipelineObjective::kEnergy   ? c.energy
                                             : c.latency;
}
double value(const Pipeline& p, PipelineObjective o) {
  return o == PipelineObjective::kThroughput ? p.period_ms
         : o == PipelineObjective::kEnergy   ? p.energy_mj
                                             : p.latency_ms;
}

bool top_levels_only(const CostModel& cm, const Candidate& c) {
  for (const PipelineStage& s : c.stages) {
    if (!cm.virtual_devices()[static_cast<size_t>(s.vd)].top) return false;
  }
  return true;
}

// The brute-force optimum of exactly k stages (nullptr when none meets the constraints).
const Candidate* best_of(const CostModel& cm, const std::vector<Candidate>& all,
                         const PipelineRequest& req) {
  const Candidate* best = nullptr;
  for (const Candidate& c : all) {
    if (req.objective != PipelineObjective::kEnergy && !top_levels_only(cm, c)) continue;
    if (c.period > req.max_period_ms || c.latency > req.max_latency_ms) continue;
    if (best == nullptr || value(c, req.objective) < value(*best, req.objective)) best = &c;
  }
  return best;
}

void expect_near(double a, double b, const std::string& what) {
  EXPECT_NEAR(a, b, 1e-9 * std::max(1.0, std::abs(b))) << what;
}

// The planner's own numbers are price_plan's, and the plan is a valid streaming plan.
void expect_priced_alike(const CostModel& cm, const LayerGraph& lg, const Pipeline& p,
                         const std::string& what) {
  Plan plan = pipeline_to_plan(cm, p);
  ASSERT_TRUE(plan.validate(cm.num_layers(), {}, true).ok()) << what;
  ASSERT_TRUE(price_plan(cm, lg, &plan).ok()) << what;
  EXPECT_EQ(plan.mode, PlanMode::kStreaming);
  expect_near(p.period_ms, plan.estimated_period_ms, what + " period");
  expect_near(p.latency_ms, plan.estimated_latency_ms, what + " latency");
  expect_near(p.energy_mj, plan.estimated_energy_mj, what + " energy");
}

// A constraint at a quantile of the candidates' values, off any candidate's exact value.
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double x = v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
  return x * (1 + 1e-7);
}

TEST(PipelineTest, EqualsBruteForceOnRandomInstances) {
  std::mt19937 rng(20261126);
  constexpr int kInstances = 2000;
  constexpr PipelineObjective kObjectives[] = {
      PipelineObjective::kThroughput, PipelineObjective::kEnergy, PipelineObjective::kLatency};
  int compared[3] = {0, 0, 0}, constrained[3] = {0, 0, 0}, refused[3] = {0, 0, 0};
  int repeated_best = 0, parallel_stages = 0, auto_compared = 0, one_device_under_corun = 0;
  for (int inst = 0; inst < kInstances; ++inst) {
    const int n = 2 + static_cast<int>(rng() % 11);
    auto m = testing::make_model(random_graph(rng, n));
    const int L = m.lg->num_layers();
    if (L > 12) continue;
    const int devices = 1 + static_cast<int>(rng() % 4);
    Profile profile = random_profile(*m.lg, rng, devices);
    auto cm = CostModel::build(profile, *m.lg);
    ASSERT_TRUE(cm.ok()) << cm.status().to_string();
    const auto all = enumerate(*cm, *m.lg, cm->energy_devices(), 3);
    const std::string where = "instance " + std::to_string(inst) + " (" + std::to_string(L) +
                              " layers, " + std::to_string(devices) + " devices)";

    // The brute force's own prices are price_plan's (a sample).
    for (int k = 1; k <= 3 && k <= L; ++k) {
      const auto& ks = all[static_cast<size_t>(k)];
      if (ks.empty()) continue;
      const Candidate& c = ks[rng() % ks.size()];
      Pipeline p;
      p.stages = c.stages;
      p.period_ms = c.period;
      p.latency_ms = c.latency;
      p.energy_mj = c.energy;
      expect_priced_alike(*cm, *m.lg, p, where + " brute force");
      double sum = 0;
      for (const PipelineStage& s : c.stages) sum += cm->slice_ms(s.vd, s.first, s.last);
      if (c.latency < sum * (1 - 1e-9)) ++parallel_stages;
    }

    for (int oi = 0; oi < 3; ++oi) {
      const PipelineObjective obj = kObjectives[oi];
      const std::string what = where + " " + pipeline_objective_name(obj);
      // Exactly k stages, with and without constraints.
      for (int k = 1; k <= 3 && k <= L; ++k) {
        PipelineRequest req;
        req.objective = obj;
        req.stages = k;
        const int variant = static_cast<int>(rng() % 4);  // 0: none, 1: latency, 2: period, 3: both
        std::vector<double> lat, per;
        for (const Candidate& c : all[static_cast<size_t>(k)]) {
          lat.push_back(c.latency);
          per.push_back(c.period);
        }
        if (variant != 0 && !lat.empty()) {
          if (variant & 1)
            req.max_latency_ms = quantile(lat, std::uniform_real_distribution<>(0, 0.6)(rng));
          if (variant & 2)
            req.max_period_ms = quantile(per, std::uniform_real_distribution<>(0, 0.6)(rng));
          ++constrained[oi];
        }
        const Candidate* want = best_of(*cm, all[static_cast<size_t>(k)], req);
        auto got = plan_pipeline(*cm, *m.lg, req);
        const std::string w =
            what + " k=" + std::to_string(k) + " variant " + std::to_string(variant);
        if (want == nullptr) {
          ASSERT_FALSE(got.ok()) << w << ": " << got->stages.size();
          EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition) << w;
          if (variant != 0 && !lat.empty()) {
            const std::string msg = got.status().message();
            EXPECT_TRUE(msg.find("max latency") != std::string::npos ||
                        msg.find("max period") != std::string::npos)
                << w << ": " << msg;
            ++refused[oi];
          }
          continue;
        }
        ASSERT_TRUE(got.ok()) << w << ": " << got.status().to_string();
        ASSERT_EQ(static_cast<int>(got->stages.size()), k) << w;
        expect_near(value(*got, obj), value(*want, obj), w);
        EXPECT_LE(got->period_ms, req.max_period_ms) << w;
        EXPECT_LE(got->latency_ms, req.max_latency_ms) << w;
        expect_priced_alike(*cm, *m.lg, *got, w);
        ++compared[oi];
        if (k >= 2) {
          std::set<int> used;
          for (const PipelineStage& st : want->stages) {
            used.insert(cm->virtual_devices()[static_cast<size_t>(st.vd)].device_index);
          }
          bool scaled = false;
          for (const DeviceProfile& d : profile.devices) scaled = scaled || d.corun_scale > 1;
          if (used.size() == 1 && scaled && devices >= 2) ++one_device_under_corun;
        }
        if (obj == PipelineObjective::kThroughput && k == 3) {
          const auto& st = want->stages;
          const auto dev = [&](int i) {
            return cm->virtual_devices()[static_cast<size_t>(st[static_cast<size_t>(i)].vd)]
                .device_index;
          };
          if (dev(0) == dev(2) && dev(0) != dev(1)) ++repeated_best;
        }
      }
      // The stopping rule, where the brute force can follow it (it stops by k = 2).
      PipelineRequest req;
      req.objective = obj;
      const Candidate* b[4] = {nullptr, nullptr, nullptr, nullptr};
      for (int k = 1; k <= 3 && k <= L; ++k) b[k] = best_of(*cm, all[static_cast<size_t>(k)], req);
      auto got = plan_pipeline(*cm, *m.lg, req);
      const Candidate* stop = nullptr;
      bool followed = false;
      for (int k = 1; k <= 3; ++k) {
        if (k > L) {
          followed = true;  // no more stages to try
          break;
        }
        if (stop == nullptr) {
          stop = b[k];  // nothing feasible before: the rule goes on to k
          continue;
        }
        if (b[k] == nullptr || !(value(*b[k], obj) < value(*stop, obj) * (1 - 1e-9))) {
          followed = true;  // k stages find nothing better than k - 1: stop
          break;
        }
        stop = b[k];
      }
      if (stop == nullptr) {
        if (followed) {
          EXPECT_FALSE(got.ok()) << what << " auto";
        }
        continue;
      }
      ASSERT_TRUE(got.ok()) << what << " auto: " << got.status().to_string();
      expect_priced_alike(*cm, *m.lg, *got, what + " auto");
      if (followed) {
        EXPECT_EQ(got->stages.size(), stop->stages.size()) << what << " auto";
        expect_near(value(*got, obj), value(*stop, obj), what + " auto");
        ++auto_compared;
      } else {
        // Three stages still helped: the planner went on, and is at least as good.
        EXPECT_LE(value(*got, obj), value(*stop, obj) * (1 + 1e-9)) << what << " auto";
      }
    }
  }
  for (int oi = 0; oi < 3; ++oi) {
    EXPECT_GT(compared[oi], kInstances) << oi;  // several k per instance
    EXPECT_GT(constrained[oi], kInstances / 2) << oi;
    EXPECT_GT(refused[oi], 5) << oi;
  }
  EXPECT_GT(repeated_best, 10);    // a device hosting two stages is sometimes the best
  EXPECT_GT(parallel_stages, 30);  // the critical path is sometimes shorter than the sum
  EXPECT_GT(auto_compared, kInstances);
  // Some best plans of two or three stages stay on one device while co-run factors apply to the
  // others: the single-device searches of the planner find them.
  EXPECT_GT(one_device_under_corun, 20) << one_device_under_corun;
}

// ---- a known answer: one device hosting two stages pays both ----

// Six layers, no transfer cost: cpu:0 is fast on the first two and the last two, npu:0 on the
// middle two. cpu:0, npu:0, cpu:0 gives stages of 2 ms each, but cpu:0 hosts two: 4 ms.
struct KnownAnswer {
  testing::TestModel m;
  Profile profile;
  std::unique_ptr<CostModel> cm;
};

std::unique_ptr<KnownAnswer> known_answer() {
  auto k = std::make_unique<KnownAnswer>();
  k->m = testing::make_model(testing::matmul_chain(6));
  Profile& p = k->profile;
  p.model_name = "chain";
  p.model_hash = "h";
  p.describe_model(*k->m.lg);
  p.platform = Platform::from_json_text(
                   R"({"format": "tessera-platform", "version": 1, "name": "t", "devices": [
      {"id": "cpu", "kind": "cpu", "device": "cpu:0", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.5}], "dynamic_w": 2.0},
      {"id": "npu", "kind": "npu", "device": "npu:0", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.1}], "dynamic_w": 1.0}]})",
                   "t")
                   .value();
  const std::vector<double> cpu = {1, 1, 4, 4, 1, 1}, npu = {4, 4, 1, 1, 4, 4};
  for (const auto& [name, times] : {std::pair{"cpu:0", cpu}, std::pair{"npu:0", npu}}) {
    DeviceProfile dp;
    dp.device = name;
    LevelProfile lv;
    for (double t : times) lv.layer_ms.push_back(t);
    lv.upload = line(0, 0);
    lv.download = line(0, 0);
    dp.levels.push_back(lv);
    p.devices.push_back(dp);
  }
  k->cm = std::make_unique<CostModel>(CostModel::build(p, *k->m.lg).value());
  return k;
}

TEST(PipelineTest, ADeviceHostingTwoStagesPaysBoth) {
  auto k = known_answer();
  PipelineRequest req;
  req.stages = 3;
  auto plan = make_pipeline_plan(*k->cm, *k->m.lg, req);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->notation(), "cpu:0[0] npu:0[2] cpu:0[4]");
  EXPECT_EQ(plan->mode, PlanMode::kStreaming);
  EXPECT_EQ(plan->planner, "pipeline");
  EXPECT_EQ(plan->objective, "throughput");
  for (const Stage& s : plan->stages) {
    EXPECT_NEAR(s.estimate.exec_ms + s.estimate.transfer_ms, 2, 1e-12);
    EXPECT_EQ(s.actor, -1);
  }
  // The period is cpu:0's summed load, not its largest stage.
  EXPECT_NEAR(plan->estimated_period_ms, 4, 1e-12);
  ASSERT_EQ(plan->device_load.size(), 2u);
  EXPECT_EQ(plan->device_load[0].device, "cpu:0");
  EXPECT_NEAR(plan->device_load[0].busy_ms, 4, 1e-12);
  EXPECT_NEAR(plan->estimated_latency_ms, 6, 1e-12);

  // The stopping rule: two stages (best 9 ms: cpu [0, 3), npu [3, 6)) beat one (cpu, 12 ms),
  // three (4 ms) beat two, four find nothing better than 4 ms.
  req.stages = 0;
  auto two = plan_pipeline(*k->cm, *k->m.lg, PipelineRequest{PipelineObjective::kThroughput, 2});
  ASSERT_TRUE(two.ok());
  EXPECT_NEAR(two->period_ms, 9, 1e-12);
  auto best = make_pipeline_plan(*k->cm, *k->m.lg, req);
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  EXPECT_EQ(best->stages.size(), 3u) << best->notation();
  EXPECT_NEAR(best->estimated_period_ms, 4, 1e-12);

  // Latency: three stages give the fastest frame (6 ms), but the stopping rule never gets
  // there: no two-stage frame beats cpu:0 alone (12 ms), so it stops at one stage.
  req.objective = PipelineObjective::kLatency;
  auto fast = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_TRUE(fast.ok());
  EXPECT_EQ(fast->stages.size(), 1u);
  EXPECT_NEAR(fast->latency_ms, 12, 1e-12);
  req.stages = 3;
  fast = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_TRUE(fast.ok());
  EXPECT_NEAR(fast->latency_ms, 6, 1e-12);

  // Energy adds each device's static power while it waits: npu:0 idles 2 ms of the 4 ms period.
  req.objective = PipelineObjective::kEnergy;
  req.stages = 3;
  req.max_period_ms = 4.5;
  auto e = make_pipeline_plan(*k->cm, *k->m.lg, req);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  double stages = 0;
  for (const Stage& s : e->stages) stages += s.estimate.energy_mj;
  EXPECT_NEAR(e->estimated_energy_mj, stages + 0.1 * 2, 1e-9);
}

// Co-running: over two devices every stage pays its device's co-run factor; on one device, or
// run sequentially, none.
TEST(PipelineTest, CoRunFactorsScaleStagesOverTwoDevices) {
  auto k = known_answer();
  k->profile.devices[0].corun_scale = 1.5;   // cpu:0
  k->profile.devices[1].corun_scale = 1.25;  // npu:0
  k->cm = std::make_unique<CostModel>(CostModel::build(k->profile, *k->m.lg).value());
  EXPECT_EQ(k->cm->corun_scale(k->cm->find("cpu:0").value()), 1.5);
  PipelineRequest req;
  req.stages = 3;
  auto plan = make_pipeline_plan(*k->cm, *k->m.lg, req);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->notation(), "cpu:0[0] npu:0[2] cpu:0[4]");
  ASSERT_EQ(plan->stages.size(), 3u);
  EXPECT_NEAR(plan->stages[0].estimate.exec_ms, 3, 1e-12);  // 2 ms x 1.5
  EXPECT_NEAR(plan->stages[1].estimate.exec_ms, 2.5, 1e-12);
  EXPECT_NEAR(plan->estimated_period_ms, 6, 1e-12);  // cpu:0 hosts two: 2 x 3 ms
  EXPECT_NEAR(plan->estimated_latency_ms, 8.5, 1e-12);
  auto two = plan_pipeline(*k->cm, *k->m.lg, PipelineRequest{PipelineObjective::kThroughput, 2});
  ASSERT_TRUE(two.ok());
  EXPECT_NEAR(two->period_ms, 11.25, 1e-12);  // cpu [0, 3) 9 ms, npu [3, 6) 11.25 ms

  // The same stages run one after another (sequential) or all on one device: no factor.
  Plan seq = *plan;
  seq.mode = PlanMode::kSequential;
  ASSERT_TRUE(price_plan(*k->cm, *k->m.lg, &seq).ok());
  EXPECT_NEAR(seq.estimated_latency_ms, 6, 1e-12);
  Plan one = pipeline_to_plan(*k->cm, Pipeline{{{0, 3, 0}, {3, 6, 0}}});
  ASSERT_TRUE(price_plan(*k->cm, *k->m.lg, &one).ok());
  EXPECT_NEAR(one.estimated_period_ms, 12, 1e-12);

  // Where co-running costs more than it gains, the best two-stage plan stays on one device:
  // cpu [0, 3) at 1.5 (9 ms) with npu [3, 6) at 1.5 (13.5 ms) loses to cpu:0 twice (12 ms).
  k->profile.devices[1].corun_scale = 1.5;
  k->cm = std::make_unique<CostModel>(CostModel::build(k->profile, *k->m.lg).value());
  two = plan_pipeline(*k->cm, *k->m.lg, PipelineRequest{PipelineObjective::kThroughput, 2});
  ASSERT_TRUE(two.ok());
  EXPECT_NEAR(two->period_ms, 12, 1e-12);
  ASSERT_EQ(two->stages.size(), 2u);
  EXPECT_EQ(two->stages[0].vd, two->stages[1].vd);
  expect_priced_alike(*k->cm, *k->m.lg, *two, "one device, two stages");
}

TEST(PipelineTest, InfeasibleConstraintsSayWhichAndTheBestValue) {
  auto k = known_answer();
  PipelineRequest req;
  req.max_period_ms = 3;
  auto r = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("max period 3 ms"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("smallest period is 4 ms"), std::string::npos)
      << r.status().message();

  req = PipelineRequest{};
  req.objective = PipelineObjective::kEnergy;
  req.stages = 2;
  req.max_latency_ms = 5;
  r = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("2-stage"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("max latency 5 ms"), std::string::npos)
      << r.status().message();
  // The quickest two-stage frame: cpu [0, 2) + npu [2, 6) = 2 + 10 ms (or npu [0, 4) +
  // cpu [4, 6) = 10 + 2).
  EXPECT_NE(r.status().message().find("smallest latency is 12 ms"), std::string::npos)
      << r.status().message();

  // Each alone can be met, not both: two stages reach a 9 ms period (cpu [0, 3), npu [3, 6),
  // latency 15 ms) and a 12 ms latency (period 10 ms).
  req = PipelineRequest{};
  req.stages = 2;
  req.max_latency_ms = 12.5;
  req.max_period_ms = 9.5;
  r = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("together: with latency <= 12.5 ms the smallest period is "
                                      "10 ms"),
            std::string::npos)
      << r.status().message();
}

TEST(PipelineTest, RequestErrors) {
  auto k = known_answer();
  PipelineRequest req;
  req.stages = PipelineRequest::kMaxStages + 1;
  auto r = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stages 9"), std::string::npos) << r.status().message();
  req.stages = 7;
  r = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("6"), std::string::npos) << r.status().message();
  req.stages = 0;
  req.max_latency_ms = -1;
  r = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("max latency"), std::string::npos) << r.status().message();
  req.max_latency_ms = std::nan("");
  EXPECT_FALSE(plan_pipeline(*k->cm, *k->m.lg, req).ok());
  req.max_latency_ms = kInfiniteCost;
  req.devices = {"gpu:3"};
  r = plan_pipeline(*k->cm, *k->m.lg, req);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gpu:3"), std::string::npos) << r.status().message();
  EXPECT_FALSE(parse_pipeline_objective("speed").ok());
  EXPECT_EQ(parse_pipeline_objective("energy").value(), PipelineObjective::kEnergy);
}

// A larger model: three stages over four devices, and the stopping rule over two, plan within
// seconds for every objective and agree with price_plan.
TEST(PipelineTest, LargerModelPlansAndAgreesWithThePricer) {
  std::mt19937 rng(5);
  auto m = testing::make_model(random_graph(rng, 60));
  for (int devices : {2, 4}) {
    Profile profile = random_profile(*m.lg, rng, devices);
    auto cm = CostModel::build(profile, *m.lg);
    ASSERT_TRUE(cm.ok()) << cm.status().to_string();
    for (PipelineObjective obj : {PipelineObjective::kThroughput, PipelineObjective::kEnergy,
                                  PipelineObjective::kLatency}) {
      PipelineRequest req;
      req.objective = obj;
      req.stages = devices == 4 ? 3 : 0;
      const std::string what = std::string(pipeline_objective_name(obj)) + " over " +
                               std::to_string(devices) + " devices";
      // CPU time, not wall time: on a loaded machine the wall time of a 2-3 s search triples.
      const std::clock_t t0 = std::clock();
      auto p = plan_pipeline(*cm, *m.lg, req);
      const double s = static_cast<double>(std::clock() - t0) / CLOCKS_PER_SEC;
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      // A guard against a runaway search (the planning time itself is a benchmark's, in
      // benchmarks/): generous, and four times that under the sanitizers' slowdown.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
      EXPECT_LT(s, 40.0) << what;
#else
      EXPECT_LT(s, 10.0) << what;
#endif
      expect_priced_alike(*cm, *m.lg, *p, what);
      if (req.stages != 0) continue;
      // The stopping rule starts from one stage: no single device does better.
      PipelineRequest one = req;
      one.stages = 1;
      auto single = plan_pipeline(*cm, *m.lg, one);
      ASSERT_TRUE(single.ok());
      EXPECT_LE(value(*p, obj), value(*single, obj) * (1 + 1e-9)) << what;
    }
  }
}

// The search budget: a search that runs out returns its best plan, marked not proven optimal,
// or says it found none; it never runs on.
TEST(PipelineTest, BudgetEndsTheSearchWithItsBestPlan) {
  std::mt19937 rng(8);
  auto m = testing::make_model(random_graph(rng, 60));
  Profile profile = random_profile(*m.lg, rng, 4);
  auto cm = CostModel::build(profile, *m.lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  PipelineRequest req;
  req.objective = PipelineObjective::kThroughput;
  req.max_visits = 20000;
  auto p = plan_pipeline(*cm, *m.lg, req);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_FALSE(p->proven_optimal);
  // The budget, plus the rest of the scan (options x ends) at each depth the search was in when
  // it ran out: the search checks the budget on entering a stage.
  EXPECT_LE(p->visited, 20000 + PipelineRequest::kMaxStages * 4 * (m.lg->num_layers() + 1));
  expect_priced_alike(*cm, *m.lg, *p, "budgeted");
  PipelineRequest two = req;
  two.stages = 2;  // Algorithm 1 needs no branch and bound: proven within any budget
  two.max_visits = 1;
  auto exact2 = plan_pipeline(*cm, *m.lg, two);
  ASSERT_TRUE(exact2.ok());
  EXPECT_TRUE(exact2->proven_optimal);
  EXPECT_LE(value(*p, req.objective), value(*exact2, req.objective) * (1 + 1e-9));

  PipelineRequest tiny = req;
  tiny.stages = 4;
  tiny.max_visits = 1;
  auto t = plan_pipeline(*cm, *m.lg, tiny);
  if (t.ok()) {
    EXPECT_FALSE(t->proven_optimal);
  } else {
    EXPECT_NE(t.status().to_string().find("budget"), std::string::npos) << t.status().to_string();
  }
  PipelineRequest zero = req;
  zero.max_visits = 0;
  EXPECT_FALSE(plan_pipeline(*cm, *m.lg, zero).ok());
}

}  // namespace
}  // namespace tessera
