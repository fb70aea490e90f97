// ONNX import: an ONNX model file (a ModelProto protobuf) to a Tessera Graph.
//
// Import is two phases, because some ONNX semantics depend on tensor ranks the file does not
// state:
//
//   ASSIGN_OR_RETURN(ImportedModel m, import_onnx("resnet50.onnx", {}));   // parse + build
//   RETURN_IF_ERROR(infer_onnx_shapes(m));                                  // shapes + lowering
//
// Phase 1 (import_onnx / import_onnx_from_memory) parses the protobuf and builds the Graph:
//   - The default domain ("" or "ai.onnx") must be imported at opset 11..21. An older opset is
//     accepted only when every op the model uses has the same definition there as at opset 11
//     (an Add or Relu of opset 7); where one changed before 11 (Clip, Pad and Slice took
//     attributes, Resize, Conv, Gemm...) the model is refused naming those ops: convert it with
//     onnx.version_converter first. Nodes of any other domain are unsupported.
//   - Initializers become constants (FLOAT, FLOAT16, INT8, UINT8, INT32, INT64, BOOL; raw_data or
//     the typed fields; external data is not supported). A graph input that has an initializer
//     is a constant, not an input.
//   - Graph inputs get their dtype and shape from the file. A symbolic (dim_param) or unknown
//     dimension is replaced by the input's shape in ImportOptions::input_shapes, by
//     ImportOptions::dim_params[name] or, for dimension 0 (the batch) only, by
//     default_dim_value; substitutions of the last two kinds are reported in
//     ImportedModel::warnings. Any other dimension left unset (or with require_all_dims, any
//     at all) is an error naming the input and the dimension. An input of unknown rank is an
//     error.
//   - Constant nodes are folded into constants, so ops see e.g. Reshape targets as constants.
//   - Every other node maps op_type to an OpKind. All unsupported nodes are reported in one
//     Unimplemented error, grouped by op type with a count and at most three node names each
//     ("unsupported operators: Loop x2 (nodes 'a', 'b'), NonZero x1 (node 'c'); ..."). This
//     happens before constant folding: an op type Tessera lacks has no reference kernel, so
//     folding could not evaluate it either, even with constant inputs.
//     Empty input names become kNoValue; unnamed nodes get unique generated names
//     (op_type + "_" + node index).
//   - value_info is ignored: Tessera infers shapes itself.
//   - The graph is sorted topologically and validated (each tensor produced once, every input
//     defined, no cycles, every graph output defined). Shapes are not inferred yet.
//
// Phase 2 (infer_onnx_shapes) runs Graph::infer_shapes and then the opset-dependent rewrites
// that need ranks. Use it instead of calling Graph::infer_shapes directly on an imported graph:
//   - Softmax before opset 13 flattened its input to 2-D at `axis` (default 1) and normalised
//     over everything from `axis` on. Where `axis` is not the last dimension such a node becomes
//     Flatten(axis) -> Softmax(axis=-1) -> Reshape(original shape), which ops/ computes with
//     opset-13 semantics. Where it is the last dimension the two semantics coincide and the node
//     is kept.
// Other opset differences within 11..21 are handled by the ops, which accept every form:
// attributes that became inputs (Split's split and Squeeze/Unsqueeze's axes in 13; ReduceMean's
// axes and Pad's axes in 18), Split's num_outputs (18), Dropout's ratio input, Reshape's
// allowzero, AveragePool's dilations (19). What those opsets added that Tessera lacks is refused
// by the op, naming the node and the attribute or mode (Resize's axes, antialias and
// keep_aspect_ratio_policy of 18 and half_pixel_symmetric of 19; Pad's 'wrap' mode of 19);
// opsets 19-21 otherwise only added element types (float8, int4), which import refuses.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "graph/graph.h"
#include "graph/onnx/import_options.h"

namespace tessera {

struct PassStats;  // graph/passes.h

// The opsets of the default ONNX domain Tessera imports.
inline constexpr int64_t kMinOnnxOpset = 11;
inline constexpr int64_t kMaxOnnxOpset = 21;

// ImportOptions (how symbolic input dimensions are sized): graph/onnx/import_options.h.

// What import produced, with the facts about the file a caller may need.
struct ImportedModel {
  Graph graph;
  int64_t ir_version = 0;
  int64_t opset = 0;  // of the default domain ("" / "ai.onnx")
  std::string producer_name;
  std::string producer_version;
  std::string graph_name;
  // Things the importer decided for the caller: substituted input dimensions, graph inputs that
  // were initializers and so became constants. One human-readable line each.
  std::vector<std::string> warnings;
};

// Phase 1 from a file. File errors are IoError/NotFound; all messages name the file.
Result<ImportedModel> import_onnx(const std::string& path, const ImportOptions& options = {});
// Phase 1 from bytes holding a serialised ModelProto.
Result<ImportedModel> import_onnx_from_memory(std::span<const uint8_t> bytes,
                                              const ImportOptions& options = {});

// A serialised TensorProto to a Tensor: the input_N.pb / output_N.pb files of ONNX's backend test
// cases, or what onnx.numpy_helper.from_array(a).SerializeToString() writes. The same element
// types as initializers; `name`, when given, receives the tensor's name (often empty).
Result<Tensor> import_onnx_tensor(std::span<const uint8_t> bytes, std::string* name = nullptr);
// The same from a file; messages name the file.
Result<Tensor> import_onnx_tensor_file(const std::string& path, std::string* name = nullptr);

// Phase 2: shape inference of the whole graph, plus the rank-dependent lowering described above.
// Inference runs through fold_constants (graph/passes.h), so shape arithmetic (Shape -> Gather ->
// Concat -> Reshape) is evaluated on the way and constant nodes are replaced by constants.
// Errors name the node whose shapes are inconsistent. The nodes folded here are added to
// `stats->folded_nodes` when given.
Status infer_onnx_shapes(ImportedModel& model, PassStats* stats = nullptr);

// The whole conversion `tessera convert` performs: import_onnx, infer_onnx_shapes, then
// optimize_graph (graph/passes.h), whose counts go to `stats` when given. The result's graph is
// what a .tsr file holds.
Result<ImportedModel> convert_onnx(const std::string& path, const ImportOptions& options = {},
                                   PassStats* stats = nullptr);

// The lowering part of phase 2 on its own (for tests and for callers that infer shapes
// themselves): rewrites the pre-opset-13 Softmax nodes whose axis is not the last dimension.
// Needs the TensorInfo of every Softmax input. Idempotent; returns how many nodes it rewrote.
// The new values have no TensorInfo until shapes are inferred again.
Result<int> lower_legacy_softmax(ImportedModel& model);

}  // namespace tessera
