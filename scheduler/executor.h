// Executor: runs a Plan (ARCHITECTURE.md, "Executor"). Sequential mode today.
//
// create() opens every device the plan names (once per name) and compiles each stage's layers
// into a Program on its device. run() takes one input: the stages run in plan order; a host
// table keyed by ValueId holds every tensor that crosses a stage boundary, so a stage reads its
// inputs wherever they were produced (skip connections over several stages included). Within a
// stage tensors stay on its device; a Program uploads what it reads from the table and
// downloads what later stages or the model outputs need.
//
// Each run records per-stage wall time (execution plus the stage's own transfers, as
// Program::run does them) and can be written as a Chrome trace (open in Perfetto): one track
// per device, one slice per stage run.
//
// DVFS levels in placements are recorded but not applied: setting frequencies is the
// governor's job (energy/governor.h) and needs privileges the executor does not assume.
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

struct StageRun {
  int stage = 0;
  int run = 0;          // index of the run() call
  double start_ms = 0;  // since the executor was created
  double ms = 0;        // wall time of the stage (execution + its transfers)
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

class Executor {
 public:
  // `lg` (and its graph) must outlive the executor. The plan is validated against `lg` and the
  // devices it names must open; errors name the stage.
  static Result<std::unique_ptr<Executor>> create(const LayerGraph& lg, const Plan& plan);
  ~Executor();

  // `inputs` in graph-input order; `outputs` receives the graph outputs in order.
  Status run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs);

  const Plan& plan() const { return plan_; }
  // Every stage run so far, in order.
  const std::vector<StageRun>& stage_runs() const { return runs_; }
  // Mean measured ms per stage over all runs (0 for a stage that never ran).
  std::vector<double> mean_stage_ms() const;

  // Chrome trace JSON ({"traceEvents": [...]}) of every run so far.
  std::string chrome_trace_json() const;
  Status write_trace(const std::string& path) const;

 private:
  Executor() = default;
  struct StageState;

  const LayerGraph* lg_ = nullptr;
  Plan plan_;
  std::vector<std::unique_ptr<Device>> devices_;  // one per distinct name
  std::vector<std::unique_ptr<StageState>> stages_;
  std::vector<Tensor> table_;  // by ValueId
  std::vector<StageRun> runs_;
  int num_runs_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

}  // namespace tessera
