// The pricer on split stages and the split planner (Procedure 1 Steps 1-2 of seed 004) on a
// synthetic profile of two devices.
#include "scheduler/planners/split.h"

#include <gtest/gtest.h>

#include "ops/split_rule.h"
#include "scheduler/pricer.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

using testing::line;
using testing::make_model;
using testing::TestModel;

// x[1,8,16,16] -> conv1 (8->8, 3x3) -> conv2 (8->32, 3x3, heavy) -> flatten -> fc (8192->64).
Graph small_cnn() {
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 8, 16, 16}});
  g.inputs().push_back(x);
  auto weights = [&](const std::string& name, Shape s) {
    std::vector<float> w(static_cast<size_t>(s.numel()), 0.01f);
    return g.add_constant(name, Tensor::from_floats(s, w));
  };
  Attributes conv;
  conv.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  ValueId c1 = g.add_value("c1"), c2 = g.add_value("c2"), f = g.add_value("f"),
          y = g.add_value("y");
  g.add_node(Node{"conv1", OpKind::kConv, conv, {x, weights("w1", Shape{8, 8, 3, 3})}, {c1}});
  g.add_node(Node{"conv2", OpKind::kConv, conv, {c1, weights("w2", Shape{32, 8, 3, 3})}, {c2}});
  g.add_node(Node{"flatten", OpKind::kFlatten, {}, {c2}, {f}});
  Attributes fc;
  fc.set("transB", int64_t{1});
  g.add_node(Node{"fc", OpKind::kGemm, fc, {f, weights("wf", Shape{64, 8192})}, {y}});
  g.outputs() = {y};
  return g;
}

Profile two_cpu_profile(const LayerGraph& lg, const std::vector<double>& ms0,
                        const std::vector<double>& ms1) {
  Profile p;
  p.model_name = "cnn";
  p.model_hash = "h";
  p.describe_model(lg);
  p.platform = Platform::from_json_text(
                   R"({"format": "tessera-platform", "version": 1, "name": "t", "devices": [
      {"id": "a", "kind": "cpu", "device": "cpu:0", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.1}], "dynamic_w": 1.0},
      {"id": "b", "kind": "cpu", "device": "cpu:1", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.1}], "dynamic_w": 1.0}]})",
                   "t")
                   .value();
  for (int d = 0; d < 2; ++d) {
    DeviceProfile dp;
    dp.device = d == 0 ? "cpu:0" : "cpu:1";
    LevelProfile lv;
    lv.mhz = 0;
    for (double ms : d == 0 ? ms0 : ms1) lv.layer_ms.push_back(ms);
    lv.upload = line(1e-7, 0.001);
    lv.download = line(1e-7, 0.001);
    dp.levels.push_back(lv);
    p.devices.push_back(dp);
  }
  return p;
}

TEST(SplitPricer, SplitStageIsTheSlowestPiecePlusMerge) {
  TestModel m = make_model(small_cnn());
  const LayerGraph& lg = *m.lg;
  ASSERT_EQ(lg.num_layers(), 4);
  Profile p = two_cpu_profile(lg, {1, 10, 0.1, 2}, {1, 10, 0.1, 2});
  auto cm = CostModel::build(p, lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  auto base = plan_from_slices(4, {{0, "cpu:0"}});
  ASSERT_TRUE(base.ok());
  ASSERT_TRUE(price_plan(*cm, lg, &*base).ok());
  for (const char* method : {"conv-channel", "conv-spatial", "conv-filter", "conv-grid"}) {
    SCOPED_TRACE(method);
    auto split = split_layer_in_plan(*base, 1, method,
                                     {DeviceShare{"cpu:0", 0, 0.5}, DeviceShare{"cpu:1", 0, 0.5}});
    ASSERT_TRUE(split.ok()) << split.status().to_string();
    ASSERT_EQ(split->stages.size(), 3u);
    Status s = price_plan(*cm, lg, &*split);
    ASSERT_TRUE(s.ok()) << s.to_string();
    const Stage& st = split->stages[1];
    // Half the work on each of two equal devices: about half the layer, never more than all.
    EXPECT_GT(st.estimate.exec_ms, 3.0);
    EXPECT_LT(st.estimate.exec_ms, 7.0);
    EXPECT_GT(st.estimate.transfer_ms, 0.0);  // scatter, gather and merge
    EXPECT_LT(split->estimated_latency_ms, base->estimated_latency_ms);
    ASSERT_EQ(split->device_load.size(), 2u);  // both members carry a piece
  }
  // Unequal ratios on equal devices: the larger piece sets the stage.
  auto skew = split_layer_in_plan(*base, 1, "conv-channel",
                                  {DeviceShare{"cpu:0", 0, 0.75}, DeviceShare{"cpu:1", 0, 0.25}});
  ASSERT_TRUE(skew.ok());
  ASSERT_TRUE(price_plan(*cm, lg, &*skew).ok());
  EXPECT_GT(skew->stages[1].estimate.exec_ms, 6.0);
  // A method without a rule for the layer is an error naming the stage.
  auto bad = split_layer_in_plan(*base, 3, "conv-spatial",
                                 {DeviceShare{"cpu:0", 0, 0.5}, DeviceShare{"cpu:1", 0, 0.5}});
  ASSERT_TRUE(bad.ok());
  Status s = price_plan(*cm, lg, &*bad);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("stage"), std::string::npos) << s.message();
}

