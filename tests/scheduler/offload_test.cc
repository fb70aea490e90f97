#include "scheduler/planners/offload.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include <nlohmann/json.hpp>

#include "backends/registry.h"
#include "backends/remote/packing.h"
#include "scheduler/planners/planner.h"
#include "scheduler/pricer.h"
#include "tests/core/hostile_names.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::line;
using testing::make_model;

// x[2,16] -> (MatMul, then Relu or Sigmoid) x n: 2n layers, ReLU cuts after some.
Graph relu_chain(int n, std::mt19937& rng) {
  Graph g;
  ValueId cur = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 16}});
  g.inputs().push_back(cur);
  std::normal_distribution<float> w(0, 0.3f);
  for (int i = 0; i < n; ++i) {
    std::vector<float> wv(16 * 16);
    for (float& e : wv) e = w(rng);
    ValueId c = g.add_constant("w" + std::to_string(i), Tensor::from_floats(Shape{16, 16}, wv));
    ValueId mm = g.add_value("mm" + std::to_string(i)), a = g.add_value("a" + std::to_string(i));
    g.add_node(Node{"mm" + std::to_string(i), OpKind::kMatMul, {}, {cur, c}, {mm}});
    const bool relu = rng() % 3 != 0;
    g.add_node(
        Node{"act" + std::to_string(i), relu ? OpKind::kRelu : OpKind::kSigmoid, {}, {mm}, {a}});
    cur = a;
  }
  g.outputs() = {cur};
  return g;
}

const char* kRemote = "remote:127.0.0.1:5599";

