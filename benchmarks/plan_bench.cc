// Planning time of the slicing planners (seed 000 reports 0.15 ms for latency over 4 devices and
// 0.82 ms for energy over 25 virtual devices; the goals here are <= 0.1 ms for 50 layers x 4
// devices and <= 1 ms for 200 layers x 25 virtual devices).
//
//   BM_Plan/<planner>/<objective>/<layers>x<devices>x<levels>
//       make_slice_plan on a MatMul chain of <layers> layers, priced by a CostModel over a
//       synthetic profile of <devices> devices with <levels> DVFS levels each (latency plans
//       over the top levels, eq. 6; energy over every level, eq. 7). The time is what
//       `tessera plan` spends planning: building the SliceTable, the search, and the Plan with
//       its estimates. Counter `priced`: slice costs the search evaluated (noise-free work).
//   BM_PlanByQuery/<planner>/<objective>/<layers>x<devices>x<levels>
//       the same search over CostModelSlices, one virtual CostModel query per slice (the path
//       before the SliceTable; kept for synthetic instances and as the exhaustive search's
//       pricing). `priced`: queries made.
//   BM_PlanModel/<model>
//       the slice planner (latency) on a real model's LayerGraph (TESSERA_MODEL_DIR, as
//       exported by scripts/export_models.py) over four devices with synthetic per-layer costs.
//   BM_PipelinePlan/<objective>/<stages>/<layers>x<devices>x<levels>
//       make_pipeline_plan (seed 001: the search, then price_plan) on a MatMul chain over the
//       synthetic profile above; <stages> 0 is `--stages auto` (the stopping rule), else exactly
//       that many; <unsupported> 10: one layer in ten cannot run on each accelerator (the
//       profile above), 0: every device runs every layer. Seed 001's largest model,
//       Inception-v3, has 122 layers; the goal is < 1 s for 122 layers x 4 devices. Counters:
//       `visited` (stage candidates the search priced) and `stages` (of the plan).
//   BM_CostModelBuild/<layers>x<devices>x<levels>
//       building the CostModel (once per profile, before any planning).
//   BM_ExecutorStages/<model>/<device>/<stages>/<merged>
//       one Executor::run of a plan cutting the model into <stages> equal stages, all on
//       <device>: merged (the default) runs them as one program, unmerged pays every boundary
//       through host memory. The gap is the per-stage overhead a same-device boundary would cost.
//   BM_ExecutorOverhead/<model>/<device>
//       the executor's cost on a one-stage plan: each iteration runs the whole-model Program
//       directly (what a device Session did before it ran on the executor) and Executor::run of
//       the one-stage plan, alternating which goes first. Counters: the median ms of each and
//       `ratio` = executor / program (the issue's bound: <= 1.02).
//   BM_OffloadDecision/<cuts>x<bits>
//       the offload planner's decision at run time (seed 002 Algorithm 2 lines 1-8: the metrics
//       of every (cut, bits) candidate under a scaling factor and a link estimate, two hard
//       constraints, two soft targets) over candidates profiled once, on a MatMul chain of
//       <cuts> layers with <bits> bitwidths per cut (and the raw hop). Goal <= 1 ms for 100 x 8
//       (seed 002: 11-14 ms on a Jetson CPU). Counter `candidates`.
//   BM_OffloadPlan/<cuts>x<bits>
//       plan_offload end to end: the candidates from the CostModel and the cut profile, the
//       decision, the two-stage Plan and its pricing.
//
// Run: build/benchmarks/tessera_plan_bench --benchmark_repetitions=5
//          --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "backends/registry.h"
#include "graph/onnx/onnx_import.h"
#include "scheduler/cost_model.h"
#include "scheduler/executor/executor.h"
#include "scheduler/planners/offload.h"
#include "scheduler/planners/pipeline.h"
#include "scheduler/planners/slice.h"
#include "tests/scheduler/profile_test_util.h"

