#include "scheduler/executor.h"

#include <algorithm>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "backends/registry.h"
#include "energy/json_fields.h"

namespace tessera {

struct Executor::StepState {
  Device* device = nullptr;
  int device_track = 0;  // trace track (index into devices_)
  std::unique_ptr<Program> program;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;        // allocated once; model outputs re-created per run
  std::vector<bool> fresh_output;     // by output: a model output (the caller keeps it)
  std::vector<uint64_t> input_bytes;  // by input, fixed by the graph
  uint64_t bytes_out = 0;
};

Executor::~Executor() = default;

namespace {

std::string stage_where(const Plan& p, size_t i) {
  const Stage& s = p.stages[i];
  return "stage " + std::to_string(i) + " (" + s.placement.label() + "[" +
         std::to_string(s.first()) + "])";
}

std::string step_where(const Plan& p, const ExecutorStep& step) {
  if (step.first_stage == step.last_stage)
    return stage_where(p, static_cast<size_t>(step.first_stage));
  return "stages " + std::to_string(step.first_stage) + "-" + std::to_string(step.last_stage) +
         " (" + step.device + "[" +
         std::to_string(p.stages[static_cast<size_t>(step.first_stage)].first()) +
         "], run as one program)";
}

// Every layer a stage reads from must run in the same or an earlier stage: sequential order.
Status check_stage_order(const LayerGraph& lg, const Plan& plan) {
  const Graph& g = lg.graph();
  std::vector<int> stage_of(static_cast<size_t>(lg.num_layers()), -1);
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    for (int l : plan.stages[i].layers) stage_of[static_cast<size_t>(l)] = static_cast<int>(i);
  }
  std::vector<int> producer(static_cast<size_t>(g.num_values()), -1);
  for (int l = 0; l < lg.num_layers(); ++l) {
    for (ValueId v : lg.layer(l).outputs) producer[static_cast<size_t>(v)] = l;
  }
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    for (int l : plan.stages[i].layers) {
      for (ValueId v : lg.layer(l).inputs) {
        const int p = producer[static_cast<size_t>(v)];
        if (p >= 0 && stage_of[static_cast<size_t>(p)] > static_cast<int>(i)) {
          return invalid_argument(stage_where(plan, i) + ": layer " + std::to_string(l) +
                                  " reads '" + g.value(v).name + "', produced by layer " +
                                  std::to_string(p) + " in the later stage " +
                                  std::to_string(stage_of[static_cast<size_t>(p)]));
        }
      }
    }
  }
  return Status();
}

// Maximal runs of adjacent stages with the same single placement (or one step per stage).
std::vector<ExecutorStep> group_steps(const Plan& plan, bool merge) {
  std::vector<ExecutorStep> steps;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Placement& pl = plan.stages[i].placement;
    if (merge && !steps.empty() && plan.stages[i - 1].placement == pl) {
      steps.back().last_stage = static_cast<int>(i);
    } else {
      steps.push_back(ExecutorStep{static_cast<int>(i), static_cast<int>(i), pl.label()});
    }
  }
  return steps;
}

std::vector<NodeId> step_nodes(const LayerGraph& lg, const Plan& plan, const ExecutorStep& step) {
  std::vector<int> layers;
  for (int i = step.first_stage; i <= step.last_stage; ++i) {
    const auto& ls = plan.stages[static_cast<size_t>(i)].layers;
    layers.insert(layers.end(), ls.begin(), ls.end());
  }
  // Layer indices follow the LayerGraph's topological order, so sorted is a valid order.
  std::sort(layers.begin(), layers.end());
  std::vector<NodeId> nodes;
  nodes.reserve(layers.size());
  for (int l : layers) nodes.push_back(lg.layer(l).node);
  return nodes;
}

}  // namespace