// cpu:0 (the client) and a remote server, random layer times; the server usually faster.
Profile client_server_profile(const LayerGraph& lg, std::mt19937& rng, double up_alpha) {
  std::uniform_real_distribution<double> u(0, 1);
  Profile p;
  p.model_name = "chain";
  p.model_hash = "h";
  p.describe_model(lg);
  p.platform = Platform::from_json_text(
                   std::string(R"({"format": "tessera-platform", "version": 1, "name": "t",
       "devices": [{"id": "c", "kind": "cpu", "device": "cpu:0", "memory_bytes": 1000000000,
         "dynamic_w": 2, "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.1}]},
        {"id": "r", "kind": "remote", "device": ")") +
                       kRemote + R"(", "memory_bytes": 1000000000,
         "dynamic_w": 0, "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0}]}]})",
                   "t")
                   .value();
  const double server_speed = 0.05 + 0.5 * u(rng);
  for (int d = 0; d < 2; ++d) {
    DeviceProfile dp;
    dp.device = p.platform.devices[static_cast<size_t>(d)].device;
    LevelProfile lv;
    for (int l = 0; l < lg.num_layers(); ++l) {
      const double base = 0.1 + 2 * u(rng);
      lv.layer_ms.push_back(d == 0 ? base : base * server_speed);
    }
    lv.upload = d == 0 ? line(1e-7, 0.01) : line(up_alpha, 0.2 + 3 * u(rng));
    lv.download = d == 0 ? line(1e-7, 0.01) : line(up_alpha * 0.5, 0.5);
    dp.levels.push_back(lv);
    p.devices.push_back(dp);
  }
  return p;
}

// Random entries: fewer bytes and lower fidelity at fewer bits.
CutProfile random_cut_profile(const LayerGraph& lg, std::mt19937& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  CutProfile c;
  c.num_layers = lg.num_layers();
  c.bits = {2, 3, 4, 6, 8, 16};
  for (int k = 0; k < lg.num_layers(); ++k) {
    c.cuts.push_back(k);
    c.relu.push_back(cut_is_relu(lg, k) ? 1 : 0);
    const double fp32 = static_cast<double>(lg.cut(k).live_bytes);
    for (int b : c.bits) {
      CutBits e;
      e.cut = k;
      e.bits = b;
      e.bytes_mean = 64 + fp32 * b / 32.0 * (0.2 + 0.8 * u(rng));
      e.bytes_p95 = e.bytes_mean * 1.1;
      e.pack_ms = 0.01 + 0.2 * u(rng);
      e.unpack_ms = 0.01 + 0.1 * u(rng);
      e.top1 = std::min(1.0, 0.8 + 0.03 * b * u(rng) + (b >= 8 ? 0.2 : 0));
      e.rel_l2 = 0.5 / (1 << std::min(b, 12)) * (1 + u(rng));
      e.report_top1 = e.top1;
      e.report_rel_l2 = e.rel_l2;
      c.entries.push_back(e);
    }
  }
  EXPECT_TRUE(c.validate(lg.num_layers()).ok());
  return c;
}

struct Brute {
  OffloadOption option;
  double latency = 0, period = 0, fidelity = 1, rel_l2 = 0, bytes = 0, device = 0, server = 0;

  double get(OffloadMetric m) const {
    switch (m) {
      case OffloadMetric::kLatency:
        return latency;
      case OffloadMetric::kPeriod:
        return period;
      case OffloadMetric::kThroughput:
        return 1000.0 / period;
      case OffloadMetric::kDeviceMs:
        return device;
      case OffloadMetric::kServerMs:
        return server;
      case OffloadMetric::kBytes:
        return bytes;
      case OffloadMetric::kFidelity:
        return fidelity;
      case OffloadMetric::kRelL2:
        return rel_l2;
    }
    return 0;
  }
};

// Every (cut, bits) as a plan priced by the pricer (the oracle), chosen by filtering and a full
// sort: Algorithm 2 as the spec states it, written the slow way.
int brute_force(const CostModel& cm, const LayerGraph& lg, const CutProfile& cuts,
                const OffloadRequest& req, std::vector<Brute>* all, bool* feasible) {
  const int L = lg.num_layers();
  all->clear();
  auto add = [&](int k, int bits) {
    OffloadOption o;
    o.cut = k;
    o.bits = bits;
    o.device_only = k == L;
    Plan p = offload_plan(cm, o, req).value();
    EXPECT_TRUE(price_plan(cm, lg, &p, &cuts).ok());
    Brute b;
    b.option = o;
    b.latency = p.estimated_latency_ms;
    b.period = p.estimated_period_ms;
    const bool has_client = k > 0;
    b.device = has_client ? p.stages[0].estimate.exec_ms + p.stages[0].estimate.transfer_ms : 0;
    if (k < L) {
      const int n = cm.slice_input_count(k, L);
      const double up_raw = cm.upload_ms(cm.find(kRemote).value(), cm.slice_input_bytes(k, L), n);
      const CutBits* e = bits > 0 ? cuts.find(k, bits) : nullptr;
      // The server's part: the stage less the packed (or raw) upload, download, pack, unpack.
      const uint64_t sent =
          e ? static_cast<uint64_t>(std::llround(e->bytes_mean)) : cm.slice_input_bytes(k, L);
      const int rv = cm.find(kRemote).value();
      // The round trip the upload and download fits both hold, once per hop.
      const double down =
          cm.download_ms(rv, cm.slice_output_bytes(k, L), cm.slice_output_count(k, L));
      const double shared = cm.slice_output_count(k, L) > 0 && n > 0
                                ? std::min({cm.hop_shared_ms(rv), up_raw, down})
                                : 0.0;
      b.server = cm.slice_ms(rv, k, L) - (up_raw + down - shared);
      b.bytes = static_cast<double>(sent);
      if (e) {
        b.fidelity = e->top1;
        b.rel_l2 = e->rel_l2;
      }
    }
    all->push_back(b);
  };
  add(L, 0);
  for (size_t c = 0; c < cuts.cuts.size(); ++c) {
    const int k = cuts.cuts[c];
    if (req.relu_cuts_only && k != 0 && !cuts.relu[c]) continue;
    if (req.raw) add(k, 0);
    for (int b : cuts.bits) add(k, b);
  }
  std::vector<OffloadTarget> targets = req.targets;
  if (targets.empty()) {
    targets = {{OffloadMetric::kThroughput, true}, {OffloadMetric::kLatency, false}};
  }
  auto before = [&](const Brute& a, const Brute& b) {
    for (const OffloadTarget& t : targets) {
      const double x = a.get(t.metric), y = b.get(t.metric);
      if (std::abs(x - y) > 1e-9 * (1 + std::abs(x))) return t.maximise ? x > y : x < y;
    }
    if (a.option.cut != b.option.cut) return a.option.cut < b.option.cut;
    return a.option.bits < b.option.bits;
  };
  std::vector<int> idx(all->size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int>(i);
  for (const OffloadConstraint& c : req.constraints) {
    std::vector<int> kept;
    for (int i : idx) {
      const double v = (*all)[static_cast<size_t>(i)].get(c.metric);
      if (c.at_most ? v <= c.threshold : v >= c.threshold) kept.push_back(i);
    }
    if (kept.empty()) {
      std::sort(idx.begin(), idx.end(), [&](int a, int b) {
        const double va = (*all)[static_cast<size_t>(a)].get(c.metric);
        const double vb = (*all)[static_cast<size_t>(b)].get(c.metric);
        const double xa = c.at_most ? va - c.threshold : c.threshold - va;
        const double xb = c.at_most ? vb - c.threshold : c.threshold - vb;
        if (std::abs(xa - xb) > 1e-9 * (1 + std::abs(xa))) return xa < xb;
        return before((*all)[static_cast<size_t>(a)], (*all)[static_cast<size_t>(b)]);
      });
      *feasible = false;
      return idx[0];
    }
    idx = kept;
  }
  std::sort(idx.begin(), idx.end(), [&](int a, int b) {
    return before((*all)[static_cast<size_t>(a)], (*all)[static_cast<size_t>(b)]);
  });
  *feasible = true;
  return idx[0];
}

TEST(OffloadTest, ParsesConstraintsAndTargets) {
  auto c = parse_offload_constraint("latency<=100");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->metric, OffloadMetric::kLatency);
  EXPECT_TRUE(c->at_most);
  EXPECT_EQ(c->threshold, 100);
  c = parse_offload_constraint("fidelity>=0.99");
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->at_most);
  auto t = parse_offload_target("device_ms:min");
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(t->maximise);
  for (const char* bad : {"latency<100", "speed<=3", "latency<=fast", "latency<=nan"}) {
    EXPECT_FALSE(parse_offload_constraint(bad).ok()) << bad;
  }
  auto bt = parse_offload_target("throughput:up");
  ASSERT_FALSE(bt.ok());
  EXPECT_NE(bt.status().to_string().find("min or max"), std::string::npos);
  EXPECT_NE(parse_offload_target("joy:max").status().to_string().find("throughput"),
            std::string::npos);
}

// Algorithm 2 against the brute force over every (cut, bits), priced by the pricer, with random
// profiles, constraints (feasible and not) and targets.
TEST(OffloadTest, MatchesBruteForceOverAllCutsAndBits) {
  std::mt19937 rng(22);
  std::uniform_real_distribution<double> u(0, 1);
  const OffloadMetric metrics[] = {OffloadMetric::kLatency,    OffloadMetric::kPeriod,
                                   OffloadMetric::kThroughput, OffloadMetric::kDeviceMs,
                                   OffloadMetric::kServerMs,   OffloadMetric::kBytes,
                                   OffloadMetric::kFidelity,   OffloadMetric::kRelL2};
  int best_effort = 0, feasible_cases = 0, split_chosen = 0;
  for (int trial = 0; trial < 40; ++trial) {
    auto m = make_model(relu_chain(2 + static_cast<int>(rng() % 6), rng));
    const LayerGraph& lg = *m.lg;
    const double up_alpha = std::pow(10.0, -6 + 3 * u(rng));  // ~10 Gbit/s .. ~8 Mbit/s
    Profile prof = client_server_profile(lg, rng, up_alpha);
    CostModel cm = CostModel::build(prof, lg).value();
    CutProfile cuts = random_cut_profile(lg, rng);
    OffloadRequest req;
    req.device = "cpu:0";
    req.remote = kRemote;
    req.relu_cuts_only = rng() % 4 == 0;
    req.raw = rng() % 3 != 0;
    // Constraints: thresholds drawn around the candidates' own values.
    std::vector<Brute> all;
    bool feasible = false;
    brute_force(cm, lg, cuts, req, &all, &feasible);
    const int nc = static_cast<int>(rng() % 3);
    for (int i = 0; i < nc; ++i) {
      OffloadConstraint c;
      c.metric = metrics[rng() % 8];
      c.at_most = rng() % 2;
      const Brute& pick = all[rng() % all.size()];
      c.threshold = pick.get(c.metric) * (0.7 + 0.6 * u(rng));
      req.constraints.push_back(c);
    }
    const int nt = static_cast<int>(rng() % 3);
    for (int i = 0; i < nt; ++i) req.targets.push_back({metrics[rng() % 8], rng() % 2 == 0});

    const int want = brute_force(cm, lg, cuts, req, &all, &feasible);
    auto got = plan_offload(cm, lg, cuts, req);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const Brute& w = all[static_cast<size_t>(want)];
    EXPECT_EQ(got->option.cut, w.option.cut) << "trial " << trial;
    EXPECT_EQ(got->option.bits, w.option.bits) << "trial " << trial;
    EXPECT_EQ(got->choice.feasible, feasible) << "trial " << trial;
    EXPECT_EQ(got->candidates, static_cast<int>(all.size()));
    // The planner's metrics are the pricer's estimates of its plan.
    EXPECT_NEAR(got->metrics.latency_ms, got->plan.estimated_latency_ms,
                1e-9 * (1 + got->metrics.latency_ms));
    EXPECT_NEAR(got->metrics.period_ms, got->plan.estimated_period_ms,
                1e-9 * (1 + got->metrics.period_ms));
    EXPECT_NEAR(got->metrics.latency_ms, w.latency, 1e-9 * (1 + w.latency));
    EXPECT_NEAR(got->metrics.server_ms, w.server, 1e-9 * (1 + std::abs(w.server)));
    EXPECT_NEAR(got->metrics.bytes, w.bytes, 1e-9 * (1 + w.bytes));
    // The plan: two stages at a split, remote packed as chosen.
    const int L = lg.num_layers();
    if (got->option.cut > 0 && got->option.cut < L) {
      ++split_chosen;
      ASSERT_EQ(got->plan.stages.size(), 2u);
      EXPECT_EQ(got->plan.mode, PlanMode::kStreaming);
      EXPECT_EQ(got->plan.stages[1].placement.devices[0].device, kRemote);
      EXPECT_EQ(got->plan.stages[1].first(), got->option.cut);
      EXPECT_EQ(got->plan.stages[1].packing.empty(), got->option.bits == 0);
    }
    if (req.relu_cuts_only && got->option.cut > 0 && got->option.cut < L) {
      EXPECT_TRUE(cut_is_relu(lg, got->option.cut));
    }
    (feasible ? feasible_cases : best_effort) += 1;
  }
  // The random cases cover both answers and real splits.
  EXPECT_GT(best_effort, 1);
  EXPECT_GT(feasible_cases, 10);
  EXPECT_GT(split_chosen, 3);
}

// A defined best-effort answer: the smallest violation of the constraint that emptied the set,
// among those that met the earlier ones.
TEST(OffloadTest, BestEffortIsTheClosestToTheConstraintThatEmptiedTheSet) {
  std::vector<OffloadOption> o(4);
  std::vector<OffloadMetrics> m(4);
  for (int i = 0; i < 4; ++i) {
    o[static_cast<size_t>(i)].cut = i;
    m[static_cast<size_t>(i)].fidelity = 0.9 + 0.02 * i;    // 0.90 0.92 0.94 0.96
    m[static_cast<size_t>(i)].latency_ms = 200 - 10.0 * i;  // 200 190 180 170
    m[static_cast<size_t>(i)].period_ms = 50;
    m[static_cast<size_t>(i)].throughput = 20;
  }
  m[3].period_ms = 500;
  const std::vector<OffloadConstraint> cs = {{OffloadMetric::kPeriod, true, 100},
                                             {OffloadMetric::kLatency, true, 100},
                                             {OffloadMetric::kFidelity, false, 0.99}};
  OffloadChoice c = choose_offload(o, m, cs, {});
  EXPECT_FALSE(c.feasible);
  EXPECT_EQ(c.emptied_by, 1);
  EXPECT_EQ(c.index, 2);  // 180 ms: the closest of those with period <= 100 (3 is not)
  EXPECT_NEAR(c.violation, 80, 1e-12);
  // Without the period constraint option 3 is closest.
  const std::vector<OffloadConstraint> cs2 = {cs[1]};
  EXPECT_EQ(choose_offload(o, m, cs2, {}).index, 3);
  // A tie in the violation goes to the soft targets.
  m[1].latency_ms = 180;
  m[1].fidelity = 0.99;
  const std::vector<OffloadTarget> t = {{OffloadMetric::kFidelity, true}};
  EXPECT_EQ(choose_offload(o, m, cs, t).index, 1);
  // Feasible: the targets in order.
  const std::vector<OffloadConstraint> loose = {{OffloadMetric::kLatency, true, 195}};
  const std::vector<OffloadTarget> t2 = {{OffloadMetric::kPeriod, false},
                                         {OffloadMetric::kLatency, true}};
  OffloadChoice f = choose_offload(o, m, loose, t2);
  EXPECT_TRUE(f.feasible);
  EXPECT_EQ(f.feasible_count, 3);
  EXPECT_EQ(f.index, 1);  // period 50 for 1, 2; latency max among them: 180 vs 180 -> cut 1
}

// The link estimate and the scaling factor enter as seed 002 states them.
TEST(OffloadTest, LinkEstimateAndScalingFactor) {
  OffloadOption a;
  a.cut = 3;
  a.bits = 4;
  a.client_ms = 10;
  a.server_ms = 2;
  a.pack_ms = 0.5;
  a.unpack_ms = 0.25;
  a.up_bytes = 125000;  // 1 Mbit
  a.down_bytes = 4000;
  a.up_ms = 1;
  a.down_ms = 1;
  std::vector<OffloadMetrics> m;
  offload_metrics(std::span<const OffloadOption>(&a, 1), 2.0, LinkEstimate{20, 10, 32}, false, &m);
  // net = 20 + 1 Mbit / 10 Mbit/s (100 ms) + 32 kbit / 32 Mbit/s (1 ms)
  EXPECT_NEAR(m[0].net_ms, 121, 1e-9);
  EXPECT_NEAR(m[0].device_ms, 20, 1e-12);
  EXPECT_NEAR(m[0].latency_ms, 20 + 0.5 + 121 + 0.25 + 2, 1e-9);
  // The executor's overlapped hop (3 frames in flight): the uplink's wire time, 1 Mbit at
  // 10 Mbit/s, bounds it (the hop / 3 is 41.25 ms, the client 20 ms).
  EXPECT_NEAR(m[0].period_ms, 100, 1e-9);
  // One frame at a time: the whole hop.
  offload_metrics(std::span<const OffloadOption>(&a, 1), 2.0, LinkEstimate{20, 10, 32}, false, &m,
                  1);
  EXPECT_NEAR(m[0].period_ms, 0.5 + 121 + 0.25 + 2, 1e-9);
  // Six in flight on a fast uplink: the hop / 6 bounds it.
  offload_metrics(std::span<const OffloadOption>(&a, 1), 2.0, LinkEstimate{200, 1000, 1000}, false,
                  &m, 6);
  EXPECT_NEAR(m[0].period_ms, (0.5 + 200 + 1 + 0.032 + 0.25 + 2) / 6, 1e-9);
  offload_metrics(std::span<const OffloadOption>(&a, 1), 2.0, LinkEstimate{20, 10, 32}, true, &m);
  EXPECT_NEAR(m[0].period_ms, 121, 1e-9);  // seed 002's three threads: the network
  offload_metrics(std::span<const OffloadOption>(&a, 1), 1.0, std::nullopt, false, &m);
  EXPECT_NEAR(m[0].net_ms, 2, 1e-12);
  EXPECT_NEAR(m[0].throughput, 1000 / 10.0, 1e-9);
}

// A remote device's upload and download fits are Pings, each holding the link's round trip; a
// slice's inputs and outputs cross in one request and its reply, so the slice's transfers count
// that round trip once: upload + download - min(round trip, upload, download).
TEST(OffloadTest, RemoteSlicesCountTheRoundTripOnce) {
  std::mt19937 rng(21);
  auto m = make_model(relu_chain(4, rng));
  const LayerGraph& lg = *m.lg;
  Profile prof = client_server_profile(lg, rng, 1e-4);
  CostModel cm = CostModel::build(prof, lg).value();
  const int rv = cm.find(kRemote).value(), cv = cm.find("cpu:0").value();
  EXPECT_EQ(cm.hop_shared_ms(cv), 0.0);
  // The fits' fixed parts: upload 0.2-3.2 ms, download 0.5 ms.
  EXPECT_NEAR(cm.hop_shared_ms(rv), std::min(cm.upload_ms(rv, 0), cm.download_ms(rv, 0)), 1e-12);
  EXPECT_GT(cm.hop_shared_ms(rv), 0.19);
  const int L = lg.num_layers();
  for (int k = 0; k < L; ++k) {
    const double up = cm.upload_ms(rv, cm.slice_input_bytes(k, L), cm.slice_input_count(k, L));
    const double down =
        cm.download_ms(rv, cm.slice_output_bytes(k, L), cm.slice_output_count(k, L));
    const double want = cm.slice_exec_ms(rv, k, L) + up + down -
                        std::min({cm.hop_shared_ms(rv), up, down}) + cm.slice_overhead_ms(rv, k, L);
    EXPECT_NEAR(cm.slice_ms(rv, k, L), want, 1e-9 * (1 + want)) << "cut " << k;
    // The local device: both transfers in full.
    const double local =
        cm.slice_exec_ms(cv, k, L) +
        cm.upload_ms(cv, cm.slice_input_bytes(k, L), cm.slice_input_count(k, L)) +
        cm.download_ms(cv, cm.slice_output_bytes(k, L), cm.slice_output_count(k, L)) +
        cm.slice_overhead_ms(cv, k, L);
    EXPECT_NEAR(cm.slice_ms(cv, k, L), local, 1e-9 * (1 + local)) << "cut " << k;
  }
}

TEST(OffloadTest, RunPlannerAndErrors) {
  std::mt19937 rng(5);
  auto m = make_model(relu_chain(4, rng));
  const LayerGraph& lg = *m.lg;
  Profile prof = client_server_profile(lg, rng, 1e-4);
  CostModel cm = CostModel::build(prof, lg).value();
  CutProfile cuts = random_cut_profile(lg, rng);
  PlanRequest r;
  r.planner = "offload";
  r.devices = {"cpu:0", kRemote};
  auto none = run_planner(cm, lg, r);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().to_string().find("cut profile"), std::string::npos);
  r.cuts = &cuts;
  auto out = run_planner(cm, lg, r);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out->plan.planner, "offload");
  ASSERT_EQ(out->notes.size(), 2u);
  EXPECT_NE(out->notes[0].find("candidates"), std::string::npos);
  EXPECT_NE(out->notes[1].find("neurosurgeon"), std::string::npos);
  EXPECT_NE(out->notes[1].find("device-only (cut " + std::to_string(lg.num_layers()) + ")"),
            std::string::npos)
      << out->notes[1];
  // The pricer's estimate is the planner's (the packed hop priced on packed bytes).
  auto direct = plan_offload(cm, lg, cuts, OffloadRequest{"cpu:0", kRemote});
  ASSERT_TRUE(direct.ok());
  EXPECT_DOUBLE_EQ(out->plan.estimated_latency_ms, direct->plan.estimated_latency_ms);

  r.devices = {"cpu:0"};
  EXPECT_NE(run_planner(cm, lg, r).status().to_string().find("two devices"), std::string::npos);
  r.devices = {"cpu:0", "remote:nowhere:1"};
  EXPECT_FALSE(run_planner(cm, lg, r).ok());
  CutProfile other = cuts;
  other.num_layers += 1;
  r.devices = {"cpu:0", kRemote};
  r.cuts = &other;
  EXPECT_NE(run_planner(cm, lg, r).status().to_string().find("layers"), std::string::npos);
  r.cuts = &cuts;
  r.scaling_factor = -1;
  EXPECT_NE(run_planner(cm, lg, r).status().to_string().find("scaling factor"), std::string::npos);
}

