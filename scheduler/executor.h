// Executor: runs a Plan (ARCHITECTURE.md, "Executor"). Sequential mode today.
//
// Phases (STYLE.md, "split a run into phases"):
//   create()  validates the plan against the LayerGraph, opens every device the plan names (once
//             per name), groups the stages into steps, compiles each step into one Program on
//             its device and allocates the step's boundary tensors. Nothing of this is redone
//             per run.
//   run()     binds the inputs and invokes the steps in plan order.
//
// Steps: adjacent stages on the same device at the same level form one step, compiled as one
// Program over the union of their layers. A tensor that crosses a boundary between two such
// stages therefore never leaves the device: the backend keeps it in device memory like any other
// tensor inside a Program. This keeps the Device contract as it is (a Program runs on host
// tensors; no device-resident handles cross the executor) while a same-device boundary costs
// nothing. Stages on one device separated by a stage elsewhere stay separate steps: what flows
// between them goes through host memory, as the transfer model prices it. (A plan from the
// `slice` planner never has two adjacent stages on one device: eq. 8 charges that boundary
// transfers, so merging them is always cheaper; hand-written and random plans can.)
//
// A host table keyed by ValueId holds every tensor that crosses a step boundary, so a step reads
// its inputs wherever they were produced (skip connections over several steps included). The
// step outputs are allocated once at create() and written in place by Program::run on every
// run; only the model outputs are fresh tensors each run, since the caller keeps them.
//
// Each run records per-step wall time (execution plus the step's own transfers, as Program::run
// does them) and can be written as a Chrome trace (open in Perfetto): one track per device, one
// slice per step run.
//
// DVFS levels in placements are recorded but not applied: setting frequencies is the
// governor's job (energy/governor.h) and needs privileges the executor does not assume. Stages
// on one device at different levels are still separate steps, so that a governor hook can sit
// between them.
#pragma once

#include <chrono>
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

// Adjacent stages of a plan on one device and level, run as one Program.
struct ExecutorStep {
  int first_stage = 0;
  int last_stage = 0;  // inclusive
  std::string device;  // placement label, "cpu" or "cpu@1800"
};

struct StepRun {
  int step = 0;
  int run = 0;          // index of the run() call
  double start_ms = 0;  // since the executor was created
  double ms = 0;        // wall time of the step (execution + its transfers)
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

struct ExecutorOptions {
  // Run adjacent same-device stages as one Program (the default). Off: every stage is its own
  // step and every boundary goes through host memory (for measuring what merging saves).
  bool merge_same_device = true;
};

class Executor {
 public:
  // `lg` (and its graph) must outlive the executor. The plan is validated against `lg` and the
  // devices it names must open and compile their stages; errors name the stage.
  static Result<std::unique_ptr<Executor>> create(const LayerGraph& lg, const Plan& plan,
                                                  const ExecutorOptions& options = {});
  ~Executor();

  // `inputs` in graph-input order; `outputs` receives the graph outputs in order.
  Status run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs);

  const Plan& plan() const { return plan_; }
  const std::vector<ExecutorStep>& steps() const { return steps_; }
  // Every step run so far, in order.
  const std::vector<StepRun>& step_runs() const { return runs_; }
  // Mean measured ms per step over the runs from `first_run` on (0 for a step that never ran).
  std::vector<double> mean_step_ms(int first_run = 0) const;

  // Chrome trace JSON ({"traceEvents": [...]}) of every run so far.
  std::string chrome_trace_json() const;
  Status write_trace(const std::string& path) const;

 private:
  Executor() = default;
  struct StepState;

  const LayerGraph* lg_ = nullptr;
  Plan plan_;
  std::vector<std::unique_ptr<Device>> devices_;  // one per distinct name
  std::vector<ExecutorStep> steps_;
  std::vector<std::unique_ptr<StepState>> states_;  // one per step
  std::vector<Tensor> table_;                       // by ValueId
  std::vector<ValueId> boundary_values_;            // the table entries a run fills
  std::vector<StepRun> runs_;
  int num_runs_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tessera
