// tessera run model.tsr --input x.npy --output y.npy [--device NAME] [--repeat N] [--top K]
// tessera run model.tsr --plan plan.json [--trace trace.json] ...   (a plan over several devices)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>

#include "core/npy.h"
#include "core/tessera.h"
#include "graph/layer_graph.h"
#include "scheduler/executor.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--input", "-i", true, true,
     "input .npy (one per model input, in order; or NAME=PATH); default: zeros"},
    {"--output", "-o", true, true, "write output .npy (one per model output, in order)"},
    {"--device", "-d", true, false, "device to run on (default: reference; see `tessera devices`)"},
    {"--repeat", "-r", true, false, "timed runs after the warm-up runs (default 1)"},
    {"--warmup", "", true, false, "untimed runs before the timed ones (default 1)"},
    {"--times", "", false, false, "print every timed run's latency, in run order"},
    {"--top", "", true, false, "print the K largest entries of the first output"},
    {"--plan", "", true, false, "run by this plan (from `tessera plan`) instead of on one device"},
    {"--trace", "", true, false, "with --plan: write a Chrome trace (open in Perfetto)"},
    {"--help", "-h", false, false, "show this help"},
};

Result<std::vector<Tensor>> gather_inputs(const Model& model, const cli::Args& args) {
  const auto& descs = model.inputs();
  const auto& specs = args.all("--input");
  std::vector<Tensor> inputs(descs.size());
  std::vector<bool> given(descs.size(), false);
  size_t next_positional = 0;
  for (const std::string& spec : specs) {
    size_t index = next_positional;
    std::string path = spec;
    const size_t eq = spec.find('=');
    if (eq != std::string::npos) {
      const std::string name = spec.substr(0, eq);
      path = spec.substr(eq + 1);
      auto it = std::find_if(descs.begin(), descs.end(),
                             [&](const TensorDesc& d) { return d.name == name; });
      if (it == descs.end()) return not_found("the model has no input '" + name + "'");
      index = static_cast<size_t>(it - descs.begin());
    } else {
      ++next_positional;
    }
    if (index >= descs.size()) {
      return invalid_argument("more --input files than model inputs (" +
                              std::to_string(descs.size()) + ")");
    }
    ASSIGN_OR_RETURN(inputs[index], read_npy(path));
    const TensorDesc& d = descs[index];
    if (inputs[index].dtype() != d.dtype || inputs[index].shape() != d.shape) {
      return invalid_argument(path + ": input '" + d.name + "' expects " + dtype_name(d.dtype) +
                              d.shape.to_string() + ", the file holds " + inputs[index].describe());
    }
    given[index] = true;
  }
  for (size_t i = 0; i < descs.size(); ++i) {
    if (given[i]) continue;
    std::fprintf(stderr, "note: input '%s' not given, using zeros\n", descs[i].name.c_str());
    ASSIGN_OR_RETURN(inputs[i], Tensor::create(descs[i].dtype, descs[i].shape));
  }
  return inputs;
}