// The pricer: a packed remote stage costs the packed upload plus pack and unpack; a profile
// without its (cut, bits) is an error naming both.
TEST(OffloadTest, PricerUsesPackedBytes) {
  std::mt19937 rng(9);
  auto m = make_model(relu_chain(3, rng));
  const LayerGraph& lg = *m.lg;
  Profile prof = client_server_profile(lg, rng, 1e-4);
  CostModel cm = CostModel::build(prof, lg).value();
  CutProfile cuts = random_cut_profile(lg, rng);
  const int L = lg.num_layers();
  Plan raw = offload_plan(cm, OffloadOption{2, 0}, OffloadRequest{"cpu:0", kRemote}).value();
  Plan packed = offload_plan(cm, OffloadOption{2, 4}, OffloadRequest{"cpu:0", kRemote}).value();
  EXPECT_EQ(packed.stages[1].packing, "isq4+bitshuffle+lz4");
  ASSERT_TRUE(price_plan(cm, lg, &raw, &cuts).ok());
  ASSERT_TRUE(price_plan(cm, lg, &packed, &cuts).ok());
  const int rv = cm.find(kRemote).value();
  const CutBits* e = cuts.find(2, 4);
  const int n = cm.slice_input_count(2, L);
  const double want = raw.stages[1].estimate.transfer_ms -
                      cm.upload_ms(rv, cm.slice_input_bytes(2, L), n) +
                      cm.upload_ms(rv, static_cast<uint64_t>(std::llround(e->bytes_mean)), n) +
                      e->pack_ms + e->unpack_ms;
  EXPECT_NEAR(packed.stages[1].estimate.transfer_ms, want, 1e-9 * (1 + want));
  EXPECT_EQ(packed.stages[1].estimate.exec_ms, raw.stages[1].estimate.exec_ms);
  // Without the cut profile: f32 bytes, as before.
  Plan unprofiled = packed;
  ASSERT_TRUE(price_plan(cm, lg, &unprofiled).ok());
  EXPECT_DOUBLE_EQ(unprofiled.stages[1].estimate.transfer_ms, raw.stages[1].estimate.transfer_ms);
  Plan odd = packed;
  odd.stages[1].packing = "isq5+bitshuffle+lz4";
  Status st = price_plan(cm, lg, &odd, &cuts);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.to_string().find("cut 2 at 5 bits"), std::string::npos) << st.to_string();
  odd.stages[1].packing = "zip";
  EXPECT_FALSE(price_plan(cm, lg, &odd, &cuts).ok());
}

