#include "scheduler/adapt/offload_adapt.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "backends/registry.h"
#include "scheduler/adapt/adaptive_stream.h"
#include "scheduler/executor/executor.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::line;
using testing::make_model;

// The transfer time of the link model: L + up / B_up + down / B_down.
double link_ms(const LinkEstimate& l, double up, double down) {
  return l.latency_ms + 8 * up / (l.up_mbit_s * 1e3) + 8 * down / (l.down_mbit_s * 1e3);
}

TEST(LinkEstimatorTest, ConvergesToTheLinkAndKeepsTheFiveMinuteRule) {
  LinkEstimator est("wifi");
  EXPECT_FALSE(est.estimate(0).has_value());
  const LinkEstimate truth{20, 8, 32};
  est.observe_latency(0, 20);
  std::mt19937 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  double t = 0;
  for (int i = 0; i < 60; ++i, t += 1) {
    const double up = 20000 + 200000 * u(rng), down = 4000;
    est.observe_transfer(t, up, down, link_ms(truth, up, down));
  }
  ASSERT_TRUE(est.realtime(t));
  auto e = est.estimate(t);
  ASSERT_TRUE(e.has_value());
  // One factor for both directions: their ratio stays the first sample's (equal rates), but the
  // predicted transfer times converge to the link's.
  for (double up : {50000.0, 100000.0, 200000.0}) {
    EXPECT_NEAR(link_ms(*e, up, 4000), link_ms(truth, up, 4000), 0.08 * link_ms(truth, up, 4000))
        << up;
  }
  // Five minutes without a transfer: the historical estimate of the network type.
  est.set_historical("wifi", LinkEstimate{5, 50, 50});
  EXPECT_TRUE(est.realtime(t + 299));
  EXPECT_FALSE(est.realtime(t + 301));
  auto h = est.estimate(t + 301);
  ASSERT_TRUE(h.has_value());
  EXPECT_EQ(h->up_mbit_s, 50);
  // Another network type without history: the stale real-time estimate.
  est.set_network("4g");
  auto stale = est.estimate(t + 301);
  ASSERT_TRUE(stale.has_value());
  EXPECT_NEAR(stale->latency_ms, 20, 1e-9);
  // Bad samples are ignored.
  est.observe_transfer(t + 302, -1, 0, 5);
  est.observe_transfer(t + 302, 100, 0, std::nan(""));
  EXPECT_FALSE(est.realtime(t + 302 + 301));
}

TEST(LinkEstimatorTest, HistoryIsASlowAverageOfTheRealTimeValues) {
  LinkEstimatorOptions o;
  o.historical_alpha = 0.1;
  LinkEstimator est("lan", o);
  est.observe_latency(0, 1);
  est.observe_transfer(0, 1e6, 0, 1 + 8e6 / 100e3);  // 100 Mbit/s
  auto h0 = est.historical("lan");
  ASSERT_TRUE(h0.has_value());
  EXPECT_NEAR(h0->up_mbit_s, 100, 1e-6);
  for (int i = 1; i <= 20; ++i) est.observe_transfer(i, 1e6, 0, 1 + 8e6 / 50e3);  // 50 Mbit/s
  // Real time follows fast, the history slowly.
  EXPECT_NEAR(est.estimate(20)->up_mbit_s, 50, 1);
  const double hist = est.historical("lan")->up_mbit_s;
  EXPECT_GT(hist, 55);
  EXPECT_LT(hist, 95);
}

TEST(ScalingFactorTest, TracksMeasuredOverProfiled) {
  ScalingFactor sf(0.5);
  EXPECT_EQ(sf.value(), 1);
  sf.observe(20, 10);
  EXPECT_EQ(sf.value(), 2);
  for (int i = 0; i < 30; ++i) sf.observe(30, 10);
  EXPECT_NEAR(sf.value(), 3, 1e-6);
  sf.observe(0, 10);  // ignored
  sf.observe(10, 0);
  EXPECT_NEAR(sf.value(), 3, 1e-6);
  EXPECT_EQ(sf.samples(), 31);
}

