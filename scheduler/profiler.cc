#include "scheduler/profiler.h"

#include <unistd.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <thread>

#include "backends/npu/npu_device.h"
#include "backends/registry.h"
#include "core/stats.h"
#include "energy/governor.h"
#include "energy/meter.h"
#include "energy/power_model.h"
#include "graph/qdq.h"
#include "graph/split.h"
#include "ops/split_rule.h"
#include "scheduler/fidelity.h"

namespace tessera {

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// The statistic of the repeats: median, min or mean.
enum class Stat { kMedian, kMin, kMean };

Stat parse_stat(const std::string& s) {
  return s == "min" ? Stat::kMin : s == "mean" ? Stat::kMean : Stat::kMedian;
}

double summarize(std::vector<double> v, Stat stat) {
  switch (stat) {
    case Stat::kMin:
      return *std::min_element(v.begin(), v.end());
    case Stat::kMean: {
      double sum = 0;
      for (double x : v) sum += x;
      return sum / static_cast<double>(v.size());
    }
    case Stat::kMedian:
      break;
  }
  return median(std::move(v));
}

// The statistic of the times of `repeat` calls of `fn` after `warmup` calls; `before`, when
// set, runs (untimed) before each timed call.
template <typename Fn>
Result<double> time_stat(Stat stat, int warmup, int repeat, Fn&& fn,
                         const std::function<Status()>& before = {}) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(fn());
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(repeat));
  for (int i = 0; i < repeat; ++i) {
    if (before) RETURN_IF_ERROR(before());
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(fn());
    ms.push_back(ms_since(t0));
  }
  return summarize(std::move(ms), stat);
}

// A layer compiled alone, with inputs of the right shapes.
struct LayerRun {
  std::unique_ptr<Program> program;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
  // Fresh outputs every run: inside a slice a layer's outputs are intermediates the program
  // allocates on each run, and that allocation is part of the layer's cost.
  Status run() {
    for (Tensor& t : outputs) t = Tensor();
    return program->run(inputs, outputs);
  }
};

// Layers [first, last) compiled as one program and timed layer by layer (a timed Program::run).
struct ChainRun {
  int first = 0;
  int last = 0;
  SliceProgram slice;

  // Compiles the chain and runs it timed once; an error when it does not compile or the
  // backend cannot time layers inside a run.
  static Result<std::unique_ptr<ChainRun>> create(const LayerGraph& lg, Device& device, int first,
                                                  int last, const CompileOptions& options) {
    auto c = std::make_unique<ChainRun>();
    c->first = first;
    c->last = last;
    ASSIGN_OR_RETURN(c->slice, SliceProgram::compile(lg, device, first, last, options));
    std::vector<double> ms;
    RETURN_IF_ERROR(c->slice.run_timed(&ms));
    if (ms.size() != static_cast<size_t>(last - first)) {
      return internal_error("run_timed gave " + std::to_string(ms.size()) + " times for " +
                            std::to_string(last - first) + " layers");
    }
    return c;
  }
  Status run() { return slice.run(); }
  // `n` timed runs, back to back, appended to runs.
  Status time_runs(int n) {
    std::vector<double> ms;
    for (int r = 0; r < n; ++r) {
      RETURN_IF_ERROR(slice.run_timed(&ms));
      runs.push_back(ms);
    }
    return Status();
  }
  std::vector<std::vector<double>> runs;  // per timed run, per layer of the chain
};

// A profiled device kept open for the co-run measurement, with its chains (declared after the
// device, so destroyed before it).
struct CorunDevice {
  size_t profile_index = 0;  // into Profile::devices
  std::unique_ptr<Device> device;
  std::vector<std::unique_ptr<ChainRun>> chains;
};

// DeviceProfile::corun_scale of devs[target]: per round, a plain run of its chains and a timed
// one (the sum of their layers) alone; then, while every other device runs its chains in a loop
// on its own thread, the same again. The statistic of the co-run sums over that of the sums
// alone (the rounds alternate, so that a drift of the machine's speed falls on both), at least 1.
Result<double> measure_corun(std::vector<CorunDevice>& devs, size_t target, int rounds, Stat stat) {
  CorunDevice& t = devs[target];
  auto plain = [&]() -> Status {
    for (const std::unique_ptr<ChainRun>& c : t.chains) RETURN_IF_ERROR(c->run());
    return Status();
  };
  auto timed = [&](double* sum) -> Status {
    *sum = 0;
    std::vector<double> ms;
    for (const std::unique_ptr<ChainRun>& c : t.chains) {
      RETURN_IF_ERROR(c->slice.run_timed(&ms));
      for (double x : ms) *sum += x;
    }
    return Status();
  };
  std::vector<double> alone, together;
  for (int r = 0; r < rounds; ++r) {
    double ms = 0;
    RETURN_IF_ERROR(plain());
    RETURN_IF_ERROR(timed(&ms));
    alone.push_back(ms);
    std::atomic<bool> stop{false};
    std::vector<Status> errors(devs.size());
    std::vector<std::thread> threads;
    for (size_t j = 0; j < devs.size(); ++j) {
      if (j == target) continue;
      threads.emplace_back([&, j] {
        while (!stop.load(std::memory_order_relaxed)) {
          for (const std::unique_ptr<ChainRun>& c : devs[j].chains) {
            Status st = c->run();
            if (!st.ok()) {
              errors[j] = st.with_context("co-running");
              return;
            }
          }
        }
      });
    }
    Status st = plain();
    if (st.ok()) st = timed(&ms);
    stop.store(true);
    for (std::thread& th : threads) th.join();
    RETURN_IF_ERROR(st);
    for (const Status& e : errors) RETURN_IF_ERROR(e);
    together.push_back(ms);
  }
  const double a = summarize(alone, stat);
  const double b = summarize(together, stat);
  return a > 0 ? std::max(1.0, b / a) : 1.0;
}

// How many of `repeat` chain samples to take at slot i of `slots`: spread evenly, so that the
// samples span the device's profiling time (as the check's rounds span seconds) instead of one
// burst of back-to-back runs that a slow phase of a shared machine can cover whole.
int samples_at(int i, int slots, int repeat) {
  return (i + 1) * repeat / slots - i * repeat / slots;
}

// The longest runs [first, last) of supported layers, cut where their weights plus the largest
// layer's activations would exceed `memory` bytes.
std::vector<std::pair<int, int>> supported_chunks(const LayerGraph& lg,
                                                  const std::vector<char>& supported,
                                                  uint64_t memory) {
  std::vector<std::pair<int, int>> out;
  const int L = lg.num_layers();
  int first = -1;
  uint64_t weights = 0, activations = 0;
  for (int i = 0; i <= L; ++i) {
    const bool ok = i < L && supported[static_cast<size_t>(i)];
    if (ok) {
      const OpCost& c = lg.layer(i).cost;
      const uint64_t act = c.input_bytes + c.output_bytes;
      if (first >= 0 && weights + c.weight_bytes + std::max(activations, act) > memory) {
        out.emplace_back(first, i);
        first = -1;
      }
      if (first < 0) {
        first = i;
        weights = 0;
        activations = 0;
      }
      weights += c.weight_bytes;
      activations = std::max(activations, act);
    } else if (first >= 0) {
      out.emplace_back(first, i);
      first = -1;
    }
  }
  return out;
}

