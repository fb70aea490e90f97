// Executor: runs any Plan (ARCHITECTURE.md, "Executor"). One stage graph, two drivers.
//
// Phases (STYLE.md, "split a run into phases"):
//   create()   validates the plan against the LayerGraph, opens every device the plan names (once
//              per name), builds the stage graph (stage_graph.h: steps, actors, dependencies),
//              compiles each step into one Program and allocates the boundary buffers of every
//              frame slot. Nothing of this is redone per frame.
//   run()      the sequential driver: one frame on the caller's thread, steps in plan order.
//   submit() / next() / close()
//              the streaming driver: one thread per actor; frames flow through a fixed pool of
//              frame slots, each with its own boundary buffers (a ring of capacity + actors
//              slots, plus max_in_flight() - 1 per overlapped step), so no tensor is shared
//              between frames in flight. A step whose program
//              runs frames overlapped (Program::max_in_flight() > 1: a remote hop) is started by
//              its actor, which goes on to the next frame, and finished in order by a thread of
//              its own, up to max_in_flight() frames apart: packing, the link and the server
//              then work on different frames at once (seed 002's pipelined hop).
//
// Streaming guarantees (each tested in tests/scheduler/stream_test.cc):
//   - next() returns frames in submission order, each exactly once, with its outputs or its own
//     error; a stage failing (or throwing) on frame k errors frame k only, frees its slot, and
//     the stream goes on;
//   - a frame's deadline (SubmitOptions) or cancel(frame) ends it even while a stage is stalled,
//     as far as the stage's program checks RunOptions (every backend does before it runs; the
//     reference and cpu backends also between layers);
//   - close() cancels the frames in flight, joins every actor thread, and leaves their results
//     (Cancelled where they did not finish) to next(); with nothing submitted after it, the
//     stream drains: next() returns OutOfRange once every frame has been returned.
//   Why no deadlock: every actor takes frames in submission order and, within a frame, its steps
//   in plan order; plan order is a valid sequential order. The earliest unfinished (frame, step)
//   has every input ready and its actor free, so some actor can always make progress.
//
// Steps: stages that are adjacent in plan order, on the same placement, with the same packing
// and (streaming) on the same actor form one step, compiled as one Program over the union of
// their layers. A tensor that crosses a boundary between two such stages never leaves the
// device. In the sequential mode all stages are on one actor (the caller), so adjacent
// same-device stages with one packing always merge.
//
// Thread rule: run(), submit(), next(), cancel() and close() may be called from any thread;
// run() fails while a stream is open (submit() opens it, close() ends it). Measurements are
// read after the frames they describe have come out of next() or run().
//
// DVFS levels in placements are recorded but not applied: setting frequencies is the
// governor's job (energy/governor.h, a device's kExtensionDvfs) and needs privileges the
// executor does not assume. Stages on one device at different levels stay separate steps.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/layer_graph.h"
#include "scheduler/plan.h"

