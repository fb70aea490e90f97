// The stage graph both drivers of the executor run (executor.h): a Plan lowered to steps (stages
// compiled together as one Program), the actors that run them, and what each step reads.
//
// Built once by build_stage_graph(); read-only afterwards, so the actor threads share it without
// locks (a Program itself is run by one actor at a time: each step belongs to one actor).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "graph/layer_graph.h"
#include "scheduler/executor/executor.h"
#include "scheduler/plan.h"

namespace tessera {

struct StageGraph {
  struct Step {
    ExecutorStep desc;
    Device* device = nullptr;
    int device_index = 0;  // into `devices`
    std::unique_ptr<Program> program;
    std::vector<uint64_t> input_bytes;  // by program input, fixed by the graph
    std::vector<bool> model_output;     // by program output: a graph output (fresh per frame)
    uint64_t bytes_out = 0;
    // Steps producing this step's inputs (graph inputs and constants need none), ascending.
    std::vector<int> deps;
  };

  std::vector<std::unique_ptr<Device>> devices;  // one per distinct device name
  std::vector<Step> steps;                       // in plan order
  std::vector<std::vector<int>> actor_steps;     // by actor: its steps in plan order
  // Values a step writes in place: non-output program outputs (one buffer per frame slot).
  std::vector<ValueId> slot_values;
};

// Where an error of step `step` happened: "stage 2 (cpu:0[5])" or "stages 1-2 (...)".
std::string step_where(const Plan& plan, const ExecutorStep& step);

// Validates the plan (structure, stage order), opens its devices with `open` (once per name),
// groups stages into steps (merging when `merge` and the stages are adjacent, on one placement,
// one actor and one packing), assigns actors (streaming plans: by Stage::actor; sequential plans:
// one actor) and compiles every step. A merged step that its device refuses as a whole (e.g. an
// NPU's per-program memory cap) falls back to one program per stage.
Result<StageGraph> build_stage_graph(
    const LayerGraph& lg, const Plan& plan, bool merge,
    const std::function<Result<std::unique_ptr<Device>>(const std::string&)>& open,
    const CompileOptions& compile_options);

}  // namespace tessera
