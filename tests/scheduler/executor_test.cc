#include "scheduler/executor/executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <optional>
#include <random>
#include <tuple>

#include "backends/registry.h"
#include "tests/scheduler/profile_test_util.h"
#include "tests/scoped_env.h"

namespace tessera {
namespace {

using testing::random_inputs;

std::vector<Tensor> run_plan(const LayerGraph& lg, const Plan& p, std::span<const Tensor> in) {
  auto ex = Executor::create(lg, p);
  EXPECT_TRUE(ex.ok()) << p.notation() << ": " << ex.status().to_string();
  if (!ex.ok()) return {};
  std::vector<Tensor> out;
  Status s = (*ex)->run(in, &out);
  EXPECT_TRUE(s.ok()) << s.to_string();
  // The steps cover the stages in order, one run each.
  const auto& steps = (*ex)->steps();
  EXPECT_EQ((*ex)->step_runs().size(), steps.size());
  int next = 0;
  for (const ExecutorStep& step : steps) {
    EXPECT_EQ(step.first_stage, next);
    next = step.last_stage + 1;
  }
  EXPECT_EQ(next, static_cast<int>(p.stages.size()));
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

// Executor::create refuses `p` with a message holding every one of `parts`; returns why.
Status expect_refused(const LayerGraph& lg, const Plan& p,
                      std::initializer_list<std::string> parts) {
  auto ex = Executor::create(lg, p);
  EXPECT_FALSE(ex.ok()) << p.notation();
  if (ex.ok()) return Status();
  for (const std::string& part : parts) {
    EXPECT_NE(ex.status().to_string().find(part), std::string::npos)
        << "'" << part << "' not in: " << ex.status().to_string();
  }
  return ex.status();
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
  ASSERT_EQ((*ex)->step_runs().size(), 8u);
  // Stage 2 (the Add) reads the relu output and x: both come in.
  EXPECT_EQ((*ex)->step_runs()[2].bytes_in, 2u * 4 * 32 * 4);
  EXPECT_EQ((*ex)->mean_step_ms().size(), 4u);
  const std::string trace = (*ex)->chrome_trace_json();
  EXPECT_NE(trace.find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(trace.find("stage 2 reference[2..2]"), std::string::npos);
  EXPECT_NE(trace.find("\"thread_name\""), std::string::npos);
}

TEST(ExecutorTest, StepRunHistoryKeepsTheMostRecentRuns) {
  auto m = testing::make_model(testing::skip_graph());
  std::mt19937 rng(9);
  std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  Plan two = plan_from_slices(4, {{0, "reference"}, {2, "cpu"}}).value();
  ExecutorOptions options;
  options.step_run_history = 5;  // two steps per frame: 2.5 frames
  auto ex = Executor::create(*m.lg, two, options);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::vector<Tensor> out;
  for (int i = 0; i < 7; ++i) ASSERT_TRUE((*ex)->run(in, &out).ok());
  const std::vector<StepRun> kept = (*ex)->step_runs();
  ASSERT_EQ(kept.size(), 5u);
  EXPECT_EQ((*ex)->step_runs_dropped(), 9u);
  EXPECT_EQ(kept.front().run, 4);  // frame 4's second step, then frames 5 and 6
  EXPECT_EQ(kept.front().step, 1);
  EXPECT_EQ(kept.back().run, 6);
  const std::vector<StepRun> recent = (*ex)->step_runs(6);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].step, 0);
  EXPECT_EQ(recent[1].step, 1);
  EXPECT_TRUE((*ex)->step_runs(7).empty());
}

TEST(ExecutorTest, CompileMemoryEstimateCountsWeightsOnceAndThePeakOfLiveValues) {
  auto m = testing::make_model(testing::skip_graph());
  const Graph& g = m.lg->graph();
  // x, mm, r, a, y are 512 bytes each, w 4096. mm is freed after relu, x and r after add.
  const std::vector<NodeId> all = {0, 1, 2, 3};
  CompileMemory whole = compile_memory_estimate(g, all);
  EXPECT_EQ(whole.weight_bytes, 4096u);
  EXPECT_EQ(whole.activation_bytes, 3u * 512);  // x, mm, r live while relu makes r
  const std::vector<NodeId> middle = {1, 2};    // reads mm and x; a leaves for sigmoid
  CompileMemory mid = compile_memory_estimate(g, middle);
  EXPECT_EQ(mid.weight_bytes, 0u);
  EXPECT_EQ(mid.activation_bytes, 3u * 512);

  auto dev = open_device("reference");
  ASSERT_TRUE(dev.ok());
  CompileOptions tight;
  tight.memory_budget = whole.total() - 1;
  auto refused = (*dev)->compile(g, all, tight);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  const std::string msg = refused.status().to_string();
  EXPECT_NE(msg.find("weights 4"), std::string::npos) << msg;
  EXPECT_NE(msg.find("over the memory budget"), std::string::npos) << msg;
  tight.memory_budget = whole.total();
  EXPECT_TRUE((*dev)->compile(g, all, tight).ok());
}

TEST(ExecutorTest, BudgetsRefuseAModelBeforeCompilingIt) {
  auto m = testing::make_model(testing::skip_graph());
  Plan p = plan_from_slices(4, {{0, "reference"}, {2, "cpu"}}).value();
  ExecutorOptions small;
  small.compile.memory_budget = 1024;
  auto ex = Executor::create(*m.lg, p, small);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(ex.status().to_string().find("the model needs about"), std::string::npos)
      << ex.status().to_string();
  ExecutorOptions work;
  work.max_flops = m.lg->total_flops() / 2;
  ex = Executor::create(*m.lg, p, work);
  ASSERT_FALSE(ex.ok());
  EXPECT_EQ(ex.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(ex.status().to_string().find("work budget"), std::string::npos);
  work.max_flops = m.lg->total_flops();
  EXPECT_TRUE(Executor::create(*m.lg, p, work).ok());
}

TEST(ExecutorTest, AdjacentSameDeviceStagesRunAsOneProgram) {
  auto m = testing::make_model(testing::skip_graph());
  std::mt19937 rng(7);
  std::vector<Tensor> in = random_inputs(m.lg->graph(), rng);
  std::vector<Tensor> expected =
      run_plan(*m.lg, plan_from_slices(4, {{0, "reference"}}).value(), in);
  Plan p =
      plan_from_slices(4, {{0, "cpu"}, {1, "cpu"}, {2, "reference"}, {3, "reference"}}).value();
  auto merged = Executor::create(*m.lg, p);
  ASSERT_TRUE(merged.ok()) << merged.status().to_string();
  ASSERT_EQ((*merged)->steps().size(), 2u);
  EXPECT_EQ((*merged)->steps()[0].first_stage, 0);
  EXPECT_EQ((*merged)->steps()[0].last_stage, 1);
  EXPECT_EQ((*merged)->steps()[1].device, "reference");
  std::vector<Tensor> out;
  ASSERT_TRUE((*merged)->run(in, &out).ok());
  expect_close(out, expected, p);
  // Only the Relu output leaves the cpu program: the MatMul output stays inside it.
  EXPECT_EQ((*merged)->step_runs()[0].bytes_out, 4u * 32 * 4);
  EXPECT_NE((*merged)->chrome_trace_json().find("stages 0-1 cpu[0..1]"), std::string::npos);

  ExecutorOptions separate;
  separate.merge_same_device = false;
  auto unmerged = Executor::create(*m.lg, p, separate);
  ASSERT_TRUE(unmerged.ok()) << unmerged.status().to_string();
  ASSERT_EQ((*unmerged)->steps().size(), 4u);
  ASSERT_TRUE((*unmerged)->run(in, &out).ok());
  expect_close(out, expected, p);
  EXPECT_EQ((*unmerged)->step_runs()[0].bytes_out, 4u * 32 * 4);
  EXPECT_EQ((*unmerged)->step_runs()[1].bytes_in, 4u * 32 * 4);

  // Same device at another DVFS level is a boundary of its own (a governor hook sits there).
  Plan levels = plan_from_slices(4, {{0, "cpu"}, {2, "cpu@1000"}}).value();
  auto lv = Executor::create(*m.lg, levels);
  ASSERT_TRUE(lv.ok()) << lv.status().to_string();
  EXPECT_EQ((*lv)->steps().size(), 2u);

  // Same device, other packing: a boundary too (each hop packs as its own stage says; the first
  // stage's packing used to win for both).
  for (const auto& [a, b, steps] : std::vector<std::tuple<std::string, std::string, size_t>>{
           {"isq4+bitshuffle+lz4", "isq8+bitshuffle+lz4", 3u},
           {"", "isq8+bitshuffle+lz4", 3u},
           {"isq8+bitshuffle+lz4", "isq8+bitshuffle+lz4", 2u}}) {
    Plan packed = plan_from_slices(4, {{0, "cpu"}, {2, "cpu"}, {3, "reference"}}).value();
    packed.stages[0].packing = a;
    packed.stages[1].packing = b;
    auto pk = Executor::create(*m.lg, packed);
    ASSERT_TRUE(pk.ok()) << pk.status().to_string();
    ASSERT_EQ((*pk)->steps().size(), steps) << "'" << a << "' then '" << b << "'";
    if (steps == 3u) {
      EXPECT_EQ((*pk)->steps()[0].last_stage, 0);
      EXPECT_EQ((*pk)->steps()[1].first_stage, 1);
    }
    ASSERT_TRUE((*pk)->run(in, &out).ok());
    expect_close(out, expected, packed);
  }
}

TEST(ExecutorTest, OutputsOfEarlierRunsAreNotOverwritten) {
  // Boundary tensors are reused across runs; the model outputs handed out must not be.
  auto m = testing::make_model(testing::skip_graph());
  std::mt19937 rng(3);
  std::vector<Tensor> in1 = random_inputs(m.lg->graph(), rng);
  std::vector<Tensor> in2 = random_inputs(m.lg->graph(), rng);
  Plan ref = plan_from_slices(4, {{0, "reference"}}).value();
  std::vector<Tensor> want1 = run_plan(*m.lg, ref, in1);
  std::vector<Tensor> want2 = run_plan(*m.lg, ref, in2);
  Plan p = plan_from_slices(4, {{0, "reference"}, {1, "cpu"}, {3, "reference"}}).value();
  auto ex = Executor::create(*m.lg, p);
  ASSERT_TRUE(ex.ok()) << ex.status().to_string();
  std::vector<Tensor> out1, out2;
  ASSERT_TRUE((*ex)->run(in1, &out1).ok());
  ASSERT_TRUE((*ex)->run(in2, &out2).ok());
  expect_close(out1, want1, p);
  expect_close(out2, want2, p);
}

bool npu_required() {
  const char* r = std::getenv("TESSERA_REQUIRE_NPU");
  return r != nullptr && *r != '\0' && std::string(r) != "0";
}

using testing::ScopedEnv;

TEST(ExecutorTest, DeviceConstraintsAreRefusedNamingTheStage) {
  if (!open_device("npu:0").ok()) {
    if (npu_required()) FAIL() << "TESSERA_REQUIRE_NPU set but npu:0 does not open";
    GTEST_SKIP() << "npu:0 is not available";
  }
  // The reference NPU does not run Sigmoid (layer 3).
  auto m = testing::make_model(testing::skip_graph());
  Plan sig = plan_from_slices(4, {{0, "reference"}, {1, "npu:0"}}).value();
  (void)expect_refused(*m.lg, sig, {"stage 1 (npu:0[1])", "sigmoid"});

  // A 1024 x 1024 fully connected layer holds 2 MB of fp16 weights: over a 1 MB cap.
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 1024}});
  g.inputs().push_back(x);
  ValueId w = g.add_constant(
      "w", Tensor::from_floats(Shape{1024, 1024}, std::vector<float>(1024 * 1024, 0.001f)));
  ValueId h = g.add_value("h"), y = g.add_value("y");
  Attributes trans_b;
  trans_b.set("transB", int64_t{1});
  g.add_node(Node{"big_gemm", OpKind::kGemm, trans_b, {x, w}, {h}});
  g.add_node(Node{"relu", OpKind::kRelu, {}, {h}, {y}});
  g.outputs() = {y};
  auto big = testing::make_model(std::move(g));
  ScopedEnv cap("TESSERA_NPU_REF_MEMORY_MB", "1");
  Plan over = plan_from_slices(2, {{0, "npu:0"}, {1, "reference"}}).value();
  EXPECT_EQ(expect_refused(*big.lg, over, {"stage 0 (npu:0[0])"}).code(),
            StatusCode::kResourceExhausted);
  // The Relu alone fits.
  Plan fits = plan_from_slices(2, {{0, "reference"}, {1, "npu:0"}}).value();
  EXPECT_TRUE(Executor::create(*big.lg, fits).ok());

