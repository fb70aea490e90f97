// tessera profile MODEL.tsr -o profile.json [--devices a,b] [--repeat N] [--warmup N]
// tessera profile MODEL.tsr --check profile.json [--slices N]   (cost-model accuracy)
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <random>
#include <sstream>

#include "backends/registry.h"
#include "core/tessera.h"
#include "energy/platform.h"
#include "graph/format/model_file.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/profiler.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--output", "-o", true, false, "write the profile JSON here"},
    {"--devices", "-d", true, false,
     "comma-separated devices to profile (default: every device of the platform)"},
    {"--platform", "-p", true, false,
     "platform JSON describing the board (default: detect this machine)"},
    {"--repeat", "-r", true, false, "timed runs per layer and transfer size (default 5)"},
    {"--warmup", "-w", true, false, "untimed runs before them (default 1)"},
    {"--statistic", "", true, false,
     "median (default, seed 000), min (quiet machine) or mean (adds up on a loaded "
     "machine) of the repeats"},
    {"--all-levels", "", false, false,
     "profile every DVFS level instead of the minimum and maximum"},
    {"--calibration", "", true, false,
     "random slices timed whole per device, to fit the per-slice overhead (default 8)"},
    {"--sysfs", "", true, false, "sysfs root for sensors and governors (default /)"},
    {"--check", "", true, false,
     "instead of profiling: compare PROFILE's predictions with measured runs"},
    {"--slices", "", true, false,
     "with --check: random slices and split plans per device "
     "(default 10)"},
    {"--seed", "", true, false, "with --check: random seed (default 1)"},
    {"--markdown", "", false, false, "with --check: print the table as Markdown"},
    {"--hot", "", false, false,
     "with --check: time each slice in a loop of itself (default: each run after a run of the "
     "whole model, as a plan's stage runs after the other stages)"},
    {"--help", "-h", false, false, "show this help"},
};

