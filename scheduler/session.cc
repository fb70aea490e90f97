// The public C++ API (core/tessera.h): Model and Session.
//
// A Session today runs the whole model as one stage on one device; plans with several stages
// reuse the same compile/run path per stage.
#include <unordered_map>

#include "backends/registry.h"
#include "core/tessera.h"
#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "graph/passes.h"

namespace tessera {

Model::Model() = default;
Model::~Model() = default;

Result<std::shared_ptr<const Model>> Model::from_graph(Graph graph) {
  RETURN_IF_ERROR(graph.validate());
  // Infers shapes; shape arithmetic left in the graph (not converted by `tessera convert`) is
  // evaluated here once, since shapes are static.
  RETURN_IF_ERROR(fold_constants(graph, nullptr));
  std::shared_ptr<Model> m(new Model());
  m->graph_ = std::make_unique<Graph>(std::move(graph));
  const Graph& g = *m->graph_;
  for (ValueId v : g.inputs()) {
    m->inputs_.push_back({g.value(v).name, g.value(v).info.dtype, g.value(v).info.shape});
  }
  for (ValueId v : g.outputs()) {
    m->outputs_.push_back({g.value(v).name, g.value(v).info.dtype, g.value(v).info.shape});
  }
  return std::shared_ptr<const Model>(std::move(m));
}

Result<std::shared_ptr<const Model>> Model::load(const std::string& path) {
  ASSIGN_OR_RETURN(LoadedModel loaded, load_model_file(path));
  Result<std::shared_ptr<const Model>> m = from_graph(std::move(loaded.graph));
  if (!m.ok()) return m.status().with_context(path);
  return m;
}

struct Session::Impl {
  std::unique_ptr<Device> device;
  std::unique_ptr<Program> program;
  // Model input i feeds program input program_input_slot[i] (or none if unused).
  std::vector<Tensor> inputs;
  std::vector<bool> input_set;
  std::vector<Tensor> outputs;
};

Session::Session(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
Session::~Session() = default;

const std::string& Session::device_name() const {
  return impl_->device->name();
}

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model,
                                                 const std::string& device) {
  if (!model) return invalid_argument("Session::create: null model");
  std::unique_ptr<Session> s(new Session(std::move(model)));
  s->impl_ = std::make_unique<Impl>();
  ASSIGN_OR_RETURN(s->impl_->device, open_device(device));
  const Graph& g = s->model_->graph();
  std::vector<NodeId> all(static_cast<size_t>(g.num_nodes()));
  for (int i = 0; i < g.num_nodes(); ++i) all[static_cast<size_t>(i)] = i;
  ASSIGN_OR_RETURN(s->impl_->program, s->impl_->device->compile(g, all));
  s->impl_->inputs.resize(g.inputs().size());
  s->impl_->input_set.assign(g.inputs().size(), false);
  return s;
}

Status Session::set_input(const std::string& name, const Tensor& tensor) {
  const auto& descs = model_->inputs();
  for (size_t i = 0; i < descs.size(); ++i) {
    if (descs[i].name != name) continue;
    if (tensor.dtype() != descs[i].dtype || tensor.shape() != descs[i].shape) {
      return invalid_argument("input '" + name + "' expects " + dtype_name(descs[i].dtype) +
                              descs[i].shape.to_string() + ", got " + tensor.describe());
    }
    impl_->inputs[i] = tensor;
    impl_->input_set[i] = true;
    return Status();
  }
  std::string names;
  for (const TensorDesc& d : descs) names += (names.empty() ? "" : ", ") + d.name;
  return not_found("the model has no input '" + name + "' (inputs: " + names + ")");
}

Status Session::run() {
  const Graph& g = model_->graph();
  for (size_t i = 0; i < impl_->inputs.size(); ++i) {
    if (!impl_->input_set[i]) {
      return failed_precondition("input '" + model_->inputs()[i].name + "' was not set");
    }
  }
  // Gather the program's inputs from the model inputs by value id.
  std::unordered_map<ValueId, Tensor> by_value;
  for (size_t i = 0; i < g.inputs().size(); ++i) by_value[g.inputs()[i]] = impl_->inputs[i];
  std::vector<Tensor> prog_in;
  for (ValueId v : impl_->program->input_values()) prog_in.push_back(by_value.at(v));
  std::vector<Tensor> prog_out(impl_->program->output_values().size());
  RETURN_IF_ERROR(impl_->program->run(prog_in, prog_out));
  for (size_t i = 0; i < prog_out.size(); ++i) {
    by_value[impl_->program->output_values()[i]] = prog_out[i];
  }
  // Graph outputs may also be constants or inputs passed straight through.
  impl_->outputs.clear();
  for (ValueId v : g.outputs()) {
    if (g.value(v).is_constant) {
      impl_->outputs.push_back(g.value(v).data);
      continue;
    }
    auto it = by_value.find(v);
    if (it == by_value.end())
      return internal_error("output '" + g.value(v).name + "' was not computed");
    impl_->outputs.push_back(it->second);
  }
  return Status();
}

Result<std::vector<Tensor>> Session::run(const std::vector<Tensor>& inputs) {
  const auto& descs = model_->inputs();
  if (inputs.size() != descs.size()) {
    return invalid_argument("the model takes " + std::to_string(descs.size()) + " input(s), got " +
                            std::to_string(inputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) RETURN_IF_ERROR(set_input(descs[i].name, inputs[i]));
  RETURN_IF_ERROR(run());
  return impl_->outputs;
}

Result<Tensor> Session::output(const std::string& name) const {
  const auto& descs = model_->outputs();
  for (size_t i = 0; i < descs.size(); ++i) {
    if (descs[i].name != name) continue;
    if (i >= impl_->outputs.size()) return failed_precondition("run() has not completed yet");
    return impl_->outputs[i];
  }
  return not_found("the model has no output '" + name + "'");
}

}  // namespace tessera