// `n` calibration slices: each chunk whole first (the slice a plan that keeps the device's part
// of the model in one stage runs, whose boundary is the model's input and output: a random slice
// seldom has an RGB image as its input), then random slices inside the chunks (a fixed seed, so
// profiles are comparable): half of them one to four layers long, where the per-slice overhead
// dominates, half of any length.
std::vector<std::pair<int, int>> calibration_slices(const std::vector<std::pair<int, int>>& chunks,
                                                    int n) {
  std::vector<std::pair<int, int>> out;
  int layers = 0;
  for (const auto& [a, b] : chunks) layers += b - a;
  if (layers == 0) return out;
  for (size_t c = 0; c < chunks.size() && static_cast<int>(out.size()) < n; ++c) {
    out.push_back(chunks[c]);
  }
  std::mt19937 rng(20240607);
  for (int s = 0; static_cast<int>(out.size()) < n; ++s) {
    int pick = static_cast<int>(rng() % static_cast<unsigned>(layers));
    size_t c = 0;
    while (pick >= chunks[c].second - chunks[c].first) {
      pick -= chunks[c].second - chunks[c].first;
      ++c;
    }
    const int len_max = chunks[c].second - chunks[c].first;
    const int cap = s % 2 == 0 ? std::min(4, len_max) : len_max;
    const int len = 1 + static_cast<int>(rng() % static_cast<unsigned>(cap));
    const int first =
        chunks[c].first + static_cast<int>(rng() % static_cast<unsigned>(len_max - len + 1));
    out.emplace_back(first, first + len);
  }
  return out;
}

// Which levels to measure: min and max (seed 000), or all.
std::vector<int> wanted_levels(const PlatformDevice& d, bool all) {
  std::vector<int> idx;
  if (all) {
    for (size_t i = 0; i < d.dvfs.size(); ++i) idx.push_back(static_cast<int>(i));
  } else {
    idx.push_back(0);
    if (d.dvfs.size() > 1) idx.push_back(static_cast<int>(d.dvfs.size()) - 1);
  }
  return idx;
}

// The level index nearest `mhz`.
int nearest_level(const PlatformDevice& d, int mhz) {
  int best = static_cast<int>(d.dvfs.size()) - 1;
  for (size_t i = 0; i < d.dvfs.size(); ++i) {
    if (std::abs(d.dvfs[i].mhz - mhz) < std::abs(d.dvfs[static_cast<size_t>(best)].mhz - mhz)) {
      best = static_cast<int>(i);
    }
  }
  return best;
}

Result<TransferFit> transfer_benchmark(Device& device, const std::vector<uint64_t>& sizes,
                                       Stat stat, int warmup, int repeat, bool upload_side) {
  std::vector<std::pair<uint64_t, double>> points;
  for (uint64_t bytes : sizes) {
    const int64_t n = static_cast<int64_t>(std::max<uint64_t>(bytes / 4, 1));
    ASSIGN_OR_RETURN(Tensor host, Tensor::create(DType::kF32, Shape({n})));
    std::fill(host.data<float>(), host.data<float>() + n, 1.0f);
    double ms = 0;
    if (upload_side) {
      ASSIGN_OR_RETURN(ms, time_stat(stat, warmup, repeat, [&]() -> Status {
                         auto buf = device.upload(host);
                         return buf.status();
                       }));
    } else {
      ASSIGN_OR_RETURN(std::unique_ptr<Buffer> buf, device.upload(host));
      ASSIGN_OR_RETURN(Tensor back, Tensor::create(DType::kF32, Shape({n})));
      ASSIGN_OR_RETURN(ms, time_stat(stat, warmup, repeat,
                                     [&]() -> Status { return device.download(*buf, &back); }));
    }
    points.emplace_back(static_cast<uint64_t>(n) * 4, ms);
  }
  return TransferFit::fit(std::move(points));
}

// Eq. 1-2 weighted by 1/ms^2: least squares on the relative error, so that a 4 KiB point counts
// as much as a 16 MiB one (ordinary least squares prices every tensor by the largest sizes).
// A negative intercept is refitted through the origin.
TransferFit fit_relative(std::vector<std::pair<uint64_t, double>> points) {
  double sw = 0, swx = 0, swy = 0, swxx = 0, swxy = 0;
  for (const auto& [b, ms] : points) {
    const double w = 1 / std::max(ms * ms, 1e-12), x = static_cast<double>(b);
    sw += w;
    swx += w * x;
    swy += w * ms;
    swxx += w * x * x;
    swxy += w * x * ms;
  }
  TransferFit f;
  const double det = sw * swxx - swx * swx;
  f.alpha_ms_per_byte = det > 0 ? (sw * swxy - swx * swy) / det : 0;
  f.beta_ms = det > 0 ? (swy - f.alpha_ms_per_byte * swx) / sw : 0;
  if (f.beta_ms < 0 || f.alpha_ms_per_byte < 0) {
    f.beta_ms = 0;
    f.alpha_ms_per_byte = swxx > 0 ? std::max(0.0, swxy / swxx) : 0;
  }
  // R^2 in the same weights: how much of the relative spread the line explains.
  const double mean = sw > 0 ? swy / sw : 0;
  double ss_res = 0, ss_tot = 0;
  for (const auto& [b, ms] : points) {
    const double w = 1 / std::max(ms * ms, 1e-12);
    const double r = ms - (f.alpha_ms_per_byte * static_cast<double>(b) + f.beta_ms);
    ss_res += w * r * r;
    ss_tot += w * (ms - mean) * (ms - mean);
  }
  f.r2 = ss_tot > 0 ? 1 - ss_res / ss_tot : 1;
  f.points = std::move(points);
  f.sort_points();
  return f;
}

