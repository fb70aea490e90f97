#include "scheduler/plan.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/core/hostile_names.h"

namespace tessera {
namespace {

Plan three_stage() {
  Plan p = plan_from_slices(10, {{0, "cpu"}, {4, "opencl:0@600"}, {7, "cpu:0-1"}}).value();
  p.model_name = "m";
  p.model_hash = "fnv1a64:0123";
  p.planner = "slice";
  p.objective = "energy";
  p.stages[1].estimate = StageEstimate{1.25, 0.5, 3.0625};
  p.estimated_latency_ms = 1.75;
  p.estimated_energy_mj = 0.1 + 0.2;  // not exactly representable: JSON must round-trip it
  return p;
}

TEST(PlanTest, NotationIsDeviceFirstLayerAndLevel) {
  Plan p = three_stage();
  EXPECT_EQ(p.notation(), "cpu[0] opencl:0@600[4] cpu:0-1[7]");
  ASSERT_EQ(p.stages.size(), 3u);
  EXPECT_EQ(p.stages[1].layers, (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(p.stages[1].placement.devices[0].mhz, 600);
  EXPECT_EQ(p.stages[1].placement.devices[0].device, "opencl:0");
  auto back = parse_plan_notation(p.notation(), 10);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->stages,
            plan_from_slices(10, {{0, "cpu"}, {4, "opencl:0@600"}, {7, "cpu:0-1"}}).value().stages);
}

TEST(PlanTest, JsonRoundTrip) {
  Plan p = three_stage();
  auto back = Plan::from_json_text(p.to_json_text(), "t.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, p);

  // Non-contiguous stages and split placements (later planners) round-trip too.
  Plan q;
  q.num_layers = 4;
  q.mode = PlanMode::kStreaming;
  Stage a;
  a.layers = {0, 2};
  a.placement = Placement::on("cpu:0");
  Stage b;
  b.layers = {1, 3};
  b.placement.devices = {{"cpu:1", 0, 0.25}, {"opencl:0", 700, 0.75}};
  b.placement.split = "output_channels";
  b.packing = "int8";
  q.stages = {a, b};
  ASSERT_TRUE(q.validate(4, {}, false).ok());
  auto qb = Plan::from_json_text(q.to_json_text(), "q.json");
  ASSERT_TRUE(qb.ok()) << qb.status().to_string();
  EXPECT_EQ(*qb, q);
  EXPECT_EQ(q.notation(), "cpu:0{0,2} cpu:1+opencl:0@700/output_channels{1,3}");
  // The notation carries no ratios: a split parses back with equal shares.
  auto qn = parse_plan_notation(q.notation(), 4);
  ASSERT_TRUE(qn.ok()) << qn.status().to_string();
  ASSERT_EQ(qn->stages.size(), 2u);
  EXPECT_EQ(qn->stages[0].layers, (std::vector<int>{0, 2}));
  EXPECT_EQ(qn->stages[1].layers, (std::vector<int>{1, 3}));
  EXPECT_EQ(qn->stages[1].placement.split, "output_channels");
  ASSERT_EQ(qn->stages[1].placement.devices.size(), 2u);
  EXPECT_EQ(qn->stages[1].placement.devices[1].label(), "opencl:0@700");
  EXPECT_DOUBLE_EQ(qn->stages[1].placement.devices[1].ratio, 0.5);
}

TEST(PlanTest, NotationWithActorsAndListedLayersParsesBack) {
  // Stages 0 and 2 are phases of actor 0; a [first] stage runs to the next [first] stage's
  // first layer, leaving out the layers a {..} stage lists.
  auto p = parse_plan_notation("cpu:0[0]#a0 cpu:1[4] cpu:0[9]#a0", 12);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->mode, PlanMode::kStreaming);
  ASSERT_EQ(p->stages.size(), 3u);
  EXPECT_EQ(p->stages[0].actor, 0);
  EXPECT_EQ(p->stages[1].actor, -1);
  EXPECT_EQ(p->stages[1].layers, (std::vector<int>{4, 5, 6, 7, 8}));
  EXPECT_EQ(p->stages[2].layers, (std::vector<int>{9, 10, 11}));
  EXPECT_EQ(p->notation(), "cpu:0[0]#a0 cpu:1[4] cpu:0[9]#a0");

  auto mixed = parse_plan_notation("cpu:0[0] cpu:1{2,5} cpu:0[4]", 7);
  ASSERT_TRUE(mixed.ok()) << mixed.status().to_string();
  EXPECT_EQ(mixed->stages[0].layers, (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(mixed->stages[1].layers, (std::vector<int>{2, 5}));
  EXPECT_EQ(mixed->stages[2].layers, (std::vector<int>{4, 6}));

  EXPECT_FALSE(parse_plan_notation("cpu:0[0]#ax", 3).ok());              // actor not a number
  EXPECT_FALSE(parse_plan_notation("cpu:0{0,,1} cpu:1[2]", 3).ok());     // empty list entry
  EXPECT_FALSE(parse_plan_notation("cpu:0{} cpu:1[0]", 3).ok());         // nothing listed
  EXPECT_FALSE(parse_plan_notation("cpu:0{0,1} cpu:1{1,2}", 3).ok());    // layer 1 twice
  EXPECT_FALSE(parse_plan_notation("cpu:0[0]#a0 cpu:1[1]#a0", 3).ok());  // one actor, two places
  EXPECT_FALSE(parse_plan_notation("cpu:0+cpu:1/[0]", 3).ok());          // no split dimension
}

TEST(PlanTest, ValidationNamesTheStage) {
  Plan p = three_stage();
  EXPECT_TRUE(p.validate(10, {"cpu", "opencl:0", "cpu:0-1"}, true).ok());

  auto absent = p.validate(10, {"cpu", "cpu:0-1"}, true);
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.to_string().find("stage 1 (opencl:0@600[4])"), std::string::npos)
      << absent.to_string();
  EXPECT_NE(absent.to_string().find("not available"), std::string::npos);

  Plan overlap = p;
  overlap.stages[2].layers.insert(overlap.stages[2].layers.begin(), 6);
  auto o = overlap.validate(10, {}, false);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.to_string().find("stage 2 (cpu:0-1[6]): layer 6 is also in stage 1"),
            std::string::npos)
      << o.to_string();

  Plan missing = p;
  missing.stages[2].layers.pop_back();
  auto m = missing.validate(10, {}, false);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.to_string().find("layer 9 is in no stage"), std::string::npos) << m.to_string();

  Plan gap = p;
  gap.stages[1].layers = {4, 6};
  gap.stages[2].layers = {5, 7, 8, 9};
  EXPECT_TRUE(gap.validate(10, {}, false).ok());
  auto g = gap.validate(10, {}, true);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.to_string().find("stage 1 (opencl:0@600{4,6}): layers are not one contiguous"),
            std::string::npos)
      << g.to_string();

