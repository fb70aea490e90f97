// tessera plan MODEL.tsr --profile profile.json --objective latency|energy
//              [--planner slice|preferred|hca|exhaustive] [--devices a,b] [--prefer a,b]
//              [-o plan.json]
// tessera plan MODEL.tsr --profile profile.json --planner pipeline
//              --objective throughput|energy|latency [--stages auto|K] [--max-latency MS]
//              [--max-period MS] [--devices a,b] [-o plan.json]
// tessera plan MODEL.tsr --profile profile.json --planner split [--mem-size MB]
//              [--stages auto|K] [--devices a,b] [-o plan.json]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "api/internal.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/planners/pipeline.h"
#include "scheduler/planners/slice.h"
#include "scheduler/planners/split.h"
#include "scheduler/pricer.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--profile", "-p", true, false, "profile JSON from `tessera profile` (required)"},
    {"--objective", "", true, false,
     "latency (default) or energy; for --planner pipeline: throughput (default), energy or "
     "latency"},
    {"--planner", "", true, false,
     "slice (default: seed 000 Algorithm 1), preferred, hca, exhaustive (small models) or "
     "pipeline (seed 001: a streaming plan of contiguous stages) or split (seed 004: the "
     "pipeline with layers split across the devices, Procedure 1 Steps 1-2)"},
    {"--mem-size", "", true, false,
     "split: memory per device in MB; layers that need more are split (Step 1)"},
    {"--stages", "", true, false,
     "pipeline: auto (default: add stages while that helps) or the number of stages, 1..8"},
    {"--max-latency", "", true, false, "pipeline: the largest latency of one frame allowed, ms"},
    {"--max-period", "", true, false,
     "pipeline: the largest period (time between frames) allowed, ms"},
    {"--devices", "-d", true, false,
     "comma-separated devices to use, DEVICE or DEVICE@MHz (default: every profiled device)"},
    {"--prefer", "", true, false,
     "for --planner preferred: the preferred device, then the fallback order"},
    {"--output", "-o", true, false, "write the plan JSON here"},
    {"--help", "-h", false, false, "show this help"},
};

// A positive number of milliseconds from a flag, or +inf when the flag is absent.
Result<double> milliseconds(const cli::Args& args, const std::string& flag) {
  ASSIGN_OR_RETURN(double x, args.get_double(flag, kInfiniteCost, 0, kInfiniteCost));
  if (!(x > 0)) {
    return invalid_argument(flag + " expects a positive number of milliseconds, got '" +
                            args.get(flag) + "'");
  }
  return x;
}

Result<PipelineRequest> pipeline_request(const cli::Args& args) {
  PipelineRequest req;
  ASSIGN_OR_RETURN(req.objective, parse_pipeline_objective(args.get("--objective", "throughput")));
  const std::string stages = args.get("--stages", "auto");
  if (stages != "auto") {
    ASSIGN_OR_RETURN(req.stages, args.get_int("--stages", 0, 1, PipelineRequest::kMaxStages));
  }
  ASSIGN_OR_RETURN(req.max_latency_ms, milliseconds(args, "--max-latency"));
  ASSIGN_OR_RETURN(req.max_period_ms, milliseconds(args, "--max-period"));
  req.devices = cli::split_commas(args.get("--devices"));
  return req;
}

}  // namespace

void print_plan_table(const Plan& p, const LayerGraph& lg) {
  std::printf("plan (%s, %s, %s): %s\n", p.planner.c_str(), p.objective.c_str(),
              plan_mode_name(p.mode), p.notation().c_str());
  std::printf("%5s  %-20s %-28s %11s %11s %11s\n", "stage", "device", "layers", "exec ms",
              "xfer ms", "energy mJ");
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const Stage& s = p.stages[i];
    std::string range = std::to_string(s.layers.front()) + ".." + std::to_string(s.layers.back()) +
                        " " + lg.layer(s.layers.front()).name;
    if (s.layers.size() > 1) range += " .. " + lg.layer(s.layers.back()).name;
    std::printf("%5zu  %-20s %-28.28s %11.3f %11.3f %11.3f\n", i, s.placement.label().c_str(),
                range.c_str(), s.estimate.exec_ms, s.estimate.transfer_ms, s.estimate.energy_mj);
  }
  std::printf("estimated latency %.3f ms, energy %.3f mJ\n", p.estimated_latency_ms,
              p.estimated_energy_mj);
  if (p.mode == PlanMode::kStreaming && p.estimated_period_ms > 0) {
    std::printf("estimated period %.3f ms (%.2f frames/s); device load:", p.estimated_period_ms,
                1000.0 / p.estimated_period_ms);
    for (const DeviceLoad& d : p.device_load) {
      std::printf(" %s %.3f ms", d.device.c_str(), d.busy_ms);
    }
    std::printf("\n");
  }
}

