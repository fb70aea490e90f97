// tessera info model.tsr
#include <cstdio>

#include "api/internal.h"
#include "graph/format/model_file.h"
#include "graph/layer_graph.h"
#include "ops/activation.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--help", "-h", false, false, "show this help"},
};

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

}  // namespace

int cmd_info(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("info", args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf("usage: tessera info MODEL.tsr\n\n%s", cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  const std::string path = args->positional[0];
  auto loaded = load_model_file(path);
  if (!loaded.ok()) return report_error("info", loaded.status());
  auto model = Model::from_graph(std::move(loaded->graph));
  if (!model.ok()) return report_error("info", model.status().with_context(path));
  const Graph& g = model_graph(**model);
  auto lg = LayerGraph::build(g);
  if (!lg.ok()) return report_error("info", lg.status());

  std::printf("model %s (format %u.%u, producer '%s')\n", path.c_str(), loaded->format_major,
              loaded->format_minor, loaded->metadata.producer.c_str());
  for (const auto& [k, v] : loaded->metadata.properties)
    std::printf("  %s: %s\n", k.c_str(), v.c_str());
  for (const TensorDesc& d : (*model)->inputs()) {
    std::printf("input  %-20s %s%s\n", d.name.c_str(), dtype_name(d.dtype),
                d.shape.to_string().c_str());
  }
  for (const TensorDesc& d : (*model)->outputs()) {
    std::printf("output %-20s %s%s\n", d.name.c_str(), dtype_name(d.dtype),
                d.shape.to_string().c_str());
  }
  std::printf("\n%4s  %-34s %-22s %-20s %10s %10s  %s\n", "#", "layer", "op", "output", "params",
              "MFLOPs", "live after");
  for (int i = 0; i < lg->num_layers(); ++i) {
    const Layer& l = lg->layer(i);
    const Node& n = g.node(l.node);
    std::string op = op_name(l.kind);
    auto act = parse_fused_activation(n.attrs);
    if (act.ok() && act->kind != ActivationKind::kNone)
      op += "+" + std::string(activation_name(act->kind));
    const std::string out_shape =
        l.outputs.empty() ? "" : g.value(l.outputs[0]).info.shape.to_string();
    std::printf("%4d  %-34.34s %-22.22s %-20s %10llu %10.2f  %s\n", i, l.name.c_str(), op.c_str(),
                out_shape.c_str(), static_cast<unsigned long long>(l.parameter_count),
                l.cost.flops / 1e6, human_bytes(lg->cut(i + 1).live_bytes).c_str());
  }
  uint64_t max_live = 0;
  for (const Cut& c : lg->cuts()) max_live = std::max(max_live, c.live_bytes);
  std::printf("\n%d layers, %.3f M parameters (%s), %.3f GFLOPs, largest cut %s\n",
              lg->num_layers(), static_cast<double>(lg->total_parameters()) / 1e6,
              human_bytes(g.parameter_bytes()).c_str(), lg->total_flops() / 1e9,
              human_bytes(max_live).c_str());
  return 0;
}

}  // namespace tessera::tools
