#include "scheduler/planners/planner.h"

#include <algorithm>
#include <cstdio>

#include "scheduler/planners/pipeline.h"
#include "scheduler/planners/slice.h"
#include "scheduler/planners/split.h"
#include "scheduler/pricer.h"

namespace tessera {

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> kNames = {"slice",    "preferred", "hca",   "exhaustive",
                                                  "pipeline", "ga",        "split", "offload"};
  return kNames;
}

namespace {

Status only_for_pipeline(const PlanRequest& r, bool stages_allowed = false) {
  if (r.stages != 0 && !stages_allowed) {
    return invalid_argument("stages applies to the pipeline planner only");
  }
  if (r.max_latency_ms != kInfiniteCost) {
    return invalid_argument("a latency bound applies to the pipeline planner only");
  }
  if (r.max_period_ms != kInfiniteCost) {
    return invalid_argument("a period bound applies to the pipeline planner only");
  }
  return Status();
}

Result<PlanOutcome> pipeline(const CostModel& cm, const LayerGraph& lg, const PlanRequest& r) {
  if (r.memory_cap_bytes != 0) {
    return invalid_argument("a memory cap applies to the split planner only");
  }
  PipelineRequest req;
  ASSIGN_OR_RETURN(req.objective,
                   parse_pipeline_objective(r.objective.empty() ? "throughput" : r.objective));
  req.stages = r.stages;
  req.max_latency_ms = r.max_latency_ms;
  req.max_period_ms = r.max_period_ms;
  req.devices = r.devices;
  ASSIGN_OR_RETURN(Pipeline found, plan_pipeline(cm, lg, req));
  PlanOutcome out;
  out.plan = pipeline_to_plan(cm, found);
  out.plan.objective = pipeline_objective_name(req.objective);
  out.proven_optimal = found.proven_optimal;
  out.visited = found.visited;
  return out;
}

std::string format(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

Result<PlanOutcome> ga(const CostModel& cm, const LayerGraph& lg, const PlanRequest& r) {
  RETURN_IF_ERROR(only_for_pipeline(r));
  GaOptions o = r.ga;
  std::vector<std::string> devs = r.devices;
  if (devs.empty()) {
    for (int vd : cm.latency_devices()) {
      devs.push_back(cm.virtual_devices()[static_cast<size_t>(vd)].label);
    }
  }
  if (r.ga_seed_with_pipeline) {
    PipelineRequest preq;
    preq.devices = devs;
    ASSIGN_OR_RETURN(Pipeline p, plan_pipeline(cm, lg, preq));
    std::vector<int> vds;
    for (const std::string& d : devs) {
      ASSIGN_OR_RETURN(int vd, cm.find(d));
      vds.push_back(vd);
    }
    std::vector<int> chromosome(static_cast<size_t>(lg.num_layers()), 0);
    for (const PipelineStage& st : p.stages) {
      const auto it = std::find(vds.begin(), vds.end(), st.vd);
      if (it == vds.end()) {
        return internal_error("ga seeded with the pipeline: it uses a device not in the list");
      }
      for (int l = st.first; l < st.last; ++l) {
        chromosome[static_cast<size_t>(l)] = static_cast<int>(it - vds.begin());
      }
    }
    o.initial.push_back(std::move(chromosome));
  }
  ASSIGN_OR_RETURN(GaPlan gp, make_ga_plan(cm, lg, devs, o));
  PlanOutcome out;
  out.notes.push_back(
      "ga: " + std::to_string(gp.result.epochs) + " epochs, " +
      std::to_string(gp.result.evaluations) + " evaluations, " + format("%.3f s", gp.seconds) +
      " (population " + std::to_string(o.population) + ", mutation " + format("%.2f", o.mutation) +
      ", crossover " + format("%.2f", o.crossover) + ", seed " + std::to_string(o.seed) +
      ", comm " + ga_comm_name(o.comm) + ", objective " + ga_objective_name(o.objective) +
      (o.initial.empty() ? "" : ", seeded with the pipeline plan") + ")");
  std::string loads = "ga: phi " + format("%.3f ms", gp.result.phi) + ", loads (tau_i):";
  for (size_t i = 0; i < devs.size() && i < gp.result.load_ms.size(); ++i) {
    loads += " " + devs[i] + " " + format("%.3f ms", gp.result.load_ms[i]);
  }
  out.notes.push_back(loads);
  out.notes.push_back("csdf: " + gp.csdf.describe() + " (" + std::to_string(gp.csdf.splits) +
                      " phases split for deadlock freedom" +
                      (gp.csdf.reordered ? ", phases reordered" : "") + ")");
  out.plan = std::move(gp.plan);
  return out;
}

}  // namespace

SplitPlanRequest split_plan_request(const PlanRequest& request) {
  SplitPlanRequest req;
  req.devices = request.devices;
  req.base_stages = request.stages;
  req.memory_cap_bytes = request.memory_cap_bytes;
  return req;
}

namespace {

Result<PlanOutcome> split(const CostModel& cm, const LayerGraph& lg, const PlanRequest& r) {
  RETURN_IF_ERROR(only_for_pipeline(r, /*stages_allowed=*/true));
  SplitPlanReport rep;
  PlanOutcome out;
  ASSIGN_OR_RETURN(out.plan, make_split_plan(cm, lg, split_plan_request(r), &rep));
  std::string note = "split planner: base pipeline period " +
                     format("%.3f ms", rep.base_period_ms) + " -> " +
                     format("%.3f ms", rep.period_ms) + ";";
  for (int l : rep.forced_layers) note += " layer " + std::to_string(l) + " split (memory);";
  for (int l : rep.balanced_layers) note += " layer " + std::to_string(l) + " split (balance);";
  out.notes.push_back(note);
  return out;
}

Result<PlanOutcome> offload(const CostModel& cm, const LayerGraph& lg, const PlanRequest& r) {
  RETURN_IF_ERROR(only_for_pipeline(r));
  if (r.memory_cap_bytes != 0)
    return invalid_argument("a memory cap applies to the split planner only");
  if (r.cuts == nullptr) {
    return invalid_argument("the offload planner needs a cut profile (tessera bench cuts)");
  }
  OffloadRequest req = r.offload;
  if (req.device.empty() && req.remote.empty()) {
    if (r.devices.size() != 2) {
      return invalid_argument("the offload planner takes two devices, the client and the " +
                              std::string("remote server; given ") +
                              std::to_string(r.devices.size()));
    }
    req.device = r.devices[0];
    req.remote = r.devices[1];
  }
  ASSIGN_OR_RETURN(OffloadResult res, plan_offload(cm, lg, *r.cuts, req, r.scaling_factor, r.link));
  PlanOutcome out;
  out.plan = std::move(res.plan);
  out.visited = res.candidates;
  const OffloadMetrics& m = res.metrics;
  std::string note = "offload: " + std::to_string(res.candidates) + " candidates; cut " +
                     std::to_string(res.option.cut) +
                     (res.option.device_only ? " (device only)"
                      : res.option.bits > 0  ? ", " + std::to_string(res.option.bits) + " bits"
                                             : ", raw f32");
  note += "; latency " + format("%.3f ms", m.latency_ms) + ", period " +
          format("%.3f ms", m.period_ms) + ", sent " + format("%.0f B", m.bytes) + ", fidelity " +
          format("%.4f", m.fidelity);
  if (res.choice.feasible) {
    note += "; " + std::to_string(res.choice.feasible_count) + " feasible";
  } else {
    const OffloadConstraint& c = req.constraints[static_cast<size_t>(res.choice.emptied_by)];
    note += std::string("; best effort: no candidate meets ") + offload_metric_name(c.metric) +
            (c.at_most ? "<=" : ">=") + format("%g", c.threshold) + ", closest misses by " +
            format("%g", res.choice.violation);
  }
  out.notes.push_back(note);
  // Baselines from the same profiles and link: device-only, server-only (raw input), and
  // Neurosurgeon (latency objective, one split, no packing; seed 002 pitfall 8).
  OffloadRequest base = req;
  base.raw = true;
  base.relu_cuts_only = false;
  ASSIGN_OR_RETURN(std::vector<OffloadOption> options, offload_options(cm, lg, *r.cuts, base));
  std::vector<OffloadMetrics> metrics;
  offload_metrics(options, r.scaling_factor, r.link, base.pipelined_hop, &metrics,
                  base.frames_in_flight);
  int device = -1, server = -1, neuro = -1;
  for (size_t i = 0; i < options.size(); ++i) {
    const OffloadOption& o = options[i];
    if (o.device_only) device = static_cast<int>(i);
    if (o.cut == 0 && o.bits == 0 && !o.device_only) server = static_cast<int>(i);
    if ((o.bits == 0 || o.device_only) &&
        (neuro < 0 || metrics[i].latency_ms < metrics[static_cast<size_t>(neuro)].latency_ms)) {
      neuro = static_cast<int>(i);
    }
  }
  std::string b = "offload baselines:";
  for (const auto& [name, i] : {std::pair<const char*, int>{"device-only", device},
                                {"server-only", server},
                                {"neurosurgeon", neuro}}) {
    if (i < 0) continue;
    const OffloadMetrics& bm = metrics[static_cast<size_t>(i)];
    b += std::string(" ") + name + " (cut " + std::to_string(options[static_cast<size_t>(i)].cut) +
         ") latency " + format("%.3f ms", bm.latency_ms) + ", period " +
         format("%.3f ms", bm.period_ms) + ";";
  }
  out.notes.push_back(b);
  return out;
}

Result<PlanOutcome> slicing(const CostModel& cm, const PlanRequest& r) {
  RETURN_IF_ERROR(only_for_pipeline(r));
  if (r.memory_cap_bytes != 0)
    return invalid_argument("a memory cap applies to the split planner only");
  SlicePlanRequest req;
  ASSIGN_OR_RETURN(req.objective, parse_objective(r.objective.empty() ? "latency" : r.objective));
  req.planner = r.planner;
  req.devices = r.devices;
  req.preference = r.prefer;
  if (req.planner == "preferred" && req.preference.empty()) req.preference = req.devices;
  PlanOutcome out;
  ASSIGN_OR_RETURN(out.plan, make_slice_plan(cm, req));
  return out;
}

}  // namespace

Result<PlanOutcome> run_planner(const CostModel& cm, const LayerGraph& lg,
                                const PlanRequest& request) {
  const auto& names = planner_names();
  if (std::find(names.begin(), names.end(), request.planner) == names.end()) {
    std::string known;
    for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
    return invalid_argument("unknown planner " + quote_name(request.planner) + ": expected " +
                            known);
  }
  PlanOutcome out;
  if (request.planner == "pipeline") {
    ASSIGN_OR_RETURN(out, pipeline(cm, lg, request));
  } else if (request.planner == "ga") {
    ASSIGN_OR_RETURN(out, ga(cm, lg, request));
  } else if (request.planner == "split") {
    ASSIGN_OR_RETURN(out, split(cm, lg, request));
  } else if (request.planner == "offload") {
    ASSIGN_OR_RETURN(out, offload(cm, lg, request));
  } else {
    ASSIGN_OR_RETURN(out, slicing(cm, request));
  }
  RETURN_IF_ERROR(price_plan(cm, lg, &out.plan, request.cuts));
  return out;
}

}  // namespace tessera