// The measured cut profile against an independent run: the same packed bytes from pack_tensor
// on activations computed by the reference device, 16 bits all but exact, 2 bits worse.
TEST(CutProfileTest, MeasuredProfileMatchesAnIndependentRun) {
  auto cpu = open_device("cpu:0");
  auto ref = open_device("reference");
  if (!cpu.ok() || !ref.ok()) GTEST_SKIP() << "cpu:0 or reference not available";
  std::mt19937 rng(3);
  auto m = make_model(relu_chain(3, rng));
  const LayerGraph& lg = *m.lg;
  const Graph& g = lg.graph();
  std::vector<std::vector<Tensor>> frames;
  for (int f = 0; f < 3; ++f) frames.push_back(testing::random_inputs(g, rng));
  CutProfileOptions o;
  o.bits = {2, 16};
  o.choose_inputs = 2;
  auto prof = measure_cut_profile(lg, **cpu, frames, o);
  ASSERT_TRUE(prof.ok()) << prof.status().to_string();
  ASSERT_TRUE(prof->validate(lg.num_layers()).ok());
  EXPECT_EQ(prof->cuts.size(), static_cast<size_t>(lg.num_layers()));
  EXPECT_EQ(prof->report_inputs, 1);
  // Round trip through JSON.
  auto back = CutProfile::from_json_text(prof->to_json_text(), "t");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(prof->entries.size(), back->entries.size());
  EXPECT_EQ(prof->cuts, back->cuts);
  // Oracle: the activations at every cut from the reference device, layer by layer.
  for (int k : prof->cuts) {
    std::vector<double> sizes;
    for (const auto& frame : frames) {
      std::map<ValueId, Tensor> values;
      for (size_t i = 0; i < frame.size(); ++i) values[g.inputs()[i]] = frame[i];
      for (int l = 0; l < k; ++l) {
        std::vector<NodeId> nodes = {lg.layer(l).node};
        auto p = (*ref)->compile(g, nodes).value();
        std::vector<Tensor> in;
        for (ValueId v : p->input_values()) in.push_back(values.at(v));
        std::vector<Tensor> out(p->output_values().size());
        ASSERT_TRUE(p->run(in, out).ok());
        for (size_t i = 0; i < out.size(); ++i) values[p->output_values()[i]] = out[i];
      }
      double bytes = 0;
      for (ValueId v : lg.cut(k).live) {
        bytes += static_cast<double>(pack_tensor(values.at(v), PackPolicy{16}, "t")->size());
      }
      sizes.push_back(bytes);
    }
    const CutBits* e = prof->find(k, 16);
    ASSERT_NE(e, nullptr);
    const double mean = (sizes[0] + sizes[1] + sizes[2]) / 3;
    // LZ4 of 16-bit codes of activations that differ in their last bits between the kernels:
    // within a few percent.
    EXPECT_NEAR(e->bytes_mean, mean, 0.05 * mean) << "cut " << k;
    EXPECT_GE(e->bytes_p95, e->bytes_mean) << "cut " << k;
    EXPECT_LT(e->rel_l2, 1e-3) << "cut " << k;
    EXPECT_EQ(e->top1, 1.0);
    const CutBits* e2 = prof->find(k, 2);
    EXPECT_GT(e2->rel_l2, e->rel_l2) << "cut " << k;
    EXPECT_LT(e2->bytes_mean, e->bytes_mean) << "cut " << k;
  }
  // Bad options name what is wrong.
  o.choose_inputs = 3;
  EXPECT_NE(measure_cut_profile(lg, **cpu, frames, o).status().to_string().find("report"),
            std::string::npos);
  o.choose_inputs = 1;
  o.bits = {9};
  EXPECT_NE(measure_cut_profile(lg, **cpu, frames, o).status().to_string().find("9 bits"),
            std::string::npos);
}

