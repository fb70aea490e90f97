// `tessera plan` and `tessera run --plan` end to end: profile, plan, run, refuse bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"
#include "tests/scheduler/profile_test_util.h"
#include "tests/tools/cli_test_util.h"

namespace tessera {
namespace {

using testing::CommandResult;
using testing::run_cli;

TEST(PlanCli, PlansRunsAndRefuses) {
  const std::string dir = ::testing::TempDir();
  const std::string model = dir + "plan_cli_skip.tsr";
  const std::string profile = dir + "plan_cli_profile.json";
  const std::string plan = dir + "plan_cli_plan.json";
  const std::string trace = dir + "plan_cli_trace.json";
  Graph skip = testing::skip_graph();
  ASSERT_TRUE(skip.infer_shapes().ok());
  ASSERT_TRUE(save_model(skip, model, ModelMetadata{"plan_cli_test", {}}).ok());

  CommandResult r = run_cli("profile " + model + " -o " + profile +
                            " --devices reference,cpu --repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  for (const char* objective : {"latency", "energy"}) {
    r = run_cli("plan " + model + " --profile " + profile + " --objective " + objective + " -o " +
                plan);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("plan (slice, " + std::string(objective)), std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("estimated latency"), std::string::npos) << r.output;
    auto p = Plan::load(plan);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->num_layers, 4);
    EXPECT_NE(r.output.find(p->notation()), std::string::npos) << r.output;
  }

  // The pipeline planner: a streaming plan with its period, and clear refusals.
  for (const char* objective : {"throughput", "energy", "latency"}) {
    r = run_cli("plan " + model + " --profile " + profile + " --planner pipeline --objective " +
                objective + " --stages 2 -o " + plan);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("plan (pipeline, " + std::string(objective) + ", streaming)"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("estimated period"), std::string::npos) << r.output;
    auto p = Plan::load(plan);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->mode, PlanMode::kStreaming);
    EXPECT_EQ(p->stages.size(), 2u);
    EXPECT_GT(p->estimated_period_ms, 0);
  }
  r = run_cli("plan " + model + " --profile " + profile + " --planner pipeline --stages auto");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* bad :
       {"--stages 0", "--stages nine", "--max-period -1", "--max-latency x", "--objective speed"}) {
    r = run_cli("plan " + model + " --profile " + profile + " --planner pipeline " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad;
    const std::string flag = std::string(bad).substr(0, std::string(bad).find(' '));
    EXPECT_NE(r.output.find(flag == "--objective" ? "speed" : flag), std::string::npos)
        << bad << ": " << r.output;
  }
  r = run_cli("plan " + model + " --profile " + profile + " --planner pipeline --max-period 1e-6");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("max period 1e-06 ms: the smallest period is"), std::string::npos)
      << r.output;
  r = run_cli("plan " + model + " --profile " + profile + " --stages 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--planner pipeline only"), std::string::npos) << r.output;

  // Procedure 1 Step 3 on the profiled devices: one stream, every frame against the reference
  // run, the last plan written.
  r = run_cli("plan " + model + " --profile " + profile +
              " --planner split --monitor --window 4 --iterations 2 --queue 2 -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("step 3, iteration 0: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("devices (measured / predicted ms per frame): "), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("each out once and in order; largest relative L2"), std::string::npos)
      << r.output;
  {
    auto p = Plan::load(plan);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->mode, PlanMode::kStreaming);
    EXPECT_EQ(p->queue_capacity, 2);
  }
  for (const char* bad : {"--planner slice --monitor", "--planner split --window 4",
                          "--planner split --monitor --window 1",
                          "--planner split --monitor --input /nonexistent.npy"}) {
    r = run_cli("plan " + model + " --profile " + profile + " " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad << ": " << r.output;
  }

  // The ga planner: CSDF actors with phases, the same plan for the same seed, clear refusals,
  // and the plan streams.
  const std::string plan2 = dir + "plan_cli_plan2.json";
  for (const std::string& out : {plan, plan2}) {
    r = run_cli("plan " + model + " --profile " + profile +
                " --planner ga --seed 5 --ga-objective max --ga-comm cross -o " + out);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("ga: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("csdf: a0"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("plan (ga, max, streaming)"), std::string::npos) << r.output;
  }
  auto ga1 = Plan::load(plan), ga2 = Plan::load(plan2);
  ASSERT_TRUE(ga1.ok() && ga2.ok());
  EXPECT_EQ(ga1->notation(), ga2->notation());
  EXPECT_EQ(ga1->planner, "ga");
  r = run_cli("run " + model + " --plan " + plan + " --stream 8 --warmup 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("throughput"), std::string::npos) << r.output;
  for (const char* bad : {"--ga-comm some", "--ga-objective fast", "--ga-init best",
                          "--ga-population 1", "--seed -2"}) {
    r = run_cli("plan " + model + " --profile " + profile + " --planner ga " + bad);
    EXPECT_EQ(r.exit_code, 1) << bad << ": " << r.output;
  }
  r = run_cli("plan " + model + " --profile " + profile + " --seed 2");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--planner ga only"), std::string::npos) << r.output;

  // The last plan written (a pipeline) is streaming; run the sequential slice plan below.
  r = run_cli("plan " + model + " --profile " + profile + " -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli("run " + model + " --plan " + plan + " --repeat 2 --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("measured ms"), std::string::npos) << r.output;
  std::ifstream tf(trace);
  std::string text((std::istreambuf_iterator<char>(tf)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("traceEvents"), std::string::npos);

  // A hand-written plan over two devices runs too, when it names the model's hash or the caller
  // says it may run without one.
  Plan manual = plan_from_slices(4, {{0, "cpu"}, {2, "reference"}}).value();
  ASSERT_TRUE(manual.save(plan).ok());
  r = run_cli("run " + model + " --plan " + plan);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("the plan names no model hash"), std::string::npos) << r.output;
  r = run_cli("run " + model + " --plan " + plan + " --allow-unhashed-plan");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cpu[0] reference[2]"), std::string::npos) << r.output;

  // Refusals: an absent device in the plan, a device the profile lacks, a bad objective, a plan
  // for another model.
  manual = plan_from_slices(4, {{0, "cpu"}, {2, "opencl:97"}}).value();
  ASSERT_TRUE(manual.save(plan).ok());
  r = run_cli("run " + model + " --plan " + plan + " --allow-unhashed-plan");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("stage 1 (opencl:97[2])"), std::string::npos) << r.output;
  r = run_cli("plan " + model + " --profile " + profile + " --devices npu:0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("no device 'npu:0'"), std::string::npos) << r.output;
  r = run_cli("plan " + model + " --profile " + profile + " --objective speed");
  EXPECT_EQ(r.exit_code, 1);
  manual.model_hash = "fnv1a64:0000000000000000";
  manual.stages[1].placement = Placement::on("reference");
  ASSERT_TRUE(manual.save(plan).ok());
  r = run_cli("run " + model + " --plan " + plan);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("the plan is for model"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessera
