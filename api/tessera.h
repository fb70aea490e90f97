// Tessera's public C++ API.
//
//   auto model = tessera::Model::load("mobilenet_v2.tsr");          // Result<shared_ptr<Model>>
//   auto session = tessera::Session::create(*model, "reference");   // Result<unique_ptr<Session>>
//   auto outputs = (*session)->run({input_tensor});                 // Result<vector<Tensor>>
//
// An ONNX model loads directly, its symbolic input dimensions sized per input:
//
//   auto det = tessera::Model::import_onnx(
//       "detector.onnx", tessera::import_options_for_shapes({{"images", {1, 3, 640, 640}}}));
//
// A session runs the whole model on one device, or a Plan over several (from `tessera plan`):
//
//   tessera::SessionOptions opts;
//   opts.plan_path = "plan.json";                                   // or opts.plan = a Plan
//   auto session = tessera::Session::create(*model, opts);
//   (*session)->submit({frame0}); (*session)->submit({frame1});     // streaming: frames overlap
//   auto f0 = (*session)->next();                                   // Result<Frame>, in order
//
// Every call returns a Status or Result; nothing throws. A Model is immutable and may be shared by
// sessions on several threads. A Session's methods may be called from any thread (they
// serialise), but its named-input state (set_input / run / output) belongs to one caller at a
// time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/onnx/import_options.h"
#include "scheduler/plan.h"

namespace tessera {

class Graph;

// The version of this library at run time ("0.1.0"), to compare with the headers' at build time.
const char* version_string();

// Name, element type and shape of a model input or output.
struct TensorDesc {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
};

class Model {
 public:
  // Loads and verifies a .tsr file.
  static Result<std::shared_ptr<const Model>> load(const std::string& path);
  // Imports an ONNX model as `tessera convert` converts it (import, shape inference, the graph
  // passes), without a .tsr file. `options` (graph/onnx/import_options.h) size the symbolic input
  // dimensions: import_options_for_shapes({{"images", {1, 3, 640, 640}}}) is the rule of the
  // tool's --shape; an ImportOptions built by hand is applied as written. An unknown input name,
  // a shape of the wrong rank or disagreeing with a fixed dimension, a size below 1, and a
  // dimension left symbolic that nothing sets are InvalidArgument errors naming the input and
  // the dimension; a missing file is NotFound. What the importer decided for the caller (a
  // symbolic batch set to default_dim_value, inputs with initializers taken as constants) goes
  // to `warnings` when given, one line each. The model's hash() is empty, so a plan's model
  // hash is not checked against it (its layer count still is): a plan made for the .tsr that
  // `tessera convert` writes with the same shapes runs on it.
  // Imports share no state: any thread may import, several at once.
  static Result<std::shared_ptr<const Model>> import_onnx(
      const std::string& path, const ImportOptions& options = {},
      std::vector<std::string>* warnings = nullptr);
  // The same from `size` bytes of a serialised ONNX ModelProto (copied; `data` may go after).
  static Result<std::shared_ptr<const Model>> import_onnx_from_memory(
      const void* data, size_t size, const ImportOptions& options = {},
      std::vector<std::string>* warnings = nullptr);
  // Wraps a graph whose inputs have static shapes (used by converters and tests); constant
  // subgraphs are folded, other passes are not applied.
  static Result<std::shared_ptr<const Model>> from_graph(Graph graph);
  ~Model();

  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const std::vector<TensorDesc>& outputs() const { return outputs_; }
  // The hash of the .tsr file it was loaded from (what plans and profiles name); empty for a
  // model made with from_graph().
  const std::string& hash() const { return hash_; }

 private:
  friend const Graph& model_graph(const Model& model);  // api/internal.h
  static Result<std::shared_ptr<const Model>> make(Graph graph, std::string hash);
  Model();
  std::unique_ptr<Graph> graph_;
  std::vector<TensorDesc> inputs_;
  std::vector<TensorDesc> outputs_;
  std::string hash_;
};

// What a session runs: the whole model on `device`, or `plan` / the plan in `plan_path`.
struct SessionOptions {
  std::string device = "reference";
  std::optional<Plan> plan;
  std::string plan_path;
  // A plan read from `plan_path` must name the hash of the model it was made for (plans from
  // `tessera plan` and `tessera profile` do), and it must be this model's: a plan file without
  // one is refused, since nothing ties it to this model. Set this to run such a plan anyway. A
  // Plan given in `plan` is the caller's own: it is checked only when it names a hash.
  bool allow_unhashed_plan = false;
  // Streaming: frames that may wait between the plan's actors; 0 = the plan's queue_capacity.
  int queue_capacity = 0;
  // Budgets for models from untrusted sources (SECURITY.md). Memory: bytes the compiled
  // programs may commit (packed weights and activations), checked for the whole model and for
  // each stage before anything is packed or planned; 0: the default of core/budget.h (the
  // machine's memory, or TESSERA_MEMORY_BUDGET). Work: FLOPs per inference the model may need;
  // 0: no limit. Over either, create() fails with ResourceExhausted saying what was asked for.
  uint64_t memory_budget = 0;
  double max_flops = 0;
  // int8 activation ranges for int8 levels (`cpu#int8`; docs/precision.md): a calibration table
  // file from `tessera calibrate`, which must be of this model. Empty: none (an int8 program
  // then fails to compile, naming `tessera calibrate`).
  std::string calibration_path;
};

// One frame out of a stream: its id (0, 1, ... in submission order) and outputs, or its error.
struct Frame {
  uint64_t id = 0;
  Status status;
  std::vector<Tensor> outputs;  // one per model output; empty when !status.ok()
};

class Session {
 public:
  // Compiles the whole model on the named device (see `tessera devices`).
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model,
                                                 const std::string& device);
  // Compiles the model on a device or by a plan (checked against the model: its layer count and,
  // when the plan names one, the model's hash).
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model,
                                                 const SessionOptions& options);
  ~Session();

  const Model& model() const { return *model_; }
  // The device, or the plan's notation ("cpu:0[0] cpu:1[30]").
  const std::string& device_name() const;
  // The plan the session runs (a one-stage plan for a device session).
  const Plan& plan() const;
  // Bytes the compiled programs hold while running (activation arenas + packed weights), as the
  // devices report it; 0 when they do not know.
  uint64_t peak_memory_bytes() const;
  // What the compiled programs run, as `tessera run --describe` prints it: per step
  // "step I on DEVICE:" and one line per kernel, conversion or layout change where the backend
  // says (the cpu device names each layer's kernel, precision and quantisation).
  std::string describe() const;

  // Positional: one tensor per model input, in Model::inputs() order; returns one per output.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);

  // Streaming: submit() queues one frame (waiting while the pipeline is full) and returns its
  // id; next() returns the next frame in submission order, waiting for it. The caller must not
  // write a submitted input until its frame is out. close() cancels what is in flight; frames
  // already submitted still come out of next(), then next() reports OutOfRange (end of stream).
  Result<uint64_t> submit(const std::vector<Tensor>& inputs);
  Result<Frame> next();
  void close();

  // Named: set inputs, run, read outputs.
  Status set_input(const std::string& name, const Tensor& tensor);
  Status run();
  Result<Tensor> output(const std::string& name) const;

 private:
  struct Impl;
  explicit Session(std::shared_ptr<const Model> model);
  std::shared_ptr<const Model> model_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
