// Tessera's public C++ API.
//
//   auto model = tessera::Model::load("mobilenet_v2.tsr");          // Result<shared_ptr<Model>>
//   auto session = tessera::Session::create(*model, "reference");   // Result<unique_ptr<Session>>
//   auto outputs = (*session)->run({input_tensor});                 // Result<vector<Tensor>>
//
// Every call returns a Status or Result; nothing throws. A Model is immutable and may be shared by
// sessions on several threads; a Session is used from one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

class Graph;

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
  // Wraps a graph whose inputs have static shapes (used by converters and tests); constant
  // subgraphs are folded, other passes are not applied.
  static Result<std::shared_ptr<const Model>> from_graph(Graph graph);
  ~Model();

  const std::vector<TensorDesc>& inputs() const { return inputs_; }
  const std::vector<TensorDesc>& outputs() const { return outputs_; }
  const Graph& graph() const { return *graph_; }

 private:
  Model();
  std::unique_ptr<Graph> graph_;
  std::vector<TensorDesc> inputs_;
  std::vector<TensorDesc> outputs_;
};

class Session {
 public:
  // Compiles the whole model on the named device (see `tessera devices`).
  static Result<std::unique_ptr<Session>> create(std::shared_ptr<const Model> model,
                                                 const std::string& device);
  ~Session();

  const Model& model() const { return *model_; }
  const std::string& device_name() const;

  // Positional: one tensor per model input, in Model::inputs() order; returns one per output.
  Result<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);

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