int cmd_plan(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("plan", args.status());
  if (args->has("--help") || args->positional.size() != 1 || !args->has("--profile")) {
    std::printf(
        "usage: tessera plan MODEL.tsr --profile profile.json [--objective latency|energy]"
        " [-o plan.json]\n"
        "       tessera plan MODEL.tsr --profile profile.json --planner pipeline"
        " [--objective throughput|energy|latency] [--stages auto|K] [--max-latency MS]"
        " [--max-period MS]\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  const std::string path = args->positional[0];
  auto model = Model::load(path);
  if (!model.ok()) return report_error("plan", model.status());
  auto lg = LayerGraph::build(model_graph(**model));
  if (!lg.ok()) return report_error("plan", lg.status());
  auto hash = model_file_hash(path);
  if (!hash.ok()) return report_error("plan", hash.status());
  auto profile = Profile::load(args->get("--profile"), *hash);
  if (!profile.ok()) return report_error("plan", profile.status());
  auto cm = CostModel::build(*profile, *lg);
  if (!cm.ok()) return report_error("plan", cm.status());

  const std::string planner = args->get("--planner", "slice");
  if (planner != "split" && args->has("--mem-size")) {
    return report_error("plan", invalid_argument("--mem-size applies to --planner split only"));
  }
  if (planner != "pipeline" && planner != "split") {
    for (const char* flag : {"--stages", "--max-latency", "--max-period"}) {
      if (args->has(flag)) {
        return report_error(
            "plan", invalid_argument(std::string(flag) + " applies to --planner pipeline only"));
      }
    }
  }
  SlicePlanRequest req;
  req.devices = cli::split_commas(args->get("--devices"));
  Result<Plan> plan = Plan{};
  if (planner == "split") {
    SplitPlanRequest sreq;
    sreq.devices = req.devices;
    const std::string stages = args->get("--stages", "auto");
    if (stages != "auto") {
      auto k = args->get_int("--stages", 0, 1, PipelineRequest::kMaxStages);
      if (!k.ok()) return report_error("plan", k.status());
      sreq.base_stages = static_cast<int>(*k);
    }
    if (args->has("--mem-size")) {
      auto mb = args->get_double("--mem-size", 0, 1e-3, 1e9);
      if (!mb.ok()) return report_error("plan", mb.status());
      sreq.memory_cap_bytes = static_cast<uint64_t>(*mb * 1e6);
    }
    SplitPlanReport rep;
    plan = make_split_plan(*cm, *lg, sreq, &rep);
    if (plan.ok()) {
      std::printf("split planner: base pipeline period %.3f ms -> %.3f ms;", rep.base_period_ms,
                  rep.period_ms);
      for (int l : rep.forced_layers) std::printf(" layer %d split (memory);", l);
      for (int l : rep.balanced_layers) std::printf(" layer %d split (balance);", l);
      std::printf("\n");
    }
  } else if (planner == "pipeline") {
    auto preq = pipeline_request(*args);
    if (!preq.ok()) return report_error("plan", preq.status());
    auto found = plan_pipeline(*cm, *lg, *preq);
    if (!found.ok()) return report_error("plan", found.status());
    if (!found->proven_optimal) {
      std::printf(
          "note: the search stopped after pricing %lld stage candidates; the plan below is the "
          "best it found, not proven optimal (fewer --stages make the proof cheaper)\n",
          static_cast<long long>(found->visited));
    }
    plan = pipeline_to_plan(*cm, *found);
    plan->objective = pipeline_objective_name(preq->objective);
  } else {
    auto objective = parse_objective(args->get("--objective", "latency"));
    if (!objective.ok()) return report_error("plan", objective.status());
    req.objective = *objective;
    req.planner = planner;
    req.preference = cli::split_commas(args->get("--prefer"));
    if (req.planner == "preferred" && req.preference.empty()) req.preference = req.devices;
    plan = make_slice_plan(*cm, req);
  }
  if (!plan.ok()) return report_error("plan", plan.status());
  plan->model_name = std::filesystem::path(path).stem().string();
  plan->model_hash = *hash;
  // The one pricer fills the plan-level estimates (period, device load) the planner leaves out.
  Status priced = price_plan(*cm, *lg, &*plan);
  if (!priced.ok()) return report_error("plan", priced);
  print_plan_table(*plan, *lg);

  // For comparison: every requested device alone at its top level.
  for (int vd : cm->latency_devices()) {
    const VirtualDevice& v = cm->virtual_devices()[static_cast<size_t>(vd)];
    if (!req.devices.empty() &&
        std::find(req.devices.begin(), req.devices.end(), v.device) == req.devices.end()) {
      continue;
    }
    const int L = cm->num_layers();
    if (!cm->can_run_slice(vd, 0, L)) {
      std::printf("  %-20s alone: cannot run the whole model\n", v.label.c_str());
    } else {
      std::printf("  %-20s alone: %.3f ms, %.3f mJ\n", v.label.c_str(), cm->slice_ms(vd, 0, L),
                  cm->slice_energy_mj(vd, 0, L));
    }
  }
  if (args->has("--output")) {
    Status s = plan->save(args->get("--output"));
    if (!s.ok()) return report_error("plan", s);
    std::printf("wrote %s\n", args->get("--output").c_str());
  }
  return 0;
}

}  // namespace tessera::tools
