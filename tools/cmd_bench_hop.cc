// tessera bench hop MODEL.tsr --device remote:HOST:PORT [--cuts K1,K2] [--bits B] [--input x.npy]
//
// Measures remote hops against the link model. First the link microbenchmark: Ping messages of
// 1 KiB .. 4 MiB each way, median of --repeat rounds, fitted to ms = L + bytes / B (one line per
// direction, least squares on the relative error). Then, per cut k, the model's layers [k, L) are
// compiled on the remote device and run on the real activations live across the cut (computed
// locally on --local, default cpu), raw and packed at --bits, in alternating rounds. Per run:
// the round trip on the client, the server's own time (decode + run + encode, reported in the
// Result), the client's pack and unpack time, and the bytes each way (whole messages). The hop
// is what is left of the round trip without the server's time; the link's share of it is
// compared with the link model on those bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <set>

#include "backends/registry.h"
#include "backends/remote/remote_device.h"
#include "core/stats.h"
#include "graph/layer_graph.h"
#include "scheduler/profile.h"
#include "tools/bench_model.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

using Clock = std::chrono::steady_clock;

const std::vector<cli::FlagSpec> kHopFlags = {
    {"--device", "-d", true, false, "the remote device, remote:HOST:PORT (required)"},
    {"--local", "", true, false, "device that computes the activations up to each cut (cpu)"},
    {"--cuts", "", true, false, "cuts K1,K2,... (layer indices; default: 4 spread over the model)"},
    {"--bits", "-b", true, false, "bitwidth of the packed runs (default 4)"},
    {"--input", "-i", true, true, "an .npy input (default: uniform noise, seed 1)"},
    {"--repeat", "-r", true, false, "rounds; the median is reported (default 9)"},
    {"--ping-max", "", true, false,
     "largest Ping of the link microbenchmark, KiB (default 4096; slow links: less)"},
    {"--help", "-h", false, false, "show this help"},
};

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// ms = beta + alpha * bytes, least squares on the relative error (weights 1 / ms^2), so that the
// small messages' latency counts as much as the large ones' bandwidth.
TransferFit fit_link(const std::vector<std::pair<uint64_t, double>>& points) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [b, ms] : points) {
    const double w = 1 / std::max(ms * ms, 1e-12), x = static_cast<double>(b);
    sw += w;
    sx += w * x;
    sy += w * ms;
    sxx += w * x * x;
    sxy += w * x * ms;
  }
  TransferFit f;
  const double det = sw * sxx - sx * sx;
  f.alpha_ms_per_byte = det > 0 ? std::max(0.0, (sw * sxy - sx * sy) / det) : 0;
  f.beta_ms = sw > 0 ? std::max(0.0, (sy - f.alpha_ms_per_byte * sx) / sw) : 0;
  return f;
}

struct HopRun {
  double wall = 0, server = 0, pack = 0, unpack = 0;
  uint64_t sent = 0, received = 0;
};

}  // namespace