  Plan order = plan_from_slices(10, {{0, "cpu"}, {4, "cpu:0-1"}}).value();
  std::swap(order.stages[0], order.stages[1]);
  auto ord = order.validate(10, {}, true);
  ASSERT_FALSE(ord.ok());
  EXPECT_NE(ord.to_string().find("stage 0 (cpu:0-1[4]): starts at layer 4, expected 0"),
            std::string::npos)
      << ord.to_string();

  Plan ratio = p;
  ratio.stages[0].placement.devices.push_back({"cpu:1", 0, 0.5});
  ratio.stages[0].placement.split = "spatial";
  auto r = ratio.validate(10, {}, true);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.to_string().find("stage 0"), std::string::npos);
  EXPECT_NE(r.to_string().find("sum to 1.5"), std::string::npos) << r.to_string();

  EXPECT_FALSE(p.validate(11, {}, true).ok());
}

TEST(PlanTest, BadJsonAndNotationNameTheField) {
  std::string text = three_stage().to_json_text();
  auto pos = text.find("\"first\": 4");
  ASSERT_NE(pos, std::string::npos);
  std::string overlapping = text;
  overlapping.replace(pos, 10, "\"first\": 3");
  auto o = Plan::from_json_text(overlapping, "o.json");
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().to_string().find("layer 3 is also in stage 0"), std::string::npos)
      << o.status().to_string();
  EXPECT_NE(o.status().to_string().find("o.json"), std::string::npos);

  std::string bad_mhz = text;
  bad_mhz.replace(bad_mhz.find("\"mhz\": 600"), 10, "\"mhz\": -6");
  auto b = Plan::from_json_text(bad_mhz, "b.json");
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().to_string().find("stages[1].placement.devices[0].mhz"), std::string::npos)
      << b.status().to_string();

  auto fmt = Plan::from_json_text(R"({"format": "tessera-profile", "version": 1})", "f.json");
  ASSERT_FALSE(fmt.ok());
  EXPECT_NE(fmt.status().to_string().find("format"), std::string::npos);

  EXPECT_FALSE(parse_plan_notation("cpu[1] npu:0[3]", 5).ok());         // must start at 0
  EXPECT_FALSE(parse_plan_notation("cpu[0] npu:0[9]", 5).ok());         // past the end
  EXPECT_FALSE(parse_plan_notation("cpu[0] npu:0[x]", 5).ok());         // not a number
  EXPECT_FALSE(parse_plan_notation("cpu@fast[0]", 5).ok());             // not MHz
  EXPECT_FALSE(parse_plan_notation("cpu[0] npu:0[3] cpu[2]", 5).ok());  // descending
  EXPECT_FALSE(parse_plan_notation("", 5).ok());
}

