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
    {"--batch", "", true, false,
     "value for a symbolic batch dimension (dimension 0 of each input; default 1); other "
     "symbolic dimensions need --shape"},
    {"--no-optimize", "", false, false, "skip the graph passes (debugging)"},
    {"--help", "-h", false, false, "show this help"},
};

std::string default_output(const std::string& in) {
  const size_t dot = in.rfind('.');
  const size_t slash = in.rfind('/');
  const bool has_ext = dot != std::string::npos && (slash == std::string::npos || dot > slash);
  return (has_ext ? in.substr(0, dot) : in) + ".tsr";
}

// Node counts by op type, most frequent first (ties in order of first appearance).
std::vector<std::pair<std::string, int>> op_counts(const Graph& g) {
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
  return kinds;
}

std::string join_counts(const std::vector<std::pair<std::string, int>>& counts) {
  std::string s;
  for (const auto& [op, count] : counts)
    s += (s.empty() ? "" : ", ") + op + " x" + std::to_string(count);
  return s.empty() ? "none" : s;
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
    const Status st = cli::parse_shape_flag(s, &options.input_shapes);
    if (!st.ok()) return report_error("convert", st);
  }
  options.require_all_dims = !options.input_shapes.empty();
  auto imported = import_onnx(in, options);
  if (!imported.ok()) return report_error("convert", imported.status());
  for (const std::string& w : imported->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  Graph& g = imported->graph;
  const int nodes_before = g.num_nodes();
  const std::vector<std::pair<std::string, int>> ops_before = op_counts(g);
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
  // What the model was, what the passes took out (folded into constants, or fused into the
  // layers that remain), and the layers by op type: what the model became.
  const std::vector<std::pair<std::string, int>> ops_after = op_counts(g);
  std::vector<std::pair<std::string, int>> gone;
  for (const auto& [op, count] : ops_before) {
    int left = 0;
    for (const auto& [op2, count2] : ops_after) left += op2 == op ? count2 : 0;
    if (count > left) gone.emplace_back(op, count - left);
  }
  std::stable_sort(gone.begin(), gone.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::printf("imported: %s\n", join_counts(ops_before).c_str());
  std::printf("folded or fused away: %s\n", join_counts(gone).c_str());
  std::printf("layers (%d): %s\n", g.num_nodes(), join_counts(ops_after).c_str());
  return 0;
}

}  // namespace tessera::tools