// Writes the outputs and prints the top-K of the first (both run paths).
int finish(const Model& model, const cli::Args& args, const std::vector<Tensor>& outputs, int top) {
  const auto& out_paths = args.all("--output");
  for (size_t i = 0; i < out_paths.size(); ++i) {
    Status st = write_npy(out_paths[i], outputs[i]);
    if (!st.ok()) return report_error("run", st);
  }
  if (top > 0 && !outputs.empty() && outputs[0].dtype() == DType::kF32) {
    const Tensor& y = outputs[0];
    std::vector<int64_t> idx(static_cast<size_t>(y.numel()));
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = std::min(idx.size(), static_cast<size_t>(top));
    const float* p = y.data<float>();
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [p](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::printf("top-%zu of '%s':\n", k, model.outputs()[0].name.c_str());
    for (size_t i = 0; i < k; ++i) {
      std::printf("  %zu. class %lld  score %.5f\n", i + 1, static_cast<long long>(idx[i]),
                  p[idx[i]]);
    }
  }
  return 0;
}

// `warmup` untimed then `repeat` timed calls of `run`; the wall times in run order. With --times
// they are printed as one line ("times ms: ..."), for scripts that want each run, not a median.
Result<std::vector<double>> timed_runs(const cli::Args& args, int warmup, int repeat,
                                       const std::function<Status()>& run) {
  for (int r = 0; r < warmup; ++r) RETURN_IF_ERROR(run());
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(run());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (args.has("--times")) {
    std::printf("times ms:");
    for (double t : ms) std::printf(" %.3f", t);
    std::printf("\n");
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

Result<std::vector<Tensor>> run_plan(const std::string& path, const Model& model,
                                     const std::vector<Tensor>& inputs, const cli::Args& args,
                                     int warmup, int repeat) {
  ASSIGN_OR_RETURN(Plan plan, Plan::load(args.get("--plan")));
  ASSIGN_OR_RETURN(std::string hash, model_file_hash(path));
  if (!plan.model_hash.empty() && plan.model_hash != hash) {
    return failed_precondition(args.get("--plan") + ": the plan is for model " + plan.model_hash +
                               ", " + path + " is " + hash);
  }
  ASSIGN_OR_RETURN(LayerGraph lg, LayerGraph::build(model.graph()));
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> ex, Executor::create(lg, plan));
  print_plan_table(plan, lg);
  std::vector<Tensor> outputs;
  ASSIGN_OR_RETURN(std::vector<double> ms,
                   timed_runs(args, warmup, repeat, [&] { return ex->run(inputs, &outputs); }));
  // Per step (adjacent stages on one device run as one program): the mean over the timed runs
  // (the warm-up runs left out) next to the sum of its stages' estimates.
  const std::vector<double> step_ms = ex->mean_step_ms(warmup);
  std::printf("%5s  %-7s %-20s %12s %12s\n", "step", "stages", "device", "measured ms",
              "estimated ms");
  for (size_t i = 0; i < ex->steps().size(); ++i) {
    const ExecutorStep& step = ex->steps()[i];
    double estimated = 0;
    for (int k = step.first_stage; k <= step.last_stage; ++k) {
      const StageEstimate& e = plan.stages[static_cast<size_t>(k)].estimate;
      estimated += e.exec_ms + e.transfer_ms;
    }
    const std::string stages =
        step.first_stage == step.last_stage
            ? std::to_string(step.first_stage)
            : std::to_string(step.first_stage) + "-" + std::to_string(step.last_stage);
    std::printf("%5zu  %-7s %-20s %12.3f %12.3f\n", i, stages.c_str(), step.device.c_str(),
                step_ms[i], estimated);
  }
  std::printf("plan %s: latency median %.3f ms, min %.3f ms over %d run(s); estimated %.3f ms\n",
              plan.notation().c_str(), ms[ms.size() / 2], ms.front(), repeat,
              plan.estimated_latency_ms);
  if (args.has("--trace")) {
    RETURN_IF_ERROR(ex->write_trace(args.get("--trace")));
    std::printf("wrote trace %s\n", args.get("--trace").c_str());
  }
  return outputs;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("run", args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf(
        "usage: tessera run MODEL.tsr [--input x.npy] [--output y.npy] [--device NAME]\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  auto repeat = args->get_int("--repeat", 1, 1, 1000000);
  if (!repeat.ok()) return report_error("run", repeat.status());
  auto warmup = args->get_int("--warmup", 1, 0, 1000000);
  if (!warmup.ok()) return report_error("run", warmup.status());
  auto top = args->get_int("--top", 0, 0, 1000000);
  if (!top.ok()) return report_error("run", top.status());

  auto model = Model::load(args->positional[0]);
  if (!model.ok()) return report_error("run", model.status());
  if (args->all("--output").size() > (*model)->outputs().size()) {
    return report_error("run", invalid_argument("more --output files than model outputs"));
  }
  auto inputs = gather_inputs(**model, *args);
  if (!inputs.ok()) return report_error("run", inputs.status());
  if (args->has("--plan")) {
    if (args->has("--device")) {
      return report_error("run", invalid_argument("give --device or --plan, not both"));
    }
    auto outputs = run_plan(args->positional[0], **model, *inputs, *args, *warmup, *repeat);
    if (!outputs.ok()) return report_error("run", outputs.status());
    return finish(**model, *args, *outputs, *top);
  }
  const std::string device = args->get("--device", "reference");
  auto session = Session::create(*model, device);
  if (!session.ok()) return report_error("run", session.status());

  std::vector<Tensor> outputs;
  auto ms = timed_runs(*args, *warmup, *repeat, [&]() -> Status {
    ASSIGN_OR_RETURN(outputs, (*session)->run(*inputs));
    return Status::ok_status();
  });
  if (!ms.ok()) return report_error("run", ms.status());
  std::printf("device %s: latency median %.3f ms, min %.3f ms over %d run(s)\n", device.c_str(),
              (*ms)[ms->size() / 2], ms->front(), *repeat);
  if ((*session)->peak_memory_bytes() > 0) {
    std::printf("device %s: peak memory %.1f MiB (activation arena + packed weights)\n",
                device.c_str(),
                static_cast<double>((*session)->peak_memory_bytes()) / (1024.0 * 1024.0));
  }

  return finish(**model, *args, outputs, *top);
}

}  // namespace tessera::tools