int cmd_bench_hop(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 3, kHopFlags);
  if (!args.ok()) return report_error("bench hop", args.status());
  if (args->has("--help") || args->positional.size() != 1 || !args->has("--device")) {
    std::printf("usage: tessera bench hop MODEL.tsr --device remote:HOST:PORT [options]\n\n%s",
                cli::usage(kHopFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  auto bits = args->get_int("--bits", 4, 2, 16);
  if (!bits.ok()) return report_error("bench hop", bits.status());
  auto repeat = args->get_int("--repeat", 9, 1, 1000);
  if (!repeat.ok()) return report_error("bench hop", repeat.status());
  const PackPolicy policy{*bits};
  if (Status st = validate_pack_policy(policy); !st.ok()) return report_error("bench hop", st);

  const std::string path = args->positional[0];
  auto bm = load_bench_model(path);
  if (!bm.ok()) return report_error("bench hop", bm.status());
  const Graph& g = bm->graph();
  const LayerGraph* lg = bm->lg.get();
  auto hash = model_file_hash(path);
  if (!hash.ok()) return report_error("bench hop", hash.status());
  const int L = lg->num_layers();
  std::vector<int> cuts;
  if (args->has("--cuts")) {
    auto parsed = parse_cut_list(args->get("--cuts"), 1, L - 1);
    if (!parsed.ok()) return report_error("bench hop", parsed.status());
    cuts = std::move(*parsed);
  } else {
    for (int i = 1; i <= 4; ++i) cuts.push_back(std::max(1, std::min(L - 1, i * L / 5)));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  }

  // Inputs.
  const std::vector<std::string> files = args->all("--input");
  std::mt19937 rng(1);
  auto inputs = bench_inputs(*bm->model, files, &rng);
  if (!inputs.ok()) return report_error("bench hop", inputs.status());
  std::map<ValueId, Tensor> values;
  for (size_t i = 0; i < inputs->size(); ++i) values[g.inputs()[i]] = (*inputs)[i];

  auto opened = open_device(args->get("--device"));
  if (!opened.ok()) return report_error("bench hop", opened.status());
  auto* remote = dynamic_cast<remote::RemoteDevice*>(opened->get());
  if (remote == nullptr) {
    return report_error("bench hop", invalid_argument("--device must be a remote:HOST:PORT"));
  }
  auto local = open_device(args->get("--local", "cpu"));
  if (!local.ok()) return report_error("bench hop", local.status());

  // 1. The link microbenchmark, both directions, alternating sizes round by round.
  auto ping_max = args->get_int("--ping-max", 4096, 16, 1 << 20);
  if (!ping_max.ok()) return report_error("bench hop", ping_max.status());
  std::vector<uint64_t> sizes;
  for (uint64_t s : {1 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20}) {
    if (s <= static_cast<uint64_t>(*ping_max) << 10) sizes.push_back(s);
  }
  std::vector<std::vector<double>> up(sizes.size()), down(sizes.size());
  for (int r = 0; r < *repeat + 1; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      Tensor t = Tensor::create(DType::kU8, Shape{static_cast<int64_t>(sizes[i])}).value();
      std::fill_n(static_cast<uint8_t*>(t.raw()), sizes[i], uint8_t{1});
      Clock::time_point t0 = Clock::now();
      auto buf = remote->upload(t);
      if (!buf.ok()) return report_error("bench hop", buf.status());
      const double u = ms_since(t0);
      t0 = Clock::now();
      if (Status st = remote->download(**buf, &t); !st.ok()) return report_error("bench hop", st);
      const double d = ms_since(t0);
      if (r > 0) {  // round 0 warms the connection
        up[i].push_back(u);
        down[i].push_back(d);
      }
    }
  }
  std::vector<std::pair<uint64_t, double>> up_pts, down_pts;
  for (size_t i = 0; i < sizes.size(); ++i) {
    up_pts.emplace_back(sizes[i], median(up[i]));
    down_pts.emplace_back(sizes[i], median(down[i]));
  }
  auto up_fit = fit_link(up_pts);
  auto down_fit = fit_link(down_pts);
  std::printf("model %s (%s), %d layers; remote %s\n", path.c_str(), hash->c_str(), L,
              remote->description().c_str());
  std::printf("link microbenchmark (Ping, median of %d):", *repeat);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::printf(" %lluB %.3f/%.3f ms", static_cast<unsigned long long>(sizes[i]), up_pts[i].second,
                down_pts[i].second);
  }
  std::printf("\n  up:   L = %.3f ms, B = %.1f Mbit/s\n", up_fit.beta_ms,
              up_fit.alpha_ms_per_byte > 0 ? 8e-3 / up_fit.alpha_ms_per_byte : 0.0);
  std::printf("  down: L = %.3f ms, B = %.1f Mbit/s\n", down_fit.beta_ms,
              down_fit.alpha_ms_per_byte > 0 ? 8e-3 / down_fit.alpha_ms_per_byte : 0.0);
  std::printf("\n%4s %-7s %10s %10s %9s %9s %9s %9s %9s %9s %7s\n", "cut", "hop", "sent B",
              "recv B", "round ms", "server ms", "pack ms", "unpack ms", "link ms", "model ms",
              "err");

  // 2. Per cut: raw and packed runs of the remote tail, alternating.
  int done = 0;
  for (int k : cuts) {
    if (k > done) {
      std::vector<NodeId> nodes;
      for (int l = done; l < k; ++l) nodes.push_back(lg->layer(l).node);
      auto program = (*local)->compile(g, nodes);
      if (!program.ok()) return report_error("bench hop", program.status());
      std::vector<Tensor> in;
      for (ValueId v : (*program)->input_values()) in.push_back(values.at(v));
      std::vector<Tensor> out((*program)->output_values().size());
      if (Status st = (*program)->run(in, out); !st.ok()) return report_error("bench hop", st);
      for (size_t i = 0; i < out.size(); ++i) values[(*program)->output_values()[i]] = out[i];
      done = k;
    }
    std::vector<NodeId> tail;
    for (int l = k; l < L; ++l) tail.push_back(lg->layer(l).node);
    CompileOptions raw_options, packed_options;
    raw_options.model_hash = packed_options.model_hash = *hash;
    packed_options.packing = pack_policy_name(policy);
    std::unique_ptr<Program> programs[2];
    for (int p = 0; p < 2; ++p) {
      auto prog = remote->compile(g, tail, p == 0 ? raw_options : packed_options);
      if (!prog.ok()) return report_error("bench hop", prog.status());
      programs[p] = std::move(*prog);
    }
    std::vector<Tensor> in;
    for (ValueId v : programs[0]->input_values()) {
      auto it = values.find(v);
      if (it == values.end()) {
        return report_error("bench hop",
                            internal_error(quote_name(g.value(v).name) + " was not computed"));
      }
      in.push_back(it->second);
    }
    std::vector<HopRun> runs[2];
    for (int r = 0; r < *repeat + 1; ++r) {
      for (int p = 0; p < 2; ++p) {
        std::vector<Tensor> out(programs[p]->output_values().size());
        const remote::RemoteTraffic before = remote->traffic();
        const Clock::time_point t0 = Clock::now();
        if (Status st = programs[p]->run(in, out); !st.ok()) return report_error("bench hop", st);
        const double wall = ms_since(t0);
        const remote::RemoteTraffic after = remote->traffic();
        if (r == 0) continue;
        runs[p].push_back(HopRun{wall, after.server_ms - before.server_ms,
                                 after.pack_ms - before.pack_ms, after.unpack_ms - before.unpack_ms,
                                 after.bytes_sent - before.bytes_sent,
                                 after.bytes_received - before.bytes_received});
      }
    }
    for (int p = 0; p < 2; ++p) {
      std::vector<double> wall, server, pack, unpack, link;
      for (const HopRun& h : runs[p]) {
        wall.push_back(h.wall);
        server.push_back(h.server);
        pack.push_back(h.pack);
        unpack.push_back(h.unpack);
        link.push_back(h.wall - h.server - h.pack - h.unpack);
      }
      const HopRun& any = runs[p].front();
      // Each Ping fit is a whole round trip (its L holds one empty round trip): a Run is
      // L_up + sent / B_up + received / B_down.
      const double predicted =
          up_fit.ms(any.sent) + down_fit.alpha_ms_per_byte * static_cast<double>(any.received);
      const double measured = median(link);
      std::printf("%4d %-7s %10llu %10llu %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %+6.0f%%\n", k,
                  p == 0 ? "raw" : ("isq" + std::to_string(*bits)).c_str(),
                  static_cast<unsigned long long>(any.sent),
                  static_cast<unsigned long long>(any.received), median(wall), median(server),
                  median(pack), median(unpack), measured, predicted,
                  predicted > 0 ? 100 * (measured / predicted - 1) : 0.0);
    }
  }
  std::printf(
      "\nlink ms = round trip - server - pack - unpack (medians of per-run values); model ms = "
      "L_up + sent / B_up +\nreceived / B_down of the fitted lines, on whole messages; err = "
      "link / model - 1\n");
  return 0;
}

}  // namespace tessera::tools
