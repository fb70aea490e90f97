// tessera bench MODEL.tsr [MODEL.tsr ...] [--devices a,b] [--plan PLAN.json] [--runs N]
//                [--warmup W] [--stream N] [--json out.json] [--compare-ort] [--quiet]
//
// The benchmark a board owner runs: for every model and device (and each plan given), the
// latency of one frame (min, median, p90, p99, mean over --runs timed runs after --warmup), the
// frames/s of a stream of --stream frames (frames overlap across a plan's stages; on one device
// the host's work overlaps the device's), the memory the compiled programs hold and the
// process' peak resident memory, and the time per kind of operator (one timed run per layer on
// the device, the median of --runs). With --compare-ort, ONNX Runtime's median latency on the
// same ONNX file (the model's `source`, or --onnx) runs alongside, from the Python package
// `onnxruntime` when it is importable. A table on stdout; --json writes the same figures.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "api/internal.h"
#include "api/tessera.h"
#include "backends/registry.h"
#include "core/json.h"
#include "graph/format/model_file.h"
#include "graph/layer_graph.h"
#include "scheduler/profiler.h"
#include "tools/calibration_file.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/progress.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--devices", "-d", true, false,
     "comma-separated devices (default: cpu; see `tessera devices`)"},
    {"--plan", "", true, true, "also benchmark the model run by this plan (repeatable)"},
    {"--calibration", "", true, false,
     "int8 activation ranges for int8 devices and plan stages (from `tessera calibrate`; "
     "default: MODEL.tsr.calib.json when it exists)"},
    {"--runs", "-r", true, false, "timed runs of one frame (default 20)"},
    {"--warmup", "-w", true, false, "untimed runs first (default 3)"},
    {"--stream", "", true, false, "frames streamed for frames/s (default 50; 0: no stream)"},
    {"--no-op-times", "", false, false, "skip the time per operator kind"},
    {"--top-layers", "", true, false,
     "also print the K slowest layers of each device run (median ms, op, name; default 0)"},
    {"--compare-ort", "", false, false,
     "add ONNX Runtime's median latency (Python package onnxruntime; $TESSERA_PYTHON or python3)"},
    {"--onnx", "", true, true,
     "with --compare-ort: the ONNX file of each model, in order "
     "(default: the `source` the .tsr recorded)"},
    {"--ort-threads", "", true, false, "with --compare-ort: ONNX Runtime's threads (default: all)"},
    {"--json", "", true, false, "write every figure to this JSON file"},
    {"--quiet", "-q", false, false, "no progress display on stderr"},
    {"--help", "-h", false, false, "show this help"},
};

using Clock = std::chrono::steady_clock;

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // Nearest rank: the smallest value with at least p of the values at or below it.
  const size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

struct Row {
  std::string model, target;  // target: a device name or "plan:<notation>"
  std::string error;          // when the target could not run the model
  std::vector<double> latency_ms;
  double stream_fps = 0;
  double arena_mib = 0, peak_rss_mib = 0;
  std::map<std::string, double> op_ms;                   // median per-run ms by operator kind
  std::vector<std::pair<std::string, double>> layer_ms;  // "op name" -> median ms, in layer order
  double ort_ms = -1;
};

json::Json row_json(const Row& r) {
  json::Json j;
  j["model"] = r.model;
  j["target"] = r.target;
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  j["runs"] = r.latency_ms.size();
  j["latency_ms"] = {{"min", percentile(r.latency_ms, 0)},
                     {"p50", percentile(r.latency_ms, 0.5)},
                     {"p90", percentile(r.latency_ms, 0.9)},
                     {"p99", percentile(r.latency_ms, 0.99)}};
  double sum = 0;
  for (double v : r.latency_ms) sum += v;
  j["latency_ms"]["mean"] =
      r.latency_ms.empty() ? 0 : sum / static_cast<double>(r.latency_ms.size());
  j["stream_frames_per_s"] = r.stream_fps;
  j["memory_mib"] = {{"programs", r.arena_mib}, {"peak_rss", r.peak_rss_mib}};
  if (!r.op_ms.empty()) j["op_ms"] = r.op_ms;
  if (!r.layer_ms.empty()) {
    json::Json layers = json::Json::array();
    for (const auto& [name, ms] : r.layer_ms) layers.push_back({{"layer", name}, {"ms", ms}});
    j["layer_ms"] = layers;
  }
  if (r.ort_ms >= 0) j["onnxruntime_p50_ms"] = r.ort_ms;
  return j;
}

