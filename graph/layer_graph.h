// LayerGraph: the view of a model that the scheduler slices.
//
// After the passes of graph/passes.h every remaining node is one layer (activations, batch norms
// and shape arithmetic are folded away). A LayerGraph lists the layers in one topological order
// and, for every cut position k = 0..L (a cut between layer k-1 and layer k; cut 0 is before the
// first layer, cut L after the last), the tensors live across it: produced before the cut (or a
// graph input) and read at or after it (or a graph output). Their total size is what a slice
// boundary at k must move between devices (seed 000 Sect. V-C, seed 002 Sect. 3.2: with skip
// connections more than one tensor crosses a cut).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace tessera {

struct Layer {
  NodeId node = kNoNode;
  std::string name;
  OpKind kind = OpKind::kIdentity;
  OpCost cost;
  std::vector<ValueId> inputs;  // non-constant inputs
  std::vector<ValueId> outputs;
  // Elements of the constant inputs this layer reads. A constant shared by several layers is
  // in each of their counts; LayerGraph::total_parameters counts it once.
  uint64_t parameter_count = 0;
};

struct Cut {
  std::vector<ValueId> live;  // tensors crossing the cut, in ValueId order
  uint64_t live_bytes = 0;
};

class LayerGraph {
 public:
  // `g` must be shape-inferred; the LayerGraph keeps a pointer to it.
  static Result<LayerGraph> build(const Graph& g);

  const Graph& graph() const { return *graph_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const std::vector<Layer>& layers() const { return layers_; }
  const Layer& layer(int i) const { return layers_[static_cast<size_t>(i)]; }
  // cuts()[k] for k in 0..num_layers().
  const std::vector<Cut>& cuts() const { return cuts_; }
  const Cut& cut(int k) const { return cuts_[static_cast<size_t>(k)]; }

  // Tensors a slice of layers [first, last) reads from outside it, and produces for outside it.
  std::vector<ValueId> slice_inputs(int first, int last) const;
  std::vector<ValueId> slice_outputs(int first, int last) const;

  // The layer producing value `v`; -1 for graph inputs and constants.
  int producer_layer(ValueId v) const { return produced_at_[static_cast<size_t>(v)]; }

  double total_flops() const;
  // Elements of the distinct constants the layers read (a shared weight counts once).
  uint64_t total_parameters() const { return total_parameters_; }

 private:
  const Graph* graph_ = nullptr;
  std::vector<Layer> layers_;
  std::vector<Cut> cuts_;
  // For every value: index of the producing layer (-1 for graph inputs and constants) and of the
  // last layer reading it (num_layers() if it is a graph output).
  std::vector<int> produced_at_;
  std::vector<int> last_use_;
  std::vector<int> first_use_;
  uint64_t total_parameters_ = 0;
};

}  // namespace tessera
