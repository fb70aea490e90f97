// tessera run model.tsr --input x.npy --output y.npy [--device NAME] [--repeat N] [--top K]
// tessera run model.onnx --shape images=1x3x640x640 ...      (converted in memory, as convert does)
// tessera run model.tsr --plan plan.json [--trace trace.json] ...   (a plan over several devices)
// tessera run model.tsr --plan plan.json --stream N [--queue C] [--warmup W]   (a stream)
// tessera run model.tsr --plan two_stage.json --stream N --adapt   (moving the cut as it runs)
//
// --device and --plan share one path: a device is the one-stage plan of the whole model on it,
// run by the same executor.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>

#include "api/internal.h"
#include "backends/registry.h"
#include "core/budget.h"
#include "core/npy.h"
#include "graph/layer_graph.h"
#include "graph/onnx/onnx_import.h"
#include "scheduler/adapt/adaptive_stream.h"
#include "scheduler/executor/executor.h"
#include "scheduler/fidelity.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"
#include "tools/bench_model.h"
#include "tools/calibration_file.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/progress.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--input", "-i", true, true,
     "input .npy (one per model input, in order; or NAME=PATH); for a one-input model, several "
     "files or a directory of .npy files are frames, run in order; default: zeros"},
    {"--output", "-o", true, true,
     "write output .npy (one per model output, in order) of the last frame; a %d in the name "
     "writes every frame's"},
    {"--device", "-d", true, false, "device to run on (default: reference; see `tessera devices`)"},
    {"--repeat", "-r", true, false, "timed runs after the warm-up runs (default 1)"},
    {"--warmup", "", true, false, "untimed runs before the timed ones (default 1)"},
    {"--times", "", false, false, "print every timed run's latency, in run order"},
    {"--describe", "", false, false,
     "print what each step's program runs: its kernels, precision conversions and layouts"},
    {"--top", "", true, false, "print the K largest entries of the first output"},
    {"--plan", "", true, false, "run by this plan (from `tessera plan`) instead of on one device"},
    {"--allow-unhashed-plan", "", false, false,
     "run a --plan that names no model hash (refused by default: nothing ties it to the model)"},
    {"--trace", "", true, false, "write a Chrome trace (open in Perfetto)"},
    {"--stream", "", true, false,
     "stream N frames through the plan (stages overlap); prints frames/s, busy shares, queue "
     "occupancy and the measured against the estimated period"},
    {"--queue", "", true, false,
     "with --stream: frames that may wait between actors (default: "
     "the plan's queue_capacity)"},
    {"--adapt", "", false, false,
     "with --stream on a two-stage plan: move the cut while streaming when the measured period "
     "or a stage's time drifts > 5% (seed 001 Algorithm 2); logs every decision"},
    {"--adapt-window", "", true, false, "with --adapt: frames per measurement (default 30)"},
    {"--quiet", "-q", false, false, "no progress display on stderr while streaming"},
    {"--shape", "", true, true,
     "for an .onnx model: NAME=1x3x640x640, the shape of graph input NAME (repeatable; once "
     "given, every symbolic input dimension must be set)"},
    {"--batch", "", true, false,
     "for an .onnx model: value for a symbolic batch dimension (dimension 0; default 1)"},
    {"--precision", "", true, false,
     "f32 (default), bf16 or int8: the arithmetic of every stage (a device without it fails; "
     "per stage, name precision levels in the plan: cpu#bf16; docs/precision.md)"},
    {"--calibration", "", true, false,
     "activation ranges for int8 (from `tessera calibrate`; default: MODEL.tsr.calib.json when "
     "it exists)"},
    {"--fidelity", "", false, false,
     "also run every frame in f32 and report top-1 agreement, top-5 overlap and relative L2 of "
     "the outputs against it (use inputs held apart from calibration)"},
    {"--memory-budget", "", true, false,
     "bytes the compiled programs may commit, e.g. 512M or 8G (default: the machine's memory, "
     "or TESSERA_MEMORY_BUDGET); over it the run is refused before anything is packed"},
    {"--max-gflops", "", true, false,
     "refuse a model that needs more GFLOPs per inference (for untrusted models; default: no "
     "limit)"},
    {"--help", "-h", false, false, "show this help"},
};

