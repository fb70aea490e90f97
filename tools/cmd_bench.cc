// tessera bench pack MODEL.tsr [--input x.npy] --bits B [--cuts all|K1,K2] [--device NAME]
//                             [--repeat R] [--pow2] [--no-shuffle] [--no-lz4]
//
// The packing codec (backends/remote/packing.h) on a model's real activations: the model runs on
// one device slice by slice, and at every chosen cut the tensors live across it (skip
// connections included, each sent once: LayerGraph::cut(k).live) are packed and unpacked. Per
// cut it prints what seed 002's pitfall 1 asks for: the sparsity, the packed bytes (headers
// included), the ratio against fp32 and against dense b-bit packing, the pack and unpack time,
// and a random-noise control of the same sizes (which should give about 32/b against fp32, no
// more).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "backends/registry.h"
#include "backends/remote/packing.h"
#include "core/stats.h"
#include "graph/layer_graph.h"
#include "scheduler/cut_profile.h"
#include "tools/bench_model.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kPackFlags = {
    {"--input", "-i", true, true,
     "input .npy, one per model input in order (default: uniform noise in [0, 1), seed 1: "
     "give a real input for real activations)"},
    {"--bits", "-b", true, false, "bits per element: 2..8 or 16 (required)"},
    {"--cuts", "", true, false,
     "all (every cut between two layers, the default) or a list of cut indices K (0 = the "
     "model's inputs, K = after layer K-1, as `tessera info` numbers layers)"},
    {"--device", "-d", true, false, "device the model runs on (default: cpu)"},
    {"--repeat", "-r", true, false, "timed pack and unpack runs per cut; the median (default 5)"},
    {"--pow2", "", false, false, "a power-of-two scale instead of a real one"},
    {"--no-shuffle", "", false, false, "no bit shuffling (one byte or two per element)"},
    {"--no-lz4", "", false, false, "no LZ4 (the quantised stream as it is)"},
    {"--help", "-h", false, false, "show this help"},
};

using Clock = std::chrono::steady_clock;

struct CutFigures {
  int cut = 0;
  int tensors = 0;
  bool relu = true;
  uint64_t elements = 0;
  uint64_t zeros = 0;
  uint64_t packed = 0;
  uint64_t dense = 0;  // dense b-bit packing, no header
  uint64_t noise_packed = 0;
  double pack_ms = 0;
  double unpack_ms = 0;
  double err2 = 0, ref2 = 0;  // for the relative L2 error
};

// Packs and unpacks the tensors live at one cut `repeat` times; the median times.
Result<CutFigures> measure_cut(const LayerGraph& lg, int k, const std::map<ValueId, Tensor>& values,
                               const PackPolicy& policy, int repeat, std::mt19937* rng) {
  const Graph& g = lg.graph();
  CutFigures f;
  f.cut = k;
  std::vector<const Tensor*> tensors;
  std::vector<std::string> names;
  for (ValueId v : lg.cut(k).live) {
    auto it = values.find(v);
    if (it == values.end()) {
      return internal_error("cut " + std::to_string(k) + ": tensor '" + g.value(v).name +
                            "' was not computed");
    }
    if (it->second.dtype() != DType::kF32) continue;  // shape tensors are not packed
    tensors.push_back(&it->second);
    names.push_back(g.value(v).name);
  }
  f.tensors = static_cast<int>(tensors.size());
  f.relu = cut_is_relu(lg, k);

  std::vector<std::vector<uint8_t>> packed(tensors.size());
  std::vector<std::vector<float>> unpacked(tensors.size());
  PackScratch scratch;
  std::vector<double> pack_ms, unpack_ms;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = Clock::now();
    for (size_t i = 0; i < tensors.size(); ++i) {
      RETURN_IF_ERROR(pack_f32(tensors[i]->span<float>(), tensors[i]->shape(), policy, names[i],
                               &packed[i], &scratch));
    }
    const auto t1 = Clock::now();
    for (size_t i = 0; i < tensors.size(); ++i) {
      unpacked[i].resize(static_cast<size_t>(tensors[i]->numel()));
      RETURN_IF_ERROR(unpack_f32(packed[i], UnpackCaps{}, unpacked[i], &scratch));
    }
    const auto t2 = Clock::now();
    pack_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    unpack_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  f.pack_ms = median(pack_ms);
  f.unpack_ms = median(unpack_ms);

  std::uniform_real_distribution<float> noise(-1.0f, 1.0f);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::span<const float> x = tensors[i]->span<float>();
    f.elements += x.size();
    f.packed += packed[i].size();
    f.dense += dense_bits_bytes(x.size(), policy.bits);
    for (size_t j = 0; j < x.size(); ++j) {
      f.zeros += x[j] == 0.0f;
      const double d = static_cast<double>(x[j]) - unpacked[i][j];
      f.err2 += d * d;
      f.ref2 += static_cast<double>(x[j]) * x[j];
    }
    // The control: noise of the same size through the same policy.
    std::vector<float> n(x.size());
    for (float& e : n) e = noise(*rng);
    std::vector<uint8_t> np;
    RETURN_IF_ERROR(pack_f32(n, tensors[i]->shape(), policy, "noise", &np, &scratch));
    f.noise_packed += np.size();
  }
  return f;
}