// json_number_overflow.plan.json (issue 28): a number no double holds used to throw out of the
// reader and terminate the process; now it is an error naming the file.
TEST(Plan, NumberOverflowIsAnErrorNamingTheFile) {
  auto p = Plan::from_json_text(R"({"format": "tessera-plan", "version": 1e999})", "x.plan.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("x.plan.json: number out of range"), std::string::npos)
      << p.status().message();
}

// Names from a plan file (devices, format, mode) and from the notation are printed escaped and
// bounded (quote_name), whatever bytes they hold.
TEST(PlanTest, HostileNamesPrintEscapedAndBounded) {
  const nlohmann::json base = nlohmann::json::parse(three_stage().to_json_text());
  for (const testing::HostileName& h : testing::hostile_names()) {
    SCOPED_TRACE(h.what);
    nlohmann::json j = base;
    j["stages"][1]["placement"]["devices"][0]["device"] = h.raw;
    auto loaded = Plan::from_json_text(j.dump(), "p.json");  // devices are checked when run
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    EXPECT_EQ(loaded->stages[1].placement.devices[0].device, h.raw);
    testing::expect_safe_message(loaded->validate(10, {"cpu", "cpu:0-1"}, true), h);

    j["stages"][1]["placement"]["devices"][0]["ratio"] = 0;  // refused by the reader itself
    testing::expect_safe_message(Plan::from_json_text(j.dump(), "p.json").status(), h);

    j = base;
    j["format"] = h.raw;
    testing::expect_safe_message(Plan::from_json_text(j.dump(), "p.json").status(), h);
    j = base;
    j["mode"] = h.raw;
    testing::expect_safe_message(Plan::from_json_text(j.dump(), "p.json").status(), h);

    if (h.raw.find('\n') == std::string::npos) {  // the notation splits stages at whitespace
      testing::expect_safe_message(parse_plan_notation(h.raw + "@9x[0]", 10).status(), h);
      testing::expect_safe_message(parse_plan_notation("cpu[0] " + h.raw + "{2,1}", 10).status(),
                                   h);
    }
  }
}

}  // namespace
}  // namespace tessera