// The NPU's eq. 1-2: a tensor enters a subgraph by Tessera's f32 -> driver dtype conversion and
// the driver's conversion into its on-chip layout, and leaves by the reverse (HAL 1.x has no
// device buffers). Timed on a subgraph of each size up to the model's largest activation (past
// the caches a byte costs several times more, and no tensor of the model gets there), with that
// size itself as the last point. Unimplemented when the driver reports no timings (the generic
// upload/download benchmark is used then).
Result<std::pair<TransferFit, TransferFit>> npu_boundary_fits(NpuDevice& device,
                                                              const LayerGraph& lg,
                                                              const std::vector<uint64_t>& sizes,
                                                              Stat stat, int warmup, int repeat) {
  uint64_t largest = 0;
  for (const Value& v : lg.graph().values()) {
    if (v.has_info && !v.is_constant) {
      largest = std::max(largest, static_cast<uint64_t>(v.info.shape.numel()) * 4);
    }
  }
  std::vector<uint64_t> wanted;
  for (uint64_t b : sizes) {
    if (b < largest) wanted.push_back(b);
  }
  if (largest > 0) wanted.push_back(largest);
  while (wanted.size() < 2 && wanted.size() < sizes.size()) wanted.push_back(sizes[wanted.size()]);
  std::vector<std::pair<uint64_t, double>> in_points, out_points;
  for (uint64_t bytes : wanted) {
    ASSIGN_OR_RETURN(std::vector<NpuBoundaryRun> runs, device.time_boundary(bytes, warmup, repeat));
    std::vector<double> in_ms, out_ms;
    for (const NpuBoundaryRun& r : runs) {
      in_ms.push_back(r.in_ms);
      out_ms.push_back(r.out_ms);
    }
    // The f32 bytes of the [1, 32, 1, W] tensor time_boundary converts.
    const uint64_t f32_bytes = std::max<uint64_t>(1, bytes / (4 * 32)) * 4 * 32;
    in_points.emplace_back(f32_bytes, summarize(std::move(in_ms), stat));
    out_points.emplace_back(f32_bytes, summarize(std::move(out_ms), stat));
  }
  if (in_points.size() < 2) return invalid_argument("NPU boundary fit: fewer than two sizes");
  return std::pair{fit_relative(std::move(in_points)), fit_relative(std::move(out_points))};
}

// The device's chains (the rest of the model for a calibration run), run once and timed layer
// by layer: per layer of the model its time in this run, NaN for layers in no chain.
using ChainsRun = std::function<Status(std::vector<double>* layer_ms)>;

// A calibration run: slice [first, last) compiled as one program and timed whole, each run
// after `before` (the device's chains: the rest of the model), as a plan's stage runs after the
// other stages. Where the backend times layers inside a run, the repeats are run_timed calls,
// and each run's overhead (its time less its layers': the launch, the copy and layout
// conversion of the boundary tensors) is measured directly; layers_ms is the statistic of the
// runs less the statistic of the overheads, and chain_ms the statistic of the same layers' sums
// in the chain runs right before (recorded when all of them are chained).
Result<SliceRun> measure_slice_run(const LayerGraph& lg, Device& device, int first, int last,
                                   int warmup, int repeat, Stat stat, const ChainsRun& before,
                                   const CompileOptions& options) {
  ASSIGN_OR_RETURN(SliceProgram slice, SliceProgram::compile(lg, device, first, last, options));
  std::vector<double> layer_ms, chain_ms;
  const Status timed = slice.run_timed(&layer_ms);
  if (timed.code() == StatusCode::kUnimplemented) {
    const std::function<Status()> untimed =
        before ? std::function<Status()>([&] { return before(&chain_ms); })
               : std::function<Status()>();
    ASSIGN_OR_RETURN(double ms, time_stat(
                                    stat, warmup, repeat, [&] { return slice.run(); }, untimed));
    return SliceRun{first, last, ms, 0.0};
  }
  RETURN_IF_ERROR(timed);
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(slice.run_timed(&layer_ms));
  std::vector<double> walls, overheads, chains;
  for (int r = 0; r < repeat; ++r) {
    if (before) {
      RETURN_IF_ERROR(before(&chain_ms));
      double chained = 0;
      bool all = true;
      for (int l = first; l < last; ++l) {
        all = all && !std::isnan(chain_ms[static_cast<size_t>(l)]);
        chained += chain_ms[static_cast<size_t>(l)];
      }
      if (all) chains.push_back(chained);
    }
    const auto t0 = Clock::now();
    RETURN_IF_ERROR(slice.run_timed(&layer_ms));
    const double wall = ms_since(t0);
    double layers = 0;
    for (double x : layer_ms) layers += x;
    walls.push_back(wall);
    overheads.push_back(std::max(0.0, wall - layers));
  }
  const double ms = summarize(std::move(walls), stat);
  const double overhead = std::min(ms, summarize(std::move(overheads), stat));
  SliceRun run{first, last, ms, ms - overhead};
  if (run.layers_ms > 0 && chains.size() == static_cast<size_t>(repeat)) {
    run.chain_ms = summarize(std::move(chains), stat);
  }
  return run;
}

// `count` sets of graph inputs, f32 ones N(0, 1) (seeds 1000, 1001, ...), others zero.
Result<std::vector<std::vector<Tensor>>> random_samples(const Graph& g, int count) {
  std::vector<std::vector<Tensor>> out;
  for (int i = 0; i < count; ++i) {
    std::mt19937 rng(1000u + static_cast<unsigned>(i));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<Tensor> sample;
    for (ValueId v : g.inputs()) {
      const Value& val = g.value(v);
      ASSIGN_OR_RETURN(Tensor t, Tensor::create(val.info.dtype, val.info.shape));
      if (t.dtype() == DType::kF32) {
        for (float& x : t.span<float>()) x = dist(rng);
      } else {
        std::fill(static_cast<unsigned char*>(t.raw()),
                  static_cast<unsigned char*>(t.raw()) + t.byte_size(), 0);
      }
      sample.push_back(std::move(t));
    }
    out.push_back(std::move(sample));
  }
  return out;
}

}  // namespace

