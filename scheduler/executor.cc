#include "scheduler/executor.h"

#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "backends/registry.h"

namespace tessera {

struct Executor::StageState {
  Device* device = nullptr;
  int device_track = 0;  // trace track (index into devices_)
  std::unique_ptr<Program> program;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

Executor::~Executor() = default;

namespace {

std::string stage_where(const Plan& p, size_t i) {
  const Stage& s = p.stages[i];
  return "stage " + std::to_string(i) + " (" + s.placement.label() + "[" +
         std::to_string(s.first()) + "])";
}

}  // namespace

Result<std::unique_ptr<Executor>> Executor::create(const LayerGraph& lg, const Plan& plan) {
  if (plan.mode != PlanMode::kSequential) {
    return unimplemented("the executor runs sequential plans only (this plan is " +
                         std::string(plan_mode_name(plan.mode)) + ")");
  }
  RETURN_IF_ERROR(plan.validate(lg.num_layers(), {}, false));
  std::unique_ptr<Executor> ex(new Executor());
  ex->lg_ = &lg;
  ex->plan_ = plan;
  const Graph& g = lg.graph();
  std::map<std::string, int> opened;
  // Every layer a stage reads from must run in an earlier stage: sequential order.
  std::vector<int> stage_of(static_cast<size_t>(lg.num_layers()), -1);
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    for (int l : plan.stages[i].layers) stage_of[static_cast<size_t>(l)] = static_cast<int>(i);
  }
  std::vector<int> producer(static_cast<size_t>(g.num_values()), -1);
  for (int l = 0; l < lg.num_layers(); ++l) {
    for (ValueId v : lg.layer(l).outputs) producer[static_cast<size_t>(v)] = l;
  }
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    const std::string where = stage_where(plan, i);
    for (int l : s.layers) {
      for (ValueId v : lg.layer(l).inputs) {
        const int p = producer[static_cast<size_t>(v)];
        if (p >= 0 && stage_of[static_cast<size_t>(p)] > static_cast<int>(i)) {
          return invalid_argument(where + ": layer " + std::to_string(l) + " reads '" +
                                  g.value(v).name + "', produced by layer " + std::to_string(p) +
                                  " in the later stage " +
                                  std::to_string(stage_of[static_cast<size_t>(p)]));
        }
      }
    }
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
    auto st = std::make_unique<StageState>();
    st->device = ex->devices_[static_cast<size_t>(it->second)].get();
    st->device_track = it->second;
    std::vector<NodeId> nodes;
    for (int l : s.layers) nodes.push_back(lg.layer(l).node);
    auto prog = st->device->compile(g, nodes);
    if (!prog.ok()) return prog.status().with_context(where);
    st->program = std::move(*prog);
    st->inputs.resize(st->program->input_values().size());
    st->outputs.resize(st->program->output_values().size());
    ex->stages_.push_back(std::move(st));
  }
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
  for (Tensor& t : table_) t = Tensor();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs()[i]);
    if (inputs[i].dtype() != v.info.dtype || inputs[i].shape() != v.info.shape) {
      return invalid_argument("input '" + v.name + "': expected " + dtype_name(v.info.dtype) +
                              v.info.shape.to_string() + ", got " + inputs[i].describe());
    }
    table_[static_cast<size_t>(g.inputs()[i])] = inputs[i];
  }
  const int run_index = num_runs_++;
  for (size_t i = 0; i < stages_.size(); ++i) {
    StageState& st = *stages_[i];
    StageRun r;
    r.stage = static_cast<int>(i);
    r.run = run_index;
    const auto& in_ids = st.program->input_values();
    for (size_t k = 0; k < in_ids.size(); ++k) {
      const Tensor& t = table_[static_cast<size_t>(in_ids[k])];
      if (!t.defined() || (t.numel() > 0 && t.raw() == nullptr)) {
        return internal_error(stage_where(plan_, i) + ": input '" + g.value(in_ids[k]).name +
                              "' was not produced by an earlier stage");
      }
      st.inputs[k] = t;
      r.bytes_in += t.byte_size();
    }
    for (Tensor& t : st.outputs) t = Tensor();  // fresh: callers may keep earlier outputs
    const auto start = std::chrono::steady_clock::now();
    Status s = st.program->run(st.inputs, st.outputs);
    const auto end = std::chrono::steady_clock::now();
    if (!s.ok()) return s.with_context(stage_where(plan_, i));
    r.start_ms = std::chrono::duration<double, std::milli>(start - t0_).count();
    r.ms = std::chrono::duration<double, std::milli>(end - start).count();
    const auto& out_ids = st.program->output_values();
    for (size_t k = 0; k < out_ids.size(); ++k) {
      r.bytes_out += st.outputs[k].byte_size();
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
  for (Tensor& t : table_) t = Tensor();
  return Status();
}

std::vector<double> Executor::mean_stage_ms() const {
  std::vector<double> sum(stages_.size(), 0);
  std::vector<int> n(stages_.size(), 0);
  for (const StageRun& r : runs_) {
    sum[static_cast<size_t>(r.stage)] += r.ms;
    ++n[static_cast<size_t>(r.stage)];
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
  for (const StageRun& r : runs_) {
    const Stage& s = plan_.stages[static_cast<size_t>(r.stage)];
    const StageState& st = *stages_[static_cast<size_t>(r.stage)];
    events.push_back(
        {{"name", "stage " + std::to_string(r.stage) + " " + s.placement.label() + "[" +
                      std::to_string(s.first()) + ".." + std::to_string(s.layers.back()) + "]"},
         {"cat", "stage"},
         {"ph", "X"},
         {"pid", 1},
         {"tid", st.device_track},
         {"ts", r.start_ms * 1000.0},
         {"dur", r.ms * 1000.0},
         {"args",
          {{"run", r.run},
           {"layers", s.layers.size()},
           {"bytes_in", r.bytes_in},
           {"bytes_out", r.bytes_out},
           {"estimated_ms", s.estimate.exec_ms + s.estimate.transfer_ms}}}});
  }
  json j = {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
  return j.dump(1) + "\n";
}

Status Executor::write_trace(const std::string& path) const {
  std::ofstream out(path, std::ios::binary);
  if (!out) return io_error(path + ": cannot write trace");
  out << chrome_trace_json();
  if (!out) return io_error(path + ": write failed");
  return Status();
}

}  // namespace tessera