namespace tessera {

// Adjacent stages of a plan on one placement, packing and actor, run as one Program.
struct ExecutorStep {
  int first_stage = 0;
  int last_stage = 0;  // inclusive
  std::string device;  // placement label, "cpu" or "cpu@1800"
  int actor = 0;       // dense actor index (0 in sequential plans)
};

// One step's run on one frame. Times are ms since the executor was created.
struct StepRun {
  int step = 0;
  int run = 0;          // the frame: index of the run() call or submitted frame id
  double start_ms = 0;  // the program started
  double ms = 0;        // busy: wall time of the program run (execution + its transfers); for an
                  // overlapped step, from its start() to its finish(): the frame's time in the
                  // hop, while other frames overlap it
  double blocked_in = 0;   // ms the actor waited for this step's inputs (streaming)
  double blocked_out = 0;  // ms the frame waited for a free slot before entering (first step)
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  bool ok = true;  // false when the step failed or was skipped for an earlier failure
  // Per member device of a step whose program spans several (a split stage): the ms each was
  // busy with its part (RunOptions::member_ms); empty for a step on one device.
  std::vector<double> member_ms;
};

// Queue occupancy seen by one actor: histogram[n] = how many times it found n further frames
// ready for it when it started a frame (seed 004's monitor reads the same).
struct QueueOccupancy {
  int actor = 0;
  std::vector<int64_t> histogram;
  double mean() const;
};

struct ExecutorOptions {
  // Run adjacent same-device stages (of one actor) as one Program (the default). Off: every stage
  // is its own step and every boundary goes through host memory (for measuring what merging
  // saves).
  bool merge_same_device = true;
  // Frames in flight between actors; 0: the plan's queue_capacity.
  int queue_capacity = 0;
  // Opens a device by name; unset: the registry's open_device. Tests open devices that fail,
  // stall or throw on chosen frames here.
  std::function<Result<std::unique_ptr<Device>>(const std::string& name)> open_device;
  // Options passed to every compile (model hash, memory budget, ...). create() also checks the
  // whole model's compile memory estimate (backends/device.h) against compile.memory_budget
  // before it compiles any stage.
  CompileOptions compile;
  // Work budget: FLOPs per inference the model may need (0: no limit); over it, create() fails
  // with ResourceExhausted.
  double max_flops = 0;
  // Step runs kept for step_runs(), mean_step_ms() and the trace: the most recent this many
  // (64 bytes each; the default keeps about 6 MiB), so a stream that runs for days does not
  // grow without bound. At least 1.
  size_t step_run_history = 100000;
};

struct SubmitOptions {
  // The frame fails with DeadlineExceeded when it has not finished by then (checked by each
  // step's program as RunOptions::deadline, and before each step starts).
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
};

// One frame out of next(): its id, and its outputs or its error.
struct FrameResult {
  uint64_t frame = 0;
  Status status;
  std::vector<Tensor> outputs;  // in graph-output order; empty when !status.ok()
};

class Executor {
 public:
  // `lg` (and its graph) must outlive the executor. The plan is validated against `lg` and the
  // devices it names must open and compile their stages; errors name the stage.
  static Result<std::unique_ptr<Executor>> create(const LayerGraph& lg, const Plan& plan,
                                                  const ExecutorOptions& options = {});
  // Closes the stream if one is open (close()).
  ~Executor();

  // Sequential driver. `inputs` in graph-input order; `outputs` receives the graph outputs.
  Status run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs,
             const RunOptions& options = {});

  // Streaming driver. submit() checks the inputs, copies nothing (the tensors are shared, so
  // the caller must not write them until the frame is out), waits while every frame slot is in
  // use, and returns the frame's id (0, 1, 2, ... in submission order).
  Result<uint64_t> submit(std::vector<Tensor> inputs, const SubmitOptions& options = {});
  // The next frame in submission order, waiting until it is finished. OutOfRange when every
  // submitted frame has been returned and the stream is closed; FailedPrecondition when nothing
  // is pending on an open stream (next() would wait forever).
  Result<FrameResult> next();
  // Asks frame `frame` to stop (it comes out of next() with Cancelled unless it finishes first).
  void cancel(uint64_t frame);
  // Cancels what is in flight and joins the actor threads. Frames already submitted still come
  // out of next(). Idempotent. A later submit() opens a new stream.
  void close();
  // Frames submitted and not yet returned by next().
  uint64_t pending() const;

  const Plan& plan() const { return plan_; }
  const std::vector<ExecutorStep>& steps() const;
  int num_actors() const;
  // Frame slots (each with its own boundary buffers): queue capacity + actors (+ the further
  // frames of overlapped steps).
  int num_slots() const;
  // Sum of the programs' peak_memory_bytes() (0 where a device does not know).
  uint64_t peak_memory_bytes() const;
  // What step i's program runs (Program::describe(): its kernels, conversions and layouts, one
  // line per step where the backend says).
  std::string describe_step(size_t step) const;
  // Every step's, each after a line "step I on DEVICE:".
  std::string describe() const;
  // Frames step i runs overlapped in a stream (its program's max_in_flight(); 1 for most).
  int step_frames_in_flight(size_t step) const;

  // The step runs kept (the last ExecutorOptions::step_run_history), in completion order; with
  // `first_run`, only those of frames >= first_run (cheap for a recent window).
  std::vector<StepRun> step_runs(int first_run = 0) const;
  // Step runs dropped from the front of the history so far.
  uint64_t step_runs_dropped() const;
  // Mean busy ms per step over the kept frames from `first_run` on (0 for a step that never ran).
  std::vector<double> mean_step_ms(int first_run = 0) const;
  std::vector<QueueOccupancy> queue_occupancy() const;

  // Chrome trace JSON ({"traceEvents": [...]}) of every frame so far: one track per actor, one
  // slice per step run, flow arrows following each frame from actor to actor.
  std::string chrome_trace_json() const;
  Status write_trace(const std::string& path) const;

  struct Impl;

 private:
  Executor() = default;
  Plan plan_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
