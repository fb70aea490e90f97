// A slice of a Tessera Graph as a self-contained HAL subgraph description (hal.h tnpu_graph):
// the tensors it touches (boundary activations, intermediates, constants with their data), its
// nodes with ONNX op names and attributes, and its inputs and outputs. The description owns
// every string and array it points at; constant data points into the Graph, which must outlive
// it.
#pragma once

#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/npu/hal.h"
#include "core/status.h"
#include "graph/graph.h"

namespace tessera {

class HalSubgraph {
 public:
  // `inputs`/`outputs` are the slice boundary (slice_boundary in backends/device.h).
  static Result<std::unique_ptr<HalSubgraph>> build(const Graph& g, std::span<const NodeId> layers,
                                                    std::span<const ValueId> inputs,
                                                    std::span<const ValueId> outputs);
  const tnpu_graph& graph() const { return graph_; }
  // The description index of a graph value (-1 if it is not part of the description).
  int index_of(ValueId v) const;

  HalSubgraph(const HalSubgraph&) = delete;
  HalSubgraph& operator=(const HalSubgraph&) = delete;

 private:
  HalSubgraph() = default;

  std::vector<ValueId> values_;  // description index -> graph value
  std::vector<int> index_;       // graph value -> description index
  std::deque<std::string> strings_;
  std::deque<std::vector<int64_t>> ints_;
  std::deque<std::vector<float>> floats_;
  std::vector<tnpu_tensor_desc> tensors_;
  std::vector<std::vector<uint32_t>> node_inputs_, node_outputs_;
  std::vector<std::vector<tnpu_attribute>> node_attrs_;
  std::vector<tnpu_node> nodes_;
  std::vector<uint32_t> inputs_, outputs_;
  tnpu_graph graph_{};
};

// The HAL element type of a Tessera dtype (nullopt-like: false when it has none).
bool hal_dtype(DType t, tnpu_dtype* out);

}  // namespace tessera
