// How an ONNX model's symbolic input dimensions get their sizes: the options of ONNX import.
//
// One header, used by the importer (graph/onnx/onnx_import.h), the `tessera` tool (convert and
// run: --shape, --batch) and the public APIs (Model::import_onnx in api/tessera.h, which
// installs this header; tessera_model_import_onnx in api/tessera_c.h; tessera.Model.import_onnx
// in Python). It holds plain data and pure functions: safe from any thread.
//
// A graph input's symbolic (dim_param) or unknown dimension is set by, in order:
//   1. input_shapes[input]: the input's whole shape (its rank and fixed dimensions must agree);
//   2. dim_params[dimension name];
//   3. for dimension 0 (the batch) only, and only without require_all_dims, default_dim_value,
//      with a warning.
// Anything else left unset is an error naming the input, the dimension and its name; so is a
// shape for an input the model lacks, a shape of the wrong rank, and a size below 1.
//
// The tool and the C and Python APIs apply one rule, import_options_for_shapes(): the shapes
// given, the batch for dimension 0, and once any shape is given every symbolic dimension must be
// set by one (a second input's symbolic batch is then an error, not a silent 1).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tessera {

struct ImportOptions {
  // Substituted for a symbolic (dim_param) or unknown dimension 0 (the batch) of a graph input
  // that neither `input_shapes` nor `dim_params` sets, with a warning. Must be at least 1. Any
  // other symbolic or unknown dimension (a height, a width) left unset is an error naming the
  // input and the dimension: no default could be right for it.
  int64_t default_dim_value = 1;
  // Values for named symbolic dimensions, e.g. {"batch_size", 8}; each at least 1.
  std::map<std::string, int64_t> dim_params;
  // Whole shapes of named graph inputs, e.g. {"images", {1, 3, 640, 640}}: they set that input's
  // symbolic and unknown dimensions, and must agree with its rank and its fixed dimensions.
  // Naming an input the model lacks is an error.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // When true, a symbolic or unknown input dimension set by neither `input_shapes` nor
  // `dim_params` is an error naming it, instead of taking default_dim_value with a warning.
  bool require_all_dims = false;
};

// The options of `tessera convert --shape ... --batch N` and of the C and Python APIs: the
// shapes, `batch` as default_dim_value, and require_all_dims when any shape is given.
ImportOptions import_options_for_shapes(std::map<std::string, std::vector<int64_t>> input_shapes,
                                        int64_t batch = 1);

// Parses the text form of input shapes, "images=1x3x640x640;mask=1x1x640x640": entries separated
// by ';', each NAME=DIMxDIMx... (the name is everything before the entry's last '='; spaces
// around an entry are ignored; an empty text or entry is none). Adds them to `out`. Errors name
// the entry and, for a bad dimension, its index ("dimension 2 ('0') is not a positive integer");
// an input named twice is an error.
Status parse_input_shapes(std::string_view text, std::map<std::string, std::vector<int64_t>>* out);

}  // namespace tessera