Result<LayerErrors> measure_layer_errors(const LayerGraph& lg, Device& device, Device& f32_device,
                                         const std::vector<std::vector<Tensor>>& inputs,
                                         const CompileOptions& options) {
  const Graph& g = lg.graph();
  const int L = lg.num_layers();
  if (inputs.empty()) return invalid_argument("no inputs to measure the error on");
  for (size_t s = 0; s < inputs.size(); ++s) {
    if (inputs[s].size() != g.inputs().size()) {
      return invalid_argument("error sample " + std::to_string(s) + " has " +
                              std::to_string(inputs[s].size()) + " tensors, the model " +
                              std::to_string(g.inputs().size()) + " inputs");
    }
  }
  CompileOptions f32_options = options;
  f32_options.precision = Precision::kF32;
  f32_options.calibration = nullptr;
  // Every reduced kernel kept (CompileOptions::keep_reduced): compiled alone, a small layer's
  // measured choice often picks f32 (its conversions cost more than it saves), while in a slice
  // of reduced layers it runs reduced; its error must be the one it brings there.
  CompileOptions low_options = options;
  low_options.keep_reduced = true;
  std::vector<std::unique_ptr<Program>> ref(static_cast<size_t>(L)), low(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    const NodeId node = lg.layer(l).node;
    const std::span<const NodeId> one(&node, 1);
    auto r = f32_device.compile(g, one, f32_options);
    if (!r.ok()) {
      return r.status().with_context("layer " + lg.layer(l).name + " at f32 on " +
                                     f32_device.name());
    }
    ref[static_cast<size_t>(l)] = std::move(*r);
    auto p = device.compile(g, one, low_options);
    if (p.ok()) low[static_cast<size_t>(l)] = std::move(*p);
  }
  std::vector<FidelityMeter> meters(static_cast<size_t>(L)), output_meters(static_cast<size_t>(L));
  std::vector<char> failed(static_cast<size_t>(L), 0);
  // Layer l's inputs from `table` (then `values`, then the constants).
  const auto inputs_of =
      [&](const Program& r, int l, const std::map<ValueId, Tensor>& values,
          const std::map<ValueId, Tensor>* table) -> Result<std::vector<Tensor>> {
    std::vector<Tensor> in;
    for (ValueId v : r.input_values()) {
      const auto it = table != nullptr ? table->find(v) : values.end();
      if (table != nullptr && it != table->end()) {
        in.push_back(it->second);
      } else if (auto iv = values.find(v); iv != values.end()) {
        in.push_back(iv->second);
      } else if (g.value(v).is_constant) {
        in.push_back(g.value(v).data);
      } else {
        return internal_error("layer " + lg.layer(l).name + ": input '" + g.value(v).name +
                              "' was not computed");
      }
    }
    return in;
  };
  // The model's outputs from `table`, else `values`, else the constants.
  const auto outputs_of = [&](const std::map<ValueId, Tensor>& values,
                              const std::map<ValueId, Tensor>& table) {
    std::vector<Tensor> out;
    for (ValueId v : g.outputs()) {
      if (auto it = table.find(v); it != table.end()) {
        out.push_back(it->second);
      } else if (auto iv = values.find(v); iv != values.end()) {
        out.push_back(iv->second);
      } else {
        out.push_back(g.value(v).data);
      }
    }
    return out;
  };
  for (const std::vector<Tensor>& sample : inputs) {
    std::map<ValueId, Tensor> values;
    for (size_t i = 0; i < sample.size(); ++i) values[g.inputs()[i]] = sample[i];
    std::vector<std::vector<Tensor>> low_out(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) {
      Program& r = *ref[static_cast<size_t>(l)];
      ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs_of(r, l, values, nullptr));
      std::vector<Tensor> want(r.output_values().size());
      RETURN_IF_ERROR(r.run(in, want).with_context("layer " + lg.layer(l).name + " at f32"));
      for (size_t o = 0; o < want.size(); ++o) values[r.output_values()[o]] = want[o];
      Program* p = low[static_cast<size_t>(l)].get();
      if (p == nullptr || failed[static_cast<size_t>(l)]) continue;
      std::vector<Tensor> got(p->output_values().size());
      if (!p->run(in, got).ok() || got.size() != want.size() ||
          !meters[static_cast<size_t>(l)].add(got, want).ok()) {
        failed[static_cast<size_t>(l)] = 1;
        continue;
      }
      low_out[static_cast<size_t>(l)] = std::move(got);
    }
    // Each layer's error carried to the outputs: its reduced outputs, then every later layer that
    // reads a changed value run again in f32 (the others keep their f32 values).
    const std::map<ValueId, Tensor> none;
    const std::vector<Tensor> want_out = outputs_of(values, none);
    for (int l = 0; l < L; ++l) {
      if (failed[static_cast<size_t>(l)] || low_out[static_cast<size_t>(l)].empty()) continue;
      std::map<ValueId, Tensor> changed;
      const Program& p = *low[static_cast<size_t>(l)];
      for (size_t o = 0; o < p.output_values().size(); ++o) {
        changed[p.output_values()[o]] = low_out[static_cast<size_t>(l)][o];
      }
      for (int m = l + 1; m < L; ++m) {
        Program& r = *ref[static_cast<size_t>(m)];
        const bool reads_changed = std::any_of(r.input_values().begin(), r.input_values().end(),
                                               [&](ValueId v) { return changed.count(v) != 0; });
        if (!reads_changed) continue;
        ASSIGN_OR_RETURN(std::vector<Tensor> in, inputs_of(r, m, values, &changed));
        std::vector<Tensor> y(r.output_values().size());
        RETURN_IF_ERROR(r.run(in, y).with_context("layer " + lg.layer(m).name + " at f32"));
        for (size_t o = 0; o < y.size(); ++o) changed[r.output_values()[o]] = std::move(y[o]);
      }
      if (!output_meters[static_cast<size_t>(l)].add(outputs_of(values, changed), want_out).ok()) {
        failed[static_cast<size_t>(l)] = 1;
      }
    }
  }
  LayerErrors out;
  out.layer_error.resize(static_cast<size_t>(L));
  out.layer_output_error.resize(static_cast<size_t>(L));
  for (int l = 0; l < L; ++l) {
    if (low[static_cast<size_t>(l)] && !failed[static_cast<size_t>(l)]) {
      out.layer_error[static_cast<size_t>(l)] =
          std::min(kMaxLayerError, meters[static_cast<size_t>(l)].result().relative_l2);
      out.layer_output_error[static_cast<size_t>(l)] =
          std::min(kMaxLayerError, output_meters[static_cast<size_t>(l)].result().relative_l2);
    }
  }
  // The whole model, where both devices compile it.
  std::vector<NodeId> nodes;
  for (int l = 0; l < L; ++l) nodes.push_back(lg.layer(l).node);
  auto whole_ref = f32_device.compile(g, nodes, f32_options);
  auto whole_low = device.compile(g, nodes, low_options);
  if (whole_ref.ok() && whole_low.ok()) {
    FidelityMeter meter;
    bool ok = true;
    auto gather = [&](const Program& prog, const std::vector<Tensor>& sample) {
      std::vector<Tensor> in;
      for (ValueId v : prog.input_values()) {
        const auto at = std::find(g.inputs().begin(), g.inputs().end(), v);
        in.push_back(at != g.inputs().end() ? sample[static_cast<size_t>(at - g.inputs().begin())]
                                            : g.value(v).data);
      }
      return in;
    };
    for (const std::vector<Tensor>& sample : inputs) {
      std::vector<Tensor> want((*whole_ref)->output_values().size());
      std::vector<Tensor> got((*whole_low)->output_values().size());
      ok = ok && (*whole_ref)->run(gather(**whole_ref, sample), want).ok() &&
           (*whole_low)->run(gather(**whole_low, sample), got).ok() && meter.add(got, want).ok();
    }
    if (ok) out.model_error = std::min(kMaxLayerError, meter.result().relative_l2);
  }
  return out;
}

Result<SliceProgram> SliceProgram::compile(const LayerGraph& lg, Device& device, int first,
                                           int last, const CompileOptions& options) {
  if (first < 0 || last > lg.num_layers() || first >= last) {
    return invalid_argument("slice [" + std::to_string(first) + ", " + std::to_string(last) +
                            ") is not a non-empty layer range");
  }
  SliceProgram s;
  std::vector<NodeId> nodes;
  for (int i = first; i < last; ++i) nodes.push_back(lg.layer(i).node);
  ASSIGN_OR_RETURN(s.program, device.compile(lg.graph(), nodes, options));
  ASSIGN_OR_RETURN(s.inputs, make_inputs(lg.graph(), s.program->input_values()));
  s.outputs.resize(s.program->output_values().size());
  return s;
}

