// The fidelity bound of the planners (scheduler/error_budget.h): the composition by hand, plans
// that respect or would violate the bound on a small model with an injected per-layer error
// table, and the profile JSON of the errors (round trip, hostile values).
#include "scheduler/error_budget.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "scheduler/cost_model.h"
#include "scheduler/planners/planner.h"
#include "scheduler/profile.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

Platform reference_platform() {
  return Platform::from_json_text(R"({"format": "tessera-platform", "version": 1, "name": "test",
    "devices": [
      {"id": "ref", "kind": "reference", "device": "reference", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 1.0}], "dynamic_w": 4.0}]})",
                                  "test")
      .value();
}

// A profile of skip_graph (4 layers) on `reference` (f32) and a level `reference#int8` made
// from it: its layers take `int8_ms`, its errors are `errors` (nullopt: not measured), and the
// f32 device's layers 1 ms each.
struct Injected {
  testing::TestModel m;
  Profile profile;
};

Injected injected_profile(const std::vector<double>& int8_ms,
                          const std::vector<std::optional<double>>& errors) {
  Injected out;
  out.m = testing::make_model(testing::skip_graph());
  ProfileOptions o = testing::quick_profile_options(0);
  o.repeat = 1;
  o.corun_rounds = 0;
  out.profile = profile_model(*out.m.lg, reference_platform(), o, "skip", "h").value();
  Profile& p = out.profile;
  DeviceProfile& f32 = p.devices[0];
  for (LevelProfile& l : f32.levels) {
    for (auto& x : l.layer_chain_ms) x = 1.0;
    for (auto& x : l.layer_ms) x = 1.0;
    l.slice_runs.clear();
  }
  DeviceProfile low = f32;
  low.device = "reference#int8";
  for (LevelProfile& l : low.levels) {
    for (size_t i = 0; i < int8_ms.size(); ++i) {
      if (!l.layer_chain_ms.empty()) l.layer_chain_ms[i] = int8_ms[i];
      l.layer_ms[i] = int8_ms[i];
    }
  }
  low.layer_error = errors;
  p.devices.push_back(low);
  PlatformDevice pd = p.platform.devices[0];
  pd.device = "reference#int8";
  pd.id = "ref#int8";
  p.platform.devices.push_back(pd);
  return out;
}