// Random inputs of the model's shapes (uniform in [0, 1), seed 1; integer inputs zero).
Result<std::vector<Tensor>> bench_inputs(const Model& model) {
  return make_inputs(model_graph(model), model_graph(model).inputs());
}

// One frame's latency, `runs` times after `warmup`, then a stream of `stream` frames.
Status bench_session(Session& s, const std::vector<Tensor>& inputs, int warmup, int runs,
                     int stream, Row* row, Progress& progress, long* done, long total) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(s.run(inputs).status());
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(s.run(inputs).status());
    row->latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    progress.update(++*done, total, row->target);
  }
  if (stream > 0) {
    const auto t0 = Clock::now();
    int submitted = 0;
    for (int received = 0; received < stream; ++received) {
      while (submitted < stream && submitted - received < 4) {
        RETURN_IF_ERROR(s.submit(inputs).status());
        ++submitted;
      }
      ASSIGN_OR_RETURN(Frame f, s.next());
      RETURN_IF_ERROR(f.status);
    }
    row->stream_fps = stream / std::chrono::duration<double>(Clock::now() - t0).count();
  }
  row->arena_mib = static_cast<double>(s.peak_memory_bytes()) / (1024.0 * 1024.0);
  row->peak_rss_mib = peak_rss_mib();
  return Status();
}

// Median ms per operator kind, and per layer ("Op name", in layer order): every layer timed on
// `device_name`, `runs` runs.
Status layer_times(const LayerGraph& lg, const std::string& device_name, int runs,
                   const CompileOptions& options, Row* row) {
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, open_device(device_name));
  ASSIGN_OR_RETURN(SliceProgram p, SliceProgram::compile(lg, *device, 0, lg.num_layers(), options));
  RETURN_IF_ERROR(p.run());
  std::vector<std::vector<double>> per_layer(static_cast<size_t>(lg.num_layers()));
  for (int r = 0; r < runs; ++r) {
    std::vector<double> ms;
    RETURN_IF_ERROR(p.run_timed(&ms));
    for (size_t l = 0; l < per_layer.size() && l < ms.size(); ++l) per_layer[l].push_back(ms[l]);
  }
  for (int l = 0; l < lg.num_layers(); ++l) {
    const double ms = percentile(per_layer[static_cast<size_t>(l)], 0.5);
    const char* op = op_name(lg.layer(l).kind);
    row->op_ms[op] += ms;
    row->layer_ms.emplace_back(std::string(op) + " " + lg.layer(l).name, ms);
  }
  return Status();
}

// ONNX Runtime's median latency of `onnx` with `threads` threads (0: its default), through its
// Python package; an error says why it could not run.
Result<double> ort_median_ms(const std::string& onnx, int threads, int warmup, int runs) {
  const char* py = std::getenv("TESSERA_PYTHON");
  const std::string python = py != nullptr && *py != '\0' ? py : "python3";
  const std::string script =
      "import sys, time, numpy as np, onnxruntime as ort\n"
      "o = ort.SessionOptions(); t = int(sys.argv[2])\n"
      "if t > 0: o.intra_op_num_threads = t; o.inter_op_num_threads = 1\n"
      "s = ort.InferenceSession(sys.argv[1], o, providers=['CPUExecutionProvider'])\n"
      "rng = np.random.default_rng(1)\n"
      "feed = {i.name: rng.random([d if isinstance(d, int) else 1 for d in i.shape])"
      ".astype(np.float32) for i in s.get_inputs()}\n"
      "for _ in range(int(sys.argv[3])): s.run(None, feed)\n"
      "ts = []\n"
      "for _ in range(int(sys.argv[4])):\n"
      "  t0 = time.perf_counter(); s.run(None, feed); ts.append(time.perf_counter() - t0)\n"
      "print('median_ms', sorted(ts)[len(ts) // 2] * 1e3)\n";
  const std::string script_path = (std::filesystem::temp_directory_path() /
                                   ("tessera_bench_ort_" + std::to_string(getpid()) + ".py"))
                                      .string();
  RETURN_IF_ERROR(json::write_text_file(script_path, script));
  auto quote = [](const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
  };
  const std::string cmd = quote(python) + " " + quote(script_path) + " " + quote(onnx) + " " +
                          std::to_string(threads) + " " + std::to_string(warmup) + " " +
                          std::to_string(runs) + " 2>&1";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
    const int rc = pclose(f);
    std::filesystem::remove(script_path);
    const size_t at = out.rfind("median_ms ");
    if (rc == 0 && at != std::string::npos) return std::stod(out.substr(at + 10));
  }
  std::filesystem::remove(script_path);
  const std::string tail = out.size() > 300 ? out.substr(out.size() - 300) : out;
  return failed_precondition("ONNX Runtime did not run " + onnx + " (" + python + "): " + tail);
}