// A one-line progress bar on stderr, redrawn at most every 100 ms.
class ProgressBar {
 public:
  void update(int done, int total, const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const int width = 30;
    const double frac = total > 0 ? std::min(1.0, static_cast<double>(done) / total) : 1;
    const int filled = static_cast<int>(frac * width);
    std::fprintf(stderr, "\r[%s%s] %3d%% %-40.40s", std::string(filled, '#').c_str(),
                 std::string(width - filled, '.').c_str(), static_cast<int>(frac * 100),
                 what.c_str());
    if (done >= total) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  std::chrono::steady_clock::time_point last_{};
};

struct LoadedGraph {
  std::shared_ptr<const Model> model;
  std::unique_ptr<LayerGraph> lg;
  std::string hash;
  std::string name;
};

Result<LoadedGraph> load(const std::string& path) {
  LoadedGraph out;
  ASSIGN_OR_RETURN(LoadedModel loaded, load_model_file(path));
  auto model = Model::from_graph(std::move(loaded.graph));
  if (!model.ok()) return model.status().with_context(path);
  out.model = std::move(*model);
  ASSIGN_OR_RETURN(LayerGraph lg, LayerGraph::build(out.model->graph()));
  out.lg = std::make_unique<LayerGraph>(std::move(lg));
  ASSIGN_OR_RETURN(out.hash, model_file_hash(path));
  out.name = std::filesystem::path(path).stem().string();
  return out;
}

void print_summary(const Profile& p, const CostModel& cm) {
  std::printf("profile of %s (%s), %d layers, %.1f s\n", p.model_name.c_str(), p.model_hash.c_str(),
              p.num_layers(), p.conditions.profiling_seconds);
  std::printf("%-14s %8s %6s %6s %10s %12s %8s %7s %9s %9s %6s %9s\n", "device", "MHz", "layers",
              "chain", "sum ms", "upload GB/s", "beta us", "R^2", "slice ms", "ns/KiB", "scale",
              "fit err");
  for (size_t di = 0; di < p.devices.size(); ++di) {
    const DeviceProfile& d = p.devices[di];
    for (const LevelProfile& l : d.levels) {
      const auto found = cm.find(d.device + "@" + std::to_string(l.mhz));
      if (!found.ok()) continue;
      const int vd = *found;
      double sum = 0;
      int n = 0, chained = 0;
      for (int i = 0; i < p.num_layers(); ++i) {
        if (!cm.can_run(vd, i)) continue;
        sum += cm.exec_ms(vd, i);
        ++n;
        chained += !l.layer_chain_ms.empty() && l.layer_chain_ms[static_cast<size_t>(i)];
      }
      const double gbs =
          l.upload.alpha_ms_per_byte > 0 ? 1e-6 / l.upload.alpha_ms_per_byte : INFINITY;
      const SliceOverhead& o = cm.slice_overhead(vd);
      std::printf("%-14s %8d %6d %6d %10.3f %12.2f %8.2f %7.4f %9.3f %9.1f %6.3f %8.1f%%\n",
                  d.device.c_str(), l.mhz, n, chained, sum, gbs, l.upload.beta_ms * 1e3,
                  l.upload.r2, o.fixed_ms, o.ms_per_byte * 1024 * 1e6, o.chain_scale,
                  100 * o.error);
    }
    std::printf("  regression error (layers not measured): %.1f%%\n",
                100 * cm.regression_error(static_cast<int>(di)));
    if (!d.unsupported.empty()) {
      std::printf("  %zu layer(s) cannot run on %s, e.g. %s: %s\n", d.unsupported.size(),
                  d.device.c_str(),
                  p.layers[static_cast<size_t>(d.unsupported.begin()->first)].name.c_str(),
                  d.unsupported.begin()->second.c_str());
    }
  }
}

struct CheckRow {
  std::string device;
  std::string what;
  double predicted = 0;
  double measured = 0;
  double error() const { return measured > 0 ? (predicted - measured) / measured : 0; }
};

// Predicted vs measured latency of the whole model, random slices and random split plans (each
// slice compiled alone, run through host memory, as the executor runs a plan; each timed run
// after a run of the whole model on the same device unless --hot).
int run_check(const LoadedGraph& m, const cli::Args& args) {
  auto profile = Profile::load(args.get("--check"), m.hash);
  if (!profile.ok()) return report_error("profile", profile.status());
  auto cm = CostModel::build(*profile, *m.lg);
  if (!cm.ok()) return report_error("profile", cm.status());
  auto slices = args.get_int("--slices", 10, 0, 100000);
  auto seed = args.get_int("--seed", 1, 0, 1 << 30);
  auto repeat = args.get_int("--repeat", 5, 1, 100000);
  auto warmup = args.get_int("--warmup", 1, 0, 100000);
  for (const auto* r : {&slices, &seed, &repeat, &warmup}) {
    if (!r->ok()) return report_error("profile", r->status());
  }
  const int L = m.lg->num_layers();
  std::mt19937 rng(static_cast<unsigned>(*seed));
  std::vector<CheckRow> rows;
  const std::vector<int> vds = cm->latency_devices();
  // Per device: the device, opened once, and the whole model compiled on it, run before each
  // timed run of a slice (unless --hot) so that the slice meets the caches as a plan's stage
  // does after the other stages. Where the whole model does not compile, slices run in a loop.
  struct Opened {
    std::unique_ptr<Device> device;
    std::unique_ptr<Program> whole;
    std::vector<Tensor> inputs, outputs;
  };
  std::map<std::string, Opened> opened;
  auto measure = [&](int vd, int first, int last) -> Result<double> {
    const std::string& name = cm->virtual_devices()[static_cast<size_t>(vd)].device;
    auto [it, fresh] = opened.try_emplace(name);
    Opened& o = it->second;
    if (fresh) {
      ASSIGN_OR_RETURN(o.device, open_device(name));
      std::vector<NodeId> nodes;
      for (int i = 0; i < L; ++i) nodes.push_back(m.lg->layer(i).node);
      auto whole = args.has("--hot") ? Result<std::unique_ptr<Program>>(unimplemented("--hot"))
                                     : o.device->compile(m.lg->graph(), nodes);
      auto inputs = whole.ok() ? make_inputs(m.lg->graph(), (*whole)->input_values())
                               : Result<std::vector<Tensor>>(whole.status());
      if (inputs.ok()) {
        o.whole = std::move(*whole);
        o.inputs = std::move(*inputs);
        o.outputs.resize(o.whole->output_values().size());
      }
    }
    std::function<Status()> before;
    if (o.whole != nullptr) before = [&o] { return o.whole->run(o.inputs, o.outputs); };
    return measure_slice_ms(*m.lg, *o.device, first, last, *warmup, *repeat,
                            profile->conditions.statistic, before);
  };
  for (int vd : vds) {
    const std::string& dev = cm->virtual_devices()[static_cast<size_t>(vd)].label;
    if (!cm->can_run_slice(vd, 0, L)) continue;
    auto whole = measure(vd, 0, L);
    if (!whole.ok()) return report_error("profile", whole.status());
    rows.push_back({dev, "whole model", cm->slice_ms(vd, 0, L), *whole});
    for (int s = 0; s < *slices && L > 1; ++s) {
      int a = static_cast<int>(rng() % static_cast<unsigned>(L));
      int b = static_cast<int>(rng() % static_cast<unsigned>(L));
      if (a > b) std::swap(a, b);
      ++b;
      if (!cm->can_run_slice(vd, a, b)) continue;
      auto ms = measure(vd, a, b);
      if (!ms.ok()) return report_error("profile", ms.status());
      rows.push_back({dev, "slice [" + std::to_string(a) + "," + std::to_string(b) + ")",
                      cm->slice_ms(vd, a, b), *ms});
    }
  }
  // Split plans over the devices: 2 or 3 slices, each on a random device, transfers at the cuts.
  for (int s = 0; s < *slices && L > 2 && !vds.empty(); ++s) {
    const int k = 2 + static_cast<int>(rng() % 2u);
    std::vector<int> cuts = {0, L};
    while (static_cast<int>(cuts.size()) < k + 1) {
      const int c = 1 + static_cast<int>(rng() % static_cast<unsigned>(L - 1));
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    double pred = 0, meas = 0;
    std::string what = "split";
    bool ok = true;
    for (size_t i = 0; i + 1 < cuts.size() && ok; ++i) {
      const int vd = vds[rng() % vds.size()];
      ok = cm->can_run_slice(vd, cuts[i], cuts[i + 1]);
      if (!ok) break;
      auto ms = measure(vd, cuts[i], cuts[i + 1]);
      if (!ms.ok()) return report_error("profile", ms.status());
      pred += cm->slice_ms(vd, cuts[i], cuts[i + 1]);
      meas += *ms;
      what += " " + cm->virtual_devices()[static_cast<size_t>(vd)].label + "[" +
              std::to_string(cuts[i]) + "," + std::to_string(cuts[i + 1]) + ")";
    }
    if (ok) rows.push_back({"plan", what, pred, meas});
  }
  const bool md = args.has("--markdown");
  if (md) {
    std::printf(
        "| device | what | predicted ms | measured ms | error |\n|---|---|---:|---:|---:|\n");
  } else {
    std::printf("%-14s %-44s %12s %12s %8s\n", "device", "what", "predicted ms", "measured ms",
                "error");
  }
  double sum_abs = 0, whole_abs = 0;
  int whole_n = 0;
  for (const CheckRow& r : rows) {
    if (md) {
      std::printf("| %s | %s | %.3f | %.3f | %+.1f%% |\n", r.device.c_str(), r.what.c_str(),
                  r.predicted, r.measured, 100 * r.error());
    } else {
      std::printf("%-14s %-44.44s %12.3f %12.3f %+7.1f%%\n", r.device.c_str(), r.what.c_str(),
                  r.predicted, r.measured, 100 * r.error());
    }
    sum_abs += std::abs(r.error());
    if (r.what == "whole model") {
      whole_abs += std::abs(r.error());
      ++whole_n;
    }
  }
  if (!rows.empty()) {
    std::printf("%s%s: mean absolute error %.2f%% over %zu runs (whole model %.2f%%)\n",
                md ? "\n" : "", m.name.c_str(), 100 * sum_abs / static_cast<double>(rows.size()),
                rows.size(), whole_n ? 100 * whole_abs / whole_n : 0.0);
    // Per device (split plans as "plan"), in order of first appearance.
    std::vector<std::string> order;
    std::map<std::string, std::pair<double, int>> per_device;
    for (const CheckRow& r : rows) {
      auto [it, fresh] = per_device.try_emplace(r.device, 0.0, 0);
      if (fresh) order.push_back(r.device);
      it->second.first += std::abs(r.error());
      it->second.second += 1;
    }
    for (const std::string& d : order) {
      const auto& [sum, n] = per_device[d];
      std::printf("%s  %s: mean absolute error %.2f%% over %d runs\n", m.name.c_str(), d.c_str(),
                  100 * sum / n, n);
    }
  }
  return 0;
}

}  // namespace

int cmd_profile(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("profile", args.status());
  if (args->has("--help") || args->positional.size() != 1 ||
      (!args->has("--output") && !args->has("--check"))) {
    std::printf(
        "usage: tessera profile MODEL.tsr -o PROFILE.json [--devices a,b] [--repeat N]\n"
        "       tessera profile MODEL.tsr --check PROFILE.json [--slices N]\n\n"
        "Runs every layer of the model alone on every device (at the minimum and maximum DVFS\n"
        "levels where they can be set), fits the transfer cost of each device, and writes the\n"
        "profile the planners read. --check compares the cost model's predictions with\n"
        "measured runs of the whole model, random slices and random split plans.\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  auto model = load(args->positional[0]);
  if (!model.ok()) return report_error("profile", model.status());
  if (args->has("--check")) return run_check(*model, *args);

  auto repeat = args->get_int("--repeat", 5, 1, 100000);
  if (!repeat.ok()) return report_error("profile", repeat.status());
  auto warmup = args->get_int("--warmup", 1, 0, 100000);
  if (!warmup.ok()) return report_error("profile", warmup.status());
  const std::string sysfs = args->get("--sysfs", "/");
  Platform platform;
  if (args->has("--platform")) {
    auto p = Platform::load(args->get("--platform"));
    if (!p.ok()) return report_error("profile", p.status());
    platform = std::move(*p);
  } else {
    platform = Platform::detect(sysfs);
  }
  ProfileOptions options;
  options.devices = cli::split_commas(args->get("--devices"));
  options.repeat = *repeat;
  options.warmup = *warmup;
  options.all_levels = args->has("--all-levels");
  auto calibration = args->get_int("--calibration", 8, 0, 10000);
  if (!calibration.ok()) return report_error("profile", calibration.status());
  options.calibration_slices = *calibration;
  options.statistic = args->get("--statistic", "median");
  options.sysfs_root = sysfs;
  ProgressBar bar;
  if (isatty(STDERR_FILENO)) {
    options.progress = [&bar](int done, int total, const std::string& what) {
      bar.update(done, total, what);
    };
  }
  auto profile = profile_model(*model->lg, platform, options, model->name, model->hash);
  if (!profile.ok()) return report_error("profile", profile.status());
  Status st = profile->save(args->get("--output"));
  if (!st.ok()) return report_error("profile", st);
  auto cm = CostModel::build(*profile, *model->lg);
  if (!cm.ok()) return report_error("profile", cm.status());
  print_summary(*profile, *cm);
  std::printf("wrote %s\n", args->get("--output").c_str());
  return 0;
}

}  // namespace tessera::tools