// The frames to run, each one tensor per model input. One frame from one file per input (or
// NAME=PATH); for a one-input model, several files or a directory of .npy files (sorted by name)
// are one frame each.
Result<std::vector<std::vector<Tensor>>> gather_frames(const Model& model, const cli::Args& args) {
  const auto& descs = model.inputs();
  std::vector<std::string> specs = args.all("--input");
  if (descs.size() == 1 && specs.size() == 1 && std::filesystem::is_directory(specs[0])) {
    const std::string dir = specs[0];
    specs.clear();
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      if (e.is_regular_file() && e.path().extension() == ".npy") specs.push_back(e.path());
    }
    std::sort(specs.begin(), specs.end());
    if (specs.empty()) return not_found(dir + ": no .npy files in the directory");
  }
  std::vector<std::vector<Tensor>> frames;
  if (descs.size() == 1 && specs.size() > 1) {
    for (const std::string& path : specs) {
      if (path.find('=') != std::string::npos) {
        return invalid_argument("--input " + path + ": NAME=PATH takes one file per input");
      }
      ASSIGN_OR_RETURN(Tensor t, read_input(descs[0], path));
      frames.push_back({std::move(t)});
    }
    return frames;
  }
  std::vector<Tensor> inputs(descs.size());
  std::vector<bool> given(descs.size(), false);
  size_t next_positional = 0;
  for (const std::string& spec : specs) {
    size_t index = next_positional;
    std::string path = spec;
    const size_t eq = spec.find('=');
    if (eq != std::string::npos) {
      const std::string name = spec.substr(0, eq);
      path = spec.substr(eq + 1);
      auto it = std::find_if(descs.begin(), descs.end(),
                             [&](const TensorDesc& d) { return d.name == name; });
      if (it == descs.end()) return not_found("the model has no input " + quote_name(name));
      index = static_cast<size_t>(it - descs.begin());
    } else {
      ++next_positional;
    }
    if (index >= descs.size()) {
      return invalid_argument("more --input files than model inputs (" +
                              std::to_string(descs.size()) + ")");
    }
    ASSIGN_OR_RETURN(inputs[index], read_input(descs[index], path));
    given[index] = true;
  }
  for (size_t i = 0; i < descs.size(); ++i) {
    if (given[i]) continue;
    std::fprintf(stderr, "note: input '%s' not given, using zeros\n", descs[i].name.c_str());
    ASSIGN_OR_RETURN(inputs[i], Tensor::create(descs[i].dtype, descs[i].shape));
  }
  frames.push_back(std::move(inputs));
  return frames;
}

// "out%d.npy" with frame 7 -> "out7.npy"; names without %d are returned as they are.
std::string frame_path(const std::string& pattern, uint64_t frame) {
  const size_t at = pattern.find("%d");
  if (at == std::string::npos) return pattern;
  return pattern.substr(0, at) + std::to_string(frame) + pattern.substr(at + 2);
}

bool has_frame_pattern(const cli::Args& args) {
  for (const std::string& p : args.all("--output")) {
    if (p.find("%d") != std::string::npos) return true;
  }
  return false;
}

Status write_frame_outputs(const cli::Args& args, uint64_t frame,
                           const std::vector<Tensor>& outputs) {
  const auto& paths = args.all("--output");
  for (size_t i = 0; i < paths.size() && i < outputs.size(); ++i) {
    RETURN_IF_ERROR(write_npy(frame_path(paths[i], frame), outputs[i]));
  }
  return Status();
}

// Writes the last frame's outputs (unless every frame's were written) and prints the top-K of
// the first output.
int finish(const Model& model, const cli::Args& args, uint64_t frame,
           const std::vector<Tensor>& outputs, int top) {
  if (!has_frame_pattern(args)) {
    Status st = write_frame_outputs(args, frame, outputs);
    if (!st.ok()) return report_error("run", st);
  }
  if (top > 0 && !outputs.empty() && outputs[0].dtype() == DType::kF32) {
    const Tensor& y = outputs[0];
    std::vector<int64_t> idx(static_cast<size_t>(y.numel()));
    std::iota(idx.begin(), idx.end(), 0);
    const size_t k = std::min(idx.size(), static_cast<size_t>(top));
    const float* p = y.data<float>();
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [p](int64_t a, int64_t b) { return p[a] > p[b]; });
    std::printf("top-%zu of '%s':\n", k, model.outputs()[0].name.c_str());
    for (size_t i = 0; i < k; ++i) {
      std::printf("  %zu. class %lld  score %.5f\n", i + 1, static_cast<long long>(idx[i]),
                  p[idx[i]]);
    }
  }
  return 0;
}