TEST(CutProfileTest, LoadingRefusesBadFields) {
  std::mt19937 rng(4);
  auto m = make_model(relu_chain(2, rng));
  CutProfile c = random_cut_profile(*m.lg, rng);
  const std::string good = c.to_json_text();
  ASSERT_TRUE(CutProfile::from_json_text(good, "t").ok());
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) s.replace(at, from.size(), to);
    return CutProfile::from_json_text(s, "t").status().to_string();
  };
  EXPECT_NE(replace("tessera-cut-profile", "tessera-plan").find("format"), std::string::npos);
  EXPECT_NE(replace("\"top1\": ", "\"top1\": 2.5, \"x\": ").find("top1"), std::string::npos);
  EXPECT_NE(replace("\"bits\": [", "\"bits\": [9, ").find("bits"), std::string::npos);
  EXPECT_NE(replace("\"pack_ms\": ", "\"pack_ms\": -1, \"y\": ").find("pack_ms"),
            std::string::npos);
  CutProfile short_entries = c;
  short_entries.entries.pop_back();
  EXPECT_NE(CutProfile::from_json_text(short_entries.to_json_text(), "t")
                .status()
                .to_string()
                .find("entries"),
            std::string::npos);
  // A hostile format string is printed escaped and bounded.
  const nlohmann::json base = nlohmann::json::parse(good);
  for (const testing::HostileName& h : testing::hostile_names()) {
    SCOPED_TRACE(h.what);
    nlohmann::json j = base;
    j["format"] = h.raw;
    testing::expect_safe_message(CutProfile::from_json_text(j.dump(), "t").status(), h);
  }
}

}  // namespace
}  // namespace tessera