namespace tessera {
namespace {

// A platform of `devices` devices with `levels` DVFS levels each (600..2000 MHz), the first a
// CPU, the rest accelerators.
Platform synthetic_platform(int devices, int levels) {
  std::string json =
      R"({"format": "tessera-platform", "version": 1, "name": "synthetic", "devices": [)";
  for (int d = 0; d < devices; ++d) {
    const std::string name = d == 0 ? "cpu" : "npu:" + std::to_string(d - 1);
    json += std::string(d ? "," : "") + R"({"id": "d)" + std::to_string(d) + R"(", "kind": ")" +
            (d == 0 ? "cpu" : "npu") + R"(", "device": ")" + name +
            R"(", "memory_bytes": 4000000000, "dynamic_w": )" + std::to_string(1.0 + d) +
            R"(, "dvfs": [)";
    for (int k = 0; k < levels; ++k) {
      const int mhz = levels == 1 ? 0 : 600 + (1400 * k) / (levels - 1);
      json += std::string(k ? "," : "") + R"({"mhz": )" + std::to_string(mhz) + R"(, "mv": )" +
              std::to_string(levels == 1 ? 0 : 700 + 50 * k) + R"(, "static_w": )" +
              std::to_string(0.1 + 0.05 * k) + "}";
    }
    json += "]}";
  }
  json += "]}";
  return Platform::from_json_text(json, "synthetic").value();
}

// Per-layer times at the lowest and highest level of every device, random but seeded; one layer
// in `unsupported_every` (default ten; 0: none) cannot run on each accelerator, so the
// constraints take part.
Profile synthetic_profile(const LayerGraph& lg, int devices, int levels, uint32_t seed,
                          int unsupported_every = 10) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0.05, 2.0);
  Profile p;
  p.model_name = "synthetic";
  p.model_hash = "h";
  p.describe_model(lg);
  p.platform = synthetic_platform(devices, levels);
  for (const PlatformDevice& pd : p.platform.devices) {
    DeviceProfile dp;
    dp.device = pd.device;
    std::vector<int> measured = {pd.dvfs.front().mhz};
    if (pd.dvfs.size() > 1) measured.push_back(pd.dvfs.back().mhz);
    for (int mhz : measured) {
      LevelProfile lv;
      lv.mhz = mhz;
      const double slow = mhz > 0 ? 2000.0 / mhz : 1.0;
      for (int l = 0; l < lg.num_layers(); ++l) lv.layer_ms.push_back(u(rng) * slow);
      lv.upload = testing::line(1e-6 * u(rng), 0.05 * u(rng));
      lv.download = testing::line(1e-6 * u(rng), 0.05 * u(rng));
      dp.levels.push_back(lv);
    }
    if (dp.device != "cpu") {
      for (int l = 0; l < lg.num_layers(); ++l) {
        if (unsupported_every > 0 && rng() % static_cast<unsigned>(unsupported_every) == 0) {
          dp.unsupported[l] = "op";
        }
      }
    }
    p.devices.push_back(dp);
  }
  return p;
}

// make_slice_plan's `preferred` order for BM_Plan: npu:0, then cpu, as options of `vds`.
std::vector<int> preference_order(const CostModel& cm, const std::vector<int>& vds) {
  std::vector<int> order;
  for (const char* name : {"npu:0", "cpu"}) {
    const int v = cm.find(name).value();
    order.push_back(static_cast<int>(std::find(vds.begin(), vds.end(), v) - vds.begin()));
  }
  return order;
}

void BM_Plan(benchmark::State& state, const std::string& planner, Objective objective) {
  const int layers = static_cast<int>(state.range(0));
  const int devices = static_cast<int>(state.range(1));
  const int levels = static_cast<int>(state.range(2));
  auto m = testing::make_model(testing::matmul_chain(layers));
  Profile p = synthetic_profile(*m.lg, devices, levels, 1);
  CostModel cm = CostModel::build(p, *m.lg).value();
  SlicePlanRequest req;
  req.planner = planner;
  req.objective = objective;
  req.preference = {"npu:0", "cpu"};
  for (auto _ : state) {
    auto plan = make_slice_plan(cm, req);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().to_string().c_str());
      break;
    }
    benchmark::DoNotOptimize(plan->estimated_latency_ms);
  }
  const std::vector<int> vds =
      objective == Objective::kLatency ? cm.latency_devices() : cm.energy_devices();
  state.counters["options"] = static_cast<double>(vds.size());
  const SliceTable table = cm.slice_table(vds, objective);
  const Slicing s = planner == "hca" ? plan_slice_hca(table)
                    : planner == "preferred"
                        ? plan_slice_preferred(table, preference_order(cm, vds))
                        : plan_slice_dp(table);
  state.counters["priced"] = static_cast<double>(s.priced);
}

