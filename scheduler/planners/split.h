// The split planner (seed 004 Sect. V, Procedure 1 GENERATEDISTRIBUTION; wave2-spec Sect. 4.3):
// refines a streaming pipeline by splitting layers across several devices.
//
//   Step 0   a base plan: the pipeline planner's throughput plan over the devices (seed 001),
//            whose contiguous stages already form groups of about equal latency.
//   Step 1   every layer whose memory (weights + largest live set, CostModel::slice_memory_bytes)
//            exceeds the per-device cap must be split: it is carved out of its stage into a stage
//            of its own and split over all the devices with the cheapest method whose pieces
//            fit the cap (each piece's weights + input and output regions).
//   Step 2   equal latency: price the plan (scheduler/pricer.h); the bottleneck is the device
//            with the largest load. Its heaviest unsplit layer is carved out and split over all
//            the devices, by every method that has a rule for it, with ratios that equalise
//            the pieces: first ratio_i proportional to 1 / exec_ms(device_i, layer), then refined
//            per method on the pieces' priced times (execution with the profile's split
//            calibration, scatter and gather; a few fixed-point steps, the best kept); the
//            split that gives the lowest period is kept if it lowers the period by at least 1%,
//            else the next heaviest layer of that device is tried. Repeat until no split helps
//            or max_rounds layers were tried.
//   Step 3   (the queue monitor of Fig. 22, queues of 10) runs the plan, so it is not here:
//            scheduler/adapt/queue_monitor.h deploys the plan, reads queue occupancy and device
//            latency, and calls make_split_plan again on a profile corrected by the slowdowns.
// The returned plan is priced by price_plan, the numbers the planner compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan.h"

namespace tessera {

struct SplitPlanRequest {
  // Devices (profiled names, "cpu:0" or "cpu:0@1800"); empty: every profiled device at its top
  // level. A split uses all of them.
  std::vector<std::string> devices;
  // Memory per device for Step 1, bytes; 0: no cap beyond what the cost model knows.
  uint64_t memory_cap_bytes = 0;
  int max_rounds = 8;   // Step 2 splits at most this many layers
  int base_stages = 0;  // Step 0's pipeline stages; 0: the pipeline planner's auto rule
};

// What the planner did, for `tessera plan` and tests.
struct SplitPlanReport {
  std::vector<int> forced_layers;    // Step 1: split because of the memory cap
  std::vector<int> balanced_layers;  // Step 2: split to lower the period
  double base_period_ms = 0;
  double period_ms = 0;
};

Result<Plan> make_split_plan(const CostModel& cm, const LayerGraph& lg,
                             const SplitPlanRequest& request, SplitPlanReport* report = nullptr);

// The ratios Step 2 gives layer `layer` split by `method` over virtual devices `vds`: speed
// ratios (1 / exec_ms) refined on the pieces' priced times (see Step 2). Falls back to the speed
// ratios where the method has no rule for the layer.
std::vector<DeviceShare> balanced_split_shares(const CostModel& cm, const LayerGraph& lg, int layer,
                                               SplitMethod method, const std::vector<int>& vds);

// Splits layer `layer` of `plan` (carving it out of its stage) over `devices` (each with its
// ratio) by `method`, returning the new plan (unpriced). The layer must not already be in a split
// stage.
Result<Plan> split_layer_in_plan(const Plan& plan, int layer, const std::string& method,
                                 const std::vector<DeviceShare>& devices);

}  // namespace tessera
