// SDF and CSDF models of a CNN (scheduler/dataflow.h, seed 003): Algorithm 1 and 2 on the paper's
// Fig. 1 / Table 1 example, the deadlock check and its repair on the counterexample and on random
// DAGs, and random mappings streamed at queue capacity 1 against the sequential run.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "backends/registry.h"
#include "scheduler/dataflow.h"
#include "tests/scheduler/dataflow_test_util.h"

namespace tessera {
namespace {

using testing::make_model;

// Table 1 (a_8 on cpu_2, as Table 1 and Fig. 1c have it; Fig. 4 differs): paper layer i is index
// i - 1, cpu_j is processor j - 1.
std::vector<int> table1_mapping() {
  std::vector<int> m(23);
  for (int l = 1; l <= 23; ++l) {
    int cpu = 0;
    if (l <= 7)
      cpu = 1;
    else if (l == 8 || l == 9 || l == 10 || l == 13)
      cpu = 2;
    else if (l == 11 || l == 12)
      cpu = 3;
    else if (l == 19 || l == 20)
      cpu = 5;
    else
      cpu = 4;
    m[static_cast<size_t>(l - 1)] = cpu - 1;
  }
  return m;
}

const CsdfChannel* find_channel(const SdfGraph& sdf, const CsdfGraph& csdf, int src, int dst) {
  for (const CsdfChannel& c : csdf.channels) {
    const SdfChannel& e = sdf.channels[static_cast<size_t>(c.sdf_channel)];
    if (e.src == src && e.dst == dst) return &c;
  }
  return nullptr;
}

TEST(SdfTest, Fig1HasAnActorPerLayerAndAChannelPerEdge) {
  auto m = make_model(testing::fig1_graph());
  ASSERT_EQ(m.lg->num_layers(), 23);
  auto sdf = build_sdf(*m.lg);
  ASSERT_TRUE(sdf.ok()) << sdf.status().to_string();
  EXPECT_EQ(sdf->num_actors, 23);
  EXPECT_EQ(sdf->channels.size(), 24u);
  auto rate = [&](int src, int dst) -> std::pair<uint64_t, uint64_t> {
    for (const SdfChannel& c : sdf->channels) {
      if (c.src == src - 1 && c.dst == dst - 1) return {c.production, c.consumption};
    }
    return {0, 0};
  };
  EXPECT_EQ(rate(3, 6), std::make_pair(uint64_t{112640}, uint64_t{112640}));  // U_36 = [112640]
  EXPECT_EQ(rate(1, 2), std::make_pair(uint64_t{3072}, uint64_t{3072}));      // [32,32,3]
  EXPECT_EQ(rate(7, 8), std::make_pair(uint64_t{187200}, uint64_t{187200}));
  EXPECT_EQ(rate(12, 13), std::make_pair(uint64_t{22500}, uint64_t{22500}));
  for (const SdfChannel& c : sdf->channels) EXPECT_EQ(c.bytes, 4 * c.production);
}

TEST(CsdfTest, Table1MappingGivesTheActorsPhasesAndRatesOfFig1c) {
  auto m = make_model(testing::fig1_graph());
  auto sdf = build_sdf(*m.lg).value();
  auto csdf = build_csdf(*m.lg, sdf, table1_mapping(), 5);
  ASSERT_TRUE(csdf.ok()) << csdf.status().to_string();
  EXPECT_EQ(csdf->splits, 0);
  EXPECT_FALSE(csdf->reordered);
  // a_1 = {l1..l7}; a_2 = {l8} then {l9, l10, l13}; a_3 = {l11, l12}; a_4 = {l14..l18} then
  // {l21..l23}; a_5 = {l19, l20} (0-based indices).
  EXPECT_EQ(csdf->describe(),
            "a0(p0): {0-6} | a1(p1): {7} {8-9,12} | a2(p2): {10-11} | a3(p3): {13-17} {20-22} | "
            "a4(p4): {18-19}");
  // 7 channels in the paper: 6 between actors plus l8 -> l9, which stays in a_2's memory.
  EXPECT_EQ(csdf->channels.size(), 6u);
  ASSERT_EQ(csdf->local.size(), 1u);
  EXPECT_EQ(sdf.channels[static_cast<size_t>(csdf->local[0])].src, 7);
  EXPECT_EQ(sdf.channels[static_cast<size_t>(csdf->local[0])].dst, 8);
  using R = std::vector<uint64_t>;
  const CsdfChannel* c12 = find_channel(sdf, *csdf, 6, 7);  // e_78
  ASSERT_NE(c12, nullptr);
  EXPECT_EQ(c12->src_actor, 0);
  EXPECT_EQ(c12->dst_actor, 1);
  EXPECT_EQ(c12->production, R({187200}));                   // U_12 = [187200]
  EXPECT_EQ(c12->consumption, R({187200, 0}));               // V_12 = [187200, 0]
  const CsdfChannel* c23 = find_channel(sdf, *csdf, 7, 10);  // e_8,11
  ASSERT_NE(c23, nullptr);
  EXPECT_EQ(c23->production, R({187200, 0}));
  EXPECT_EQ(c23->consumption, R({187200}));
  const CsdfChannel* c32 = find_channel(sdf, *csdf, 11, 12);  // e_12,13: 22500 tokens at phase 2
  ASSERT_NE(c32, nullptr);
  EXPECT_EQ(c32->production, R({22500}));
  EXPECT_EQ(c32->consumption, R({0, 22500}));
  const CsdfChannel* c45 = find_channel(sdf, *csdf, 17, 18);
  ASSERT_NE(c45, nullptr);
  EXPECT_EQ(c45->production, R({4096, 0}));
  const CsdfChannel* c54 = find_channel(sdf, *csdf, 19, 20);
  ASSERT_NE(c54, nullptr);
  EXPECT_EQ(c54->consumption, R({0, 2048}));
  EXPECT_TRUE(check_deadlock_free(sdf, *csdf).ok());

  // The paper's warning: l8 and l13 in one phase of a_2 deadlock with a_3.
  CsdfGraph merged = *csdf;
  merged.actors[1].phases = {{7, 8, 9, 12}};
  Status s = check_deadlock_free(sdf, merged);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("actor a1 phase 1 {7-9,12} waits for layer 11"), std::string::npos)
      << s.to_string();
  EXPECT_NE(s.message().find("actor a2 phase 1 {10-11} waits for layer 7"), std::string::npos)
      << s.to_string();

