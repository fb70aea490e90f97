#include "scheduler/planners/planner.h"

#include <algorithm>

#include "scheduler/planners/pipeline.h"
#include "scheduler/planners/slice.h"
#include "scheduler/pricer.h"

namespace tessera {

const std::vector<std::string>& planner_names() {
  static const std::vector<std::string> kNames = {"slice", "preferred", "hca", "exhaustive",
                                                  "pipeline"};
  return kNames;
}

namespace {

Status only_for_pipeline(const PlanRequest& r) {
  if (r.stages != 0) return invalid_argument("stages applies to the pipeline planner only");
  if (r.max_latency_ms != kInfiniteCost) {
    return invalid_argument("a latency bound applies to the pipeline planner only");
  }
  if (r.max_period_ms != kInfiniteCost) {
    return invalid_argument("a period bound applies to the pipeline planner only");
  }
  return Status();
}

Result<PlanOutcome> pipeline(const CostModel& cm, const LayerGraph& lg, const PlanRequest& r) {
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

Result<PlanOutcome> slicing(const CostModel& cm, const PlanRequest& r) {
  RETURN_IF_ERROR(only_for_pipeline(r));
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
    return invalid_argument("unknown planner '" + request.planner + "': expected " + known);
  }
  PlanOutcome out;
  if (request.planner == "pipeline") {
    ASSIGN_OR_RETURN(out, pipeline(cm, lg, request));
  } else {
    ASSIGN_OR_RETURN(out, slicing(cm, request));
  }
  RETURN_IF_ERROR(price_plan(cm, lg, &out.plan));
  return out;
}

}  // namespace tessera