TEST(ErrorBudgetTest, ComposesBySumOfSquares) {
  EXPECT_DOUBLE_EQ(compose_errors(std::vector<double>{}).value(), 0.0);
  EXPECT_NEAR(compose_errors(std::vector<double>{0.03, 0.04}).value(), 0.05, 1e-15);
  EXPECT_NEAR(compose_errors(std::vector<double>{0.01, 0.02, 0.02}).value(), 0.03, 1e-15);
  EXPECT_NEAR(compose_errors(std::vector<double>{0, 0.5}).value(), 0.5, 1e-15);
  for (double bad : {-0.1, std::nan(""), std::numeric_limits<double>::infinity()}) {
    auto r = compose_errors(std::vector<double>{0.1, bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("error 1"), std::string::npos);
  }
}

TEST(ErrorBudgetTest, PlanErrorComposesTheLayersOnReducedDevices) {
  Injected in = injected_profile({0.5, 0.5, 0.5, 0.5}, {0.01, 0.02, 0.0, 0.03});
  const Profile& p = in.profile;
  // Layers 0-1 at int8, 2-3 at f32: sqrt(0.01^2 + 0.02^2).
  Plan plan = plan_from_slices(4, {{0, "reference#int8"}, {2, "reference"}}).value();
  EXPECT_NEAR(plan_expected_error(p, plan).value(), std::sqrt(0.0001 + 0.0004), 1e-12);
  plan = plan_from_slices(4, {{0, "reference"}}).value();
  EXPECT_DOUBLE_EQ(plan_expected_error(p, plan).value(), 0.0);
  plan = plan_from_slices(4, {{0, "reference#int8"}}).value();
  EXPECT_NEAR(plan_expected_error(p, plan).value(), std::sqrt(0.0001 + 0.0004 + 0.0009), 1e-12);
  // A split placement: each layer takes its shares' largest error.
  plan.stages[0].placement.devices = {{"reference", 0, 0.5}, {"reference#int8", 0, 0.5}};
  EXPECT_NEAR(plan_expected_error(p, plan).value(), std::sqrt(0.0001 + 0.0004 + 0.0009), 1e-12);
  // A level without a measured error for a layer it runs: no estimate, saying why.
  Injected missing = injected_profile({0.5, 0.5, 0.5, 0.5}, {0.01, std::nullopt, 0.0, 0.03});
  plan = plan_from_slices(4, {{0, "reference#int8"}}).value();
  auto e = plan_expected_error(missing.profile, plan);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no measured error for layer 1"), std::string::npos)
      << e.status().to_string();
  EXPECT_NE(e.status().message().find("profile the model again"), std::string::npos);
  plan = plan_from_slices(4, {{0, "nowhere"}}).value();
  EXPECT_FALSE(plan_expected_error(p, plan).ok());
}

// The gain: a level whose whole model measured twice the composition of its layers doubles every
// layer's error, so the whole model on it predicts the measured error exactly.
TEST(ErrorBudgetTest, ScalesByTheLevelsMeasuredGain) {
  Injected in = injected_profile({0.5, 0.5, 0.5, 0.5}, {0.01, 0.02, 0.0, 0.02});
  in.profile.devices[1].model_error = 0.06;  // the composition is 0.03: gain 2
  Plan plan = plan_from_slices(4, {{0, "reference#int8"}}).value();
  EXPECT_NEAR(plan_expected_error(in.profile, plan).value(), 0.06, 1e-12);
  plan = plan_from_slices(4, {{0, "reference#int8"}, {1, "reference"}}).value();
  EXPECT_NEAR(plan_expected_error(in.profile, plan).value(), 0.02, 1e-12);
  EXPECT_NEAR(profiled_layer_error(in.profile, "reference#int8", 1).value(), 0.04, 1e-12);
  EXPECT_EQ(profiled_layer_error(in.profile, "reference", 1).value(), 0.0);
  // The bound sees the gained errors (layer 0: 0.02, layers 1 and 3: 0.04): 0.03 admits layer
  // 0 and the free layer 2 only.
  auto b = bound_profile_error(&in.profile, 0.03);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->admitted, 2);
  EXPECT_NEAR(b->reserved, 0.02, 1e-12);
  // A whole-model error of 0 (or none) leaves the errors as measured.
  in = injected_profile({0.5, 0.5, 0.5, 0.5}, {0.01, 0.02, 0.0, 0.02});
  in.profile.devices[1].model_error = 0.0;
  EXPECT_NEAR(profiled_layer_error(in.profile, "reference#int8", 1).value(), 0.02, 1e-12);
}

// Measured output errors (DeviceProfile::layer_output_error) replace the gain: each layer is
// charged its own error at the outputs, whatever the whole model measured.
TEST(ErrorBudgetTest, OutputErrorsReplaceTheGain) {
  Injected in = injected_profile({0.5, 0.5, 0.5, 0.5}, {0.01, 0.02, 0.0, 0.02});
  in.profile.devices[1].model_error = 0.06;  // a gain of 2 for the layer errors alone
  in.profile.devices[1].layer_output_error = {0.05, 0.03, 0.0, std::nullopt};
  EXPECT_NEAR(profiled_layer_error(in.profile, "reference#int8", 0).value(), 0.05, 1e-12);
  EXPECT_NEAR(profiled_layer_error(in.profile, "reference#int8", 1).value(), 0.03, 1e-12);
  // Layer 3 has no output error: its layer error times the gain.
  EXPECT_NEAR(profiled_layer_error(in.profile, "reference#int8", 3).value(), 0.04, 1e-12);
  Plan plan = plan_from_slices(4, {{0, "reference#int8"}, {2, "reference"}}).value();
  EXPECT_NEAR(plan_expected_error(in.profile, plan).value(), std::sqrt(0.05 * 0.05 + 0.03 * 0.03),
              1e-12);
  // The bound admits by the output errors: 0.035 holds layer 1 (0.03) and the free layer 2,
  // not layer 0 (0.05).
  auto b = bound_profile_error(&in.profile, 0.035);
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(in.profile.devices[1].unsupported.count(0));
  EXPECT_FALSE(in.profile.devices[1].unsupported.count(1));
  EXPECT_FALSE(in.profile.devices[1].unsupported.count(2));
  EXPECT_NE(in.profile.devices[1].unsupported.at(0).find("relative L2 error 0.05"),
            std::string::npos)
      << in.profile.devices[1].unsupported.at(0);
}

