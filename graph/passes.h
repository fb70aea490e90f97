// Graph passes: rewrite a shape-inferred Graph into the form backends and planners work on.
//
// Each pass keeps the graph valid and topologically ordered and returns how much it changed.
// `optimize_graph` runs them in the order the converter uses:
//   fold_constants     nodes whose inputs are all constant (and Shape of any static tensor) are
//                      evaluated with the reference kernels and replaced by constants; this
//                      collapses shape subgraphs such as Shape->Gather->Unsqueeze->Concat->Reshape
//   remove_identities  Identity and inference-mode Dropout are bypassed
//   fold_batchnorm     BatchNormalization after Conv/ConvTranspose/Gemm is folded into the
//                      weights and bias of that layer
//   prune_padding_taps kernel taps of a Conv that read only padding for every output position
//                      (a dilated 3x3 on a map smaller than its dilation, DeepLab's atrous
//                      pyramid at 20x20: a 1x1) are dropped from the weight and the pads
//                      shrink to match, so the output and what each position reads are unchanged
//   fuse_hard_swish    x * HardSigmoid(x) (alpha 1/6, beta 1/2: HardSwish as exported before
//                      ONNX opset 14) becomes HardSwish(x), which fuse_activations can then fold
//                      into the layer producing x
//   fuse_gelu          0.5 * x * (1 + erf(x / sqrt 2)) and its tanh approximation, as exporters
//                      spell GELU before ONNX opset 20, become one Gelu node
//   fuse_activations   an activation after a layer that accepts one (ops/activation.h) becomes an
//                      attribute of that layer
//   eliminate_dead     nodes that do not contribute to a graph output are removed
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.h"

namespace tessera {

struct PassStats {
  int folded_nodes = 0;
  int removed_identities = 0;
  int folded_batchnorms = 0;
  int fused_hard_swishes = 0;
  int fused_gelus = 0;
  int fused_activations = 0;
  int pruned_conv_taps = 0;
  int dead_nodes = 0;

  std::string to_string() const;
};

// Infers every value's shape in node order and folds constant nodes on the way; needs only the
// graph inputs' shapes. Use it (rather than Graph::infer_shapes) on freshly imported graphs,
// whose shape arithmetic must be folded before the nodes that consume it can be inferred.
// The constants it makes are checked against `memory_budget` (bytes; 0: the default of
// core/budget.h) before each is allocated: over it, ResourceExhausted naming the node, the
// shape, the bytes and the budget.
Status fold_constants(Graph& g, PassStats* stats, uint64_t memory_budget = 0);
// The passes below require inferred shapes and keep them valid.
Status remove_identities(Graph& g, PassStats* stats);
Status fold_batchnorm(Graph& g, PassStats* stats);
// Only for a constant f32 weight, where every dropped weight is finite (a NaN or infinity times
// a padding zero would be NaN) and the new pads are not negative.
Status prune_padding_taps(Graph& g, PassStats* stats);
Status fuse_hard_swish(Graph& g, PassStats* stats);
// The Erf form (x / sqrt 2 or x * (1 / sqrt 2); the tail 0.5 * x * (1 + erf) in any order of
// the multiplications) and the Tanh form (sqrt(2 / pi) * (x + 0.044715 * x^3) with x^3 as
// Pow(x, 3), x * (x * x) or (x * x) * x), every intermediate value read only inside the pattern.
Status fuse_gelu(Graph& g, PassStats* stats);
Status fuse_activations(Graph& g, PassStats* stats);
Status eliminate_dead_nodes(Graph& g, PassStats* stats);

// validate, every pass above in order, then validate + infer_shapes again.
Status optimize_graph(Graph& g, PassStats* stats = nullptr, uint64_t memory_budget = 0);

}  // namespace tessera
