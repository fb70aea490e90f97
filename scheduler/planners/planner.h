// Every planner behind one call: what `tessera plan`, the library's users and the Python module
// run. A planner reads a CostModel (a profile of the model on the devices) and returns a Plan
// with its estimates filled by the pricer (scheduler/pricer.h).
//
//   slice, preferred, hca, exhaustive   seed 000: a sequential plan of contiguous slices
//                                       (scheduler/planners/slice.h), latency or energy
//   pipeline                            seed 001: a streaming plan of contiguous stages
//                                       (scheduler/planners/pipeline.h), throughput, energy or
//                                       latency, optional stage count and bounds
//   ga                                  seed 003: CSDF actors with phases, mapped by a genetic
//                                       algorithm (scheduler/planners/ga.h)
//   split                               seed 004: the pipeline with layers split across the
//                                       devices, Procedure 1 Steps 1-2 (planners/split.h)
//   offload                             seed 002: one split between a client and a remote
//                                       server with packed hops, Algorithm 2
//                                       (scheduler/planners/offload.h); needs a CutProfile
//
// Thread rule: run_planner reads its arguments only; calls may run on several threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan.h"
#include "scheduler/planners/ga.h"
#include "scheduler/planners/offload.h"
#include "scheduler/planners/split.h"

namespace tessera {

struct PlanRequest {
  std::string planner = "slice";
  std::string objective;             // "" = the planner's default (latency; pipeline: throughput)
  std::vector<std::string> devices;  // "cpu:0" or "cpu:0@1800"; empty = every profiled device
  std::vector<std::string> prefer;   // planner "preferred": the preferred device, then fallbacks
  // Pipeline only (an error for the other planners when set):
  int stages = 0;                         // 0 = auto; else 1..8
  double max_latency_ms = kInfiniteCost;  // the largest latency of one frame allowed
  double max_period_ms = kInfiniteCost;   // the largest period allowed
  // ga only: the GA's options, and whether the pipeline planner's mapping joins the initial
  // population (an ablation; the plan is labelled ga+seeded).
  GaOptions ga;
  bool ga_seed_with_pipeline = false;
  // split only: memory per device, bytes (Step 1 splits the layers that need more); 0 = none.
  uint64_t memory_cap_bytes = 0;
  // offload only: the request (its device and remote, when empty, are `devices` [0] and [1]),
  // the cut profile (required; also prices the packed hop), the scaling factor and a link
  // estimate (nullopt: the profile's transfer fits).
  OffloadRequest offload;
  const CutProfile* cuts = nullptr;
  double scaling_factor = 1;
  std::optional<LinkEstimate> link;
};

struct PlanOutcome {
  Plan plan;
  // False when a search stopped at its budget before proving the plan optimal.
  bool proven_optimal = true;
  int64_t visited = 0;  // candidates the search priced, where the planner counts them
  // What the planner reports beyond the plan (one line each, for `tessera plan` to print).
  std::vector<std::string> notes;
};

// The split planner's part of a request (devices, base stages, memory cap): what run_planner
// gives make_split_plan, and what the queue monitor (Step 3) re-plans with.
SplitPlanRequest split_plan_request(const PlanRequest& request);

// The planners run_planner knows, in the order help texts list them.
const std::vector<std::string>& planner_names();

// Runs the request's planner on `cm` (built for `lg`) and prices the plan. The caller sets the
// plan's model_name and model_hash. Errors name the planner, objective or option at fault.
Result<PlanOutcome> run_planner(const CostModel& cm, const LayerGraph& lg,
                                const PlanRequest& request);

}  // namespace tessera