// The search alone over the per-query CostModelSlices.
void BM_PlanByQuery(benchmark::State& state, const std::string& planner, Objective objective) {
  const int layers = static_cast<int>(state.range(0));
  auto m = testing::make_model(testing::matmul_chain(layers));
  Profile p = synthetic_profile(*m.lg, static_cast<int>(state.range(1)),
                                static_cast<int>(state.range(2)), 1);
  CostModel cm = CostModel::build(p, *m.lg).value();
  const std::vector<int> vds =
      objective == Objective::kLatency ? cm.latency_devices() : cm.energy_devices();
  auto search = [&] {
    CostModelSlices costs(cm, objective, vds);
    if (planner == "hca") return plan_slice_hca(costs);
    if (planner == "preferred") return plan_slice_preferred(costs, preference_order(cm, vds));
    return plan_slice_dp(costs);
  };
  for (auto _ : state) {
    Slicing s = search();
    benchmark::DoNotOptimize(s.cost);
  }
  state.counters["priced"] = static_cast<double>(search().priced);
}

void BM_PipelinePlan(benchmark::State& state, PipelineObjective objective) {
  const int layers = static_cast<int>(state.range(1));
  auto m = testing::make_model(testing::matmul_chain(layers));
  Profile p =
      synthetic_profile(*m.lg, static_cast<int>(state.range(2)), static_cast<int>(state.range(3)),
                        1, static_cast<int>(state.range(4)));
  CostModel cm = CostModel::build(p, *m.lg).value();
  PipelineRequest req;
  req.objective = objective;
  req.stages = static_cast<int>(state.range(0));
  for (auto _ : state) {
    auto plan = make_pipeline_plan(cm, *m.lg, req);
    if (!plan.ok()) {
      state.SkipWithError(plan.status().to_string().c_str());
      return;
    }
    benchmark::DoNotOptimize(plan->estimated_period_ms);
  }
  auto search = plan_pipeline(cm, *m.lg, req);
  state.counters["visited"] = static_cast<double>(search->visited);
  state.counters["stages"] = static_cast<double>(search->stages.size());
}

void BM_CostModelBuild(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0));
  auto m = testing::make_model(testing::matmul_chain(layers));
  Profile p = synthetic_profile(*m.lg, static_cast<int>(state.range(1)),
                                static_cast<int>(state.range(2)), 1);
  for (auto _ : state) {
    auto cm = CostModel::build(p, *m.lg);
    benchmark::DoNotOptimize(cm.ok());
  }
}

Result<LayerGraph> load_model(const std::string& model, ImportedModel* keep) {
  const char* dir = std::getenv("TESSERA_MODEL_DIR");
  const std::string path = std::string(dir ? dir : "") + "/" + model + ".onnx";
  if (dir == nullptr || !std::filesystem::exists(path)) {
    return not_found("no " + path + " (set TESSERA_MODEL_DIR)");
  }
  ASSIGN_OR_RETURN(*keep, convert_onnx(path));
  return LayerGraph::build(keep->graph);
}

void BM_PlanModel(benchmark::State& state, const std::string& model) {
  ImportedModel imported;
  auto lg = load_model(model, &imported);
  if (!lg.ok()) {
    state.SkipWithError(lg.status().to_string().c_str());
    return;
  }
  Profile p = synthetic_profile(*lg, 4, 1, 2);
  CostModel cm = CostModel::build(p, *lg).value();
  SlicePlanRequest req;
  for (auto _ : state) {
    auto plan = make_slice_plan(cm, req);
    benchmark::DoNotOptimize(plan.ok());
  }
  state.counters["layers"] = lg->num_layers();
}

void BM_ExecutorStages(benchmark::State& state, const std::string& model,
                       const std::string& device) {
  const int stages = static_cast<int>(state.range(0));
  ImportedModel imported;
  auto lg = load_model(model, &imported);
  if (!lg.ok()) {
    state.SkipWithError(lg.status().to_string().c_str());
    return;
  }
  const int L = lg->num_layers();
  std::vector<std::pair<int, std::string>> starts;
  for (int s = 0; s < stages; ++s) starts.emplace_back(s * L / stages, device);
  Plan plan = plan_from_slices(L, starts).value();
  ExecutorOptions options;
  options.merge_same_device = state.range(1) != 0;
  auto ex = Executor::create(*lg, plan, options);
  if (!ex.ok()) {
    state.SkipWithError(ex.status().to_string().c_str());
    return;
  }
  std::vector<Tensor> inputs;
  for (ValueId v : lg->graph().inputs()) {
    const TensorInfo& info = lg->graph().value(v).info;
    inputs.push_back(Tensor::create(info.dtype, info.shape).value());
  }
  std::vector<Tensor> outputs;
  for (auto _ : state) {
    Status s = (*ex)->run(inputs, &outputs);
    if (!s.ok()) {
      state.SkipWithError(s.to_string().c_str());
      break;
    }
  }
  state.counters["steps"] = static_cast<double>((*ex)->steps().size());
}

