// tessera convert model.onnx -o model.tsr
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/format/model_file.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--output", "-o", true, false, "output .tsr path (default: input with .tsr extension)"},
    {"--shape", "", true, true,
     "NAME=1x3x640x640: the shape of graph input NAME (repeatable); once given, every symbolic "
     "input dimension must be set"},
    {"--batch", "", true, false, "value for symbolic input dimensions (default 1)"},
    {"--no-optimize", "", false, false, "skip the graph passes (debugging)"},
    {"--help", "-h", false, false, "show this help"},
};

std::string default_output(const std::string& in) {
  const size_t dot = in.rfind('.');
  const size_t slash = in.rfind('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_ext ? in.substr(0, dot) : in) + ".tsr";
}

// "images=1x3x640x640" -> {"images", {1, 3, 640, 640}}.
Status parse_shape_flag(const std::string& flag, std::map<std::string, std::vector<int64_t>>* out) {
  const size_t eq = flag.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    return invalid_argument("--shape '" + flag +
                            "': expected NAME=DIMxDIMx... (e.g. x=1x3x224x224)");
  }
  const std::string name = flag.substr(0, eq);
  std::vector<int64_t> dims;
  size_t start = eq + 1;
  while (true) {
    const size_t x = flag.find('x', start);
    const std::string part = flag.substr(start, x == std::string::npos ? x : x - start);
    char* end = nullptr;
    const long long v = part.empty() ? 0 : std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1) {
      return invalid_argument("--shape '" + flag + "': dimension " + std::to_string(dims.size()) +
                              " ('" + part + "') is not a positive integer");
    }
    dims.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (!out->emplace(name, std::move(dims)).second)
    return invalid_argument("--shape given twice for input '" + name + "'");
  return Status();
}

}  // namespace

int cmd_convert(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("convert", args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf("usage: tessera convert MODEL.onnx [-o MODEL.tsr] [--shape NAME=1x3x640x640]\n\n%s",
                cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  const std::string in = args->positional[0];
  const std::string out = args->get("--output", default_output(in));
  auto batch = args->get_int("--batch", 1, 1, 1 << 16);
  if (!batch.ok()) return report_error("convert", batch.status());

  const auto t0 = std::chrono::steady_clock::now();
  ImportOptions options;
  options.default_dim_value = *batch;
  for (const std::string& s : args->all("--shape")) {
    const Status st = parse_shape_flag(s, &options.input_shapes);
    if (!st.ok()) return report_error("convert", st);
  }
  options.require_all_dims = !options.input_shapes.empty();
  auto imported = import_onnx(in, options);
  if (!imported.ok()) return report_error("convert", imported.status());
  for (const std::string& w : imported->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  Graph& g = imported->graph;
  const int nodes_before = g.num_nodes();
  // Shape inference folds the shape arithmetic: those nodes count as folded too.
  PassStats stats;
  Status st = infer_onnx_shapes(*imported, &stats);
  if (!st.ok()) return report_error("convert", st.with_context(in));
  if (!args->has("--no-optimize")) {
    st = optimize_graph(g, &stats);
    if (!st.ok()) return report_error("convert", st.with_context(in));
  }
  ModelMetadata meta;
  meta.producer = "tessera convert";
  meta.properties["source"] = in;
  meta.properties["onnx_opset"] = std::to_string(imported->opset);
  meta.properties["onnx_producer"] = imported->producer_name + " " + imported->producer_version;
  st = save_model(g, out, meta);
  if (!st.ok()) return report_error("convert", st);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s -> %s: opset %lld, %d nodes -> %d layers, %.2f M parameters (%.1f ms)\n",
              in.c_str(), out.c_str(), static_cast<long long>(imported->opset), nodes_before,
              g.num_nodes(), static_cast<double>(g.parameter_count()) / 1e6, ms);
  std::printf("passes: %s%s\n", stats.to_string().c_str(),
              args->has("--no-optimize") ? " (--no-optimize: shape folding only)" : "");
  // The layers by op type, most frequent first: what the model became.
  std::vector<std::pair<std::string, int>> kinds;
  for (const Node& n : g.nodes()) {
    auto it = std::find_if(kinds.begin(), kinds.end(),
                           [&](const auto& k) { return k.first == op_name(n.kind); });
    if (it == kinds.end()) {
      kinds.emplace_back(op_name(n.kind), 1);
    } else {
      ++it->second;
    }
  }
  std::stable_sort(kinds.begin(), kinds.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::string layers;
  for (const auto& [op, count] : kinds)
    layers += (layers.empty() ? "" : ", ") + op + " x" + std::to_string(count);
  std::printf("layers: %s\n", layers.empty() ? "none" : layers.c_str());
  return 0;
}

}  // namespace tessera::tools