Result<std::unique_ptr<Executor>> Executor::create(const LayerGraph& lg, const Plan& plan,
                                                   const ExecutorOptions& options) {
  if (plan.mode != PlanMode::kSequential) {
    return unimplemented("the executor runs sequential plans only (this plan is " +
                         std::string(plan_mode_name(plan.mode)) + ")");
  }
  RETURN_IF_ERROR(plan.validate(lg.num_layers(), {}, false));
  RETURN_IF_ERROR(check_stage_order(lg, plan));
  std::unique_ptr<Executor> ex(new Executor());
  ex->lg_ = &lg;
  ex->plan_ = plan;
  const Graph& g = lg.graph();

  // Phase 1: open each device once; check every stage on its device, so that an unsupported
  // layer is reported against its own stage even when stages are merged below.
  std::map<std::string, int> opened;
  std::vector<int> stage_device(plan.stages.size());
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    const std::string where = stage_where(plan, i);
    if (!s.placement.single()) {
      return unimplemented(where + ": split placements are not executed yet");
    }
    const std::string& name = s.placement.devices[0].device;
    auto it = opened.find(name);
    if (it == opened.end()) {
      auto dev = open_device(name);
      if (!dev.ok()) return dev.status().with_context(where);
      it = opened.emplace(name, static_cast<int>(ex->devices_.size())).first;
      ex->devices_.push_back(std::move(*dev));
    }
    stage_device[i] = it->second;
    std::vector<NodeId> nodes;
    for (int l : s.layers) nodes.push_back(lg.layer(l).node);
    Status cap = check_capabilities(*ex->devices_[static_cast<size_t>(it->second)], g, nodes);
    if (!cap.ok()) return cap.with_context(where);
  }

  // Phase 2: compile each step. A merged step the device refuses as a whole (e.g. an NPU's
  // per-program memory cap) falls back to one program per stage.
  std::vector<ExecutorStep> grouped = group_steps(plan, options.merge_same_device);
  for (const ExecutorStep& group : grouped) {
    Device* dev =
        ex->devices_[static_cast<size_t>(stage_device[static_cast<size_t>(group.first_stage)])]
            .get();
    std::vector<std::pair<ExecutorStep, std::unique_ptr<Program>>> compiled;
    auto prog = dev->compile(g, step_nodes(lg, plan, group));
    if (prog.ok()) {
      compiled.emplace_back(group, std::move(*prog));
    } else if (group.first_stage == group.last_stage) {
      return prog.status().with_context(step_where(plan, group));
    } else {
      for (int i = group.first_stage; i <= group.last_stage; ++i) {
        ExecutorStep one{i, i, group.device};
        auto p1 = dev->compile(g, step_nodes(lg, plan, one));
        if (!p1.ok()) return p1.status().with_context(step_where(plan, one));
        compiled.emplace_back(one, std::move(*p1));
      }
    }
    for (auto& [step, program] : compiled) {
      auto st = std::make_unique<StepState>();
      st->device = dev;
      st->device_track = stage_device[static_cast<size_t>(step.first_stage)];
      st->program = std::move(program);
      for (ValueId v : st->program->input_values()) {
        const TensorInfo& info = g.value(v).info;
        st->input_bytes.push_back(static_cast<uint64_t>(info.shape.numel()) *
                                  dtype_size(info.dtype));
      }
      st->inputs.resize(st->input_bytes.size());
      // Phase 3: the step's boundary tensors, allocated once and written in place each run.
      for (ValueId v : st->program->output_values()) {
        const TensorInfo& info = g.value(v).info;
        const bool model_output =
            std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
        st->fresh_output.push_back(model_output);
        Tensor t;
        if (!model_output) {
          auto alloc = Tensor::create(info.dtype, info.shape);
          if (!alloc.ok()) return alloc.status().with_context(step_where(plan, step));
          t = std::move(*alloc);
        }
        st->bytes_out += static_cast<uint64_t>(info.shape.numel()) * dtype_size(info.dtype);
        st->outputs.push_back(std::move(t));
        ex->boundary_values_.push_back(v);
      }
      ex->steps_.push_back(step);
      ex->states_.push_back(std::move(st));
    }
  }
  for (ValueId v : g.inputs()) ex->boundary_values_.push_back(v);
  ex->table_.resize(static_cast<size_t>(g.num_values()));
  ex->t0_ = std::chrono::steady_clock::now();
  return ex;
}

