// tessera plan MODEL.tsr --profile profile.json --objective latency|energy
//              [--planner slice|preferred|hca|exhaustive] [--devices a,b] [--prefer a,b]
//              [-o plan.json]
// tessera plan MODEL.tsr --profile profile.json --planner pipeline
//              --objective throughput|energy|latency [--stages auto|K] [--max-latency MS]
//              [--max-period MS] [--devices a,b] [-o plan.json]
// tessera plan MODEL.tsr --profile profile.json --planner ga [--seed N] [--ga-population N]
//              [--ga-epochs N] [--ga-patience N] [--ga-comm all|cross] [--ga-objective
//              balance|max|period] [--ga-init random|pipeline] [--devices a,b] [-o plan.json]
// tessera plan MODEL.tsr --profile profile.json --planner split [--mem-size MB]
//              [--stages auto|K] [--devices a,b] [--monitor [--input x.npy] [--queue N]
//              [--window N] [--iterations N] [--drift X]] [-o plan.json]
// tessera plan MODEL.tsr --profile profile.json --planner offload --cut-profile cuts.json
//              --devices CLIENT,remote:HOST:PORT [--constraint latency<=100 ...]
//              [--target throughput:max ...] [--relu-cuts] [--no-raw] [--pipelined-hop]
//              [--sf X] [--link MS,UP_MBIT,DOWN_MBIT] [-o plan.json]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <optional>
#include <random>
#include <sstream>

#include "api/internal.h"
#include "graph/layer_graph.h"
#include "scheduler/adapt/queue_monitor.h"
#include "scheduler/cost_model.h"
#include "scheduler/cut_profile.h"
#include "scheduler/error_budget.h"
#include "scheduler/fidelity.h"
#include "scheduler/planners/pipeline.h"
#include "scheduler/planners/planner.h"
#include "tools/bench_model.h"
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
     "slice (default: seed 000 Algorithm 1), preferred, hca, exhaustive (small models), "
     "pipeline (seed 001: a streaming plan of contiguous stages), ga (seed 003: CSDF actors "
     "with phases, mapped by a genetic algorithm) or split (seed 004: the pipeline with layers "
     "split across the devices, Procedure 1 Steps 1-2)"},
    {"--mem-size", "", true, false,
     "split: memory per device in MB; layers that need more are split (Step 1)"},
    {"--monitor", "", false, false,
     "split: Procedure 1 Step 3, on these devices: stream the model through the plan with "
     "queues of --queue frames, read each device's queue and latency over a window, and "
     "re-plan with a slow device's measured slowdown, swapping plans inside the stream, until "
     "the bottleneck is the one predicted; writes the plan that streamed fastest"},
    {"--input", "", true, false,
     "with --monitor: the frame streamed (a .npy, one-input models; default: random values)"},
    {"--queue", "", true, false, "with --monitor: queue capacity per actor (default 10)"},
    {"--window", "", true, false, "with --monitor: frames per measurement (default 20)"},
    {"--iterations", "", true, false, "with --monitor: most re-plans (default 6)"},
    {"--drift", "", true, false,
     "with --monitor: how far a device's measured time may be off its prediction before its "
     "slowdown is folded into the profile (default 0.2)"},
    {"--seed", "", true, false, "ga: seed of the genetic algorithm (default 1)"},
    {"--ga-population", "", true, false, "ga: population (default 1000)"},
    {"--ga-epochs", "", true, false, "ga: most epochs (default 500)"},
    {"--ga-patience", "", true, false,
     "ga: stop after this many epochs without improvement (default 50)"},
    {"--ga-comm", "", true, false,
     "ga: all (default, eq. 4 as printed: every channel) or cross (channels between processors)"},
    {"--ga-objective", "", true, false,
     "ga: balance (default, eq. 1), max (the largest processor load) or period (what the CSDF "
     "actors' phase order allows)"},
    {"--ga-init", "", true, false,
     "ga: random (default) or pipeline (an ablation: the pipeline planner's mapping joins the "
     "initial population; the plan is labelled ga+seeded)"},
    {"--stages", "", true, false,
     "pipeline: auto (default: add stages while that helps) or the number of stages, 1..8"},
    {"--max-latency", "", true, false, "pipeline: the largest latency of one frame allowed, ms"},
    {"--max-period", "", true, false,
     "pipeline: the largest period (time between frames) allowed, ms"},
    {"--cut-profile", "", true, false,
     "offload: the cut profile from `tessera bench cuts` (required for offload)"},
    {"--constraint", "", true, true,
     "offload: a hard constraint METRIC<=X or METRIC>=X, in priority order (metrics: latency, "
     "period, throughput, device_ms, server_ms, bytes, fidelity, rel_l2)"},
    {"--target", "", true, true,
     "offload: a soft target METRIC:min|max, in order (default throughput:max, latency:min)"},
    {"--relu-cuts", "", false, false, "offload: only cuts whose tensors are all ReLU outputs"},
    {"--no-raw", "", false, false, "offload: no unpacked (f32) hops"},
    {"--pipelined-hop", "", false, false,
     "offload: price the period as seed 002's three threads, max(client + pack, network, "
     "unpack + server), not the executor's overlapped hop (3 frames in flight)"},
    {"--sf", "", true, false, "offload: scaling factor of the client's times (default 1)"},
    {"--link", "", true, false,
     "offload: a link estimate MS,UP_MBIT,DOWN_MBIT instead of the profile's transfer fits"},
    {"--devices", "-d", true, false,
     "comma-separated devices to use, DEVICE or DEVICE@MHz (default: every profiled device)"},
    {"--prefer", "", true, false,
     "for --planner preferred: the preferred device, then the fallback order"},
    {"--max-error", "", true, false,
     "a bound on the plan's relative L2 error against f32, composed from the profile's "
     "per-layer errors of precision levels (cpu#bf16, cpu#int8; docs/precision.md)"},
    {"--output", "-o", true, false, "write the plan JSON here"},
    {"--help", "-h", false, false, "show this help"},
};