// x[2,16] -> (MatMul, Relu) x n.
Graph mm_relu_chain(int n) {
  Graph g;
  ValueId cur = g.add_value("x", TensorInfo{DType::kF32, Shape{2, 16}});
  g.inputs().push_back(cur);
  for (int i = 0; i < n; ++i) {
    std::vector<float> w(16 * 16);
    for (size_t j = 0; j < w.size(); ++j)
      w[j] = 0.02f * static_cast<float>((j * 7 + i) % 11) - 0.1f;
    ValueId c = g.add_constant("w" + std::to_string(i), Tensor::from_floats(Shape{16, 16}, w));
    ValueId mm = g.add_value("mm" + std::to_string(i)), a = g.add_value("a" + std::to_string(i));
    g.add_node(Node{"mm" + std::to_string(i), OpKind::kMatMul, {}, {cur, c}, {mm}});
    g.add_node(Node{"relu" + std::to_string(i), OpKind::kRelu, {}, {mm}, {a}});
    cur = a;
  }
  g.outputs() = {cur};
  return g;
}

// Client cpu:0 (2 ms a layer) and a server, "reference" here so that the plans run in this
// process (20x faster in the profile; its real speed does not matter: the hop times below are
// the link model's).
Profile client_server(const LayerGraph& lg) {
  Profile p;
  p.model_name = "chain";
  p.model_hash = "h";
  p.describe_model(lg);
  p.platform = Platform::from_json_text(
                   R"({"format": "tessera-platform", "version": 1, "name": "t", "devices": [
        {"id": "c", "kind": "cpu", "device": "cpu:0", "memory_bytes": 1000000000,
         "dynamic_w": 1, "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0}]},
        {"id": "s", "kind": "remote", "device": "reference", "memory_bytes": 1000000000,
         "dynamic_w": 0, "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0}]}]})",
                   "t")
                   .value();
  for (int d = 0; d < 2; ++d) {
    DeviceProfile dp;
    dp.device = p.platform.devices[static_cast<size_t>(d)].device;
    LevelProfile lv;
    for (int l = 0; l < lg.num_layers(); ++l) lv.layer_ms.push_back(d == 0 ? 2.0 : 0.1);
    lv.upload = d == 0 ? line(0, 0) : line(8e-6, 1);  // ~1 Gbit/s, 1 ms
    lv.download = d == 0 ? line(0, 0) : line(8e-6, 0);
    dp.levels.push_back(lv);
    p.devices.push_back(dp);
  }
  return p;
}

CutProfile packed_cuts(const LayerGraph& lg) {
  CutProfile c;
  c.num_layers = lg.num_layers();
  c.bits = {4, 8};
  for (int k = 0; k < lg.num_layers(); ++k) {
    c.cuts.push_back(k);
    c.relu.push_back(cut_is_relu(lg, k) ? 1 : 0);
    for (int b : c.bits) {
      CutBits e;
      e.cut = k;
      e.bits = b;
      e.bytes_mean = e.bytes_p95 = 100 + static_cast<double>(lg.cut(k).live_bytes) * b / 32;
      e.pack_ms = e.unpack_ms = 0.01;
      e.top1 = e.report_top1 = b == 8 ? 1.0 : 0.95;
      c.entries.push_back(e);
    }
  }
  return c;
}

TEST(OffloadAdapterTest, ReplansOnlyOnDriftAndFollowsTheRate) {
  auto m = make_model(mm_relu_chain(5));
  const LayerGraph& lg = *m.lg;
  Profile prof = client_server(lg);
  CostModel cm = CostModel::build(prof, lg).value();
  CutProfile cuts = packed_cuts(lg);
  OffloadRequest req;
  req.device = "cpu:0";
  req.remote = "reference";
  req.constraints = {{OffloadMetric::kFidelity, false, 0.99}};
  req.targets = {{OffloadMetric::kLatency, false}};
  // A fast link: everything on the server (20 ms on the client against ~2 ms).
  auto a = OffloadAdapter::create(cm, lg, cuts, req, LinkEstimate{1, 1000, 1000});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->current().option.cut, 0);
  EXPECT_NE(a->current().option.bits, 4);  // the fidelity constraint
  // Frames that match the estimate: no re-plan.
  double t = 0;
  for (int i = 0; i < 10; ++i, t += 0.1) {
    const OffloadOption& o = a->current().option;
    a->observe_frame(
        t, 0,
        o.pack_ms + o.unpack_ms + o.server_ms + link_ms({1, 1000, 1000}, o.up_bytes, o.down_bytes));
    auto r = a->maybe_replan(t);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->has_value()) << "frame " << i;
  }
  // The link drops to 0.1 Mbit/s with 100 ms: within a few frames the plan goes local.
  int switched_at = -1;
  for (int i = 0; i < 20 && switched_at < 0; ++i, t += 0.1) {
    const OffloadOption& o = a->current().option;
    a->observe_frame(
        t, o.client_ms,
        o.pack_ms + o.unpack_ms + o.server_ms + link_ms({100, 0.1, 0.1}, o.up_bytes, o.down_bytes));
    auto r = a->maybe_replan(t);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    if (r->has_value()) switched_at = i;
  }
  EXPECT_GE(switched_at, 0);
  EXPECT_LT(switched_at, 5);
  EXPECT_TRUE(a->current().option.device_only);
  EXPECT_GT(a->decisions().size(), 1u);
  // Local now, with the link estimated at L ~ 37 ms (one slow transfer averaged in): a client
  // twice as slow as profiled (SF 2, 40 ms) makes the server (~38 ms) the better choice again.
  for (int i = 0; i < 10; ++i, t += 0.1) {
    a->observe_frame(t, 2 * a->current().option.client_ms, 0);
  }
  EXPECT_NEAR(a->scaling_factor(), 2, 1e-9);
  auto r = a->maybe_replan(t);
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->option.cut, 0);
  EXPECT_NE(a->decisions().back().reason.find("SF 2.000"), std::string::npos)
      << a->decisions().back().reason;
}