Status Executor::run(std::span<const Tensor> inputs, std::vector<Tensor>* outputs) {
  const Graph& g = lg_->graph();
  if (inputs.size() != g.inputs().size()) {
    return invalid_argument("the model takes " + std::to_string(g.inputs().size()) +
                            " inputs, got " + std::to_string(inputs.size()));
  }
  for (ValueId v : boundary_values_) table_[static_cast<size_t>(v)] = Tensor();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs()[i]);
    if (inputs[i].dtype() != v.info.dtype || inputs[i].shape() != v.info.shape) {
      return invalid_argument("input '" + v.name + "': expected " + dtype_name(v.info.dtype) +
                              v.info.shape.to_string() + ", got " + inputs[i].describe());
    }
    table_[static_cast<size_t>(g.inputs()[i])] = inputs[i];
  }
  const int run_index = num_runs_++;
  for (size_t i = 0; i < states_.size(); ++i) {
    StepState& st = *states_[i];
    StepRun r;
    r.step = static_cast<int>(i);
    r.run = run_index;
    const auto& in_ids = st.program->input_values();
    for (size_t k = 0; k < in_ids.size(); ++k) {
      const Tensor& t = table_[static_cast<size_t>(in_ids[k])];
      if (!t.defined() || (t.numel() > 0 && t.raw() == nullptr)) {
        return internal_error(step_where(plan_, steps_[i]) + ": input '" + g.value(in_ids[k]).name +
                              "' was not produced by an earlier stage");
      }
      st.inputs[k] = t;
      r.bytes_in += st.input_bytes[k];
    }
    for (size_t k = 0; k < st.outputs.size(); ++k) {
      if (st.fresh_output[k]) st.outputs[k] = Tensor();
    }
    const auto start = std::chrono::steady_clock::now();
    Status s = st.program->run(st.inputs, st.outputs);
    const auto end = std::chrono::steady_clock::now();
    if (!s.ok()) return s.with_context(step_where(plan_, steps_[i]));
    r.start_ms = std::chrono::duration<double, std::milli>(start - t0_).count();
    r.ms = std::chrono::duration<double, std::milli>(end - start).count();
    r.bytes_out = st.bytes_out;
    const auto& out_ids = st.program->output_values();
    for (size_t k = 0; k < out_ids.size(); ++k) {
      table_[static_cast<size_t>(out_ids[k])] = st.outputs[k];
    }
    for (Tensor& t : st.inputs) t = Tensor();
    runs_.push_back(r);
  }
  outputs->clear();
  for (ValueId v : g.outputs()) {
    const Tensor& t = table_[static_cast<size_t>(v)];
    if (!t.defined()) {
      return internal_error("model output '" + g.value(v).name + "' was not produced");
    }
    outputs->push_back(t);
  }
  for (ValueId v : boundary_values_) table_[static_cast<size_t>(v)] = Tensor();
  return Status();
}

std::vector<double> Executor::mean_step_ms(int first_run) const {
  std::vector<double> sum(steps_.size(), 0);
  std::vector<int> n(steps_.size(), 0);
  for (const StepRun& r : runs_) {
    if (r.run < first_run) continue;
    sum[static_cast<size_t>(r.step)] += r.ms;
    ++n[static_cast<size_t>(r.step)];
  }
  for (size_t i = 0; i < sum.size(); ++i) {
    if (n[i]) sum[i] /= n[i];
  }
  return sum;
}

std::string Executor::chrome_trace_json() const {
  using nlohmann::json;
  json events = json::array();
  for (size_t d = 0; d < devices_.size(); ++d) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", 1},
                      {"tid", d},
                      {"args", {{"name", devices_[d]->name()}}}});
  }
  for (const StepRun& r : runs_) {
    const ExecutorStep& step = steps_[static_cast<size_t>(r.step)];
    const StepState& st = *states_[static_cast<size_t>(r.step)];
    int first_layer = lg_->num_layers(), last_layer = 0;
    size_t layers = 0;
    double estimated_ms = 0;
    for (int i = step.first_stage; i <= step.last_stage; ++i) {
      const Stage& s = plan_.stages[static_cast<size_t>(i)];
      first_layer = std::min(first_layer, s.layers.front());
      last_layer = std::max(last_layer, s.layers.back());
      layers += s.layers.size();
      estimated_ms += s.estimate.exec_ms + s.estimate.transfer_ms;
    }
    const std::string stages =
        step.first_stage == step.last_stage
            ? "stage " + std::to_string(step.first_stage)
            : "stages " + std::to_string(step.first_stage) + "-" + std::to_string(step.last_stage);
    events.push_back({{"name", stages + " " + step.device + "[" + std::to_string(first_layer) +
                                   ".." + std::to_string(last_layer) + "]"},
                      {"cat", "stage"},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", st.device_track},
                      {"ts", r.start_ms * 1000.0},
                      {"dur", r.ms * 1000.0},
                      {"args",
                       {{"run", r.run},
                        {"layers", layers},
                        {"bytes_in", r.bytes_in},
                        {"bytes_out", r.bytes_out},
                        {"estimated_ms", estimated_ms}}}});
  }
  json j = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return j.dump(1) + "\n";
}

Status Executor::write_trace(const std::string& path) const {
  return json::write_text_file(path, chrome_trace_json());
}

}  // namespace tessera
