// QDQ models on int8 kernels (docs/precision.md, "QDQ models").
//
// A QDQ model (ONNX Runtime's quantize_static with QuantFormat.QDQ, and other quantisers) keeps
// its arithmetic in float and marks each quantised activation x with a QuantizeLinear ->
// DequantizeLinear pair: what flows between layers is round(x / s) + zp, read back as
// s * (q - zp). Its weights are DequantizeLinear of int8 constants, which constant folding turns
// into f32 when the model is converted. Devices without an int8 path run the pairs as they are
// (ops/quantize.h) and so compute what an int8 runtime computes.
//
// An int8 program does not need them: if x is held in int8 with the pair's own scale and zero
// point, the pair is the identity on it. fold_qdq_pairs() finds the pairs of a slice that can be
// folded so, and gives the graph without them (the readers of each DequantizeLinear output read x)
// and the quantisation of each x; the cpu device's int8 program then holds x in int8 with it
// (requantising into it inside the convolution that produces x). Pure function; safe from any
// thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "graph/graph.h"

namespace tessera {

// One per-tensor quantisation from a QuantizeLinear: real = scale * (q - zero_point), q in u8
// [0, 255] (is_unsigned) or s8 [-128, 127].
struct QdqQuantisation {
  float scale = 0;
  int32_t zero_point = 0;
  bool is_unsigned = true;
};

struct QdqFolding {
  // A copy of the graph (constants shared, not copied) in which every reader of a folded pair's
  // DequantizeLinear output reads the QuantizeLinear's input instead, and the folded nodes read
  // nothing (they are in no slice). Value and node ids are the original ones.
  Graph graph;
  // The slice without the folded pairs' nodes, in the original order.
  std::vector<NodeId> layers;
  // The QuantizeLinear input of each folded pair and its quantisation.
  std::vector<std::pair<ValueId, QdqQuantisation>> quant;
  int pairs = 0;  // QuantizeLinear nodes folded (each with its DequantizeLinear readers)
};

// Folds each QuantizeLinear Q of `layers` whose input x is an f32 activation read only inside
// the slice (no graph output) with a constant
// per-tensor scale (finite, > 0) and zero point (u8 or i8; absent: u8 0), whose output is read
// only by DequantizeLinear nodes of the slice with the same scale and zero point, and whose
// DequantizeLinear outputs are read only inside the slice (not by another slice, not graph
// outputs). A value quantised twice with different parameters keeps its second pair. nullopt when
// no pair folds.
std::optional<QdqFolding> fold_qdq_pairs(const Graph& g, std::span<const NodeId> layers);

// The quantisation of every value of the whole graph a folding pair gives: each
// QuantizeLinear input and each of its DequantizeLinear outputs (on the same grid). A slice
// that cuts a pair (the profiler's single layers) quantises its boundary values with these.
std::vector<std::pair<ValueId, QdqQuantisation>> qdq_quantisation(const Graph& g);

// Whether the whole graph has a pair that folds: a QDQ model, whose int8 programs need no
// calibration table.
bool has_qdq_pairs(const Graph& g);

}  // namespace tessera