  // The plan: one stage per phase, grouped by actor, in a valid sequential order.
  auto plan = csdf_to_plan(sdf, *csdf, {"cpu:0", "cpu:1", "cpu:0", "cpu:1", "cpu:0"}, 23);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  EXPECT_EQ(plan->notation(),
            "cpu:0[0]#a0 cpu:1[7]#a1 cpu:0[10]#a2 cpu:1{8,9,12}#a1 cpu:1[13]#a3 cpu:0[18]#a4 "
            "cpu:1[20]#a3");
}

TEST(CsdfTest, CounterexampleDeadlocksAsPrintedAndRunsRepaired) {
  auto m = make_model(testing::counterexample_graph());
  const LayerGraph& lg = *m.lg;
  ASSERT_EQ(lg.num_layers(), 5);
  auto sdf = build_sdf(lg).value();
  const std::vector<int> mapping = {0, 0, 0, 1, 0};  // l4 alone on the second processor
  auto printed = csdf_algorithm2(lg, sdf, mapping, 2);
  ASSERT_TRUE(printed.ok());
  EXPECT_EQ(printed->describe(), "a0(p0): {0-2,4} | a1(p1): {3}");
  Status s = check_deadlock_free(sdf, *printed);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("deadlocks"), std::string::npos);

  auto fixed = build_csdf(lg, sdf, mapping, 2);
  ASSERT_TRUE(fixed.ok()) << fixed.status().to_string();
  EXPECT_EQ(fixed->describe(), "a0(p0): {0-2} {4} | a1(p1): {3}");
  EXPECT_EQ(fixed->splits, 1);
  EXPECT_TRUE(check_deadlock_free(sdf, *fixed).ok());

  std::vector<std::string> devices = {"cpu:0", "cpu:1"};
  for (const std::string& d : devices) {
    if (!open_device(d).ok()) devices = {"reference", "reference"};
  }
  auto plan = csdf_to_plan(sdf, *fixed, devices, 5);
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  plan->queue_capacity = 1;
  testing::expect_stream_equals_sequential(lg, *plan, 20);
}

// Random DAGs of element-wise layers, random mappings onto 2-4 processors: the repaired CSDF
// graph always passes the check, holds every layer once, and becomes a valid plan.
TEST(CsdfTest, RepairMakesEveryRandomMappingDeadlockFree) {
  std::mt19937 rng(23);
  int repaired = 0;
  for (int trial = 0; trial < 300; ++trial) {
    testing::CnnBuilder b;
    std::vector<ValueId> values = {b.input(2, 2, 2)};
    const int n = 3 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) {
      const ValueId a = values[rng() % values.size()];
      const ValueId c = values[rng() % values.size()];
      values.push_back(rng() % 2 == 0 || a == c ? b.relu(a) : b.sum(a, c));
    }
    b.output(values.back());
    auto m = make_model(std::move(b.g));
    const LayerGraph& lg = *m.lg;
    auto sdf = build_sdf(lg).value();
    const int procs = 2 + static_cast<int>(rng() % 3);
    std::vector<int> mapping(static_cast<size_t>(lg.num_layers()));
    for (int& p : mapping) p = static_cast<int>(rng() % static_cast<unsigned>(procs));
    auto printed = csdf_algorithm2(lg, sdf, mapping, procs).value();
    if (!check_deadlock_free(sdf, printed).ok()) ++repaired;
    auto csdf = build_csdf(lg, sdf, mapping, procs);
    ASSERT_TRUE(csdf.ok()) << csdf.status().to_string();
    ASSERT_TRUE(check_deadlock_free(sdf, *csdf).ok()) << csdf->describe();
    std::vector<int> seen(static_cast<size_t>(lg.num_layers()), 0);
    for (const CsdfActor& a : csdf->actors) {
      for (const auto& phase : a.phases) {
        ASSERT_FALSE(phase.empty());
        for (int l : phase) {
          ++seen[static_cast<size_t>(l)];
          EXPECT_EQ(mapping[static_cast<size_t>(l)], a.processor);
        }
      }
    }
    for (int c : seen) EXPECT_EQ(c, 1);
    std::vector<std::string> devices(static_cast<size_t>(procs), "reference");
    auto plan = csdf_to_plan(sdf, *csdf, devices, lg.num_layers());
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    if (trial % 10 == 0) {  // the executor's own stage-order check accepts the plan
      auto ex = Executor::create(lg, *plan);
      ASSERT_TRUE(ex.ok()) << plan->notation() << ": " << ex.status().to_string();
    }
  }
  EXPECT_GT(repaired, 10);  // Algorithm 2 as printed deadlocks on a good share of them
}