double summarize_ms(std::vector<double> ms, const std::string& statistic) {
  return ms.empty() ? 0.0 : summarize(std::move(ms), parse_stat(statistic));
}

Result<std::vector<std::vector<double>>> time_interleaved(const std::vector<TimedRun>& runs,
                                                          int rounds, std::mt19937& rng) {
  if (rounds < 1) return invalid_argument("rounds must be at least 1");
  std::vector<std::vector<double>> ms(runs.size());
  std::vector<size_t> order(runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  for (int r = 0; r < rounds; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      const TimedRun& t = runs[i];
      if (t.before) {
        Status st = t.before();
        if (!st.ok()) return st.with_context(t.name + " (the untimed run before it)");
      }
      const auto t0 = Clock::now();
      Status st = t.run();
      const double elapsed = ms_since(t0);
      if (!st.ok()) return st.with_context(t.name);
      ms[i].push_back(elapsed);
    }
  }
  return ms;
}

std::vector<int> split_calibration_layers(const LayerGraph& lg,
                                          const std::vector<std::optional<double>>& times,
                                          int count) {
  const Graph& g = lg.graph();
  std::vector<std::pair<double, int>> timed;
  for (int l = 0; l < lg.num_layers() && static_cast<size_t>(l) < times.size(); ++l) {
    if (!times[static_cast<size_t>(l)]) continue;
    NodeContext nc(g, g.node(lg.layer(l).node));
    bool splittable = false;
    for (SplitMethod m : kAllSplitMethods) {
      auto extent = split_extent(nc.ctx(), m);
      if (extent.ok() && *extent >= 2) {
        splittable = true;
        break;
      }
    }
    if (splittable) timed.emplace_back(*times[static_cast<size_t>(l)], l);
  }
  std::stable_sort(timed.begin(), timed.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<int> out;
  for (size_t i = 0; i < timed.size() && static_cast<int>(i) < count; ++i) {
    out.push_back(timed[i].second);
  }
  return out;
}

Result<std::vector<PieceRun>> measure_piece_runs(const LayerGraph& lg, Device& device,
                                                 const std::vector<int>& layers,
                                                 const std::vector<double>& shares, int warmup,
                                                 int repeat, const std::string& statistic,
                                                 const CompileOptions& options) {
  for (double s : shares) {
    if (!(s > 0 && s < 1)) {
      return invalid_argument("split calibration share " + std::to_string(s) + " is not in (0, 1)");
    }
  }
  if (repeat < 1) return invalid_argument("split calibration needs repeat >= 1");
  const Stat stat = parse_stat(statistic);
  const Graph& g = lg.graph();
  std::mt19937 rng(0x5eed);
  std::vector<PieceRun> out;
  // A piece and what it needs alive while it runs: its split layer owns the piece graph.
  struct Piece {
    SplitLayer split;
    PieceRun run;
    LayerRun program;
  };
  for (int l : layers) {
    if (l < 0 || l >= lg.num_layers()) {
      return invalid_argument("split calibration layer " + std::to_string(l) +
                              " is not a layer of the model");
    }
    const Layer& layer = lg.layer(l);
    const NodeId node = layer.node;
    auto whole_program = device.compile(g, std::span<const NodeId>(&node, 1), options);
    if (!whole_program.ok()) continue;
    LayerRun whole;
    whole.program = std::move(*whole_program);
    ASSIGN_OR_RETURN(whole.inputs, make_inputs(g, whole.program->input_values()));
    whole.outputs.resize(whole.program->output_values().size());
    NodeContext nc(g, g.node(node));
    std::vector<std::unique_ptr<Piece>> pieces;
    for (SplitMethod m : kAllSplitMethods) {
      std::vector<double> seen_flops;
      for (double s : shares) {
        const double ratios[2] = {s, 1 - s};
        auto split = split_layer(g, node, m, ratios);
        if (!split.ok()) continue;
        const OpCost c = split_piece_cost(nc.ctx(), split->rule, 0);
        const double bytes = static_cast<double>(c.input_bytes + c.weight_bytes + c.output_bytes);
        const double size = c.flops > 0 ? c.flops : bytes;
        if (std::find(seen_flops.begin(), seen_flops.end(), size) != seen_flops.end()) continue;
        auto piece = std::make_unique<Piece>();
        piece->split = std::move(*split);
        const SplitLayer::Piece& pg = piece->split.pieces[0];
        auto program = device.compile(pg.graph, std::span<const NodeId>(&pg.node, 1), options);
        if (!program.ok()) continue;
        seen_flops.push_back(size);
        piece->program.program = std::move(*program);
        ASSIGN_OR_RETURN(piece->program.inputs,
                         make_inputs(pg.graph, piece->program.program->input_values()));
        piece->program.outputs.resize(piece->program.program->output_values().size());
        piece->run = PieceRun{l, split_method_name(m), c.flops, bytes, 0, 0};
        pieces.push_back(std::move(piece));
      }
    }
    if (pieces.empty()) continue;
    std::vector<TimedRun> runs;
    runs.push_back(TimedRun{
        "layer " + quote_name(layer.name) + " whole", {}, [&whole] { return whole.run(); }});
    for (const auto& p : pieces) {
      Piece* piece = p.get();
      runs.push_back(TimedRun{
          "layer " + quote_name(layer.name) + " " + piece->run.method + " piece", {}, [piece] {
            return piece->program.run();
          }});
    }
    for (const TimedRun& r : runs) {
      for (int i = 0; i < warmup; ++i) {
        Status st = r.run();
        if (!st.ok()) return st.with_context(r.name);
      }
    }
    ASSIGN_OR_RETURN(std::vector<std::vector<double>> ms, time_interleaved(runs, repeat, rng));
    const double whole_ms = std::max(1e-9, summarize(ms[0], stat));
    for (size_t i = 0; i < pieces.size(); ++i) {
      PieceRun r = pieces[i]->run;
      r.ms = std::max(1e-9, summarize(ms[i + 1], stat));
      r.whole_ms = whole_ms;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<double> layer_statistics(const std::vector<std::vector<double>>& runs,
                                     const std::string& statistic) {
  if (runs.empty()) return {};
  const Stat stat = parse_stat(statistic);
  const size_t layers = runs.front().size();
  std::vector<double> out(layers, 0.0), sums;
  for (const std::vector<double>& r : runs) {
    double sum = 0;
    for (size_t l = 0; l < layers && l < r.size(); ++l) sum += r[l];
    sums.push_back(sum);
  }
  double total_of_layers = 0;
  for (size_t l = 0; l < layers; ++l) {
    std::vector<double> samples;
    for (const std::vector<double>& r : runs) samples.push_back(l < r.size() ? r[l] : 0.0);
    out[l] = summarize(std::move(samples), stat);
    total_of_layers += out[l];
  }
  const double total = summarize(std::move(sums), stat);
  if (total_of_layers > 0) {
    for (double& x : out) x *= total / total_of_layers;
  }
  return out;
}

Result<std::vector<Tensor>> make_inputs(const Graph& g, const std::vector<ValueId>& values) {
  std::vector<Tensor> out;
  std::mt19937 rng(12345);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (ValueId v : values) {
    const Value& val = g.value(v);
    if (val.is_constant) {
      out.push_back(val.data);
      continue;
    }
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(val.info.dtype, val.info.shape));
    if (t.dtype() == DType::kF32) {
      for (float& x : t.span<float>()) x = dist(rng);
    } else {
      std::fill(static_cast<unsigned char*>(t.raw()),
                static_cast<unsigned char*>(t.raw()) + t.byte_size(), 0);
    }
    out.push_back(std::move(t));
  }
  return out;
}

Result<Profile> profile_model(const LayerGraph& lg, const Platform& platform,
                              const ProfileOptions& options, const std::string& model_name,
                              const std::string& model_hash) {
  if (options.repeat < 1) return invalid_argument("repeat must be at least 1");
  if (options.warmup < 0) return invalid_argument("warmup must be >= 0");
  if (options.statistic != "median" && options.statistic != "min" && options.statistic != "mean") {
    return invalid_argument("statistic must be median, min or mean, not " +
                            quote_name(options.statistic));
  }
  const Stat stat = parse_stat(options.statistic);
  auto warn = options.warn ? options.warn : [](const std::string& m) {
    std::fprintf(stderr, "warning: %s\n", m.c_str());
  };
  const auto t_start = Clock::now();
  const Graph& g = lg.graph();
  const int L = lg.num_layers();

  Profile profile;
  profile.model_name = model_name;
  profile.model_hash = model_hash;
  profile.describe_model(lg);
  profile.conditions.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  profile.conditions.repeat = options.repeat;
  profile.conditions.warmup = options.warmup;
  profile.conditions.statistic = options.statistic;
  profile.conditions.date = utc_timestamp();
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) profile.conditions.host = host;
  profile.conditions.tessera_version = "0.1.0";

  std::vector<uint64_t> sizes = options.transfer_sizes;
  if (sizes.empty()) {
    for (uint64_t b = 4096; b <= (16u << 20); b *= 4) sizes.push_back(b);
  }

  // The devices to profile, in platform order (or the order asked).
  std::vector<const PlatformDevice*> targets;
  // Precision levels of platform devices (`cpu#bf16`, docs/precision.md): the device's own
  // description under the level's name, profiled as a device of its own.
  std::deque<PlatformDevice> precision_levels;
  if (options.devices.empty()) {
    for (const PlatformDevice& d : platform.devices) targets.push_back(&d);
  } else {
    for (const std::string& name : options.devices) {
      const PlatformDevice* d = platform.find(name);
      const Result<DeviceName> parsed = parse_device_name(name);
      if (d == nullptr && parsed.ok() && parsed->precision != Precision::kF32) {
        if (const PlatformDevice* base = platform.find(parsed->base())) {
          precision_levels.push_back(*base);
          precision_levels.back().device = name;
          precision_levels.back().id = base->id + "#" + precision_name(parsed->precision);
          d = &precision_levels.back();
        }
      }
      if (d == nullptr) {
        return not_found("device " + quote_name(name) + " is not in platform " +
                         quote_name(platform.name) + " (see `tessera devices`)");
      }
      targets.push_back(d);
    }
  }
  Platform recorded = platform;
  recorded.devices.clear();
  // Every program compiled for profiling gets the int8 ranges; an int8 level without them
  // would compile nothing (every layer refused), so it is refused up front.
  CompileOptions compile_options;
  compile_options.calibration = options.calibration;
  for (const PlatformDevice* d : targets) {
    const Result<DeviceName> parsed = parse_device_name(d->device);
    if (parsed.ok() && parsed->precision == Precision::kInt8 && !options.calibration &&
        !has_qdq_pairs(g)) {
      return failed_precondition("device '" + d->device +
                                 "' computes in int8 and needs the model's activation ranges: "
                                 "no calibration table was given (`tessera calibrate` writes "
                                 "one)");
    }
  }
  // The inputs the errors of reduced-precision devices are measured on.
  std::vector<std::vector<Tensor>> error_inputs = options.error_inputs;
  if (error_inputs.empty() && options.error_samples > 0) {
    ASSIGN_OR_RETURN(error_inputs, random_samples(g, options.error_samples));
  }

  // Work units per device and level, for the progress bar: layers, calibration runs, transfers.
  const int per_level = L + std::max(0, options.calibration_slices) +
                        2 * static_cast<int>(sizes.size()) + std::max(0, options.split_layers);
  int total = 0;
  for (const PlatformDevice* d : targets) {
    total += static_cast<int>(wanted_levels(*d, options.all_levels).size()) * per_level;
  }
  int done = 0;
  auto tick = [&](const std::string& what) {
    ++done;
    if (options.progress) options.progress(done, total, what);
  };

  const int corun_rounds = options.corun_rounds < 0 ? options.repeat : options.corun_rounds;
  std::vector<CorunDevice> corun;
  for (const PlatformDevice* pd : targets) {
    std::vector<int> levels = wanted_levels(*pd, options.all_levels);
    auto opened = open_device(pd->device);
    if (!opened.ok()) {
      warn("skipping device " + pd->device + ": " + opened.status().to_string());
      total -= static_cast<int>(levels.size()) * per_level;
      continue;
    }
    Device& device = **opened;
    DeviceProfile dp;
    dp.device = pd->device;
    dp.description = device.description();
    dp.memory_bytes = std::min<uint64_t>(
        device.memory_capacity() ? device.memory_capacity() : pd->memory_bytes, pd->memory_bytes);

    // Phase 1: which layers can run here at all (capability, memory capacity).
    std::vector<char> supported(static_cast<size_t>(L), 0);
    for (int i = 0; i < L; ++i) {
      const Layer& layer = lg.layer(i);
      const Capability cap = device.capabilities(g, g.node(layer.node));
      if (!cap.supported) {
        dp.unsupported[i] = cap.reason;
        continue;
      }
      const uint64_t need =
          layer.cost.weight_bytes + layer.cost.input_bytes + layer.cost.output_bytes;
      if (need > dp.memory_bytes) {
        dp.unsupported[i] = "needs " + std::to_string(need) + " bytes, the device holds " +
                            std::to_string(dp.memory_bytes);
        continue;
      }
      supported[static_cast<size_t>(i)] = 1;
    }

    // Phase 2: chains, the longest runs of supported layers that fit the device memory, each
    // compiled as one program. A first timed run tells whether the backend times layers inside
    // a run; where it cannot (or the chain does not compile), its layers are timed alone.
    const std::vector<std::pair<int, int>> chunks =
        supported_chunks(lg, supported, dp.memory_bytes);
    std::vector<std::unique_ptr<ChainRun>> chains;
    std::vector<char> chained(static_cast<size_t>(L), 0);
    for (const auto& [first, last] : chunks) {
      auto chain = ChainRun::create(lg, device, first, last, compile_options);
      if (!chain.ok()) continue;
      for (int i = first; i < last; ++i) chained[static_cast<size_t>(i)] = 1;
      chains.push_back(std::move(*chain));
    }
    std::vector<std::unique_ptr<LayerRun>> runs(static_cast<size_t>(L));
    for (int i = 0; i < L; ++i) {
      if (!supported[static_cast<size_t>(i)] || chained[static_cast<size_t>(i)]) continue;
      const NodeId node = lg.layer(i).node;
      auto program = device.compile(g, std::span<const NodeId>(&node, 1), compile_options);
      if (!program.ok()) {
        dp.unsupported[i] = program.status().to_string();
        continue;
      }
      auto run = std::make_unique<LayerRun>();
      run->program = std::move(*program);
      auto inputs = make_inputs(g, run->program->input_values());
      if (!inputs.ok()) return inputs.status().with_context("layer " + lg.layer(i).name);
      run->inputs = std::move(*inputs);
      run->outputs.resize(run->program->output_values().size());
      runs[static_cast<size_t>(i)] = std::move(run);
    }
    const std::vector<std::pair<int, int>> calibration =
        calibration_slices(chunks, options.calibration_slices);
    total -= static_cast<int>(levels.size()) *
             (std::max(0, options.calibration_slices) - static_cast<int>(calibration.size()));
    const int device_per_level =
        per_level - std::max(0, options.calibration_slices) + static_cast<int>(calibration.size());

    Governor governor(options.sysfs_root, *pd);
    bool governed = governor.has_domain() && pd->dvfs.size() > 1;
    if (governed && !set_level_or_warn(governor, pd->device, pd->dvfs[levels[0]].mhz)) {
      governed = false;
    }
    if (!governed) {
      // Only the level the device runs at is reachable: measure once and label it.
      auto cur = current_mhz(options.sysfs_root, *pd);
      const int level = cur.ok() ? nearest_level(*pd, *cur) : static_cast<int>(pd->dvfs.size()) - 1;
      if (levels.size() > 1) {
        warn(pd->device + ": DVFS levels cannot be set here; profiling only the current level (" +
             (cur.ok() ? std::to_string(*cur) + " MHz" : std::string("frequency unknown")) + ")");
      }
      total -= static_cast<int>(levels.size() - 1) * device_per_level;
      levels = {level};
    }

    for (size_t li = 0; li < levels.size(); ++li) {
      const int level = levels[li];
      if (governed && li > 0 && !set_level_or_warn(governor, pd->device, pd->dvfs[level].mhz)) {
        total -= device_per_level;
        continue;
      }
      LevelProfile lp;
      lp.mhz = pd->dvfs[static_cast<size_t>(level)].mhz;
      lp.set_by_governor = governed;
      std::unique_ptr<EnergyMeter> meter = make_meter(options.sysfs_root, *pd, level);
      const bool metered = meter->measured();
      if (metered) lp.energy_source = meter->source();
      const double static_w = pd->dvfs[static_cast<size_t>(level)].static_w;
      lp.layer_ms.resize(static_cast<size_t>(L));
      if (!chains.empty()) lp.layer_chain_ms.resize(static_cast<size_t>(L));
      if (metered) lp.layer_dynamic_w.resize(static_cast<size_t>(L));

      // Layers inside their chains: the statistic of each layer over `repeat` runs, taken in
      // slots spread over the device's calibration runs (each slot after a plain run of the
      // chain, as its timed runs at the first slot follow the warm-up): the first slot here,
      // the others after each calibration slice. With a meter, every layer of a chain is given
      // the chain's mean dynamic power.
      const int slots = 1 + static_cast<int>(calibration.size());
      auto chain_slot = [&](int i) -> Status {
        const int n = samples_at(i, slots, options.repeat);
        for (const std::unique_ptr<ChainRun>& chain : chains) {
          if (i > 0 && n > 0) RETURN_IF_ERROR(chain->run());
          RETURN_IF_ERROR(chain->time_runs(n));
        }
        return Status();
      };
      for (const std::unique_ptr<ChainRun>& chain : chains) {
        chain->runs.clear();
        for (int i = 0; i < options.warmup; ++i) RETURN_IF_ERROR(chain->run());
      }
      RETURN_IF_ERROR(chain_slot(0));
      for (const std::unique_ptr<ChainRun>& chain : chains) {
        for (int i = chain->first; i < chain->last; ++i) tick(pd->device + " " + lg.layer(i).name);
        if (metered) {
          RETURN_IF_ERROR(meter->begin());
          for (int r = 0; r < options.repeat; ++r) RETURN_IF_ERROR(chain->run());
          ASSIGN_OR_RETURN(EnergyReading e, meter->end());
          for (int i = chain->first; i < chain->last; ++i) {
            lp.layer_dynamic_w[static_cast<size_t>(i)] = std::max(0.0, e.watts() - static_w);
          }
        }
      }
      // The other layers alone.
      for (int i = 0; i < L; ++i) {
        if (chained[static_cast<size_t>(i)]) continue;
        LayerRun* run = runs[static_cast<size_t>(i)].get();
        if (run != nullptr) {
          auto ms = time_stat(stat, options.warmup, options.repeat, [&] { return run->run(); });
          if (!ms.ok()) {
            // A kernel that compiled but fails at run time: the layer cannot run here.
            dp.unsupported[i] = ms.status().to_string();
            runs[static_cast<size_t>(i)].reset();
          } else {
            lp.layer_ms[static_cast<size_t>(i)] = *ms;
            if (metered) {
              // Eq. 4: dynamic = measured total - static at this level.
              RETURN_IF_ERROR(meter->begin());
              for (int r = 0; r < options.repeat; ++r) RETURN_IF_ERROR(run->run());
              ASSIGN_OR_RETURN(EnergyReading e, meter->end());
              lp.layer_dynamic_w[static_cast<size_t>(i)] = std::max(0.0, e.watts() - static_w);
            }
          }
        }
        tick(pd->device + " " + lg.layer(i).name);
      }
      // Calibration runs: slices timed whole, as the accuracy check and the executor run them,
      // each run after the device's chains (the rest of the model, as in a plan).
      const ChainsRun rest_of_model =
          chains.empty() ? ChainsRun() : [&](std::vector<double>* layer_ms) -> Status {
        layer_ms->assign(static_cast<size_t>(L), std::nan(""));
        std::vector<double> ms;
        for (const std::unique_ptr<ChainRun>& chain : chains) {
          RETURN_IF_ERROR(chain->slice.run_timed(&ms));
          std::copy(ms.begin(), ms.end(), layer_ms->begin() + chain->first);
        }
        return Status();
      };
      for (size_t ci = 0; ci < calibration.size(); ++ci) {
        const auto [first, last] = calibration[ci];
        auto run = measure_slice_run(lg, device, first, last, options.warmup, options.repeat, stat,
                                     rest_of_model, compile_options);
        if (run.ok()) {
          lp.slice_runs.push_back(*run);
        } else {
          warn(pd->device + ": calibration slice [" + std::to_string(first) + ", " +
               std::to_string(last) + ") failed: " + run.status().to_string());
        }
        RETURN_IF_ERROR(chain_slot(static_cast<int>(ci) + 1));
        tick(pd->device + " slice [" + std::to_string(first) + "," + std::to_string(last) + ")");
      }
      for (const std::unique_ptr<ChainRun>& chain : chains) {
        const std::vector<double> ms = layer_statistics(chain->runs, options.statistic);
        for (int i = chain->first; i < chain->last; ++i) {
          lp.layer_chain_ms[static_cast<size_t>(i)] = ms[static_cast<size_t>(i - chain->first)];
        }
      }
      // Split calibration: the most expensive splittable layers, by their time here.
      if (options.split_layers > 0) {
        std::vector<std::optional<double>> times = lp.layer_ms;
        for (size_t i = 0; i < lp.layer_chain_ms.size(); ++i) {
          if (lp.layer_chain_ms[i]) times[i] = lp.layer_chain_ms[i];
        }
        const std::vector<int> chosen = split_calibration_layers(lg, times, options.split_layers);
        auto pieces =
            measure_piece_runs(lg, device, chosen, options.split_shares, options.warmup,
                               std::max(1, options.repeat), options.statistic, compile_options);
        if (!pieces.ok()) return pieces.status().with_context(pd->device + " split calibration");
        lp.piece_runs = std::move(*pieces);
        for (int k = 0; k < options.split_layers; ++k) tick(pd->device + " split calibration");
      }
      if (auto* npu = dynamic_cast<NpuDevice*>(&device)) {
        auto fits = npu_boundary_fits(*npu, lg, sizes, stat, options.warmup, options.repeat);
        if (fits.ok()) {
          for (size_t s = 0; s < 2 * sizes.size(); ++s) tick(pd->device + " boundary");
          lp.upload = std::move(fits->first);
          lp.download = std::move(fits->second);
          dp.levels.push_back(std::move(lp));
          continue;
        }
        warn(pd->device + ": " + fits.status().to_string() + "; timing upload/download instead");
      }
      auto up = transfer_benchmark(device, sizes, stat, options.warmup, options.repeat, true);
      if (!up.ok()) return up.status().with_context(pd->device + " upload benchmark");
      for (size_t s = 0; s < sizes.size(); ++s) tick(pd->device + " upload");
      auto down = transfer_benchmark(device, sizes, stat, options.warmup, options.repeat, false);
      if (!down.ok()) return down.status().with_context(pd->device + " download benchmark");
      for (size_t s = 0; s < sizes.size(); ++s) tick(pd->device + " download");
      lp.upload = std::move(*up);
      lp.download = std::move(*down);
      dp.levels.push_back(std::move(lp));
    }
    std::sort(dp.levels.begin(), dp.levels.end(),
              [](const LevelProfile& a, const LevelProfile& b) { return a.mhz < b.mhz; });
    if (dp.levels.empty()) {
      warn("skipping device " + pd->device + ": no level could be profiled");
      continue;
    }
    // The error of a reduced-precision level against its device at f32.
    const Result<DeviceName> parsed = parse_device_name(pd->device);
    if (parsed.ok() && parsed->precision != Precision::kF32 && !error_inputs.empty()) {
      auto f32 = open_device(parsed->base());
      Result<LayerErrors> errors =
          f32.ok() ? measure_layer_errors(lg, device, **f32, error_inputs, compile_options)
                   : Result<LayerErrors>(f32.status());
      if (errors.ok()) {
        dp.layer_error = std::move(errors->layer_error);
        dp.layer_output_error = std::move(errors->layer_output_error);
        dp.model_error = errors->model_error;
      } else {
        warn(pd->device + ": error against f32 not measured: " + errors.status().to_string());
      }
    }
    recorded.devices.push_back(*pd);
    profile.devices.push_back(std::move(dp));
    if (corun_rounds > 0 && targets.size() >= 2 && !chains.empty()) {
      CorunDevice c;
      c.profile_index = profile.devices.size() - 1;
      c.chains = std::move(chains);
      c.device = std::move(*opened);
      corun.push_back(std::move(c));
    }
  }
  // Co-run factors, with every device (that times layers in a chain) open at once.
  if (corun.size() >= 2) {
    for (size_t i = 0; i < corun.size(); ++i) {
      auto f = measure_corun(corun, i, corun_rounds, stat);
      if (!f.ok()) {
        warn(profile.devices[corun[i].profile_index].device +
             ": co-run factor not measured: " + f.status().to_string());
        continue;
      }
      // Beyond 100 the devices are time-sliced on shared cores (a loaded machine, or devices
      // whose threads are not pinned apart): keep the cap the profile reader accepts, and say so.
      double factor = *f;
      if (factor > kMaxCorunScale) {
        warn(profile.devices[corun[i].profile_index].device + ": co-run factor " +
             std::to_string(factor) + " capped at " + std::to_string(kMaxCorunScale) +
             " (the devices share cores, or the machine is loaded)");
        factor = kMaxCorunScale;
      }
      profile.devices[corun[i].profile_index].corun_scale = factor;
    }
  }
  corun.clear();
  if (options.progress) options.progress(done, done, "done");
  if (profile.devices.empty()) return failed_precondition("no device could be profiled");
  profile.platform = std::move(recorded);
  profile.conditions.profiling_seconds = ms_since(t_start) / 1000;
  return profile;
}

Result<double> measure_slice_ms(const LayerGraph& lg, const std::string& device_name, int first,
                                int last, int warmup, int repeat, const std::string& statistic,
                                const std::function<Status()>& before) {
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, open_device(device_name));
  return measure_slice_ms(lg, *device, first, last, warmup, repeat, statistic, before);
}

Result<double> measure_slice_ms(const LayerGraph& lg, Device& device, int first, int last,
                                int warmup, int repeat, const std::string& statistic,
                                const std::function<Status()>& before) {
  ASSIGN_OR_RETURN(SliceProgram slice, SliceProgram::compile(lg, device, first, last));
  return time_stat(
      parse_stat(statistic), warmup, repeat, [&] { return slice.run(); }, before);
}

}  // namespace tessera
