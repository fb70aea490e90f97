// The public C++ API (api/tessera.h): Model and Session. A Session is a Plan run by the executor
// (scheduler/executor/): a device session is the one-stage plan of the whole model on it.
#include <mutex>

#include "api/internal.h"
#include "backends/registry.h"
#include "core/calibration_table.h"
#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "graph/layer_graph.h"
#include "graph/passes.h"
#include "scheduler/executor/executor.h"
#include "scheduler/profile.h"

namespace tessera {

const char* version_string() {
  return TESSERA_VERSION_STRING;
}

const Graph& model_graph(const Model& model) {
  return *model.graph_;
}

Model::Model() = default;
Model::~Model() = default;

Result<std::shared_ptr<const Model>> Model::from_graph(Graph graph) {
  return make(std::move(graph), "");
}

Result<std::shared_ptr<const Model>> Model::make(Graph graph, std::string hash) {
  RETURN_IF_ERROR(graph.validate());
  // Infers shapes; shape arithmetic left in the graph (not converted by `tessera convert`) is
  // evaluated here once, since shapes are static.
  RETURN_IF_ERROR(fold_constants(graph, nullptr));
  std::shared_ptr<Model> m(new Model());
  m->hash_ = std::move(hash);
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
  ASSIGN_OR_RETURN(std::string hash, model_file_hash(path));
  Result<std::shared_ptr<const Model>> m = make(std::move(loaded.graph), std::move(hash));
  if (!m.ok()) return m.status().with_context(path);
  return m;
}

struct Session::Impl {
  LayerGraph lg;
  std::unique_ptr<Executor> executor;
  std::string name;  // device name or plan notation
  std::mutex mu;     // guards the named-input state below
  std::vector<Tensor> inputs;
  std::vector<bool> input_set;
  std::vector<Tensor> outputs;
};

Session::Session(std::shared_ptr<const Model> model) : model_(std::move(model)) {}
Session::~Session() = default;

const std::string& Session::device_name() const {
  return impl_->name;
}

const Plan& Session::plan() const {
  return impl_->executor->plan();
}

uint64_t Session::peak_memory_bytes() const {
  return impl_->executor->peak_memory_bytes();
}

std::string Session::describe() const {
  return impl_->executor->describe();
}

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model,
                                                 const std::string& device) {
  SessionOptions options;
  options.device = device;
  return create(std::move(model), options);
}

Result<std::unique_ptr<Session>> Session::create(std::shared_ptr<const Model> model,
                                                 const SessionOptions& options) {
  if (!model) return invalid_argument("Session::create: null model");
  if (options.plan && !options.plan_path.empty()) {
    return invalid_argument("Session::create: give a plan or a plan_path, not both");
  }
  std::unique_ptr<Session> s(new Session(std::move(model)));
  s->impl_ = std::make_unique<Impl>();
  Impl& impl = *s->impl_;
  const Graph& g = model_graph(*s->model_);
  ASSIGN_OR_RETURN(impl.lg, LayerGraph::build(g));
  Plan plan;
  if (options.plan) {
    plan = *options.plan;
  } else if (!options.plan_path.empty()) {
    ASSIGN_OR_RETURN(plan, Plan::load(options.plan_path));
    if (plan.model_hash.empty() && !options.allow_unhashed_plan) {
      return failed_precondition(
          options.plan_path +
          ": the plan names no model hash, so nothing "
          "ties it to this model (set allow_unhashed_plan to run it anyway)");
    }
  } else {
    if (impl.lg.num_layers() > 0) {
      ASSIGN_OR_RETURN(plan, plan_from_slices(impl.lg.num_layers(), {{0, options.device}}));
    }
    RETURN_IF_ERROR(parse_device_name(options.device).status());
    plan.planner = "device";
  }
  const bool device_session = !options.plan && options.plan_path.empty();
  if (!device_session && !plan.model_hash.empty() && !s->model_->hash().empty() &&
      plan.model_hash != s->model_->hash()) {
    return failed_precondition("the plan is for model " + plan.model_hash + ", this model is " +
                               s->model_->hash());
  }
  ExecutorOptions eo;
  eo.queue_capacity = options.queue_capacity;
  eo.compile.memory_budget = options.memory_budget;
  eo.max_flops = options.max_flops;
  if (!options.calibration_path.empty()) {
    ASSIGN_OR_RETURN(CalibrationTable table, CalibrationTable::load(options.calibration_path));
    if (!table.model_hash.empty() && !s->model_->hash().empty() &&
        table.model_hash != s->model_->hash()) {
      return failed_precondition(options.calibration_path + ": the calibration is for model " +
                                 table.model_hash + ", this model is " + s->model_->hash());
    }
    eo.compile.calibration = std::make_shared<const CalibrationTable>(std::move(table));
  }
  ASSIGN_OR_RETURN(impl.executor, Executor::create(impl.lg, plan, eo));
  impl.name = device_session ? options.device : plan.notation();
  impl.inputs.resize(g.inputs().size());
  impl.input_set.assign(g.inputs().size(), false);
  return s;
}

Status Session::set_input(const std::string& name, const Tensor& tensor) {
  const auto& descs = model_->inputs();
  for (size_t i = 0; i < descs.size(); ++i) {
    if (descs[i].name != name) continue;
    if (tensor.dtype() != descs[i].dtype || tensor.shape() != descs[i].shape) {
      return invalid_argument("input " + quote_name(name) + " expects " +
                              dtype_name(descs[i].dtype) + descs[i].shape.to_string() + ", got " +
                              tensor.describe());
    }
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->inputs[i] = tensor;
    impl_->input_set[i] = true;
    return Status();
  }
  std::string names;
  for (const TensorDesc& d : descs) names += (names.empty() ? "" : ", ") + quote_name(d.name);
  return not_found("the model has no input " + quote_name(name) + " (inputs: " + names + ")");
}

Status Session::run() {
  Impl& impl = *impl_;
  std::lock_guard<std::mutex> lk(impl.mu);
  for (size_t i = 0; i < impl.inputs.size(); ++i) {
    if (!impl.input_set[i]) {
      return failed_precondition("input " + quote_name(model_->inputs()[i].name) + " was not set");
    }
  }
  return impl.executor->run(impl.inputs, &impl.outputs);
}

Result<std::vector<Tensor>> Session::run(const std::vector<Tensor>& inputs) {
  const auto& descs = model_->inputs();
  if (inputs.size() != descs.size()) {
    return invalid_argument("the model takes " + std::to_string(descs.size()) + " input(s), got " +
                            std::to_string(inputs.size()));
  }
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(impl_->executor->run(inputs, &outputs));
  return outputs;
}

Result<uint64_t> Session::submit(const std::vector<Tensor>& inputs) {
  return impl_->executor->submit(inputs);
}

Result<Frame> Session::next() {
  ASSIGN_OR_RETURN(FrameResult r, impl_->executor->next());
  return Frame{r.frame, std::move(r.status), std::move(r.outputs)};
}

void Session::close() {
  impl_->executor->close();
}

Result<Tensor> Session::output(const std::string& name) const {
  const auto& descs = model_->outputs();
  for (size_t i = 0; i < descs.size(); ++i) {
    if (descs[i].name != name) continue;
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (i >= impl_->outputs.size()) return failed_precondition("run() has not completed yet");
    return impl_->outputs[i];
  }
  return not_found("the model has no output " + quote_name(name));
}

}  // namespace tessera