// The greedy admission by hand: savings {0.5, 0.1, 0.5, 0.8} ms, errors {0.01, 0.01, 0, 0.03}:
// layer 2 is free, then layer 0 (5000 ms per unit squared error), layer 1 (1000), layer 3 (889).
TEST(ErrorBudgetTest, AdmitsBySavingPerSquaredError) {
  const std::vector<std::optional<double>> errors = {0.01, 0.01, 0.0, 0.03};
  {
    Injected in = injected_profile({0.5, 0.9, 0.5, 0.2}, errors);
    auto b = bound_profile_error(&in.profile, 0.02);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(b->admitted, 3);
    EXPECT_EQ(b->refused, 1);
    EXPECT_NEAR(b->reserved, std::sqrt(0.0002), 1e-12);
    const DeviceProfile& low = in.profile.devices[1];
    ASSERT_EQ(low.unsupported.count(3), 1u);
    EXPECT_NE(low.unsupported.at(3).find("does not fit the error bound 0.02"), std::string::npos);
    EXPECT_TRUE(in.profile.devices[0].unsupported.empty());  // f32 is never restricted
  }
  {
    Injected in = injected_profile({0.5, 0.9, 0.5, 0.2}, errors);
    auto b = bound_profile_error(&in.profile, 0.0);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->admitted, 1);  // the free layer only
    EXPECT_EQ(in.profile.devices[1].unsupported.size(), 3u);
  }
  {
    Injected in = injected_profile({0.5, 0.9, 0.5, 0.2}, errors);
    auto b = bound_profile_error(&in.profile, 1.0);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->admitted, 4);
    EXPECT_EQ(b->refused, 0);
    EXPECT_NEAR(b->reserved, std::sqrt(0.0011), 1e-12);
  }
  {
    // Not measured: never admitted, whatever the bound.
    Injected in = injected_profile({0.5, 0.9, 0.5, 0.2}, {0.01, std::nullopt, 0.0, 0.03});
    auto b = bound_profile_error(&in.profile, 1.0);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->refused, 1);
    EXPECT_NE(in.profile.devices[1].unsupported.at(1).find("no measured error"), std::string::npos);
  }
  Injected in = injected_profile({0.5, 0.9, 0.5, 0.2}, errors);
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    EXPECT_FALSE(bound_profile_error(&in.profile, bad).ok()) << bad;
  }
}

