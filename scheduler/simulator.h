// A discrete-event run of any Plan over the cost model (wave2-spec Sect. 6.3, `tessera simulate`).
//
// The simulator replays what the executor (scheduler/executor/executor.h) does with a plan, with
// each stage's time taken from the pricer instead of a device:
//   - every stage is a task of its actor (its own, or the actor id it shares), and an actor runs
//     its tasks one after another, frames in submission order and, within a frame, its stages
//     in plan order;
//   - a stage starts when its actor is free, the stages it reads from (same frame) have
//     finished, and its device is free: a device hosting stages of several actors serves them
//     one at a time, first come first served (DeviceInfo::concurrency 1);
//   - a frame enters when a frame slot is free: the executor keeps max(2, queue capacity +
//     actors) frames in flight, and frame f takes the slot frame f - slots leaves;
//   - frames arrive back to back (a saturated stream, as `tessera run --stream`), or every
//     `arrival_interval_ms` (a camera).
// A stage's time is its priced busy time (exec + transfers, pricer.h) times the load factor of
// its device, times a seeded log-normal factor with the given coefficient of variation when
// `jitter_cv` > 0 (0: every frame takes the priced time).
//
// What it reports is what `tessera run --stream` measures, so that the two can be compared: the
// period (time between frames leaving, in the steady state after the warm-up frames), latency
// per frame (from entering the pipeline to leaving it), per-device utilisation, per-actor queue
// occupancy (frames ready for an actor when it takes one), and energy per frame (the stages'
// energy, scaled by the load factors, plus each device's static power while it idles).
//
// Not modelled: co-running slowdown (caches and memory bandwidth shared by stages that run at
// once), links between machines (a remote stage holds its actor for its whole hop here, where
// the executor overlaps up to 3 frames in it and the pricer prices that), and the executor's
// own overhead (measured <= 1%, docs/executor.md).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/plan.h"

namespace tessera {

struct SimulationOptions {
  int frames = 300;
  int warmup = 20;                 // frames left out of the steady-state figures
  int queue_capacity = 0;          // 0: the plan's
  double arrival_interval_ms = 0;  // 0: saturated (frames enter as soon as a slot is free)
  // Multiplies the time of every stage on a device (by device name, all its DVFS levels), e.g.
  // {"cpu:1", 2.0} for a core shared with another process. Unnamed devices: 1.
  std::map<std::string, double> load;
  double jitter_cv = 0;  // coefficient of variation of a stage's time (log-normal); 0: none
  uint64_t seed = 1;
};

struct SimulatedDevice {
  std::string device;
  double busy_ms = 0;      // per frame, steady state
  double utilisation = 0;  // busy share of the steady-state span
};

struct SimulatedActor {
  int actor = 0;  // dense index, in order of first stage (as the executor numbers actors)
  std::vector<int> stages;
  double busy_ms = 0;              // per frame, steady state
  double mean_frames_waiting = 0;  // frames ready for it when it took one
};

struct SimulationResult {
  int frames = 0;
  int slots = 0;
  double period_ms = 0;  // mean time between frames leaving, steady state
  double frames_per_s = 0;
  double makespan_ms = 0;  // first frame entering to last frame leaving
  // Latency from entering the pipeline to leaving (steady-state frames), and from arriving when
  // frames arrive at an interval (the wait for a slot included).
  double latency_mean_ms = 0;
  double latency_p50_ms = 0;
  double latency_p90_ms = 0;
  double latency_p99_ms = 0;
  double latency_max_ms = 0;
  double energy_per_frame_mj = 0;
  std::vector<double> stage_busy_ms;  // by stage: mean time per frame (load and jitter included)
  std::vector<SimulatedDevice> devices;
  std::vector<SimulatedActor> actors;
  // Per frame (all frames): when it entered, started its first stage, and left (ms from 0).
  std::vector<double> enter_ms, leave_ms;
};

// Simulates `plan` (sequential or streaming) over `cm` (built for `lg`). A sequential plan runs
// one frame at a time on one actor. Errors name the stage (as price_plan) or the option.
Result<SimulationResult> simulate_plan(const CostModel& cm, const LayerGraph& lg, const Plan& plan,
                                       const SimulationOptions& options = {});

}  // namespace tessera
