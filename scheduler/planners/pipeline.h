// The pipeline planner (seed 001, wave2-spec Sect. 1): a streaming Plan of k contiguous stages,
// one actor each, every stage on one virtual device (a device at one DVFS level).
//
// Stage i holds layers [c_i, c_{i+1}) (0 = c_0 < c_1 < ... < c_k = L) on option h_i. Its busy
// time b_i is eq. 8 of seed 000 (CostModel::slice_ms: execution, the transfers of every live
// tensor at both cuts, the per-slice overhead; seed 001 eq. 6-7 with Tessera's transfer model),
// its energy e_i is CostModel::slice_energy_mj. With B_d the summed busy time of physical device d
// (a device hosting several stages pays all of them, Fig. 10 of seed 001) and s_d its static
// power, the three objectives are
//   throughput (eq. 3)  minimise the period   T = max( max_d B_d, max_i b_i )
//   energy     (eq. 4)  minimise per frame    E = sum_i e_i + sum_{d used} s_d (T - B_d)
//                       (eq. 4 plus the static power of each device while it waits, pitfall 7)
//   latency    (eq. 5)  minimise one frame's critical path: stage i starts when every stage it
//                       reads from has finished (the sum of the stages on a chain of layers)
// each optionally subject to T <= max_period_ms and latency <= max_latency_ms. These are exactly
// the numbers price_plan (scheduler/pricer.h) gives the returned Plan: the planner's internal
// objective and the one pricer agree (tests/scheduler/pipeline_test.cc).
// In a plan over two or more physical devices every b_i is multiplied by its device's co-run
// factor (CostModel::corun_scale; stages share caches and memory bandwidth while they run at
// once), as price_plan does; a plan on one device is priced alone. The search scales each
// option's busy times in one instance and searches every device's options alone, unscaled, in
// another, and keeps the better (exact).
//
// The space (seed 001 eq. 2): C(L-1, k-1) cut sets times the option sequences, a device may
// host several stages (h_0 = h_2 is allowed), all of a device's stages run at one DVFS level (a
// device that alternates between its stages every frame does not switch frequency between them,
// and its static power while idle is that level's). Throughput and latency plans use each
// device's top level (eq. 6), energy plans every level (eq. 7); op support and memory as in
// `slice` (a stage that a device cannot run or that does not fit its memory is infeasible).
//
// The search, exact for every k:
//   k = 1      every option: O(D).
//   k = 2      Algorithm 1 of seed 001: per ordered pair of options one scan over the cut,
//              O(D^2 L), with Tessera's fixes (no empty stage, no transfer charged to one; the
//              single-device plans are the k = 1 plans).
//   k >= 3     depth-first branch and bound over (option, end) of stage 0, 1, ..., carrying the
//              load of every device, the finish time of every stage and the energy so far.
//              A branch is cut when a lower bound reaches the best plan found (or breaks a
//              constraint). The bounds are admissible, built once per call by O(L^2 k) dynamic
//              programs over the cheapest r-stage covers of every suffix [c, L):
//                period  >= max(T so far, (sum_d B_d + Rb(c, r)) / devices)
//                latency >= elapsed + Rb(c, r) (a chain of layers), else max(finish so far,
//                           Rb(c, r) / r)
//                energy  >= max(sum e + Re(c, r), sum_i (e_i - s_i b_i) + Rn(c, r) + T * sum s)
//              where Rb, Re and Rn are the least summed busy time, energy and energy less static
//              power over any r stages covering [c, L). The search first bounds the objective
//              by (1 + 0.01 x 2^j) times the global lower bound, j = 0, 1, ..., while that is
//              below the incumbent (the best plan of k - 1 stages under --stages auto, which
//              only looks for strictly better plans), then by the incumbent: a pass that finds
//              a plan below its bound has found the optimum, and tight bounds keep it narrow.
//              Worst case O(D^k C(L-1, k-1)) leaves (eq. 2). At 122 layers x 4 devices
//              (benchmarks/plan_bench.cc, BM_PipelinePlan) k <= 3 plans in milliseconds and
//              k = 4 in about 0.3 s for throughput; energy and latency, whose bounds are tight,
//              stay in milliseconds. Throughput at k >= 5 on 4 similar devices is not
//              practical yet (the pooled period bound is loose: it puts every remaining slice
//              on its fastest device), and --stages auto reaches it when 4 stages beat 3.
//   auto       the stopping rule of Sect. II-A-2: k = 1, 2, ... until k + 1 finds nothing
//              better (relative 1e-9) than k, at most kMaxStages; while no k meets the
//              constraints the search goes on to the next k.
//   budget     PipelineRequest::max_visits bounds the work of one call: a search that reaches
//              it returns its best plan so far, marked not proven optimal (so --stages auto on
//              throughput with 4 similar devices, whose 5-stage proof is out of reach, answers
//              in seconds instead of running on).
// Precomputation: b and e of every feasible slice on every option, O(D L^2) time and memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan.h"

namespace tessera {

enum class PipelineObjective { kThroughput, kEnergy, kLatency };

Result<PipelineObjective> parse_pipeline_objective(const std::string& name);
const char* pipeline_objective_name(PipelineObjective o);

struct PipelineRequest {
  PipelineObjective objective = PipelineObjective::kThroughput;
  int stages = 0;  // 0: auto (the stopping rule); else exactly this many, 1..kMaxStages
  double max_latency_ms = kInfiniteCost;  // constraint on one frame's latency; inf: none
  double max_period_ms = kInfiniteCost;   // constraint on the period; inf: none
  // Device names as in SlicePlanRequest::devices ("cpu:0", or "cpu:0@1800" for one level);
  // empty: every profiled device.
  std::vector<std::string> devices;
  // The most stage candidates the branch and bound of k >= 3 stages may price in one call (the
  // whole stopping rule included). When it runs out, the search stops: it returns the best
  // pipeline found so far, marked not proven optimal (under --stages auto: the best of the
  // stage counts it finished, and of the one it was exploring). About 1-3 s at the default.
  int64_t max_visits = 100'000'000;

  static constexpr int kMaxStages = 8;
};

struct PipelineStage {
  int first = 0;
  int last = 0;  // exclusive
  int vd = 0;    // virtual device of the CostModel
  bool operator==(const PipelineStage&) const = default;
};

// A pipeline and the planner's own numbers for it (price_plan gives the same).
struct Pipeline {
  std::vector<PipelineStage> stages;
  double period_ms = kInfiniteCost;
  double latency_ms = kInfiniteCost;
  double energy_mj = kInfiniteCost;
  int64_t visited = 0;  // stage candidates the search priced (its work, noise-free)
  // False when the search ran out of PipelineRequest::max_visits before it could prove that no
  // better pipeline exists.
  bool proven_optimal = true;
  bool feasible() const { return !stages.empty(); }
};

// The search alone: the best pipeline for the request, or an error that names what is wrong
// (an invalid request; no feasible plan because of op support or memory; a constraint no
// pipeline meets, with the best value any pipeline achieves).
Result<Pipeline> plan_pipeline(const CostModel& cm, const LayerGraph& lg,
                               const PipelineRequest& request);

// plan_pipeline as a streaming Plan, one actor per stage, with its estimates from price_plan.
Result<Plan> make_pipeline_plan(const CostModel& cm, const LayerGraph& lg,
                                const PipelineRequest& request);

// The streaming Plan of `p` (estimates not yet filled; price_plan fills them).
Plan pipeline_to_plan(const CostModel& cm, const Pipeline& p);

}  // namespace tessera
