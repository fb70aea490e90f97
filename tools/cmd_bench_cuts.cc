// tessera bench cuts MODEL.tsr [--input x.npy ...] [--frames N] [--choose N] [--bits 2,3,4]
//                              [--cuts all|relu|K1,K2] [--device cpu] [-o cuts.json]
//
// The profile of cuts (scheduler/cut_profile.h): per candidate cut and bitwidth, the packed
// bytes (mean, p95) of the tensors live across the cut, pack and unpack time, and fidelity
// against fp32 (top-1 agreement, relative L2) on a choose set and on a report set held apart.
// Frames: each --input file is one frame of a one-input model; without files, --frames frames of
// uniform noise. Optionally each frame is jittered into more (--jitter): the input plus Gaussian
// noise of that standard deviation, so one real image gives several related frames.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include "backends/registry.h"
#include "backends/remote/packing.h"
#include "scheduler/cut_profile.h"
#include "scheduler/profile.h"
#include "tools/bench_model.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kCutsFlags = {
    {"--input", "-i", true, true,
     "an .npy frame of a one-input model; repeat for more frames (default: noise frames)"},
    {"--frames", "", true, false, "noise frames when no --input is given (default 8)"},
    {"--jitter", "", true, false,
     "each frame also as K variants with Gaussian noise: K,SIGMA (default none)"},
    {"--choose", "", true, false,
     "frames in the choose set, the first ones (default: half); the rest are the report set"},
    {"--bits", "-b", true, false, "bitwidths, comma-separated (default 2,3,4,5,6,7,8,16)"},
    {"--cuts", "", true, false,
     "all (0..L-1, the default), relu (seed 002's heuristic: ReLU cuts and 0) or K1,K2,..."},
    {"--device", "-d", true, false, "device the model runs on (default cpu)"},
    {"--output", "-o", true, false, "write the cut profile JSON here"},
    {"--help", "-h", false, false, "show this help"},
};

}  // namespace

