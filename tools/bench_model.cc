#include "tools/bench_model.h"

#include <algorithm>
#include <cstdlib>

#include "core/npy.h"
#include "graph/format/model_file.h"
#include "tools/cli.h"

namespace tessera::tools {

Result<BenchModel> load_bench_model(const std::string& path) {
  ASSIGN_OR_RETURN(auto loaded, load_model_file(path));
  auto model = Model::from_graph(std::move(loaded.graph));
  if (!model.ok()) return model.status().with_context(path);
  BenchModel b;
  b.model = std::move(*model);
  auto lg = LayerGraph::build(b.graph());
  if (!lg.ok()) return lg.status().with_context(path);
  b.lg = std::make_unique<LayerGraph>(std::move(*lg));
  return b;
}

Result<std::vector<int>> parse_cut_list(const std::string& spec, int lo, int hi,
                                        const std::string& flag) {
  std::vector<int> cuts;
  for (const std::string& s : cli::split_commas(spec)) {
    char* end = nullptr;
    const long k = std::strtol(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || k < lo || k > hi) {
      return invalid_argument(flag + ": " + quote_name(s) + " is no cut (" + std::to_string(lo) +
                              ".." + std::to_string(hi) + ")");
    }
    cuts.push_back(static_cast<int>(k));
  }
  if (cuts.empty()) return invalid_argument(flag + ": no cut given");
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  return cuts;
}

Result<Tensor> read_input(const TensorDesc& d, const std::string& path) {
  ASSIGN_OR_RETURN(Tensor t, read_npy(path));
  if (t.dtype() != d.dtype || t.shape() != d.shape) {
    return invalid_argument(path + ": input " + quote_name(d.name) + " expects " +
                            dtype_name(d.dtype) + d.shape.to_string() + ", the file holds " +
                            t.describe());
  }
  return t;
}

Result<std::vector<Tensor>> bench_inputs(const Model& model, const std::vector<std::string>& files,
                                         std::mt19937* rng) {
  const auto& descs = model.inputs();
  if (!files.empty() && files.size() != descs.size()) {
    return invalid_argument("--input: the model has " + std::to_string(descs.size()) +
                            " inputs, given " + std::to_string(files.size()));
  }
  std::vector<Tensor> out;
  for (size_t i = 0; i < descs.size(); ++i) {
    if (!files.empty()) {
      ASSIGN_OR_RETURN(Tensor t, read_input(descs[i], files[i]));
      out.push_back(std::move(t));
      continue;
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(descs[i].dtype, descs[i].shape));
    if (t.dtype() == DType::kF32) {
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (float& x : t.span<float>()) x = u(*rng);
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace tessera::tools