// Planners on the bounded profile: every plan's composed error is within the bound; without
// the bound the fastest plan puts every layer on the faster level and exceeds it.
TEST(ErrorBudgetTest, PlannersRespectTheBound) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> err(0.0, 0.05), ms(0.2, 0.9);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> times;
    std::vector<std::optional<double>> errors;
    for (int l = 0; l < 4; ++l) {
      times.push_back(ms(rng));
      errors.push_back(err(rng));
    }
    Injected in = injected_profile(times, errors);
    const double unbounded_error = [&] {
      double s = 0;
      for (const auto& e : errors) s += *e * *e;
      return std::sqrt(s);
    }();
    auto cm_free = CostModel::build(in.profile, *in.m.lg);
    ASSERT_TRUE(cm_free.ok()) << cm_free.status().to_string();
    PlanRequest req;
    auto free_plan = run_planner(*cm_free, *in.m.lg, req);
    ASSERT_TRUE(free_plan.ok()) << free_plan.status().to_string();
    EXPECT_NEAR(plan_expected_error(in.profile, free_plan->plan).value(), unbounded_error, 1e-12)
        << free_plan->plan.notation();
    for (double bound : {0.0, 0.02, 0.04}) {
      Profile bounded = in.profile;
      ASSERT_TRUE(bound_profile_error(&bounded, bound).ok());
      auto cm = CostModel::build(bounded, *in.m.lg);
      ASSERT_TRUE(cm.ok()) << cm.status().to_string();
      for (const char* planner : {"slice", "pipeline", "exhaustive"}) {
        req.planner = planner;
        auto out = run_planner(*cm, *in.m.lg, req);
        ASSERT_TRUE(out.ok()) << planner << ": " << out.status().to_string();
        const double e = plan_expected_error(in.profile, out->plan).value();
        EXPECT_LE(e, bound * (1 + 1e-9)) << planner << " " << out->plan.notation();
      }
      req.planner = "slice";
    }
  }
}

// The budget search: every budget's plan is priced; the kept one is the cheapest whose own
// composed error is within the bound, at least as cheap as the plan of the bound itself.
TEST(ErrorBudgetTest, SearchesTheFilterBudgetForTheCheapestPlanWithinTheBound) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> err(0.0, 0.05), ms(0.2, 0.9);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<double> times;
    std::vector<std::optional<double>> errors;
    for (int l = 0; l < 4; ++l) {
      times.push_back(ms(rng));
      errors.push_back(err(rng));
    }
    Injected in = injected_profile(times, errors);
    std::vector<std::pair<double, double>> priced;  // latency, error of each budget's plan
    auto make_plan = [&](const Profile& p) -> Result<Plan> {
      ASSIGN_OR_RETURN(CostModel cm, CostModel::build(p, *in.m.lg));
      ASSIGN_OR_RETURN(PlanOutcome o, run_planner(cm, *in.m.lg, PlanRequest{}));
      priced.emplace_back(o.plan.estimated_latency_ms,
                          plan_expected_error(in.profile, o.plan).value());
      return o.plan;
    };
    const double bound = 0.03;
    auto best = search_error_budget(in.profile, bound, make_plan);
    ASSERT_TRUE(best.ok()) << best.status().to_string();
    EXPECT_EQ(best->tried, static_cast<int>(priced.size()));
    ASSERT_LT(best->call, best->tried);
    EXPECT_LE(plan_expected_error(in.profile, best->plan).value(), bound * (1 + 1e-9));
    EXPECT_EQ(best->plan.estimated_latency_ms, priced[static_cast<size_t>(best->call)].first);
    for (const auto& [latency, error] : priced) {
      if (error <= bound) {
        EXPECT_LE(best->plan.estimated_latency_ms, latency + 1e-12);
      }
    }
    EXPECT_LE(best->plan.estimated_latency_ms, priced[0].first + 1e-12);
  }
  // A planner failing at the bound itself is the search's error.
  Injected in = injected_profile({0.5, 0.5, 0.5, 0.5}, {0.01, 0.02, 0.0, 0.03});
  auto failed = search_error_budget(in.profile, 0.03, [](const Profile&) -> Result<Plan> {
    return failed_precondition("no device");
  });
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("no device"), std::string::npos);
}