// `warmup` untimed then `repeat` timed calls of `run`; the wall times in run order. With --times
// they are printed as one line ("times ms: ..."), for scripts that want each run, not a median.
Result<std::vector<double>> timed_runs(const cli::Args& args, int warmup, int repeat,
                                       const std::function<Status()>& run) {
  for (int r = 0; r < warmup; ++r) RETURN_IF_ERROR(run());
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(run());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  if (args.has("--times")) {
    std::printf("times ms:");
    for (double t : ms) std::printf(" %.3f", t);
    std::printf("\n");
  }
  std::sort(ms.begin(), ms.end());
  return ms;
}

double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// The per-step table of a sequential run: the mean over the timed runs (the warm-up runs left
// out) next to the sum of its stages' estimates.
void print_step_table(const Executor& ex, const Plan& plan, int first_run) {
  const std::vector<double> step_ms = ex.mean_step_ms(first_run);
  std::printf("%5s  %-7s %-20s %12s %12s\n", "step", "stages", "device", "measured ms",
              "estimated ms");
  for (size_t i = 0; i < ex.steps().size(); ++i) {
    const ExecutorStep& step = ex.steps()[i];
    double estimated = 0;
    for (int k = step.first_stage; k <= step.last_stage; ++k) {
      const StageEstimate& e = plan.stages[static_cast<size_t>(k)].estimate;
      estimated += e.exec_ms + e.transfer_ms;
    }
    const std::string stages =
        step.first_stage == step.last_stage
            ? std::to_string(step.first_stage)
            : std::to_string(step.first_stage) + "-" + std::to_string(step.last_stage);
    std::printf("%5zu  %-7s %-20s %12.3f %12.3f\n", i, stages.c_str(), step.device.c_str(),
                step_ms[i], estimated);
  }
}

// What drive_stream saw: the last good frame, and the timed window (from the moment the last
// warm-up frame came out).
struct StreamTotals {
  uint64_t last_id = 0;
  std::vector<Tensor> last;
  uint64_t timed_from = 0;  // id of the first timed frame
  double wall_ms = 0;
  double cpu_s = 0;
  int failed = 0;  // frames that came out with an error
};

// Submits `warmup` then `count` frames (cycling through `frames`) to an Executor or an
// AdaptiveStream, keeping every slot busy, and takes them out in order: checks that each id
// comes out exactly once and in submission order, writes per-frame outputs when asked, and
// reports failed frames (the stream goes on; the caller fails the command at the end).
template <typename Stream>
Result<StreamTotals> drive_stream(Stream& s, const std::vector<std::vector<Tensor>>& frames,
                                  const cli::Args& args, int warmup, int count) {
  const int total = warmup + count;
  int submitted = 0, received = 0;
  StreamTotals t;
  uint64_t first_id = 0;
  auto t0 = std::chrono::steady_clock::now();
  double cpu0 = cpu_seconds();
  Progress progress("stream", args.has("--quiet"));
  while (received < total) {
    while (submitted < total && submitted - received < s.num_slots()) {
      ASSIGN_OR_RETURN(uint64_t id,
                       s.submit(frames[static_cast<size_t>(submitted) % frames.size()]));
      if (submitted == 0) first_id = id;
      if (id != first_id + static_cast<uint64_t>(submitted)) {
        return internal_error("frame " + std::to_string(submitted) + " was submitted as id " +
                              std::to_string(id));
      }
      if (submitted == warmup) t.timed_from = id;
      ++submitted;
    }
    ASSIGN_OR_RETURN(FrameResult r, s.next());
    if (r.frame != first_id + static_cast<uint64_t>(received)) {
      return internal_error("frame " + std::to_string(r.frame) + " came out where frame " +
                            std::to_string(first_id + static_cast<uint64_t>(received)) +
                            " was due");
    }
    if (received == warmup - 1) {
      // The warm-up frames are out: the timed window starts now.
      t0 = std::chrono::steady_clock::now();
      cpu0 = cpu_seconds();
    }
    if (!r.status.ok()) {
      ++t.failed;
      std::fprintf(stderr, "frame %llu: %s\n", static_cast<unsigned long long>(r.frame),
                   r.status.to_string().c_str());
    } else {
      if (has_frame_pattern(args)) RETURN_IF_ERROR(write_frame_outputs(args, r.frame, r.outputs));
      t.last_id = r.frame;
      t.last = std::move(r.outputs);
    }
    ++received;
    progress.update(received, total, "frame " + std::to_string(received));
  }
  progress.finish();
  t.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  t.cpu_s = cpu_seconds() - cpu0;
  return t;
}