void print_table(const std::vector<Row>& rows, int top_layers) {
  std::printf("%-16s %-28s %9s %9s %9s %9s %10s %9s %9s %9s\n", "model", "target", "min ms",
              "p50 ms", "p90 ms", "p99 ms", "stream f/s", "prog MiB", "RSS MiB", "ORT ms");
  for (const Row& r : rows) {
    if (!r.error.empty()) {
      std::printf("%-16.16s %-28.28s %s\n", r.model.c_str(), r.target.c_str(), r.error.c_str());
      continue;
    }
    char ort[32] = "-";
    if (r.ort_ms >= 0) std::snprintf(ort, sizeof ort, "%.3f", r.ort_ms);
    std::printf("%-16.16s %-28.28s %9.3f %9.3f %9.3f %9.3f %10.1f %9.1f %9.1f %9s\n",
                r.model.c_str(), r.target.c_str(), percentile(r.latency_ms, 0),
                percentile(r.latency_ms, 0.5), percentile(r.latency_ms, 0.9),
                percentile(r.latency_ms, 0.99), r.stream_fps, r.arena_mib, r.peak_rss_mib, ort);
  }
  for (const Row& r : rows) {
    if (r.op_ms.empty()) continue;
    std::vector<std::pair<double, std::string>> by_time;
    double total = 0;
    for (const auto& [k, v] : r.op_ms) {
      by_time.emplace_back(v, k);
      total += v;
    }
    std::sort(by_time.rbegin(), by_time.rend());
    std::printf("%s on %s, time per operator kind (sum of layer medians %.3f ms):", r.model.c_str(),
                r.target.c_str(), total);
    for (const auto& [v, k] : by_time) {
      std::printf(" %s %.3f (%.0f%%)", k.c_str(), v, total > 0 ? 100 * v / total : 0.0);
    }
    std::printf("\n");
    if (top_layers <= 0) continue;
    std::vector<std::pair<double, std::string>> slowest;
    for (const auto& [name, ms] : r.layer_ms) slowest.emplace_back(ms, name);
    std::stable_sort(slowest.begin(), slowest.end(),
                     [](const auto& a, const auto& b) { return a.first > b.first; });
    if (slowest.size() > static_cast<size_t>(top_layers))
      slowest.resize(static_cast<size_t>(top_layers));
    std::printf("%s on %s, the %zu slowest layers:\n", r.model.c_str(), r.target.c_str(),
                slowest.size());
    for (const auto& [ms, name] : slowest) {
      std::printf("  %9.3f ms %5.1f%%  %s\n", ms, total > 0 ? 100 * ms / total : 0.0, name.c_str());
    }
  }
}

}  // namespace

