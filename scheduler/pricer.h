// One pricer for any Plan (ARCHITECTURE.md, "Cost models"; wave2-spec Sect. 6.3).
//
// price_plan() fills every stage's estimate and the plan's estimates from a CostModel:
//   - a stage: execution, transfers and per-slice overhead of its layers on its virtual device
//     (seed 000 eq. 8; a stage whose layers are not one range is priced as the sum of its
//     maximal ranges, each with its own boundary), and its energy;
//   - a split stage (one layer over several devices, seed 004): each piece's execution from the
//     per-op regression on its FLOPs and bytes, calibrated by the profiled layer and by the
//     profile's split calibration (CostModel::piece_exec_ms); its scatter and
//     gather from the exact byte counts (ops/split_rule.h) through the member's transfer fits;
//     the stage is the slowest piece (scatter + exec + gather) plus the host merge, and each
//     member device is loaded with its own piece;
//   - sequential latency: the sum of the stages (one frame runs them in plan order);
//   - streaming period: the largest summed busy time of any resource; the resources are the
//     devices (a device hosting two stages, at any DVFS levels, pays both) and the actors (the
//     stages of one actor run one after another on its thread); and each actor's span in one
//     frame's critical path (first stage's start to last stage's end), since an actor takes the
//     next frame only after its last stage of this one (CSDF phases waiting on other actors in
//     between, seed 003; an estimate: frames in flight can shift the waits);
//   - streaming latency: one frame's critical path, where a stage starts when the stages it
//     reads from have finished and the previous stage of its actor has;
//   - co-running: in a streaming plan whose stages keep two or more devices busy, each stage's
//     time is its device's co-run factor (CostModel::corun_scale, measured by the profiler with
//     the other devices running) times its time alone; its energy is not scaled;
//   - energy per frame: the stage energies, plus in a streaming plan each device's static power
//     over its idle share of the period.
//   - a remote hop (a stage with `packing`, given a CutProfile): the stage's inputs are priced on
//     the packed bytes of the cut at its first layer (the profile's mean, side information
//     included) through the device's upload fit, plus the profile's pack and unpack time, in
//     place of the f32 upload (seed 002: transfer = L + d_<s,c> / B, pitfall 5: packing time is
//     in the latency). Without a CutProfile a packed stage is priced on f32 bytes. In a streaming
//     plan a stage on a remote device runs overlapped (executor.h; RemoteDevice's default of 3
//     frames in flight): its actor is busy packing only, its server with the execution and
//     unpacking, and the period is bounded too by each link direction's wire time (the transfer
//     fit less its fixed latency) and by the whole hop / 3; one frame's latency is the whole hop.
// On a contiguous sequential plan this equals the slicing planners' SliceTable costs exactly
// (tests/scheduler/slice_test.cc).
#pragma once

#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/cut_profile.h"
#include "scheduler/plan.h"

namespace tessera {

// For each stage of `plan` (over `lg`), the other stages whose outputs it reads in the same frame,
// in first-read order: what one frame's critical path (the pricer) and the stage graph of a
// simulated stream (simulator.h) wait on.
std::vector<std::vector<int>> stage_dependencies(const LayerGraph& lg, const Plan& plan);

// `lg` is the model the CostModel was built for (its dependencies give the critical path).
// Placements must name profiled devices (and levels); errors name the stage. `cuts` (optional)
// prices packed hops; a packed stage whose cut and bitwidth it lacks is an error naming both.
Status price_plan(const CostModel& cm, const LayerGraph& lg, Plan* plan,
                  const CutProfile* cuts = nullptr);

// The pieces of layer `layer` split by `method` over virtual devices `vds` with `ratios`, as a
// split stage is priced: each piece's execution and its scatter + gather, and the host merge.
struct SplitPiecePrice {
  double exec_ms = 0;
  double moved_ms = 0;
  double busy_ms() const { return exec_ms + moved_ms; }
};
struct SplitPrice {
  std::vector<SplitPiecePrice> pieces;
  double merge_ms = 0;
  // The slowest piece plus the merge: the stage's time alone.
  double stage_ms() const;
};
Result<SplitPrice> price_split_pieces(const CostModel& cm, const LayerGraph& lg, int layer,
                                      SplitMethod method, const std::vector<int>& vds,
                                      const std::vector<double>& ratios);

}  // namespace tessera