int cmd_bench_cuts(int argc, char** argv) {
  const char* cmd = "bench cuts";
  auto args = cli::parse(argc, argv, 3, kCutsFlags);
  if (!args.ok()) return report_error(cmd, args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf("usage: tessera bench cuts MODEL.tsr [options] -o cuts.json\n\n%s",
                cli::usage(kCutsFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  const std::string path = args->positional[0];
  auto bm = load_bench_model(path);
  if (!bm.ok()) return report_error(cmd, bm.status());
  const LayerGraph& lg = *bm->lg;
  const int L = lg.num_layers();
  auto hash = model_file_hash(path);
  if (!hash.ok()) return report_error(cmd, hash.status());

  CutProfileOptions o;
  if (args->has("--bits")) {
    o.bits.clear();
    for (const std::string& b : cli::split_commas(args->get("--bits"))) {
      char* end = nullptr;
      const long v = std::strtol(b.c_str(), &end, 10);
      if (b.empty() || *end != '\0' || v < 2 || v > 16 ||
          !pack_bits_supported(static_cast<int>(v))) {
        return report_error(cmd,
                            invalid_argument("--bits: " + quote_name(b) + " is not 2..8 or 16"));
      }
      o.bits.push_back(static_cast<int>(v));
    }
  }
  const std::string spec = args->get("--cuts", "all");
  if (spec == "relu") {
    o.cuts.push_back(0);
    for (int k = 1; k < L; ++k) {
      if (cut_is_relu(lg, k)) o.cuts.push_back(k);
    }
  } else if (spec != "all") {
    auto c = parse_cut_list(spec, 0, L - 1);
    if (!c.ok()) return report_error(cmd, c.status());
    o.cuts = *c;
  }

  // Frames.
  std::mt19937 rng(1);
  std::vector<std::vector<Tensor>> frames;
  const std::vector<std::string> files = args->all("--input");
  if (!files.empty()) {
    for (const std::string& f : files) {
      auto in = bench_inputs(*bm->model, {f}, &rng);
      if (!in.ok()) return report_error(cmd, in.status());
      frames.push_back(std::move(*in));
    }
  } else {
    auto n = args->get_int("--frames", 8, 2, 100000);
    if (!n.ok()) return report_error(cmd, n.status());
    for (int i = 0; i < *n; ++i) {
      auto in = bench_inputs(*bm->model, {}, &rng);
      if (!in.ok()) return report_error(cmd, in.status());
      frames.push_back(std::move(*in));
    }
  }
  if (args->has("--jitter")) {
    const std::vector<std::string> parts = cli::split_commas(args->get("--jitter"));
    char* e1 = nullptr;
    char* e2 = nullptr;
    const long k = parts.size() == 2 ? std::strtol(parts[0].c_str(), &e1, 10) : -1;
    const double sigma = parts.size() == 2 ? std::strtod(parts[1].c_str(), &e2) : -1;
    if (parts.size() != 2 || *e1 != '\0' || *e2 != '\0' || k < 1 || k > 10000 || !(sigma > 0) ||
        !std::isfinite(sigma)) {
      return report_error(cmd, invalid_argument("--jitter: expected K,SIGMA (K 1..10000, SIGMA "
                                                "> 0), got " +
                                                quote_name(args->get("--jitter"))));
    }
    std::normal_distribution<float> noise(0.0f, static_cast<float>(sigma));
    const size_t base = frames.size();
    for (long j = 0; j < k; ++j) {
      for (size_t f = 0; f < base; ++f) {
        std::vector<Tensor> v;
        for (const Tensor& t : frames[f]) {
          auto cl = t.clone();
          if (!cl.ok()) return report_error(cmd, cl.status());
          Tensor c = std::move(*cl);
          if (c.dtype() == DType::kF32) {
            for (float& x : c.span<float>()) x += noise(rng);
          }
          v.push_back(std::move(c));
        }
        frames.push_back(std::move(v));
      }
    }
  }
  if (frames.size() < 2) {
    return report_error(cmd, invalid_argument("at least two frames are needed (a choose and a "
                                              "report set): give more --input files or --jitter"));
  }
  // Shuffle so that the choose and report sets both hold originals and variants.
  std::shuffle(frames.begin(), frames.end(), rng);
  auto choose = args->get_int("--choose", static_cast<int>(frames.size() / 2), 1,
                              static_cast<int>(frames.size()) - 1);
  if (!choose.ok()) return report_error(cmd, choose.status());
  o.choose_inputs = *choose;

  const std::string device_name = args->get("--device", "cpu");
  auto device = open_device(device_name);
  if (!device.ok()) return report_error(cmd, device.status());
  auto prof = measure_cut_profile(lg, **device, frames, o);
  if (!prof.ok()) return report_error(cmd, prof.status());
  prof->model_name = std::filesystem::path(path).stem().string();
  prof->model_hash = *hash;

  std::printf("model %s, %d layers, %zu cuts x %zu bitwidths; %d choose + %d report frames (%s)\n",
              path.c_str(), L, prof->cuts.size(), prof->bits.size(), prof->choose_inputs,
              prof->report_inputs, files.empty() ? "uniform noise" : "from --input");
  std::printf("fidelity is agreement with the f32 model (random weights: not accuracy)\n");
  std::printf("%4s %4s %4s %12s %12s %9s %9s %8s %9s %8s %9s\n", "cut", "relu", "bits",
              "bytes mean", "bytes p95", "pack ms", "unpack ms", "top1", "rel L2", "rep top1",
              "rep L2");
  for (size_t c = 0; c < prof->cuts.size(); ++c) {
    for (size_t w = 0; w < prof->bits.size(); ++w) {
      const CutBits& e = prof->entries[c * prof->bits.size() + w];
      std::printf("%4d %4s %4d %12.0f %12.0f %9.3f %9.3f %7.1f%% %9.2e %7.1f%% %9.2e\n", e.cut,
                  prof->relu[c] ? "yes" : "no", e.bits, e.bytes_mean, e.bytes_p95, e.pack_ms,
                  e.unpack_ms, 100 * e.top1, e.rel_l2, 100 * e.report_top1, e.report_rel_l2);
    }
  }
  // The fidelity table: the smallest bitwidth per cut with top-1 agreement >= 99% on the choose
  // set, and what it gives on the report set.
  std::printf("\nsmallest bitwidth with top-1 >= 99%% (choose set) per cut -> report set:\n");
  for (size_t c = 0; c < prof->cuts.size(); ++c) {
    for (size_t w = 0; w < prof->bits.size(); ++w) {
      const CutBits& e = prof->entries[c * prof->bits.size() + w];
      if (e.top1 >= 0.99) {
        std::printf("  cut %d: %d bits -> %.1f%%, rel L2 %.2e\n", e.cut, e.bits,
                    100 * e.report_top1, e.report_rel_l2);
        break;
      }
    }
  }
  if (args->has("--output")) {
    if (Status st = prof->save(args->get("--output")); !st.ok()) return report_error(cmd, st);
    std::printf("wrote %s\n", args->get("--output").c_str());
  }
  return 0;
}

}  // namespace tessera::tools
