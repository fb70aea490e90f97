// Procedure 1 Step 3 of seed 004 (wave2-spec Sect. 4.3): deploy the split plan, monitor queue
// occupancy and latency on every device with queues of 10, and when a device's queue stays full
// and it runs slower than the plan predicted, split its work again (Step 2) and iterate.
//
// Monitor (read_queue_window). A window is a run of frames on a streaming executor after it has
// filled, with frames still coming behind it (a source that always has one). For each actor, its
// queue is the frames that were ready for it when it started one (Executor::queue_occupancy, the
// histogram seed 004's Fig. 22 reads); the actor's queue counts as full at a start when it found at
// least capacity - 1 frames waiting (the frame slots of a pipeline are capacity + actors, and the
// actors upstream hold frames while they work), and it "stays full" when that is so at `full_share`
// of its starts in the window, or when it found on average at least `full_share` x (capacity - 1)
// frames waiting (a queue a noisy machine drains now and then). For each device, its latency is
// its measured time per frame against the plan's estimate: the estimate sums the stages it runs
// alone (exec + transfers) and its pieces of split stages (StageEstimate::member_ms); the
// measure is the union of the intervals in which those steps ran (a piece: from its step's start
// for the member's own time, StepRun::member_ms, from the composite split device) over the
// window's frames. The union, not the sum: several actors on one device overlap in time, each
// waiting for the others' turns, and the sum would count that waiting as the device's work.
// slowdown = measured / predicted.
//
// Rebalance (run_queue_rebalance). Iteration i deploys the plan that Steps 0-2 (make_split_plan)
// give on the profile with every device's layer times multiplied by its slowdown found so far
// (the "database" corrected by what the devices now do), streams warm-up + window frames
// through it and reads the window. The bottleneck is the actor whose queue stays full with the
// most waiting frames. When one of its devices' slowdowns drifts more than `drift` from 1, that
// factor is folded into the profile and the next iteration re-plans; otherwise (the bottleneck
// is the one the plan expected), or when re-planning gives the plan already running, the loop
// has converged. All iterations are one stream (an AdaptiveStream with its search off,
// adaptive_stream.h): a re-planned plan compiles in the background while the running one keeps
// streaming and is swapped in at a frame boundary; its window is read after its own warm-up.
// Every frame comes out once and in order and goes to `on_frame`; at the end the frames still in
// flight come out too. A frame that fails ends the run with its error.
//
// A split stage's own time is the slowest piece plus the merge, which cannot say which member
// is slow; its members' piece times can, so a device that runs only pieces of split stages is
// monitored as well as one that runs whole stages.
//
// Thread rule: read_queue_window reads a const Executor (its own locks); run_queue_rebalance
// submits and collects frames on the caller's thread (the executors' actors run the stages, a
// background thread compiles the next plan).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/layer_graph.h"
#include "scheduler/executor/executor.h"
#include "scheduler/planners/split.h"
#include "scheduler/profile.h"

namespace tessera {

struct QueueMonitorOptions {
  int queue_capacity = 10;  // seed 004's request queue per device (Fig. 22)
  int warmup = 0;           // frames before a window; 0: the executor's frame slots
  int window = 20;          // frames measured per iteration
  double full_share = 0.5;  // share of an actor's starts with a full queue: "stays full"
  double drift = 0.2;       // |slowdown - 1| that makes the bottleneck's device re-planned
  int max_iterations = 6;
};

// One actor's queue over a window.
struct ActorQueue {
  int actor = 0;
  std::vector<std::string> devices;  // the placement labels of its steps (split: every member)
  bool split = false;                // one of its steps is a split stage
  double mean_waiting = 0;           // frames found waiting per start
  double full_share = 0;             // starts that found a full queue
  double busy_ms = 0;                // measured busy ms per frame
};

// One device's latency over a window (single-device steps only).
struct DeviceLatency {
  std::string device;
  double predicted_ms = 0;
  double measured_ms = 0;
  double slowdown() const { return predicted_ms > 0 ? measured_ms / predicted_ms : 1.0; }
};

struct QueueWindow {
  std::vector<ActorQueue> actors;
  std::vector<DeviceLatency> devices;
  int bottleneck = -1;   // the actor whose queue stays full with most frames waiting; -1: none
  double period_ms = 0;  // measured time between frames leaving the pipeline
};

// Reads the window of frames [first_frame, last_frame] (inclusive) of `ex`: queues from the
// difference of its histograms `after` and `before` the window, busy times and the period from
// the window's step runs. `capacity`: the plan's queue capacity.
QueueWindow read_queue_window(const Executor& ex, const std::vector<QueueOccupancy>& before,
                              const std::vector<QueueOccupancy>& after, int first_frame,
                              int last_frame, int capacity, double full_share);

// One iteration of Step 3, for reports.
struct RebalanceIteration {
  Plan plan;  // the plan deployed
  QueueWindow window;
  std::map<std::string, double> slowdown;  // the factors the plan was made with
  std::string decision;                    // what the monitor concluded, in words
};

struct RebalanceReport {
  std::vector<RebalanceIteration> iterations;
  bool converged = false;
  int best = -1;  // the iteration whose plan measured the lowest period: the plan returned
};

// Runs Procedure 1 (Steps 1-2 by make_split_plan, then Step 3) on `profile`'s devices, streaming
// frames from `make_frame` (called once per frame, on the caller's thread); `on_frame` (may be
// empty) sees every frame that comes out, in order, on the same thread. Returns the plan that
// measured the lowest period over the iterations (the last one unless an earlier plan streamed
// faster: slowdowns folded in from a contended window can make a re-plan worse; seed 004 keeps
// the last); `report` gets every iteration and which was kept. Errors: planning, compiling or a
// frame failing (named with the iteration).
Result<Plan> run_queue_rebalance(const Profile& profile, const LayerGraph& lg,
                                 const SplitPlanRequest& request,
                                 const ExecutorOptions& executor_options,
                                 const std::function<std::vector<Tensor>()>& make_frame,
                                 const std::function<void(const FrameResult&)>& on_frame,
                                 const QueueMonitorOptions& options, RebalanceReport* report);

// `profile` with every layer time of each named device (all its levels) multiplied by its
// factor. Errors name a device the profile does not have.
Result<Profile> scale_profile(const Profile& profile, const std::map<std::string, double>& factor);

}  // namespace tessera