// The swap at a frame boundary: frames stream while the plan changes twice (another cut, then
// one stage); every frame comes out once, in order, with the reference outputs.
TEST(OffloadAdapterTest, SwitchPlanLosesNoFrame) {
  for (const char* d : {"cpu:0", "reference"}) {
    if (!open_device(d).ok()) GTEST_SKIP() << d << " is not available";
  }
  auto m = make_model(mm_relu_chain(4));
  const LayerGraph& lg = *m.lg;
  const int L = lg.num_layers();
  auto two = [&](int cut) {
    Plan p = plan_from_slices(L, {{0, "cpu:0"}, {cut, "reference"}}).value();
    p.mode = PlanMode::kStreaming;
    p.stages[1].packing = "isq8+bitshuffle+lz4";  // ignored by local devices
    return p;
  };
  AdaptOptions ao;
  ao.search = false;
  ao.window = 4;
  auto stream = AdaptiveStream::create(lg, two(2), ExecutorOptions{}, ao);
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  std::mt19937 rng(2);
  // Eight distinct frames, cycled.
  std::vector<std::vector<Tensor>> inputs, expected;
  auto ref = Executor::create(lg, plan_from_slices(L, {{0, "reference"}}).value()).value();
  for (int f = 0; f < 8; ++f) {
    inputs.push_back(testing::random_inputs(lg.graph(), rng));
    std::vector<Tensor> out;
    ASSERT_TRUE(ref->run(inputs.back(), &out).ok());
    expected.push_back(out);
  }
  Plan local = plan_from_slices(L, {{0, "cpu:0"}}).value();
  int received = 0;
  auto drain_one = [&]() {
    auto r = (*stream)->next();
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_TRUE(r->status.ok()) << r->status.to_string();
    ASSERT_EQ(r->frame, static_cast<uint64_t>(received));
    const auto& want = expected[static_cast<size_t>(received % 8)];
    ASSERT_EQ(r->outputs.size(), want.size());
    auto x = r->outputs[0].span<float>();
    auto y = want[0].span<float>();
    for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(x[i], y[i], 1e-4f * (1 + std::abs(y[i])));
    ++received;
  };
  // Stream until the second plan is in (the swap waits for a submit after its compile), at
  // least 40 frames.
  int submitted = 0;
  for (int f = 0; f < 40 || (*stream)->cut() != L; ++f) {
    ASSERT_LT(f, 4000) << "the second plan never came in";
    if (f == 10) {
      ASSERT_TRUE((*stream)->switch_plan(two(6), "test: another cut").ok());
    }
    if (f == 25) {
      ASSERT_TRUE((*stream)->switch_plan(local, "test: device only").ok());
    }
    auto id = (*stream)->submit(inputs[static_cast<size_t>(f % 8)]);
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    EXPECT_EQ(*id, static_cast<uint64_t>(f));
    ++submitted;
    while (submitted - received >= (*stream)->num_slots()) drain_one();
    if (f >= 40) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  while (received < submitted) drain_one();
  int switches = 0;
  for (const AdaptEvent& e : (*stream)->events()) switches += e.what == "switched";
  EXPECT_EQ(switches, 2);
  EXPECT_EQ((*stream)->cut(), L);
  (*stream)->close();
  // A plan for another model is refused at once.
  Plan bad = plan_from_slices(L + 1, {{0, "cpu:0"}}).value();
  EXPECT_FALSE((*stream)->switch_plan(bad, "bad").ok());
}

}  // namespace
}  // namespace tessera
