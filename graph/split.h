// Piece graphs of a split layer (seed 004): the layer's node cut by its split rule
// (ops/split_rule.h) into one small graph per piece, each holding the piece node and its sliced
// constants, ready to compile on an ordinary device.
//
// Plain data built once; read-only afterwards (safe to share between threads).
#pragma once

#include <span>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "ops/split_rule.h"

namespace tessera {

struct SplitLayer {
  SplitRule rule;
  NodeId node = kNoNode;  // in the original graph
  // The node's non-constant input slots, and the values of the original graph they read. Every
  // piece graph has one graph input per slot, in this order, shaped as the piece's region.
  std::vector<int> input_slots;
  std::vector<ValueId> inputs;
  ValueId output = kNoValue;

  struct Piece {
    Graph graph;  // graph inputs per input_slots, one node, one output; shapes inferred
    NodeId node = kNoNode;
  };
  std::vector<Piece> pieces;
};

// Cuts node `node` of `g` (shape-inferred) by `method` into ratios.size() pieces. Errors name the
// node (an op without a rule for the method, more pieces than units, a piece reading only
// padding).
Result<SplitLayer> split_layer(const Graph& g, NodeId node, SplitMethod method,
                               std::span<const double> ratios);

}  // namespace tessera
