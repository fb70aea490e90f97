#include "scheduler/executor/stage_graph.h"

#include <algorithm>
#include <map>

namespace tessera {

namespace {

// Every layer a stage reads from must run in the same or an earlier stage: sequential order.
Status check_stage_order(const LayerGraph& lg, const Plan& plan) {
  const Graph& g = lg.graph();
  std::vector<int> stage_of(static_cast<size_t>(lg.num_layers()), -1);
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    for (int l : plan.stages[i].layers) stage_of[static_cast<size_t>(l)] = static_cast<int>(i);
  }
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    for (int l : plan.stages[i].layers) {
      for (ValueId v : lg.layer(l).inputs) {
        const int p = lg.producer_layer(v);
        if (p >= 0 && stage_of[static_cast<size_t>(p)] > static_cast<int>(i)) {
          return invalid_argument(plan.stage_name(i) + ": layer " + std::to_string(l) + " reads " +
                                  quote_name(g.value(v).name) + ", produced by layer " +
                                  std::to_string(p) + " in the later stage " +
                                  std::to_string(stage_of[static_cast<size_t>(p)]));
        }
      }
    }
  }
  return Status();
}

// Maximal runs of plan-adjacent stages with the same single placement, actor and packing (or
// one step per stage): stages that pack their hop differently compile as programs of their own.
std::vector<ExecutorStep> group_steps(const Plan& plan, const std::vector<int>& actor, bool merge) {
  std::vector<ExecutorStep> steps;
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Placement& pl = plan.stages[i].placement;
    if (merge && !steps.empty() && plan.stages[i - 1].placement == pl &&
        plan.stages[i - 1].packing == plan.stages[i].packing && steps.back().actor == actor[i]) {
      steps.back().last_stage = static_cast<int>(i);
    } else {
      steps.push_back(ExecutorStep{static_cast<int>(i), static_cast<int>(i), pl.label(), actor[i]});
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

std::string step_where(const Plan& p, const ExecutorStep& step) {
  if (step.first_stage == step.last_stage)
    return p.stage_name(static_cast<size_t>(step.first_stage));
  return "stages " + std::to_string(step.first_stage) + "-" + std::to_string(step.last_stage) +
         " (" + step.device + "[" +
         std::to_string(p.stages[static_cast<size_t>(step.first_stage)].first()) +
         "], run as one program)";
}

Result<StageGraph> build_stage_graph(
    const LayerGraph& lg, const Plan& plan, bool merge,
    const std::function<Result<std::unique_ptr<Device>>(const std::string&)>& open,
    const CompileOptions& compile_options) {
  RETURN_IF_ERROR(plan.validate(lg.num_layers(), {}, false));
  RETURN_IF_ERROR(check_stage_order(lg, plan));
  const Graph& g = lg.graph();
  StageGraph sg;

  // Phase 1: open each device once; check every stage on its device, so that an unsupported
  // layer is reported against its own stage even when stages are merged below.
  std::map<std::string, int> opened;
  std::vector<int> stage_device(plan.stages.size());
  for (size_t i = 0; i < plan.stages.size(); ++i) {
    const Stage& s = plan.stages[i];
    const std::string where = plan.stage_name(i);
    // A split placement opens as one composite device like any other (backends/split/).
    auto device_name = s.placement.device_name();
    if (!device_name.ok()) return device_name.status().with_context(where);
    const std::string& name = *device_name;
    auto it = opened.find(name);
    if (it == opened.end()) {
      auto dev = open(name);
      if (!dev.ok()) return dev.status().with_context(where);
      it = opened.emplace(name, static_cast<int>(sg.devices.size())).first;
      sg.devices.push_back(std::move(*dev));
    }
    stage_device[i] = it->second;
    std::vector<NodeId> nodes;
    for (int l : s.layers) nodes.push_back(lg.layer(l).node);
    Status cap = check_capabilities(*sg.devices[static_cast<size_t>(it->second)], g, nodes);
    if (!cap.ok()) return cap.with_context(where);
  }

  // Phase 2: compile each step.
  const std::vector<int> actor = plan.stage_actors();
  int num_actors = 0;
  for (int a : actor) num_actors = std::max(num_actors, a + 1);
  for (const ExecutorStep& group : group_steps(plan, actor, merge)) {
    const int device_index = stage_device[static_cast<size_t>(group.first_stage)];
    Device* dev = sg.devices[static_cast<size_t>(device_index)].get();
    std::vector<std::pair<ExecutorStep, std::unique_ptr<Program>>> compiled;
    // A remote stage packs its hop as the plan says (Stage::packing; merged stages share it).
    CompileOptions step_options = compile_options;
    step_options.packing = plan.stages[static_cast<size_t>(group.first_stage)].packing;
    auto prog = dev->compile(g, step_nodes(lg, plan, group), step_options);
    if (prog.ok()) {
      compiled.emplace_back(group, std::move(*prog));
    } else if (group.first_stage == group.last_stage) {
      return prog.status().with_context(step_where(plan, group));
    } else {
      for (int i = group.first_stage; i <= group.last_stage; ++i) {
        ExecutorStep one{i, i, group.device, group.actor};
        step_options.packing = plan.stages[static_cast<size_t>(i)].packing;
        auto p1 = dev->compile(g, step_nodes(lg, plan, one), step_options);
        if (!p1.ok()) return p1.status().with_context(step_where(plan, one));
        compiled.emplace_back(one, std::move(*p1));
      }
    }
    for (auto& [desc, program] : compiled) {
      StageGraph::Step st;
      st.desc = desc;
      st.device = dev;
      st.device_index = device_index;
      st.program = std::move(program);
      for (ValueId v : st.program->input_values()) {
        const TensorInfo& info = g.value(v).info;
        st.input_bytes.push_back(static_cast<uint64_t>(info.shape.numel()) *
                                 dtype_size(info.dtype));
      }
      for (ValueId v : st.program->output_values()) {
        const TensorInfo& info = g.value(v).info;
        const bool model_output =
            std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
        st.model_output.push_back(model_output);
        st.bytes_out += static_cast<uint64_t>(info.shape.numel()) * dtype_size(info.dtype);
        if (!model_output) sg.slot_values.push_back(v);
      }
      sg.steps.push_back(std::move(st));
    }
  }

  // Phase 3: dependencies (which step produces each input) and the actors' step lists.
  std::vector<int> producer(static_cast<size_t>(g.num_values()), -1);
  for (size_t i = 0; i < sg.steps.size(); ++i) {
    for (ValueId v : sg.steps[i].program->output_values()) {
      producer[static_cast<size_t>(v)] = static_cast<int>(i);
    }
  }
  sg.actor_steps.assign(static_cast<size_t>(num_actors), {});
  for (size_t i = 0; i < sg.steps.size(); ++i) {
    StageGraph::Step& st = sg.steps[i];
    for (ValueId v : st.program->input_values()) {
      const int p = producer[static_cast<size_t>(v)];
      if (p < 0) {
        if (std::find(g.inputs().begin(), g.inputs().end(), v) == g.inputs().end()) {
          return internal_error(step_where(plan, st.desc) + ": input '" + g.value(v).name +
                                "' is produced by no step and is not a model input");
        }
        continue;
      }
      if (p >= static_cast<int>(i)) {
        return internal_error(step_where(plan, st.desc) + ": input '" + g.value(v).name +
                              "' is produced by a later step");
      }
      if (std::find(st.deps.begin(), st.deps.end(), p) == st.deps.end()) st.deps.push_back(p);
    }
    std::sort(st.deps.begin(), st.deps.end());
    sg.actor_steps[static_cast<size_t>(st.desc.actor)].push_back(static_cast<int>(i));
  }
  return sg;
}

}  // namespace tessera