Status failed_frames(const StreamTotals& t, int total) {
  if (t.failed == 0) return Status();
  return internal_error(std::to_string(t.failed) + " of " + std::to_string(total) +
                        " frame(s) failed");
}

// Streams `warmup` then `count` frames through the executor (drive_stream); prints throughput,
// busy shares, queue occupancy and the period against the plan's estimate. Returns the last
// frame's id and outputs.
Result<std::pair<uint64_t, std::vector<Tensor>>> run_stream(
    Executor& ex, const Plan& plan, const std::vector<std::vector<Tensor>>& frames,
    const cli::Args& args, int warmup, int count) {
  ASSIGN_OR_RETURN(StreamTotals t, drive_stream(ex, frames, args, warmup, count));
  const double wall_ms = t.wall_ms, cpu_s = t.cpu_s;
  const uint64_t timed_from = t.timed_from;
  ex.close();
  // With warm-up frames, the timed window starts when the last warm-up frame came out, so the
  // pipeline is already full; without, it includes the fill.
  std::printf("plan %s: streamed %d frame(s) (%d warm-up) with %d slot(s), %d actor(s)\n",
              plan.notation().c_str(), count, warmup, ex.num_slots(), ex.num_actors());
  std::printf("throughput %.2f frames/s, period %.3f ms (estimated %s), cpu time / wall %.2f\n",
              1000.0 * count / wall_ms, wall_ms / count,
              plan.estimated_period_ms > 0
                  ? (std::to_string(plan.estimated_period_ms) + " ms").c_str()
                  : "n/a",
              cpu_s * 1000.0 / wall_ms);
  // Busy share of each step over the timed frames, and how long its actor waited for inputs.
  std::vector<double> busy(ex.steps().size(), 0), blocked(ex.steps().size(), 0);
  for (const StepRun& r : ex.step_runs()) {
    if (static_cast<uint64_t>(r.run) < timed_from || !r.ok) continue;
    busy[static_cast<size_t>(r.step)] += r.ms;
    blocked[static_cast<size_t>(r.step)] += r.blocked_in;
  }
  std::printf("%5s  %5s  %-20s %10s %12s %14s\n", "step", "actor", "device", "busy %", "busy ms/fr",
              "wait-in ms/fr");
  for (size_t i = 0; i < ex.steps().size(); ++i) {
    const ExecutorStep& s = ex.steps()[i];
    std::printf("%5zu  %5d  %-20s %10.1f %12.3f %14.3f\n", i, s.actor, s.device.c_str(),
                100.0 * busy[i] / wall_ms, busy[i] / count, blocked[i] / count);
  }
  for (size_t i = 0; i < ex.steps().size(); ++i) {
    if (const int k = ex.step_frames_in_flight(i); k > 1) {
      std::printf(
          "step %zu runs up to %d frames overlapped (a remote hop): busy ms/fr is one frame's "
          "time in the hop, busy %% the mean frames in it x 100\n",
          i, k);
    }
  }
  for (const QueueOccupancy& q : ex.queue_occupancy()) {
    std::printf("actor %d: frames waiting when it took one: mean %.2f\n", q.actor, q.mean());
  }
  RETURN_IF_ERROR(failed_frames(t, warmup + count));
  return std::make_pair(t.last_id, std::move(t.last));
}

