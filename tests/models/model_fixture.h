// The foundation models of the model tests (label `model`): where they are, how one is loaded
// (the ONNX file converted, its LayerGraph, PyTorch's input and output from
// scripts/export_models.py) and how an output is compared with PyTorch's.
//
// Thread rule: plain functions and values; a LoadedModel is used by one thread at a time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "core/npy.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/layer_graph.h"
#include "graph/onnx/onnx_import.h"

namespace tessera::testing {

// TESSERA_MODEL_DIR (set by ctest), or an error saying it is not set.
inline Result<std::string> model_dir() {
  const char* dir = std::getenv("TESSERA_MODEL_DIR");
  if (dir == nullptr)
    return failed_precondition("TESSERA_MODEL_DIR is not set (run through ctest)");
  return std::string(dir);
}

struct LoadedModel {
  std::unique_ptr<ImportedModel> imported;  // owns the graph `lg` refers to
  std::unique_ptr<LayerGraph> lg;
  Tensor input;
  Tensor expected;  // PyTorch's output for `input`
};

// Loads model `name` of the model directory; errors name the file that is missing or bad.
inline Result<LoadedModel> load_model(const std::string& name) {
  ASSIGN_OR_RETURN(std::string dir, model_dir());
  const std::string base = dir + "/" + name;
  if (!std::filesystem::exists(base + ".onnx")) return not_found(base + ".onnx is missing");
  LoadedModel m;
  ASSIGN_OR_RETURN(ImportedModel imported, convert_onnx(base + ".onnx"));
  m.imported = std::make_unique<ImportedModel>(std::move(imported));
  ASSIGN_OR_RETURN(LayerGraph lg, LayerGraph::build(m.imported->graph));
  m.lg = std::make_unique<LayerGraph>(std::move(lg));
  ASSIGN_OR_RETURN(m.input, read_npy(base + ".input.npy"));
  ASSIGN_OR_RETURN(m.expected, read_npy(base + ".output.npy"));
  return m;
}

// An fp32 output against PyTorch's.
struct OutputError {
  double max_ref = 0;            // max |torch|
  double max_err = 0;            // max |y - torch|
  double rel_l2 = 0;             // ||y - torch|| / ||torch||
  int64_t first_nonfinite = -1;  // index of the first non-finite output, -1: none
};

inline OutputError compare_output(const Tensor& out, const Tensor& expected) {
  OutputError e;
  double err2 = 0, ref2 = 0;
  const int64_t n = std::min(out.numel(), expected.numel());
  for (int64_t i = 0; i < n; ++i) {
    const double y = out.data<float>()[i], t = expected.data<float>()[i];
    if (!std::isfinite(y) && e.first_nonfinite < 0) e.first_nonfinite = i;
    e.max_ref = std::max(e.max_ref, std::fabs(t));
    e.max_err = std::max(e.max_err, std::fabs(y - t));
    err2 += (y - t) * (y - t);
    ref2 += t * t;
  }
  e.rel_l2 = std::sqrt(err2 / std::max(ref2, 1e-30));
  return e;
}

}  // namespace tessera::testing