int cmd_bench_models(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("bench", args.status());
  if (args->has("--help") || args->positional.empty()) {
    std::printf(
        "usage: tessera bench MODEL.tsr [MODEL.tsr ...] [--devices a,b] [--plan PLAN.json] "
        "[--runs N] [--stream N] [--json out.json] [--compare-ort]\n"
        "       tessera bench pack MODEL.tsr --bits B [options]   (the remote-hop codec)\n"
        "       tessera bench cuts MODEL.tsr [options] -o cuts.json (the profile of cuts)\n"
        "       tessera bench hop MODEL.tsr --device remote:HOST:PORT [options]   (remote "
        "hops)\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  auto runs = args->get_int("--runs", 20, 1, 1000000);
  auto warmup = args->get_int("--warmup", 3, 0, 1000000);
  auto stream = args->get_int("--stream", 50, 0, 100000000);
  auto ort_threads = args->get_int("--ort-threads", 0, 0, 1024);
  auto top_layers = args->get_int("--top-layers", 0, 0, 1000000);
  for (const auto* r : {&runs, &warmup, &stream, &ort_threads, &top_layers}) {
    if (!r->ok()) return report_error("bench", r->status());
  }
  std::vector<std::string> devices = cli::split_device_list(args->get("--devices", "cpu"));
  const std::vector<std::string> plans = args->all("--plan");
  const std::vector<std::string> onnx = args->all("--onnx");
  if (!onnx.empty() && onnx.size() != args->positional.size()) {
    return report_error("bench", invalid_argument("--onnx: one file per model, given " +
                                                  std::to_string(onnx.size()) + " for " +
                                                  std::to_string(args->positional.size())));
  }
  const bool op_kinds = !args->has("--no-op-times");
  const long per_target = *runs + (op_kinds ? 1 : 0);
  const long total = static_cast<long>(args->positional.size()) *
                     static_cast<long>(devices.size() + plans.size()) * per_target;
  Progress progress("bench", args->has("--quiet"));
  long done = 0;
  std::vector<Row> rows;
  for (size_t mi = 0; mi < args->positional.size(); ++mi) {
    const std::string& path = args->positional[mi];
    auto model = Model::load(path);
    if (!model.ok()) return report_error("bench", model.status());
    auto lg = LayerGraph::build(model_graph(**model));
    if (!lg.ok()) return report_error("bench", lg.status());
    auto inputs = bench_inputs(**model);
    if (!inputs.ok()) return report_error("bench", inputs.status());
    const std::string name = std::filesystem::path(path).stem().string();
    double ort = -1;
    if (args->has("--compare-ort")) {
      std::string source = onnx.empty() ? "" : onnx[mi];
      if (source.empty()) {
        auto meta = load_model_file(path);
        if (meta.ok()) {
          auto it = meta->metadata.properties.find("source");
          if (it != meta->metadata.properties.end()) source = it->second;
        }
      }
      auto ms = source.empty() ? Result<double>(not_found("no ONNX file recorded; give --onnx"))
                               : ort_median_ms(source, *ort_threads, *warmup, *runs);
      if (ms.ok()) {
        ort = *ms;
      } else {
        std::fprintf(stderr, "bench: %s: %s\n", name.c_str(), ms.status().to_string().c_str());
      }
    }
    // int8 ranges: --calibration, else the model's sidecar; an int8 target without them is
    // refused up front, naming the sidecar and `tessera calibrate`.
    auto table = load_calibration_file(path, (*model)->hash(), args->get("--calibration"));
    if (!table.ok()) return report_error("bench", table.status());
    std::vector<std::string> names = devices;
    for (const std::string& p : plans) {
      auto plan = Plan::load(p);
      if (!plan.ok()) return report_error("bench", plan.status());
      for (const Stage& s : plan->stages) {
        for (const DeviceShare& d : s.placement.devices) names.push_back(d.device);
      }
    }
    if (Status st = require_calibration(names, *table, model_graph(**model), path, "--calibration");
        !st.ok()) {
      return report_error("bench", st);
    }
    const std::string table_path = !*table ? ""
                                   : args->has("--calibration")
                                       ? args->get("--calibration")
                                       : CalibrationTable::default_path(path);
    CompileOptions compile;
    compile.calibration = *table;
    std::vector<std::pair<std::string, SessionOptions>> targets;
    for (const std::string& d : devices) {
      SessionOptions o;
      o.device = d;
      o.calibration_path = table_path;
      targets.emplace_back(d, o);
    }
    for (const std::string& p : plans) {
      SessionOptions o;
      o.plan_path = p;
      o.calibration_path = table_path;
      targets.emplace_back("plan " + std::filesystem::path(p).filename().string(), o);
    }
    for (auto& [target, options] : targets) {
      Row row;
      row.model = name;
      row.target = target;
      row.ort_ms = ort;
      auto session = Session::create(*model, options);
      Status st = session.ok() ? bench_session(**session, *inputs, *warmup, *runs, *stream, &row,
                                               progress, &done, total)
                               : session.status();
      if (st.ok() && session.ok() && options.plan_path.empty() && op_kinds) {
        Row timed;
        if (layer_times(*lg, options.device, *runs, compile, &timed).ok()) {
          row.op_ms = std::move(timed.op_ms);
          row.layer_ms = std::move(timed.layer_ms);
        }
        progress.update(++done, total, target + " per layer");
      }
      if (session.ok() && !options.plan_path.empty())
        row.target = "plan " + (*session)->device_name();
      if (!st.ok()) row.error = st.to_string();
      rows.push_back(std::move(row));
    }
  }
  progress.finish();
  print_table(rows, static_cast<int>(*top_layers));
  if (args->has("--json")) {
    json::Json j = json::Json::array();
    for (const Row& r : rows) j.push_back(row_json(r));
    Status st = json::write_file(args->get("--json"), json::Json{{"bench", j}});
    if (!st.ok()) return report_error("bench", st);
    std::printf("wrote %s\n", args->get("--json").c_str());
  }
  for (const Row& r : rows) {
    if (!r.error.empty())
      return report_error("bench", internal_error(r.model + " on " + r.target + ": " + r.error));
  }
  return 0;
}

}  // namespace tessera::tools