std::string layer_label(const LayerGraph& lg, int k) {
  if (k == 0) return "(inputs)";
  return lg.layer(k - 1).name;
}

int cmd_bench_pack(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 3, kPackFlags);
  if (!args.ok()) return report_error("bench pack", args.status());
  if (args->has("--help") || args->positional.size() != 1 || !args->has("--bits")) {
    std::printf(
        "usage: tessera bench pack MODEL.tsr --bits B [--input x.npy] [--cuts all|K1,K2]\n\n%s",
        cli::usage(kPackFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  auto bits = args->get_int("--bits", 8, 2, 16);
  if (!bits.ok()) return report_error("bench pack", bits.status());
  PackPolicy policy;
  policy.bits = *bits;
  if (args->has("--pow2")) policy.scale = PackScale::kPow2;
  if (args->has("--no-shuffle")) policy.shuffle = PackShuffle::kNone;
  if (args->has("--no-lz4")) policy.codec = PackCodec::kNone;
  if (Status st = validate_pack_policy(policy); !st.ok()) return report_error("bench pack", st);
  auto repeat = args->get_int("--repeat", 5, 1, 1000);
  if (!repeat.ok()) return report_error("bench pack", repeat.status());

  // The model, its layers and cuts.
  const std::string path = args->positional[0];
  auto bm = load_bench_model(path);
  if (!bm.ok()) return report_error("bench pack", bm.status());
  const Graph& g = bm->graph();
  const LayerGraph* lg = bm->lg.get();
  const int layers = lg->num_layers();
  std::vector<int> cuts;
  const std::string cut_spec = args->get("--cuts", "all");
  if (cut_spec == "all") {
    for (int k = 1; k < layers; ++k) cuts.push_back(k);
  } else {
    auto parsed = parse_cut_list(cut_spec, 0, layers);
    if (!parsed.ok()) return report_error("bench pack", parsed.status());
    cuts = std::move(*parsed);
  }

  // The inputs: the files given, else noise (the activations are then not a real image's).
  const std::vector<std::string> files = args->all("--input");
  std::mt19937 rng(1);
  auto inputs = bench_inputs(*bm->model, files, &rng);
  if (!inputs.ok()) return report_error("bench pack", inputs.status());
  std::map<ValueId, Tensor> values;
  for (size_t i = 0; i < inputs->size(); ++i) values[g.inputs()[i]] = (*inputs)[i];
  const std::string device_name = args->get("--device", "cpu");
  auto device = open_device(device_name);
  if (!device.ok()) return report_error("bench pack", device.status());

  std::printf("model %s, %d layers; input: %s; device %s\n", path.c_str(), layers,
              files.empty() ? "uniform noise (seed 1), not a real image" : files[0].c_str(),
              device_name.c_str());
  std::printf("policy %s; times: median of %d, one thread; sizes include each tensor's header\n",
              pack_policy_name(policy).c_str(), *repeat);
  std::printf("\n%4s  %-28s %4s %4s %10s %6s %10s %8s %8s %9s %9s %8s %9s\n", "cut", "after layer",
              "tens", "relu", "fp32 KiB", "zeros", "packed B", "x fp32", "x dense", "pack ms",
              "unpack ms", "noise x", "rel L2");

  // Run the model slice by slice up to each cut, keeping only the tensors live across it.
  std::vector<double> ratios, relu_ratios;
  int done = 0;
  for (int k : cuts) {
    if (k > done) {
      std::vector<NodeId> nodes;
      for (int l = done; l < k; ++l) nodes.push_back(lg->layer(l).node);
      auto program = (*device)->compile(g, nodes);
      if (!program.ok()) return report_error("bench pack", program.status());
      std::vector<Tensor> in;
      for (ValueId v : (*program)->input_values()) {
        auto it = values.find(v);
        if (it == values.end()) {
          return report_error("bench pack", internal_error("tensor " + quote_name(g.value(v).name) +
                                                           " was not computed"));
        }
        in.push_back(it->second);
      }
      std::vector<Tensor> out((*program)->output_values().size());
      if (Status st = (*program)->run(in, out); !st.ok()) return report_error("bench pack", st);
      for (size_t i = 0; i < out.size(); ++i) values[(*program)->output_values()[i]] = out[i];
      done = k;
    }
    const std::set<ValueId> live(lg->cut(k).live.begin(), lg->cut(k).live.end());
    std::erase_if(values, [&](const auto& e) { return live.count(e.first) == 0; });

    auto f = measure_cut(*lg, k, values, policy, *repeat, &rng);
    if (!f.ok()) return report_error("bench pack", f.status());
    const double fp32 = 4.0 * static_cast<double>(f->elements);
    const double ratio = fp32 / static_cast<double>(std::max<uint64_t>(f->packed, 1));
    ratios.push_back(ratio);
    if (f->relu) relu_ratios.push_back(ratio);
    std::printf(
        "%4d  %-28.28s %4d %4s %10.1f %5.1f%% %10llu %8.2f %8.2f %9.3f %9.3f %8.2f %9.2e\n", k,
        layer_label(*lg, k).c_str(), f->tensors, f->relu ? "yes" : "no", fp32 / 1024,
        100.0 * static_cast<double>(f->zeros) / static_cast<double>(f->elements),
        static_cast<unsigned long long>(f->packed), ratio,
        static_cast<double>(f->dense) / static_cast<double>(std::max<uint64_t>(f->packed, 1)),
        f->pack_ms, f->unpack_ms,
        fp32 / static_cast<double>(std::max<uint64_t>(f->noise_packed, 1)),
        f->ref2 > 0 ? std::sqrt(f->err2 / f->ref2) : 0.0);
  }
  std::printf("\nmedian x fp32: %.2f over %zu cuts", median(ratios), ratios.size());
  if (!relu_ratios.empty())
    std::printf(", %.2f over the %zu ReLU cuts", median(relu_ratios), relu_ratios.size());
  std::printf(" (dense %d-bit packing alone: %.2f)\n", policy.bits, 32.0 / policy.bits);
  return 0;
}

}  // namespace

int cmd_bench_hop(int argc, char** argv);   // cmd_bench_hop.cc
int cmd_bench_cuts(int argc, char** argv);  // cmd_bench_cuts.cc

int cmd_bench(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[2]) == "pack") return cmd_bench_pack(argc, argv);
  if (argc >= 3 && std::string(argv[2]) == "hop") return cmd_bench_hop(argc, argv);
  if (argc >= 3 && std::string(argv[2]) == "cuts") return cmd_bench_cuts(argc, argv);
  return cmd_bench_models(argc, argv);
}

}  // namespace tessera::tools
