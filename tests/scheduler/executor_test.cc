#include "scheduler/executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/registry.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

std::vector<Tensor> random_inputs(const Graph& g, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<Tensor> in;
  for (ValueId v : g.inputs()) {
    Tensor t = Tensor::create(g.value(v).info.dtype, g.value(v).info.shape).value();
    for (float& x : t.span<float>()) x = u(rng);
    in.push_back(t);
  }
  return in;
}

std::vector<Tensor> run_plan(const LayerGraph& lg, const Plan& p, std::span<const Tensor> in) {
  auto ex = Executor::create(lg, p);
  EXPECT_TRUE(ex.ok()) << p.notation() << ": " << ex.status().to_string();
  if (!ex.ok()) return {};
  std::vector<Tensor> out;
  Status s = (*ex)->run(in, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ((*ex)->stage_runs().size(), p.stages.size());
  return out;
}

void expect_close(const std::vector<Tensor>& a, const std::vector<Tensor>& b, const Plan& p) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape());
    auto x = a[i].span<float>();
    auto y = b[i].span<float>();
    for (size_t k = 0; k < x.size(); ++k) {
      ASSERT_NEAR(x[k], y[k], 1e-4f * (1 + std::abs(y[k]))) << p.notation() << " output " << i;
    }
  }
}

// Random contiguous plans over three devices; every plan gives the reference outputs.
TEST(ExecutorTest, RandomPlansMatchTheReferenceRun) {
  std::vector<std::string> devices = {"reference", "cpu", "cpu:0"};
  for (const std::string& d : devices) {
    if (!open_device(d).ok()) GTEST_SKIP() << d << " is not available";
  }
  std::mt19937 rng(11);
  int graphs = 0;
  for (Graph g : {testing::skip_graph(), testing::matmul_chain(7)}) {
    auto m = testing::make_model(std::move(g));
    const LayerGraph& lg = *m.lg;
    const int L = lg.num_layers();
    std::vector<Tensor> in = random_inputs(lg.graph(), rng);
    Plan ref = plan_from_slices(L, {{0, "reference"}}).value();
    std::vector<Tensor> expected = run_plan(lg, ref, in);
    ASSERT_FALSE(expected.empty());
    for (int trial = 0; trial < 25; ++trial) {
      std::vector<std::pair<int, std::string>> starts = {{0, devices[rng() % 3]}};
      for (int l = 1; l < L; ++l) {
        if (rng() % 2) starts.emplace_back(l, devices[rng() % 3]);
      }
      Plan p = plan_from_slices(L, starts).value();
      expect_close(run_plan(lg, p, in), expected, p);
    }
    ++graphs;
  }
  EXPECT_EQ(graphs, 2);
}

TEST(ExecutorTest, SkipConnectionCrossesSeveralStages) {
  // x feeds layer 0 and layer 2: with a stage per layer it must survive two boundaries.
  auto m = testing::make_model(testing::skip_graph());
  std::mt19937 rng(5);
  std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  Plan one = plan_from_slices(4, {{0, "reference"}}).value();
  Plan four =
      plan_from_slices(4, {{0, "reference"}, {1, "cpu"}, {2, "reference"}, {3, "cpu"}}).value();
  auto ex = Executor::create(*m.lg, four);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::vector<Tensor> out;
  ASSERT_TRUE((*ex)->run(in, &out).ok());
  ASSERT_TRUE((*ex)->run(in, &out).ok());
  expect_close(out, run_plan(*m.lg, one, in), four);
  ASSERT_EQ((*ex)->stage_runs().size(), 8u);
  // Stage 2 (the Add) reads the relu output and x: both come in.
  EXPECT_EQ((*ex)->stage_runs()[2].bytes_in, 2u * 4 * 32 * 4);
  EXPECT_EQ((*ex)->mean_stage_ms().size(), 4u);
  const std::string trace = (*ex)->chrome_trace_json();
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(trace.find("stage 2 reference[2..2]"), std::string::npos);
  EXPECT_NE(trace.find("\"thread_name\""), std::string::npos);
}

TEST(ExecutorTest, BadPlansNameTheStage) {
  auto m = testing::make_model(testing::skip_graph());
  Plan absent = plan_from_slices(4, {{0, "reference"}, {2, "opencl:97"}}).value();
  auto a = Executor::create(*m.lg, absent);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().to_string().find("stage 1 (opencl:97[2])"), std::string::npos)
      << a.status().to_string();

  // Layer 2 (Add) placed before layer 1 (Relu) that it reads.
  Plan order;
  order.num_layers = 4;
  Stage s0, s1;
  s0.layers = {0, 2, 3};
  s0.placement = Placement::on("reference");
  s1.layers = {1};
  s1.placement = Placement::on("reference");
  order.stages = {s0, s1};
  auto o = Executor::create(*m.lg, order);
  ASSERT_FALSE(o.ok());
  EXPECT_NE(o.status().to_string().find("stage 0 (reference[0])"), std::string::npos)
      << o.status().to_string();
  EXPECT_NE(o.status().to_string().find("later stage 1"), std::string::npos);

  Plan missing = plan_from_slices(3, {{0, "reference"}}).value();
  EXPECT_FALSE(Executor::create(*m.lg, missing).ok());

  auto ok = Executor::create(*m.lg, plan_from_slices(4, {{0, "reference"}}).value());
  ASSERT_TRUE(ok.ok());
  std::vector<Tensor> out;
  std::vector<Tensor> wrong = {Tensor::create(DType::kF32, Shape{4, 31}).value()};
  Status s = (*ok)->run(wrong, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.to_string().find("input 'x'"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace tessera