// Split calibration (seed 004's database): a measured piece corrects the regression's price
// of the pieces of its layer and method, interpolated towards the whole layer and held below
// the smallest share; the planner's ratios follow the corrected prices.
TEST(SplitCalibration, MeasuredPiecesCorrectThePriceAndTheRatios) {
  TestModel m = make_model(small_cnn());
  const LayerGraph& lg = *m.lg;
  Profile plain = two_cpu_profile(lg, {1, 10, 0.1, 2}, {1, 10, 0.1, 2});
  auto base = CostModel::build(plain, lg);
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  const Graph& g = lg.graph();
  NodeContext nc(g, g.node(lg.layer(1).node));
  // The pieces of conv2 split by channel at 0.5 / 0.5 and at 0.25 / 0.75.
  auto piece = [&](double share, size_t i) {
    const std::vector<double> ratios = {share, 1 - share};
    const SplitRule rule = split_node(nc.ctx(), SplitMethod::kConvChannel, ratios).value();
    const OpCost c = split_piece_cost(nc.ctx(), rule, i);
    return std::make_pair(c.flops,
                          static_cast<double>(c.input_bytes + c.weight_bytes + c.output_bytes));
  };
  const auto [f50, b50] = piece(0.5, 0);
  const auto [f75, b75] = piece(0.25, 1);
  const auto [f25, b25] = piece(0.25, 0);
  // cpu:0 measured its half piece at 2x what the regression's ratio says.
  const double plain50 = base->piece_exec_ms(0, 1, SplitMethod::kConvChannel, f50, b50);
  const double whole = base->exec_ms(0, 1);
  Profile calibrated = plain;
  calibrated.devices[0].levels[0].piece_runs.push_back(
      PieceRun{1, "conv-channel", f50, b50, 2 * plain50 / whole * 4.0, 4.0});
  auto cm = CostModel::build(calibrated, lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  const auto& pts = cm->piece_corrections(0, 1, SplitMethod::kConvChannel);
  ASSERT_EQ(pts.size(), 1u);
  EXPECT_NEAR(pts[0].first, f50 / plain.layers[1].flops, 1e-12);
  EXPECT_NEAR(pts[0].second, 2.0, 1e-9);
  auto ratio = [&](const CostModel& c, double f, double b, int vd = 0,
                   SplitMethod method = SplitMethod::kConvChannel) {
    return c.piece_exec_ms(vd, 1, method, f, b) / base->piece_exec_ms(vd, 1, method, f, b);
  };
  EXPECT_NEAR(ratio(*cm, f50, b50), 2.0, 1e-9);
  // Between (0.5, 2) and (1, 1), linearly in the piece's share of the layer's FLOPs.
  const double s50 = f50 / plain.layers[1].flops, s75 = f75 / plain.layers[1].flops;
  ASSERT_GT(s75, s50);
  ASSERT_LT(s75, 1.0);
  EXPECT_NEAR(ratio(*cm, f75, b75), 2.0 - (s75 - s50) / (1.0 - s50), 1e-9);
  EXPECT_NEAR(ratio(*cm, f25, b25), 2.0, 1e-9);  // held below the smallest share
  // Another method, another device, another layer: uncorrected.
  EXPECT_NEAR(ratio(*cm, f50, b50, 0, SplitMethod::kConvFilter), 1.0, 1e-12);
  EXPECT_NEAR(ratio(*cm, f50, b50, 1), 1.0, 1e-12);
  EXPECT_TRUE(cm->piece_corrections(0, 0, SplitMethod::kConvChannel).empty());

  // Equal devices: the speed ratios are equal; the correction that makes cpu:0's pieces
  // slower gives it the smaller share, and a more balanced stage than the speed ratios.
  const std::vector<int> vds = {0, 1};
  const auto even = balanced_split_shares(*base, lg, 1, SplitMethod::kConvChannel, vds);
  ASSERT_EQ(even.size(), 2u);
  EXPECT_NEAR(even[0].ratio, 0.5, 0.05);
  const auto shifted = balanced_split_shares(*cm, lg, 1, SplitMethod::kConvChannel, vds);
  ASSERT_EQ(shifted.size(), 2u);
  EXPECT_LT(shifted[0].ratio, 0.45);
  EXPECT_NEAR(shifted[0].ratio + shifted[1].ratio, 1.0, 1e-12);
  auto stage = [&](const std::vector<DeviceShare>& shares) {
    return price_split_pieces(*cm, lg, 1, SplitMethod::kConvChannel, vds,
                              {shares[0].ratio, shares[1].ratio})
        .value()
        .stage_ms();
  };
  EXPECT_LT(stage(shifted), stage(even));
  // Bad arguments to the piece pricer.
  EXPECT_FALSE(price_split_pieces(*cm, lg, 9, SplitMethod::kConvChannel, vds, {0.5, 0.5}).ok());
  EXPECT_FALSE(price_split_pieces(*cm, lg, 1, SplitMethod::kConvChannel, vds, {1.0}).ok());
  EXPECT_FALSE(price_split_pieces(*cm, lg, 3, SplitMethod::kConvSpatial, vds, {0.5, 0.5}).ok());
}

TEST(SplitPlanner, MemoryCapForcesTheFcSplitAndStep2Balances) {
  TestModel m = make_model(small_cnn());
  const LayerGraph& lg = *m.lg;
  // conv2 dominates; cpu:1 is 1.5x slower.
  Profile p = two_cpu_profile(lg, {1, 20, 0.1, 2}, {1.5, 30, 0.15, 3});
  auto cm = CostModel::build(p, lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  SplitPlanRequest req;
  req.memory_cap_bytes = 8192 * 64 * 4 / 2 + 8192 * 4 * 2;  // fc does not fit one device
  SplitPlanReport rep;
  auto plan = make_split_plan(*cm, lg, req, &rep);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  ASSERT_TRUE(plan->validate(4, {}, false).ok());
  EXPECT_EQ(rep.forced_layers, std::vector<int>{3}) << plan->notation();
  bool fc_split = false, conv2_split = false;
  for (const Stage& s : plan->stages) {
    if (s.layers == std::vector<int>{3}) fc_split = !s.placement.single();
    if (s.layers == std::vector<int>{1}) conv2_split = !s.placement.single();
  }
  EXPECT_TRUE(fc_split) << plan->notation();
  EXPECT_TRUE(conv2_split) << plan->notation();
  EXPECT_LT(rep.period_ms, rep.base_period_ms);
  double lo = 1e30, hi = 0;
  for (const DeviceLoad& d : plan->device_load) {
    lo = std::min(lo, d.busy_ms);
    hi = std::max(hi, d.busy_ms);
  }
  EXPECT_LE(hi / lo, 1.25) << plan->notation();
  // The faster device takes the larger share of the split conv.
  for (const Stage& s : plan->stages) {
    if (s.layers == std::vector<int>{1} && !s.placement.single()) {
      EXPECT_GT(s.placement.devices[0].ratio, s.placement.devices[1].ratio);
    }
  }
  // A cap no split can meet names the layer.
  req.memory_cap_bytes = 1000;
  auto none = make_split_plan(*cm, lg, req);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("layer"), std::string::npos);
}

}  // namespace
}  // namespace tessera