// Streams like run_stream, through an AdaptiveStream that may move the plan's cut (frames still
// come out exactly once and in order across the plan swaps: drive_stream checks); prints
// throughput, every window's period and every adaptation decision.
Result<std::pair<uint64_t, std::vector<Tensor>>> run_adaptive_stream(
    const LayerGraph& lg, const Plan& plan, const ExecutorOptions& options,
    const std::vector<std::vector<Tensor>>& frames, const cli::Args& args, int warmup, int count,
    int window) {
  AdaptOptions ao;
  ao.window = window;
  ASSIGN_OR_RETURN(std::unique_ptr<AdaptiveStream> s,
                   AdaptiveStream::create(lg, plan, options, ao));
  ASSIGN_OR_RETURN(StreamTotals t, drive_stream(*s, frames, args, warmup, count));
  const double wall_ms = t.wall_ms;
  s->close();
  std::printf("adaptive stream from %s: %d frame(s) (%d warm-up), each out once and in order\n",
              plan.notation().c_str(), count, warmup);
  std::printf("throughput %.2f frames/s over the timed frames; now running %s\n",
              1000.0 * count / wall_ms, s->plan().notation().c_str());
  for (const AdaptEvent& e : s->events()) {
    std::printf("  frame %6llu  %-9s cut %3d  %s\n", static_cast<unsigned long long>(e.frame),
                e.what.c_str(), e.cut, e.reason.c_str());
  }
  std::printf("window periods (cut: ms):");
  for (const auto& [cut, ms] : s->windows()) std::printf(" %d:%.2f", cut, ms);
  std::printf("\n");
  RETURN_IF_ERROR(failed_frames(t, warmup + count));
  return std::make_pair(t.last_id, std::move(t.last));
}

// Runs every frame on `ex` and on the same plan compiled in f32 (every device at its f32 level),
// and prints how far the outputs are from f32's; warns below the goals of docs/precision.md.
Status report_fidelity(const LayerGraph& lg, const Plan& plan, const ExecutorOptions& options,
                       Executor& ex, const std::vector<std::vector<Tensor>>& frames) {
  Plan f32 = plan;
  for (Stage& s : f32.stages) {
    for (DeviceShare& d : s.placement.devices) {
      ASSIGN_OR_RETURN(DeviceName name, parse_device_name(d.device));
      d.device = name.base();
    }
  }
  ExecutorOptions f32_options = options;
  f32_options.compile.precision = Precision::kF32;
  ASSIGN_OR_RETURN(std::unique_ptr<Executor> ref, Executor::create(lg, f32, f32_options));
  FidelityMeter meter;
  std::vector<Tensor> y, y32;
  for (const std::vector<Tensor>& frame : frames) {
    RETURN_IF_ERROR(ex.run(frame, &y));
    RETURN_IF_ERROR(ref->run(frame, &y32));
    RETURN_IF_ERROR(meter.add(y, y32));
  }
  const Fidelity f = meter.result();
  std::printf("fidelity against f32 (%s) over %zu frame(s): %s\n", f32.notation().c_str(),
              frames.size(), f.to_string().c_str());
  if (plan.estimated_error) {
    std::printf(
        "plan's expected relative L2 %.3g (composed from the profile's per-layer errors, "
        "an estimate), measured %.3g\n",
        *plan.estimated_error, f.relative_l2);
  }
  if (plan.max_error && f.relative_l2 > *plan.max_error) {
    std::printf("warning: measured relative L2 %.3g exceeds the plan's bound %.3g (--max-error)\n",
                f.relative_l2, *plan.max_error);
  }
  if (f.rows > 0 && f.top1_agreement < kFidelityTop1Goal) {
    std::printf("warning: top-1 agreement %.1f%% is below %.0f%%: this precision changes answers\n",
                100.0 * f.top1_agreement, 100.0 * kFidelityTop1Goal);
  }
  return Status();
}

}  // namespace