void BM_ExecutorOverhead(benchmark::State& state, const std::string& model,
                         const std::string& device) {
  ImportedModel imported;
  auto lg = load_model(model, &imported);
  if (!lg.ok()) return state.SkipWithError(lg.status().to_string().c_str());
  const Graph& g = lg->graph();
  auto dev = open_device(device);
  if (!dev.ok()) return state.SkipWithError(dev.status().to_string().c_str());
  std::vector<NodeId> all;
  for (int l = 0; l < lg->num_layers(); ++l) all.push_back(lg->layer(l).node);
  auto program = (*dev)->compile(g, all);
  if (!program.ok()) return state.SkipWithError(program.status().to_string().c_str());
  auto ex = Executor::create(*lg, plan_from_slices(lg->num_layers(), {{0, device}}).value());
  if (!ex.ok()) return state.SkipWithError(ex.status().to_string().c_str());
  std::vector<Tensor> inputs;
  for (ValueId v : g.inputs()) {
    inputs.push_back(Tensor::create(g.value(v).info.dtype, g.value(v).info.shape).value());
  }
  std::vector<Tensor> prog_out((*program)->output_values().size()), ex_out;
  std::vector<double> direct, executor;
  using Clock = std::chrono::steady_clock;
  bool executor_first = false;
  for (auto _ : state) {
    for (int k = 0; k < 2; ++k) {
      const bool run_executor = (k == 0) == executor_first;
      const auto t0 = Clock::now();
      Status st;
      if (run_executor) {
        st = (*ex)->run(inputs, &ex_out);
      } else {
        for (Tensor& t : prog_out) t = Tensor();  // fresh outputs, as a Session returns them
        st = (*program)->run(inputs, prog_out);
      }
      const double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!st.ok()) return state.SkipWithError(st.to_string().c_str());
      (run_executor ? executor : direct).push_back(ms);
    }
    executor_first = !executor_first;
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  const double d = median(direct), e = median(executor);
  state.counters["program_ms"] = d;
  state.counters["executor_ms"] = e;
  state.counters["ratio"] = e / d;
}

// A cut profile of every cut of `lg` at `bits` bitwidths (2..8, 16, the first `bits` of them):
// bytes falling with the bitwidth, fidelity rising.
CutProfile synthetic_cut_profile(const LayerGraph& lg, int bits, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  const int all[] = {2, 3, 4, 5, 6, 7, 8, 16};
  CutProfile c;
  c.num_layers = lg.num_layers();
  for (int i = 0; i < bits && i < 8; ++i) c.bits.push_back(all[i]);
  for (int k = 0; k < lg.num_layers(); ++k) {
    c.cuts.push_back(k);
    c.relu.push_back(0);
    for (int b : c.bits) {
      CutBits e;
      e.cut = k;
      e.bits = b;
      e.bytes_mean = 64 + static_cast<double>(lg.cut(k).live_bytes) * b / 32 * (0.2 + 0.5 * u(rng));
      e.bytes_p95 = e.bytes_mean;
      e.pack_ms = 0.05 * u(rng);
      e.unpack_ms = 0.05 * u(rng);
      e.top1 = std::min(1.0, 0.9 + 0.02 * b * u(rng));
      e.report_top1 = e.top1;
      c.entries.push_back(e);
    }
  }
  return c;
}

OffloadRequest bench_offload_request() {
  OffloadRequest r;
  r.device = "cpu";
  r.remote = "npu:0";
  r.constraints = {{OffloadMetric::kLatency, true, 40}, {OffloadMetric::kFidelity, false, 0.95}};
  r.targets = {{OffloadMetric::kThroughput, true}, {OffloadMetric::kDeviceMs, false}};
  return r;
}

void BM_OffloadDecision(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0));
  auto m = testing::make_model(testing::matmul_chain(layers));
  Profile p = synthetic_profile(*m.lg, 2, 1, 7, 0);
  CostModel cm = CostModel::build(p, *m.lg).value();
  CutProfile cuts = synthetic_cut_profile(*m.lg, static_cast<int>(state.range(1)), 3);
  const OffloadRequest req = bench_offload_request();
  const std::vector<OffloadOption> options = offload_options(cm, *m.lg, cuts, req).value();
  std::vector<OffloadMetrics> metrics;
  double sf = 1;
  for (auto _ : state) {
    sf = sf == 1 ? 1.07 : 1;  // a changed estimate, as a re-plan would see
    offload_metrics(options, sf, LinkEstimate{20, 10 * sf, 20}, false, &metrics);
    OffloadChoice c = choose_offload(options, metrics, req.constraints, req.targets);
    benchmark::DoNotOptimize(c);
  }
  state.counters["candidates"] = static_cast<double>(options.size());
}

