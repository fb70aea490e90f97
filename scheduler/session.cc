// The public C++ API (core/tessera.h): Model and Session.
//
// A Session today runs the whole model as one stage on one device; plans with several stages
// reuse the same compile/run path per stage.
#include <algorithm>

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
  std::vector<Tensor> inputs;
  std::vector<bool> input_set;
  std::vector<Tensor> outputs;
  // Resolved once at create(): program input j is model input program_input_from[j]; model output
  // i is a constant, a model input passed straight through, or a program output.
  struct OutputSource {
    enum Kind { kConstant, kModelInput, kProgramOutput } kind;
    size_t index = 0;
  };
  std::vector<size_t> program_input_from;
  std::vector<OutputSource> output_from;
  std::vector<Tensor> program_inputs;
  std::vector<Tensor> program_outputs;
};

Session::Session(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
Session::~Session() = default;

const std::string& Session::device_name() const {
  return impl_->device->name();
}

uint64_t Session::peak_memory_bytes() const {
  return impl_->program->peak_memory_bytes();
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
  Impl& impl = *s->impl_;
  impl.inputs.resize(g.inputs().size());
  impl.input_set.assign(g.inputs().size(), false);
  auto position = [](const std::vector<ValueId>& list, ValueId v) {
    return static_cast<size_t>(std::find(list.begin(), list.end(), v) - list.begin());
  };
  for (ValueId v : impl.program->input_values()) {
    size_t i = position(g.inputs(), v);
    if (i == g.inputs().size()) {
      return internal_error("program input '" + g.value(v).name + "' is not a model input");
    }
    impl.program_input_from.push_back(i);
  }
  for (ValueId v : g.outputs()) {
    using Source = Impl::OutputSource;
    if (g.value(v).is_constant) {
      impl.output_from.push_back({Source::kConstant, 0});
    } else if (size_t j = position(impl.program->output_values(), v);
               j < impl.program->output_values().size()) {
      impl.output_from.push_back({Source::kProgramOutput, j});
    } else if (size_t i = position(g.inputs(), v); i < g.inputs().size()) {
      impl.output_from.push_back({Source::kModelInput, i});
    } else {
      return internal_error("output '" + g.value(v).name + "' is not computed by the program");
    }
  }
  impl.program_inputs.resize(impl.program_input_from.size());
  impl.program_outputs.resize(impl.program->output_values().size());
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
  Impl& impl = *impl_;
  for (size_t i = 0; i < impl.inputs.size(); ++i) {
    if (!impl.input_set[i]) {
      return failed_precondition("input '" + model_->inputs()[i].name + "' was not set");
    }
  }
  for (size_t j = 0; j < impl.program_input_from.size(); ++j) {
    impl.program_inputs[j] = impl.inputs[impl.program_input_from[j]];
  }
  for (Tensor& t : impl.program_outputs) t = Tensor();
  RETURN_IF_ERROR(impl.program->run(impl.program_inputs, impl.program_outputs));
  const Graph& g = model_->graph();
  impl.outputs.resize(impl.output_from.size());
  for (size_t i = 0; i < impl.output_from.size(); ++i) {
    const Impl::OutputSource& src = impl.output_from[i];
    switch (src.kind) {
      case Impl::OutputSource::kConstant:
        impl.outputs[i] = g.value(g.outputs()[i]).data;
        break;
      case Impl::OutputSource::kModelInput:
        impl.outputs[i] = impl.inputs[src.index];
        break;
      case Impl::OutputSource::kProgramOutput:
        impl.outputs[i] = impl.program_outputs[src.index];
        break;
    }
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