namespace {

// A .tsr file, or an .onnx file converted in memory as `tessera convert` converts it (sized by
// --shape / --batch; its import warnings go to stderr).
Result<std::shared_ptr<const Model>> load_model_or_onnx(const std::string& path,
                                                        const cli::Args& args) {
  const bool onnx = path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0;
  if (!onnx) {
    if (args.has("--shape") || args.has("--batch")) {
      return invalid_argument("--shape and --batch size an .onnx model; " + path +
                              " is a .tsr file, whose shapes are fixed (convert again)");
    }
    return Model::load(path);
  }
  ImportOptions options;
  ASSIGN_OR_RETURN(int batch, args.get_int("--batch", 1, 1, 1 << 16));
  options.default_dim_value = batch;
  for (const std::string& s : args.all("--shape"))
    RETURN_IF_ERROR(cli::parse_shape_flag(s, &options.input_shapes));
  options.require_all_dims = !options.input_shapes.empty();
  ASSIGN_OR_RETURN(ImportedModel m, convert_onnx(path, options));
  for (const std::string& w : m.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return Model::from_graph(std::move(m.graph));
}

}  // namespace

int cmd_run(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("run", args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf(
        "usage: tessera run MODEL.tsr|MODEL.onnx [--shape NAME=1x3xHxW] [--input x.npy] [--output "
        "y.npy] [--device NAME | --plan "
        "PLAN.json [--stream N]]\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  auto repeat = args->get_int("--repeat", 1, 1, 1000000);
  if (!repeat.ok()) return report_error("run", repeat.status());
  auto warmup = args->get_int("--warmup", 1, 0, 1000000);
  if (!warmup.ok()) return report_error("run", warmup.status());
  auto top = args->get_int("--top", 0, 0, 1000000);
  if (!top.ok()) return report_error("run", top.status());
  auto stream = args->get_int("--stream", 0, 1, 100000000);
  if (!stream.ok()) return report_error("run", stream.status());
  auto queue = args->get_int("--queue", 0, 1, 1024);
  if (!queue.ok()) return report_error("run", queue.status());
  if (args->has("--queue") && !args->has("--stream")) {
    return report_error("run", invalid_argument("--queue needs --stream"));
  }
  if (args->has("--plan") && args->has("--device")) {
    return report_error("run", invalid_argument("give --device or --plan, not both"));
  }
  auto adapt_window = args->get_int("--adapt-window", 30, 2, 100000);
  if (!adapt_window.ok()) return report_error("run", adapt_window.status());
  if ((args->has("--adapt") || args->has("--adapt-window")) &&
      !(args->has("--stream") && args->has("--plan") && args->has("--adapt"))) {
    return report_error("run", invalid_argument("--adapt needs --plan and --stream"
                                                " (--adapt-window needs --adapt)"));
  }

  const std::string& path = args->positional[0];
  auto model = load_model_or_onnx(path, *args);
  if (!model.ok()) return report_error("run", model.status());
  if (args->all("--output").size() > (*model)->outputs().size()) {
    return report_error("run", invalid_argument("more --output files than model outputs"));
  }
  auto frames = gather_frames(**model, *args);
  if (!frames.ok()) return report_error("run", frames.status());
  auto lg = LayerGraph::build(model_graph(**model));
  if (!lg.ok()) return report_error("run", lg.status());

  // One path for both: a device is the one-stage plan of the whole model on it.
  const bool by_plan = args->has("--plan");
  const std::string device = args->get("--device", "reference");
  Plan plan;
  if (by_plan) {
    auto loaded = Plan::load(args->get("--plan"));
    if (!loaded.ok()) return report_error("run", loaded.status());
    plan = std::move(*loaded);
    if (plan.model_hash.empty() && !args->has("--allow-unhashed-plan")) {
      return report_error(
          "run", failed_precondition(args->get("--plan") +
                                     ": the plan names no model hash, so nothing ties it to " +
                                     path + " (--allow-unhashed-plan runs it anyway)"));
    }
    if (!plan.model_hash.empty() && plan.model_hash != (*model)->hash()) {
      return report_error(
          "run", failed_precondition(args->get("--plan") + ": the plan is for model " +
                                     plan.model_hash + ", " + path + " is " + (*model)->hash()));
    }
  } else {
    auto p = plan_from_slices(lg->num_layers(), {{0, device}});
    if (!p.ok()) return report_error("run", p.status());
    plan = std::move(*p);
  }
  ExecutorOptions options;
  options.queue_capacity = args->has("--queue") ? *queue : 0;
  options.compile.model_hash = (*model)->hash();
  if (args->has("--memory-budget")) {
    auto budget = parse_byte_count(args->get("--memory-budget"));
    if (!budget.ok()) return report_error("run", budget.status().with_context("--memory-budget"));
    options.compile.memory_budget = *budget;
  }
  auto max_gflops = args->get_double("--max-gflops", 0, 1e-9, 1e12);
  if (!max_gflops.ok()) return report_error("run", max_gflops.status());
  options.max_flops = *max_gflops * 1e9;
  if (args->has("--precision")) {
    auto precision = parse_precision(args->get("--precision"));
    if (!precision.ok()) return report_error("run", precision.status().with_context("--precision"));
    options.compile.precision = *precision;
  }
  {
    auto table = load_calibration_file(path, (*model)->hash(), args->get("--calibration"));
    if (!table.ok()) return report_error("run", table.status());
    options.compile.calibration = std::move(*table);
  }
  {
    std::vector<std::string> names;
    for (const Stage& s : plan.stages) {
      for (const DeviceShare& d : s.placement.devices) names.push_back(d.device);
    }
    // `--precision int8` puts every stage at int8 (on the cpu device, the one that has it).
    if (options.compile.precision == Precision::kInt8) {
      for (const std::string& n : std::vector<std::string>(names)) {
        if (n.rfind("cpu", 0) == 0 && n.find('#') == std::string::npos)
          names.push_back(n + "#int8");
      }
    }
    Status st = require_calibration(names, options.compile.calibration, model_graph(**model), path,
                                    "--calibration");
    if (!st.ok()) return report_error("run", st);
  }
  if (args->has("--fidelity") && (args->has("--stream") || args->has("--adapt"))) {
    return report_error("run", invalid_argument("--fidelity runs frames one at a time; drop "
                                                "--stream"));
  }
  if (args->has("--adapt")) {
    print_plan_table(plan, *lg);
    auto r =
        run_adaptive_stream(*lg, plan, options, *frames, *args, *warmup, *stream, *adapt_window);
    if (!r.ok()) return report_error("run", r.status());
    return finish(**model, *args, r->first, r->second, *top);
  }
  auto ex = Executor::create(*lg, plan, options);
  if (!ex.ok()) return report_error("run", ex.status());
  if (by_plan) print_plan_table(plan, *lg);
  if (args->has("--describe")) std::fputs((*ex)->describe().c_str(), stdout);

  uint64_t last_frame = 0;
  std::vector<Tensor> outputs;
  if (args->has("--stream")) {
    auto r = run_stream(**ex, plan, *frames, *args, *warmup, *stream);
    if (!r.ok()) return report_error("run", r.status());
    last_frame = r->first;
    outputs = std::move(r->second);
  } else {
    uint64_t run_index = 0;
    auto ms = timed_runs(*args, *warmup, *repeat, [&]() -> Status {
      const auto& in = (*frames)[run_index % frames->size()];
      RETURN_IF_ERROR((*ex)->run(in, &outputs));
      if (has_frame_pattern(*args)) RETURN_IF_ERROR(write_frame_outputs(*args, run_index, outputs));
      last_frame = run_index++;
      return Status();
    });
    if (!ms.ok()) return report_error("run", ms.status());
    if (by_plan) {
      print_step_table(**ex, plan, *warmup);
      std::printf(
          "plan %s: latency median %.3f ms, min %.3f ms over %d run(s); estimated %.3f ms\n",
          plan.notation().c_str(), (*ms)[ms->size() / 2], ms->front(), *repeat,
          plan.estimated_latency_ms);
    } else {
      std::printf("device %s: latency median %.3f ms, min %.3f ms over %d run(s)\n", device.c_str(),
                  (*ms)[ms->size() / 2], ms->front(), *repeat);
    }
  }
  if (args->has("--fidelity")) {
    Status st = report_fidelity(*lg, plan, options, **ex, *frames);
    if (!st.ok()) return report_error("run", st);
  }
  if ((*ex)->peak_memory_bytes() > 0) {
    std::printf("%s: peak memory %.1f MiB (activation arenas + packed weights)\n",
                by_plan ? "plan" : ("device " + device).c_str(),
                static_cast<double>((*ex)->peak_memory_bytes()) / (1024.0 * 1024.0));
  }
  if (args->has("--trace")) {
    Status st = (*ex)->write_trace(args->get("--trace"));
    if (!st.ok()) return report_error("run", st);
    std::printf("wrote trace %s\n", args->get("--trace").c_str());
  }
  return finish(**model, *args, last_frame, outputs, *top);
}

}  // namespace tessera::tools