  // Two 700 x 700 layers fit the cap one at a time (0.98 MB of fp16 weights each) but not
  // together: the merged program is refused, so the two stages run as two programs.
  Graph g2;
  ValueId cur = g2.add_value("x", TensorInfo{DType::kF32, Shape{1, 700}});
  g2.inputs().push_back(cur);
  for (int i = 0; i < 2; ++i) {
    ValueId wi = g2.add_constant(
        "w" + std::to_string(i),
        Tensor::from_floats(Shape{700, 700}, std::vector<float>(700 * 700, 0.001f)));
    ValueId out = g2.add_value("h" + std::to_string(i));
    g2.add_node(Node{"fc" + std::to_string(i), OpKind::kGemm, trans_b, {cur, wi}, {out}});
    cur = out;
  }
  g2.outputs() = {cur};
  auto two = testing::make_model(std::move(g2));
  Plan split = plan_from_slices(2, {{0, "npu:0"}, {1, "npu:0"}}).value();
  auto sp = Executor::create(*two.lg, split);
  ASSERT_TRUE(sp.ok()) << sp.status().to_string();
  EXPECT_EQ((*sp)->steps().size(), 2u);
  std::mt19937 rng(9);
  std::vector<Tensor> in = random_inputs(two.lg->graph(), rng);
  std::vector<Tensor> out;
  ASSERT_TRUE((*sp)->run(in, &out).ok());
  std::vector<Tensor> want = run_plan(*two.lg, plan_from_slices(2, {{0, "reference"}}).value(), in);
  ASSERT_EQ(out.size(), 1u);
  for (size_t k = 0; k < want[0].span<float>().size(); ++k) {
    ASSERT_NEAR(out[0].span<float>()[k], want[0].span<float>()[k],
                1e-2f * (1 + std::abs(want[0].span<float>()[k])));  // fp16 on the NPU
  }
}