TEST(ErrorBudgetTest, ProfileErrorsRoundTripAndHostileOnesAreRefused) {
  Injected in = injected_profile({0.5, 0.9, 0.5, 0.2}, {0.01, std::nullopt, 0.0, 0.03});
  in.profile.devices[1].model_error = 0.125;
  in.profile.devices[1].layer_output_error = {0.02, std::nullopt, 0.0, 0.5};
  const std::string text = in.profile.to_json_text();
  auto back = Profile::from_json_text(text, "p.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  ASSERT_EQ(back->devices.size(), 2u);
  EXPECT_TRUE(back->devices[0].layer_error.empty());
  EXPECT_FALSE(back->devices[0].model_error.has_value());
  EXPECT_EQ(back->devices[1].layer_error, in.profile.devices[1].layer_error);
  EXPECT_EQ(back->devices[1].model_error, std::optional<double>(0.125));
  EXPECT_EQ(back->devices[1].layer_output_error, in.profile.devices[1].layer_output_error);
  EXPECT_TRUE(back->devices[0].layer_output_error.empty());
  auto refused = [&](const std::function<void(nlohmann::json&)>& edit, const std::string& what) {
    auto j = nlohmann::json::parse(text);
    edit(j);
    auto p = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_FALSE(p.ok()) << "accepted " << what;
    EXPECT_NE(p.status().message().find(what), std::string::npos) << p.status().to_string();
  };
  refused([](nlohmann::json& j) { j["devices"][1]["layer_error"][0] = -0.01; },
          "devices[1].layer_error[0]");
  refused([](nlohmann::json& j) { j["devices"][1]["layer_output_error"][3] = "x"; },
          "devices[1].layer_output_error[3]");
  refused([](nlohmann::json& j) { j["devices"][1]["layer_output_error"] = {0.1}; },
          "devices[1].layer_output_error");
  refused([](nlohmann::json& j) { j["devices"][1]["layer_error"][2] = "x"; },
          "devices[1].layer_error[2]");
  refused([](nlohmann::json& j) { j["devices"][1]["layer_error"][3] = 1e300; },
          "devices[1].layer_error[3]");
  refused(
      [](nlohmann::json& j) {
        j["devices"][1]["layer_error"] = {0.1, 0.2};
      },
      "devices[1].layer_error: has 2 entries");
  refused([](nlohmann::json& j) { j["devices"][1]["layer_error"] = 0.1; },
          "devices[1].layer_error");
  refused([](nlohmann::json& j) { j["devices"][1]["model_error"] = -1; }, "devices[1].model_error");
  // An unknown level: a device name this Tessera cannot read, with errors recorded.
  refused(
      [](nlohmann::json& j) {
        j["devices"][1]["device"] = "reference#int3";
        j["platform"]["devices"][1]["device"] = "reference#int3";
      },
      "reference#int3");
  // NaN is no JSON number: the text is refused where it stands.
  std::string nan_text = text;
  const size_t at = nan_text.find("\"layer_error\"");
  ASSERT_NE(at, std::string::npos);
  const size_t open = nan_text.find('[', at);
  nan_text.replace(open + 1, 0, "NaN, ");
  EXPECT_FALSE(Profile::from_json_text(nan_text, "p.json").ok());
  // Version 2 profiles (before errors were recorded) still load, without errors read.
  auto j = nlohmann::json::parse(text);
  j["version"] = 2;
  auto v2 = Profile::from_json_text(j.dump(), "p.json");
  ASSERT_TRUE(v2.ok()) << v2.status().to_string();
  EXPECT_TRUE(v2->devices[1].layer_error.empty());
}

TEST(ErrorBudgetTest, PlanJsonKeepsTheExpectedErrorAndBound) {
  Plan plan = plan_from_slices(4, {{0, "cpu#int8"}, {2, "cpu"}}).value();
  plan.estimated_error = 0.0375;
  plan.max_error = 0.05;
  auto back = Plan::from_json_text(plan.to_json_text(), "plan.json");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(*back, plan);
  plan.estimated_error.reset();
  plan.max_error.reset();
  back = Plan::from_json_text(plan.to_json_text(), "plan.json");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->estimated_error.has_value());
  auto j = nlohmann::json::parse(plan.to_json_text());
  j["estimate"]["error"] = -0.5;
  auto bad = Plan::from_json_text(j.dump(), "plan.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("estimate.error"), std::string::npos)
      << bad.status().to_string();
}

}  // namespace
}  // namespace tessera