// A positive number of milliseconds from a flag, or +inf when the flag is absent.
Result<double> milliseconds(const cli::Args& args, const std::string& flag) {
  ASSIGN_OR_RETURN(double x, args.get_double(flag, kInfiniteCost, 0, kInfiniteCost));
  if (!(x > 0)) {
    return invalid_argument(flag + " expects a positive number of milliseconds, got " +
                            quote_name(args.get(flag)));
  }
  return x;
}

Result<PlanRequest> plan_request(const cli::Args& args) {
  PlanRequest req;
  req.planner = args.get("--planner", "slice");
  req.objective = args.get("--objective");
  req.devices = cli::split_device_list(args.get("--devices"));
  req.prefer = cli::split_device_list(args.get("--prefer"));
  if (req.planner != "ga") {
    for (const char* flag : {"--seed", "--ga-population", "--ga-epochs", "--ga-patience",
                             "--ga-comm", "--ga-objective", "--ga-init"}) {
      if (args.has(flag)) {
        return invalid_argument(std::string(flag) + " applies to --planner ga only");
      }
    }
  } else {
    ASSIGN_OR_RETURN(int seed, args.get_int("--seed", 1, 0, std::numeric_limits<int>::max()));
    req.ga.seed = static_cast<uint64_t>(seed);
    ASSIGN_OR_RETURN(req.ga.population, args.get_int("--ga-population", 1000, 2, 1'000'000));
    ASSIGN_OR_RETURN(req.ga.epochs, args.get_int("--ga-epochs", 500, 0, 1'000'000));
    ASSIGN_OR_RETURN(req.ga.patience, args.get_int("--ga-patience", 50, 1, 1'000'000));
    ASSIGN_OR_RETURN(req.ga.comm, parse_ga_comm(args.get("--ga-comm", "all")));
    ASSIGN_OR_RETURN(req.ga.objective, parse_ga_objective(args.get("--ga-objective", "balance")));
    const std::string init = args.get("--ga-init", "random");
    if (init != "random" && init != "pipeline") {
      return invalid_argument("--ga-init " + quote_name(init) + ": expected random or pipeline");
    }
    req.ga_seed_with_pipeline = init == "pipeline";
  }
  if (req.planner != "split" && args.has("--mem-size")) {
    return invalid_argument("--mem-size applies to --planner split only");
  }
  if (args.has("--mem-size")) {
    ASSIGN_OR_RETURN(double mb, args.get_double("--mem-size", 0, 1e-3, 1e9));
    req.memory_cap_bytes = static_cast<uint64_t>(mb * 1e6);
  }
  if (req.planner != "pipeline") {
    for (const char* flag : {"--stages", "--max-latency", "--max-period"}) {
      if (req.planner == "split" && std::string(flag) == "--stages") continue;
      if (args.has(flag)) {
        return invalid_argument(std::string(flag) + " applies to --planner pipeline only");
      }
    }
  }
  if (req.planner != "offload") {
    for (const char* flag : {"--cut-profile", "--constraint", "--target", "--relu-cuts", "--no-raw",
                             "--pipelined-hop", "--sf", "--link"}) {
      if (args.has(flag)) {
        return invalid_argument(std::string(flag) + " applies to --planner offload only");
      }
    }
  } else {
    for (const std::string& c : args.all("--constraint")) {
      ASSIGN_OR_RETURN(OffloadConstraint oc, parse_offload_constraint(c));
      req.offload.constraints.push_back(oc);
    }
    for (const std::string& t : args.all("--target")) {
      ASSIGN_OR_RETURN(OffloadTarget ot, parse_offload_target(t));
      req.offload.targets.push_back(ot);
    }
    req.offload.relu_cuts_only = args.has("--relu-cuts");
    req.offload.raw = !args.has("--no-raw");
    req.offload.pipelined_hop = args.has("--pipelined-hop");
    ASSIGN_OR_RETURN(req.scaling_factor, args.get_double("--sf", 1, 1e-6, 1e6));
    if (args.has("--link")) {
      const std::vector<std::string> parts = cli::split_commas(args.get("--link"));
      std::vector<double> v;
      for (const std::string& x : parts) {
        char* end = nullptr;
        const double d = std::strtod(x.c_str(), &end);
        if (x.empty() || *end != '\0' || !std::isfinite(d) || d < 0) break;
        v.push_back(d);
      }
      if (parts.size() != 3 || v.size() != 3 || !(v[1] > 0) || !(v[2] > 0)) {
        return invalid_argument("--link '" + args.get("--link") +
                                "': expected MS,UP_MBIT,DOWN_MBIT (latency >= 0, rates > 0)");
      }
      req.link = LinkEstimate{v[0], v[1], v[2]};
    }
  }
  const std::string stages = args.get("--stages", "auto");
  if (stages != "auto") {
    ASSIGN_OR_RETURN(req.stages, args.get_int("--stages", 0, 1, PipelineRequest::kMaxStages));
  }
  ASSIGN_OR_RETURN(req.max_latency_ms, milliseconds(args, "--max-latency"));
  ASSIGN_OR_RETURN(req.max_period_ms, milliseconds(args, "--max-period"));
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
  if (p.estimated_error) {
    std::printf(
        "expected relative L2 error against f32 %.3g (an estimate: each layer's measured "
        "error at the outputs, in a sum of squares)",
        *p.estimated_error);
    if (p.max_error) std::printf("; bound %.3g", *p.max_error);
    std::printf("\n");
  }
  if (p.mode == PlanMode::kStreaming && p.estimated_period_ms > 0) {
    std::printf("estimated period %.3f ms (%.2f frames/s); device load:", p.estimated_period_ms,
                1000.0 / p.estimated_period_ms);
    for (const DeviceLoad& d : p.device_load) {
      std::printf(" %s %.3f ms", d.device.c_str(), d.busy_ms);
    }
    std::printf("\n");
  }
}

