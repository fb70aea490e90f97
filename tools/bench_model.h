// What the `tessera bench` subcommands that run a model slice by slice share (bench pack, bench
// hop, bench cuts): loading the model with its LayerGraph, parsing a list of cuts, and building
// the model's inputs from .npy files or noise (which run, calibrate and plan --monitor read
// their inputs with too). Plain functions; safe from any thread.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/internal.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/layer_graph.h"

namespace tessera::tools {

struct BenchModel {
  std::shared_ptr<const Model> model;
  std::unique_ptr<LayerGraph> lg;
  const Graph& graph() const { return model_graph(*model); }
};

// Loads a model file and builds its LayerGraph; errors name the path.
Result<BenchModel> load_bench_model(const std::string& path);

// Cut indices from "K1,K2,..." (each in [lo, hi]), sorted and without repeats. `flag` names the
// option in errors: "--cuts: 'x' is no cut (1..40)".
Result<std::vector<int>> parse_cut_list(const std::string& spec, int lo, int hi,
                                        const std::string& flag = "--cuts");

// Model input `d` from the .npy file at `path`; an error names the file, the input, and both
// dtypes and shapes when they differ.
Result<Tensor> read_input(const TensorDesc& d, const std::string& path);

// One tensor per model input: read from `files` (one per input, in order; dtype and shape
// checked) or, when `files` is empty, uniform noise in [0, 1) from `rng` (f32 inputs; others
// zero).
Result<std::vector<Tensor>> bench_inputs(const Model& model, const std::vector<std::string>& files,
                                         std::mt19937* rng);

}  // namespace tessera::tools
