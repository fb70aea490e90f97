// tessera simulate MODEL.tsr --plan plan.json --profile profile.json [--frames N] [--warmup W]
//                  [--queue C] [--interval MS] [--load DEVICE=FACTOR,...] [--jitter CV]
//                  [--seed S] [--scale DEVICE=FACTOR,...]
// A discrete-event run of the plan over the profile's cost model (scheduler/simulator.h): what
// `tessera run --plan P --stream N` would measure, without the devices.
#include <cstdio>

#include "api/internal.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/pricer.h"
#include "scheduler/simulator.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--plan", "", true, false, "plan JSON (from `tessera plan`, or written by hand) (required)"},
    {"--profile", "-p", true, false, "profile JSON from `tessera profile` (required)"},
    {"--frames", "-n", true, false, "frames to simulate (default 300)"},
    {"--warmup", "", true, false, "frames left out of the steady-state figures (default 20)"},
    {"--queue", "", true, false, "frames that may wait between actors (default: the plan's)"},
    {"--interval", "", true, false,
     "a frame arrives every MS milliseconds (default 0: back to back, as run --stream)"},
    {"--load", "", true, true,
     "DEVICE=FACTOR[,...]: the device's stages take FACTOR times as long (a shared core); "
     "repeatable; a comma before a digit continues a core set (cpu:0,3-5=2)"},
    {"--scale", "", true, true,
     "DEVICE=FACTOR[,...]: as --load, for a board whose profile is not measured; the result "
     "is labelled as scaled (repeatable; cpu:0,3-5=0.2 scales that core set)"},
    {"--jitter", "", true, false,
     "coefficient of variation of each stage's time (log-normal; default 0)"},
    {"--seed", "", true, false, "seed of the jitter (default 1)"},
    {"--help", "-h", false, false, "show this help"},
};

Result<SimulationOptions> simulation_options(const cli::Args& args, bool* scaled) {
  SimulationOptions o;
  ASSIGN_OR_RETURN(o.frames, args.get_int("--frames", 300, 1, 10'000'000));
  ASSIGN_OR_RETURN(o.warmup, args.get_int("--warmup", std::min(20, o.frames - 1), 0, o.frames - 1));
  ASSIGN_OR_RETURN(o.queue_capacity, args.get_int("--queue", 0, 0, 1024));
  ASSIGN_OR_RETURN(o.arrival_interval_ms, args.get_double("--interval", 0, 0, 1e9));
  ASSIGN_OR_RETURN(o.jitter_cv, args.get_double("--jitter", 0, 0, 10));
  ASSIGN_OR_RETURN(int seed, args.get_int("--seed", 1, 0, 2'000'000'000));
  o.seed = static_cast<uint64_t>(seed);
  ASSIGN_OR_RETURN(o.load, cli::parse_device_factors("--load", args.all("--load")));
  ASSIGN_OR_RETURN(auto scale, cli::parse_device_factors("--scale", args.all("--scale")));
  *scaled = !scale.empty();
  for (const auto& [device, f] : scale) {
    o.load[device] = (o.load.count(device) ? o.load[device] : 1.0) * f;
  }
  return o;
}

void print_result(const Plan& plan, const SimulationResult& r, const SimulationOptions& o,
                  bool scaled) {
  std::printf("simulated%s: plan %s, %d frame(s) (%d warm-up), %d slot(s), %zu actor(s)%s\n",
              scaled ? " on a scaled profile" : "", plan.notation().c_str(), r.frames, o.warmup,
              r.slots, r.actors.size(),
              o.arrival_interval_ms > 0
                  ? (", a frame every " + std::to_string(o.arrival_interval_ms) + " ms").c_str()
                  : "");
  std::printf("throughput %.2f frames/s, period %.3f ms (priced %.3f ms)\n", r.frames_per_s,
              r.period_ms, plan.estimated_period_ms);
  std::printf("latency ms: mean %.3f, p50 %.3f, p90 %.3f, p99 %.3f, max %.3f\n", r.latency_mean_ms,
              r.latency_p50_ms, r.latency_p90_ms, r.latency_p99_ms, r.latency_max_ms);
  std::printf("energy %.3f mJ/frame\n", r.energy_per_frame_mj);
  std::printf("%6s  %-20s %12s %8s\n", "stage", "device", "busy ms/fr", "busy %");
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    std::printf("%6zu  %-20s %12.3f %8.1f\n", i, plan.stages[i].placement.label().c_str(),
                r.stage_busy_ms[i], r.period_ms > 0 ? 100 * r.stage_busy_ms[i] / r.period_ms : 0);
  }
  for (const SimulatedDevice& d : r.devices) {
    std::printf("device %-20s busy %.3f ms/frame, utilisation %.1f%%\n", d.device.c_str(),
                d.busy_ms, 100 * d.utilisation);
  }
  for (const SimulatedActor& a : r.actors) {
    std::printf("actor %d: frames waiting when it took one: mean %.2f\n", a.actor,
                a.mean_frames_waiting);
  }
}

}  // namespace

int cmd_simulate(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("simulate", args.status());
  if (args->has("--help") || args->positional.size() != 1 || !args->has("--plan") ||
      !args->has("--profile")) {
    std::printf(
        "usage: tessera simulate MODEL.tsr --plan plan.json --profile profile.json [options]\n\n"
        "A discrete-event run of the plan over the profile's cost model: the period, latency\n"
        "distribution, per-device utilisation, queue occupancy and energy per frame that\n"
        "`tessera run --plan plan.json --stream N` would measure.\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  const std::string path = args->positional[0];
  bool scaled = false;
  auto options = simulation_options(*args, &scaled);
  if (!options.ok()) return report_error("simulate", options.status());
  auto model = Model::load(path);
  if (!model.ok()) return report_error("simulate", model.status());
  auto lg = LayerGraph::build(model_graph(**model));
  if (!lg.ok()) return report_error("simulate", lg.status());
  auto hash = model_file_hash(path);
  if (!hash.ok()) return report_error("simulate", hash.status());
  auto profile = Profile::load(args->get("--profile"), *hash);
  if (!profile.ok()) return report_error("simulate", profile.status());
  auto cm = CostModel::build(*profile, *lg);
  if (!cm.ok()) return report_error("simulate", cm.status());
  auto plan = Plan::load(args->get("--plan"));
  if (!plan.ok()) return report_error("simulate", plan.status());
  if (!plan->model_hash.empty() && plan->model_hash != *hash) {
    return report_error("simulate",
                        invalid_argument("the plan is for model " + quote_name(plan->model_hash) +
                                         ", " + path + " is " + *hash));
  }
  if (options->queue_capacity > 0) plan->queue_capacity = options->queue_capacity;
  Status priced = price_plan(*cm, *lg, &*plan);
  if (!priced.ok()) return report_error("simulate", priced);
  auto r = simulate_plan(*cm, *lg, *plan, *options);
  if (!r.ok()) return report_error("simulate", r.status());
  print_result(*plan, *r, *options, scaled);
  return 0;
}

}  // namespace tessera::tools