TEST(ExecutorTest, BadPlansNameTheStage) {
  auto m = testing::make_model(testing::skip_graph());
  Plan absent = plan_from_slices(4, {{0, "reference"}, {2, "opencl:97"}}).value();
  (void)expect_refused(*m.lg, absent, {"stage 1 (opencl:97[2])"});

  // Layer 2 (Add) placed before layer 1 (Relu) that it reads.
  Plan order;
  order.num_layers = 4;
  Stage s0, s1;
  s0.layers = {0, 2, 3};
  s0.placement = Placement::on("reference");
  s1.layers = {1};
  s1.placement = Placement::on("reference");
  order.stages = {s0, s1};
  (void)expect_refused(*m.lg, order, {"stage 0 (reference{0,2,3})", "later stage 1"});

  Plan wrong_size = plan_from_slices(3, {{0, "reference"}}).value();
  EXPECT_FALSE(Executor::create(*m.lg, wrong_size).ok());

  Plan overlap = plan_from_slices(4, {{0, "reference"}, {2, "cpu"}}).value();
  overlap.stages[1].layers = {1, 2, 3};
  (void)expect_refused(*m.lg, overlap, {"stage 1 (cpu[1]): layer 1 is also in stage 0"});

  Plan missing = plan_from_slices(4, {{0, "reference"}, {2, "cpu"}}).value();
  missing.stages[1].layers = {3};
  (void)expect_refused(*m.lg, missing, {"layer 2 is in no stage"});

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