void BM_OffloadPlan(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0));
  auto m = testing::make_model(testing::matmul_chain(layers));
  Profile p = synthetic_profile(*m.lg, 2, 1, 7, 0);
  CostModel cm = CostModel::build(p, *m.lg).value();
  CutProfile cuts = synthetic_cut_profile(*m.lg, static_cast<int>(state.range(1)), 3);
  const OffloadRequest req = bench_offload_request();
  int candidates = 0;
  for (auto _ : state) {
    auto r = plan_offload(cm, *m.lg, cuts, req, 1.0, LinkEstimate{20, 10, 20});
    if (!r.ok()) {
      state.SkipWithError(r.status().to_string().c_str());
      return;
    }
    candidates = r->candidates;
    benchmark::DoNotOptimize(r->plan);
  }
  state.counters["candidates"] = candidates;
}

void register_all() {
  benchmark::RegisterBenchmark("BM_OffloadDecision", BM_OffloadDecision)
      ->Args({100, 8})
      ->Args({400, 8})
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_OffloadPlan", BM_OffloadPlan)
      ->Args({100, 8})
      ->Unit(benchmark::kMicrosecond);
  // Latency over 4 devices at one level; energy over 5 devices x 5 levels = 25 virtual devices.
  for (const char* planner : {"slice", "hca", "preferred"}) {
    for (Objective objective : {Objective::kLatency, Objective::kEnergy}) {
      const int64_t devices = objective == Objective::kLatency ? 4 : 5;
      const int64_t levels = objective == Objective::kLatency ? 1 : 5;
      using Fn = void (*)(benchmark::State&, const std::string&, Objective);
      for (const auto& [family, fn] :
           {std::pair<const char*, Fn>{"BM_Plan/", BM_Plan}, {"BM_PlanByQuery/", BM_PlanByQuery}}) {
        benchmark::RegisterBenchmark(
            (family + std::string(planner) + "/" + objective_name(objective)).c_str(),
            [fn, planner, objective](benchmark::State& s) { fn(s, planner, objective); })
            ->Args({50, devices, levels})
            ->Args({200, devices, levels})
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  // 122 layers (Inception-v3 in seed 001) over 4 devices; energy also over 4 x 5 levels.
  for (PipelineObjective objective :
       {PipelineObjective::kThroughput, PipelineObjective::kEnergy, PipelineObjective::kLatency}) {
    auto* b = benchmark::RegisterBenchmark(
        (std::string("BM_PipelinePlan/") + pipeline_objective_name(objective)).c_str(),
        [objective](benchmark::State& s) { BM_PipelinePlan(s, objective); });
    for (int64_t unsupported : {0, 10}) {
      for (int64_t stages : {0, 2, 3, 4}) b->Args({stages, 122, 4, 1, unsupported});
      if (objective == PipelineObjective::kEnergy) b->Args({0, 122, 4, 5, unsupported});
    }
    b->ArgNames({"stages", "layers", "devices", "levels", "unsupported"})
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("BM_CostModelBuild", BM_CostModelBuild)
      ->Args({50, 4, 1})
      ->Args({200, 5, 5})
      ->Unit(benchmark::kMicrosecond);
  for (const char* model :
       {"mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1", "vgg16", "alexnet"}) {
    benchmark::RegisterBenchmark((std::string("BM_PlanModel/") + model).c_str(),
                                 [model](benchmark::State& s) { BM_PlanModel(s, model); })
        ->Unit(benchmark::kMicrosecond);
  }
  for (const char* model : {"mobilenet_v2", "resnet18", "squeezenet1_1"}) {
    for (const char* device : {"cpu", "cpu:0", "reference"}) {
      if (std::string(device) == "reference" && std::string(model) != "squeezenet1_1") continue;
      benchmark::RegisterBenchmark(
          (std::string("BM_ExecutorOverhead/") + model + "/" + device).c_str(),
          [model, device](benchmark::State& s) { BM_ExecutorOverhead(s, model, device); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (const char* model : {"mobilenet_v2", "resnet18"}) {
    for (const char* device : {"cpu", "npu:0"}) {
      benchmark::RegisterBenchmark(
          (std::string("BM_ExecutorStages/") + model + "/" + device).c_str(),
          [model, device](benchmark::State& s) { BM_ExecutorStages(s, model, device); })
          ->ArgsProduct({{1, 8}, {1, 0}})
          ->ArgNames({"stages", "merged"})
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  tessera::register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