TEST(CsdfTest, BadMappingsAreRefusedByName) {
  auto m = make_model(testing::counterexample_graph());
  auto sdf = build_sdf(*m.lg).value();
  auto short_map = build_csdf(*m.lg, sdf, {0, 0}, 2);
  ASSERT_FALSE(short_map.ok());
  EXPECT_NE(short_map.status().message().find("names 2 layers"), std::string::npos);
  auto bad = build_csdf(*m.lg, sdf, {0, 0, 5, 0, 0}, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("layer 2"), std::string::npos);
  auto csdf = build_csdf(*m.lg, sdf, {0, 1, 0, 1, 0}, 2).value();
  auto plan = csdf_to_plan(sdf, csdf, {"cpu:0"}, 5);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("processor 1"), std::string::npos);
}

// Random mappings of the model-shaped graphs over {cpu:0, cpu:1} and {cpu:0, npu:0}: 20 frames at
// queue capacity 1 under a watchdog, outputs equal to the sequential run. The unit label runs 48
// mappings; tests/models/dataflow_model_test.cc runs the real models.
struct StyleCase {
  const char* name;
  Graph (*make)();
};

class DataflowStreamTest
    : public ::testing::TestWithParam<std::tuple<StyleCase, std::vector<std::string>>> {};

TEST_P(DataflowStreamTest, RandomMappingsStreamLikeTheSequentialRun) {
  const auto& [style, devices] = GetParam();
  std::vector<std::unique_ptr<Device>> devs;
  for (const std::string& d : devices) {
    auto dev = open_device(d);
    if (!dev.ok()) GTEST_SKIP() << d << " is not available";
    devs.push_back(std::move(*dev));
  }
  auto m = make_model(style.make());
  const LayerGraph& lg = *m.lg;
  auto sdf = build_sdf(lg).value();
  std::vector<std::vector<int>> can(static_cast<size_t>(lg.num_layers()));
  for (int l = 0; l < lg.num_layers(); ++l) {
    for (size_t p = 0; p < devs.size(); ++p) {
      const Node& node = lg.graph().node(lg.layer(l).node);
      if (devs[p]->capabilities(lg.graph(), node).supported) {
        can[static_cast<size_t>(l)].push_back(static_cast<int>(p));
      }
    }
    ASSERT_FALSE(can[static_cast<size_t>(l)].empty()) << "layer " << l;
  }
  std::mt19937 rng(static_cast<unsigned>(lg.num_layers() * 31 + devices[1].size()));
  for (int trial = 0; trial < 6; ++trial) {
    std::vector<int> mapping(static_cast<size_t>(lg.num_layers()));
    for (int l = 0; l < lg.num_layers(); ++l) {
      const auto& c = can[static_cast<size_t>(l)];
      mapping[static_cast<size_t>(l)] = c[rng() % c.size()];
    }
    auto csdf = build_csdf(lg, sdf, mapping, static_cast<int>(devices.size()));
    ASSERT_TRUE(csdf.ok()) << csdf.status().to_string();
    auto plan = csdf_to_plan(sdf, *csdf, devices, lg.num_layers());
    ASSERT_TRUE(plan.ok()) << plan.status().to_string();
    plan->queue_capacity = 1;
    SCOPED_TRACE(plan->notation());
    testing::expect_stream_equals_sequential(lg, *plan, 20);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Styles, DataflowStreamTest,
    ::testing::Combine(::testing::Values(StyleCase{"resnet18", testing::resnet_style},
                                         StyleCase{"googlenet", testing::googlenet_style},
                                         StyleCase{"squeezenet1_1", testing::squeezenet_style},
                                         StyleCase{"densenet121", testing::densenet_style}),
                       ::testing::Values(std::vector<std::string>{"cpu:0", "cpu:1"},
                                         std::vector<std::string>{"cpu:0", "npu:0"})),
    [](const auto& p) {
      return std::string(std::get<0>(p.param).name == std::string("squeezenet1_1")
                             ? "squeezenet"
                             : std::get<0>(p.param).name) +
             "_" + (std::get<1>(p.param)[1] == "npu:0" ? "cpu0_npu0" : "cpu0_cpu1");
    });

}  // namespace
}  // namespace tessera