// Procedure 1 Step 3 (`--monitor`): run_queue_rebalance on the profiled devices, one stream of
// the same frame; every frame's outputs are compared with one sequential run of the model on the
// reference device (relative L2, the largest printed). Returns the plan that streamed fastest.
Result<Plan> monitor_split(const Model& model, const Profile& profile, const LayerGraph& lg,
                           const PlanRequest& req, const cli::Args& args) {
  QueueMonitorOptions o;
  ASSIGN_OR_RETURN(o.queue_capacity, args.get_int("--queue", 10, 1, 1000));
  ASSIGN_OR_RETURN(o.window, args.get_int("--window", 20, 2, 100000));
  ASSIGN_OR_RETURN(o.max_iterations, args.get_int("--iterations", 6, 1, 1000));
  ASSIGN_OR_RETURN(o.drift, args.get_double("--drift", 0.2, 1e-3, 100));
  std::mt19937 rng(1);
  std::vector<std::string> files;
  if (args.has("--input")) files.push_back(args.get("--input"));
  ASSIGN_OR_RETURN(std::vector<Tensor> frame, bench_inputs(model, files, &rng));
  // The sequential outputs every frame is compared with.
  ASSIGN_OR_RETURN(Plan reference, plan_from_slices(lg.num_layers(), {{0, "reference"}}));
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> seq, Executor::create(lg, reference));
  std::vector<Tensor> expected;
  RETURN_IF_ERROR(seq->run(frame, &expected));
  seq->close();
  int frames = 0;
  double worst = 0;
  RebalanceReport rep;
  auto plan = run_queue_rebalance(
      profile, lg, split_plan_request(req), ExecutorOptions{}, [&] { return frame; },
      [&](const FrameResult& r) {
        ++frames;
        if (!r.status.ok()) return;
        FidelityMeter meter;
        if (!meter.add(r.outputs, expected).ok()) {
          worst = std::numeric_limits<double>::infinity();  // outputs of another shape or dtype
          return;
        }
        worst = std::max(worst, meter.result().relative_l2);
      },
      o, &rep);
  for (size_t i = 0; i < rep.iterations.size(); ++i) {
    const RebalanceIteration& it = rep.iterations[i];
    std::printf("step 3, iteration %zu: %s\n  window of %d frames: period %.3f ms;", i,
                it.plan.notation().c_str(), o.window, it.window.period_ms);
    for (const ActorQueue& q : it.window.actors) {
      std::printf(" actor %d %.2f waiting (full at %.0f%% of starts), busy %.3f ms;", q.actor,
                  q.mean_waiting, 100 * q.full_share, q.busy_ms);
    }
    std::printf("\n  devices (measured / predicted ms per frame):");
    for (const DeviceLatency& d : it.window.devices) {
      std::printf(" %s %.3f / %.3f (%.2fx);", d.device.c_str(), d.measured_ms, d.predicted_ms,
                  d.slowdown());
    }
    std::printf("\n  -> %s\n", it.decision.c_str());
  }
  if (!plan.ok()) return plan.status().with_context("--monitor");
  std::printf(
      "step 3 %s after %zu iteration(s); %d frames streamed, each out once and in order; "
      "largest relative L2 against the sequential reference run %.3g\n",
      rep.converged ? "converged" : "stopped at --iterations", rep.iterations.size(), frames,
      worst);
  if (rep.best >= 0) {
    std::printf("step 3 keeps iteration %d's plan: the lowest measured period, %.3f ms\n", rep.best,
                rep.iterations[static_cast<size_t>(rep.best)].window.period_ms);
  }
  return plan;
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
        " [--max-period MS]\n"
        "       tessera plan MODEL.tsr --profile profile.json --planner ga [--seed N]"
        " [--ga-comm all|cross] [--ga-objective balance|max|period] [--ga-init "
        "random|pipeline]\n\n%s",
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
  std::optional<double> max_error;
  if (args->has("--max-error")) {
    auto e = args->get_double("--max-error", 0, 0, 1e6);
    if (!e.ok()) return report_error("plan", e.status());
    max_error = *e;
  }

  auto req = plan_request(*args);
  if (!req.ok()) return report_error("plan", req.status());
  const bool monitor_flags = args->has("--input") || args->has("--queue") ||
                             args->has("--window") || args->has("--iterations") ||
                             args->has("--drift");
  if ((args->has("--monitor") && req->planner != "split") ||
      (monitor_flags && !args->has("--monitor"))) {
    return report_error("plan", invalid_argument("--monitor applies to --planner split only "
                                                 "(--input, --queue, --window, --iterations "
                                                 "and --drift need --monitor)"));
  }
  if (args->has("--monitor") && max_error) {
    return report_error("plan", invalid_argument("--monitor does not take --max-error"));
  }
  std::optional<CutProfile> cuts;
  if (args->has("--cut-profile")) {
    auto c = CutProfile::load(args->get("--cut-profile"));
    if (!c.ok()) return report_error("plan", c.status());
    if (!c->model_hash.empty() && c->model_hash != *hash) {
      return report_error("plan", invalid_argument(args->get("--cut-profile") +
                                                   ": a cut profile of another model (hash " +
                                                   c->model_hash + ", the model's " + *hash + ")"));
    }
    cuts = std::move(*c);
    req->cuts = &*cuts;
  }
  Result<PlanOutcome> outcome = internal_error("not planned");
  if (!max_error) {
    outcome = run_planner(*cm, *lg, *req);
  } else {
    // A fidelity bound restricts which layers the precision levels may run, at a few budgets
    // (error_budget.h); the fastest plan within the bound is kept.
    std::vector<PlanOutcome> outcomes;
    auto bounded = search_error_budget(*profile, *max_error, [&](const Profile& p) -> Result<Plan> {
      auto bcm = CostModel::build(p, *lg);
      Result<PlanOutcome> o =
          bcm.ok() ? run_planner(*bcm, *lg, *req) : Result<PlanOutcome>(bcm.status());
      outcomes.push_back(o.ok() ? *o : PlanOutcome{});  // one per call
      if (!o.ok()) return o.status();
      return o->plan;
    });
    if (!bounded.ok()) return report_error("plan", bounded.status().with_context("--max-error"));
    std::printf(
        "error bound %.3g: planned at %d filter budgets; kept budget %.3g, where %d (layer, "
        "precision level) pairs were admitted and %d refused\n",
        *max_error, bounded->tried, bounded->budget, bounded->bound.admitted,
        bounded->bound.refused);
    outcome = std::move(outcomes[static_cast<size_t>(bounded->call)]);
  }
  if (!outcome.ok()) return report_error("plan", outcome.status());
  if (args->has("--monitor")) {
    auto monitored = monitor_split(**model, *profile, *lg, *req, *args);
    if (!monitored.ok()) return report_error("plan", monitored.status());
    outcome->plan = std::move(*monitored);
  }
  for (const std::string& note : outcome->notes) std::printf("%s\n", note.c_str());
  if (!outcome->proven_optimal) {
    std::printf(
        "note: the search stopped after pricing %lld stage candidates; the plan below is the "
        "best it found, not proven optimal (fewer --stages make the proof cheaper)\n",
        static_cast<long long>(outcome->visited));
  }
  Plan* plan = &outcome->plan;
  plan->model_name = std::filesystem::path(path).stem().string();
  plan->model_hash = *hash;
  if (auto e = plan_expected_error(*profile, *plan); e.ok()) {
    plan->estimated_error = *e;
  } else if (max_error) {
    return report_error("plan", e.status());
  }
  plan->max_error = max_error;
  print_plan_table(*plan, *lg);

  // For comparison: every requested device alone at its top level.
  for (int vd : cm->latency_devices()) {
    const VirtualDevice& v = cm->virtual_devices()[static_cast<size_t>(vd)];
    if (!req->devices.empty() &&
        std::find(req->devices.begin(), req->devices.end(), v.device) == req->devices.end()) {
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
