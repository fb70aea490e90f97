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
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "api/internal.h"
#include "backends/registry.h"
#include "core/npy.h"
#include "energy/platform.h"
#include "graph/format/model_file.h"
#include "graph/layer_graph.h"
#include "scheduler/cost_model.h"
#include "scheduler/executor/executor.h"
#include "scheduler/plan.h"
#include "scheduler/planners/split.h"
#include "scheduler/pricer.h"
#include "scheduler/profiler.h"
#include "tools/calibration_file.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/progress.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--output", "-o", true, false, "write the profile JSON here"},
    {"--devices", "-d", true, false,
     "comma-separated devices to profile (default: every device of the platform)"},
    {"--platform", "-p", true, false,
     "platform JSON describing the board, or a shipped board (hikey970, jetson_tx2, ...; default: "
     "detect this machine)"},
    {"--repeat", "-r", true, false, "timed runs per layer and transfer size (default 5)"},
    {"--warmup", "-w", true, false, "untimed runs before them (default 1)"},
    {"--statistic", "", true, false,
     "median (default, seed 000), min (quiet machine) or mean (adds up on a loaded "
     "machine) of the repeats"},
    {"--all-levels", "", false, false,
     "profile every DVFS level instead of the minimum and maximum"},
    {"--calibration-slices", "", true, false,
     "random slices timed whole per device, to fit the per-slice overhead (default 8)"},
    {"--split-layers", "", true, false,
     "split calibration: the N most expensive splittable layers per device get one piece per "
     "split method and share timed against the whole layer (default 0: none)"},
    {"--split-shares", "", true, false,
     "the shares of those pieces, comma-separated, each in (0, 1) (default 0.5,0.25)"},
    {"--calibration", "", true, false,
     "int8 activation ranges for int8 levels such as cpu#int8 (from `tessera calibrate`; "
     "default: MODEL.tsr.calib.json when it exists)"},
    {"--error-input", "", true, true,
     "a .npy input (single-input models) on which the error of each precision level against "
     "f32 is measured, per layer (repeatable; default: --error-samples random N(0,1) inputs)"},
    {"--error-samples", "", true, false,
     "random inputs for the per-layer error of precision levels (default 2; 0: none)"},
    {"--corun-rounds", "", true, false,
     "rounds of the co-run factor where two or more devices are profiled: each device's chains "
     "alone and while the others run theirs (default: --repeat; 0: none)"},
    {"--sysfs", "", true, false, "sysfs root for sensors and governors (default /)"},
    {"--check", "", true, false,
     "instead of profiling: compare PROFILE's predictions with measured runs"},
    {"--slices", "", true, false,
     "with --check: random slices and split plans per device "
     "(default 10)"},
    {"--layer-splits", "", true, false,
     "with --check: the N most expensive splittable layers each split over every profiled "
     "device by every method, with the split planner's ratios, run through the composite split "
     "device (default 0)"},
    {"--seed", "", true, false, "with --check: random seed (default 1)"},
    {"--markdown", "", false, false, "with --check: print the table as Markdown"},
    {"--hot", "", false, false,
     "with --check: time each slice right after a run of itself (default: each run after a run "
     "of the whole model, as a plan's stage runs after the other stages)"},
    {"--settle", "", true, false,
     "with --check: untimed rounds of each configuration's steady state before each timed "
     "run: a slice runs N times more, each followed by the whole model; a plan and the whole "
     "model N times more (default 3; 0 = one untimed run, as before)"},
    {"--interleave-mib", "", true, false,
     "with --check: MiB of resident memory up to which configurations are compiled together "
     "and timed interleaved; the rest are timed one at a time (default 4096)"},
    {"--quiet", "-q", false, false, "no progress display on stderr"},
    {"--help", "-h", false, false, "show this help"},
};

struct LoadedGraph {
  std::shared_ptr<const Model> model;
  std::unique_ptr<LayerGraph> lg;
  std::string hash;
  std::string name;
  std::string path;
};

Result<LoadedGraph> load(const std::string& path) {
  LoadedGraph out;
  ASSIGN_OR_RETURN(LoadedModel loaded, load_model_file(path));
  auto model = Model::from_graph(std::move(loaded.graph));
  if (!model.ok()) return model.status().with_context(path);
  out.model = std::move(*model);
  ASSIGN_OR_RETURN(LayerGraph lg, LayerGraph::build(model_graph(*out.model)));
  out.lg = std::make_unique<LayerGraph>(std::move(lg));
  ASSIGN_OR_RETURN(out.hash, model_file_hash(path));
  out.name = std::filesystem::path(path).stem().string();
  out.path = path;
  return out;
}

void print_summary(const Profile& p, const CostModel& cm) {
  std::printf("profile of %s (%s), %d layers, %.1f s\n", p.model_name.c_str(), p.model_hash.c_str(),
              p.num_layers(), p.conditions.profiling_seconds);
  std::printf("%-14s %8s %6s %6s %10s %12s %8s %7s %9s %9s %6s %6s %9s\n", "device", "MHz",
              "layers", "chain", "sum ms", "upload GB/s", "beta us", "R^2", "slice ms", "ns/KiB",
              "scale", "cold", "fit err");
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
      std::printf("%-14s %8d %6d %6d %10.3f %12.2f %8.2f %7.4f %9.3f %9.1f %6.3f %6.3f %8.1f%%\n",
                  d.device.c_str(), l.mhz, n, chained, sum, gbs, l.upload.beta_ms * 1e3,
                  l.upload.r2, o.fixed_ms, o.ms_per_byte * 1024 * 1e6, o.chain_scale, o.cold_scale,
                  100 * o.error);
    }
    std::printf("  regression error (layers not measured): %.1f%%\n",
                100 * cm.regression_error(static_cast<int>(di)));
    if (d.corun_scale > 0) {
      std::printf("  co-run factor (the other devices running): %.3f\n", d.corun_scale);
    }
    if (!d.levels.empty() && !d.levels.back().piece_runs.empty()) {
      const auto& runs = d.levels.back().piece_runs;
      std::set<int> layers;
      for (const PieceRun& r : runs) layers.insert(r.layer);
      // How far the measured piece/whole ratios are from the regression's, on average.
      auto found = cm.find(d.device);
      const int vd = found.ok() ? *found : -1;
      int n = 0;
      double sum = 0;
      if (vd >= 0) {
        std::set<std::pair<int, int>> seen;
        for (const PieceRun& r : runs) {
          auto method = parse_split_method(r.method);
          if (!method.ok() || !seen.insert({r.layer, static_cast<int>(*method)}).second) continue;
          for (const auto& [share, c] : cm.piece_corrections(vd, r.layer, *method)) {
            sum += std::abs(c - 1);
            ++n;
          }
        }
      }
      std::printf(
          "  split calibration: %zu pieces of %zu layers; measured piece/layer ratios differ from "
          "the regression's by %.1f%% on average\n",
          runs.size(), layers.size(), n ? 100 * sum / n : 0.0);
    }
    if (!d.layer_error.empty()) {
      std::vector<double> errors;
      for (const auto& e : d.layer_error) {
        if (e) errors.push_back(*e);
      }
      std::sort(errors.begin(), errors.end());
      double sum2 = 0;
      for (double e : errors) sum2 += e * e;
      std::printf(
          "  error against f32 (relative L2) of %zu layers: median %.3g, max %.3g, composed "
          "(sqrt of the sum of squares) %.3g",
          errors.size(), errors.empty() ? 0.0 : errors[errors.size() / 2],
          errors.empty() ? 0.0 : errors.back(), std::sqrt(sum2));
      if (!d.layer_output_error.empty()) {
        double out2 = 0;
        for (const auto& e : d.layer_output_error) {
          if (e) out2 += *e * *e;
        }
        std::printf("; at the outputs composed %.3g", std::sqrt(out2));
      }
      if (d.model_error) std::printf("; whole model measured %.3g", *d.model_error);
      std::printf("\n");
    }
    if (!d.unsupported.empty()) {
      std::printf("  %zu layer(s) cannot run on %s, e.g. %s: %s\n", d.unsupported.size(),
                  d.device.c_str(),
                  p.layers[static_cast<size_t>(d.unsupported.begin()->first)].name.c_str(),
                  d.unsupported.begin()->second.c_str());
    }
  }
}

// ---- tessera profile --check: predicted vs measured latency --------------------------------
//
// Phases: (1) compile every configuration: per device the whole model and the random slices,
// and the random split plans, each as an Executor over its stages (as `tessera run --plan` runs
// it) and each of its stages alone (the plan's sum of slices, as the check measured plans
// before); (2) time them interleaved (time_interleaved): `repeat` rounds, each timing every
// configuration once in a shuffled order, so that a drift of the machine's speed over minutes
// reaches all of them alike; (3) compare the statistic over the rounds with the cost model,
// absolutely and normalised by the whole model of the same round.

// The resident memory of this process in bytes (/proc/self/statm); 0 where it cannot be read.
uint64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) : 0;
}

// One device the check runs on: opened once, with the whole model compiled on it. An untimed
// run of the whole model precedes each timed run of a slice (unless --hot), so that the slice
// meets the caches as a plan's stage meets them after the other stages; its prediction is the
// cost model's price after the whole model (CostModel::slice_ms with all of its cached state
// evicted; with --hot, none), while a plan's stages are priced as stages. Before each timed run
// of the whole model itself run two untimed ones: a plain run (the caches warm with this model,
// whatever configuration ran before), then one that times the model's layers where the backend
// can (run_timed): one layer sum per round, taken as the profile's in-chain layer times were
// (right after a run of the same chain), whose statistic against theirs (the same statistic over
// --repeat runs at profile time) says how far the machine's speed drifted since profiling.
// (Only those: with a minimum, a statistic over the hundreds of runs before the slices would
// fall further into the tail than the profile's.)
struct CheckDevice {
  std::unique_ptr<Device> device;
  std::optional<SliceProgram> whole;  // unset where the whole model does not compile
  bool layers_timed = true;           // false once run_timed is unimplemented
  std::vector<double> layer_ms, layer_sums;
  std::vector<double> walls;  // wall ms of those timed runs (run_timed: always on all threads)
  int whole_config = -1;      // the whole-model configuration, where there is a row for it

  Status run_whole_timed() {
    if (layers_timed) {
      const auto t0 = std::chrono::steady_clock::now();
      const Status st = whole->run_timed(&layer_ms);
      const double wall =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (st.code() != StatusCode::kUnimplemented) {
        RETURN_IF_ERROR(st);
        double sum = 0;
        for (double x : layer_ms) sum += x;
        layer_sums.push_back(sum);
        walls.push_back(wall);
        return Status();
      }
      layers_timed = false;
    }
    return whole->run();
  }
};

// One measured configuration: a slice on one device or a split plan through the executor.
struct CheckConfig {
  std::string device;  // the device's label, or "plan"
  std::string what;
  double predicted = 0;
  std::vector<std::pair<int, double>> stages;  // (virtual device, predicted ms) per stage
  CheckDevice* on = nullptr;                   // the device of a slice
  SliceProgram* program = nullptr;             // a slice: `own` or the device's whole model
  std::optional<SliceProgram> own;
  std::unique_ptr<Executor> plan;
  std::vector<Tensor> plan_inputs, plan_outputs;
  std::vector<double> ms;  // the timed runs
  bool block = false;      // measured in its own block (memory budget), not interleaved
  // A layer split: the composite split device and its one-layer program (plan_inputs/outputs
  // are its inputs and outputs), and its price without the profile's split calibration.
  std::unique_ptr<Device> split_device;
  std::unique_ptr<Program> split_program;
  double predicted_uncalibrated = std::nan("");

  Status run() {
    if (split_program) return split_program->run(plan_inputs, plan_outputs);
    return plan ? plan->run(plan_inputs, &plan_outputs) : program->run();
  }
};

// A row of the check's table.
struct CheckRow {
  std::string device;
  std::string what;
  double predicted = 0;
  double measured = 0;
  double normalised = std::nan("");  // error normalised by the whole model of the same round
  bool primary = true;  // false for a comparison row: a plan's sum of slices, or a layer split
                        // priced without the split calibration
  std::string group;    // of a comparison row: "sum" or "uncalibrated"
  double error() const { return measured > 0 ? (predicted - measured) / measured : 0; }
};

std::string range_text(int first, int last) {
  return "[" + std::to_string(first) + "," + std::to_string(last) + ")";
}

class Check {
 public:
  Check(const LoadedGraph& m, const CostModel& cm, int warmup, int repeat, int settle, bool hot,
        uint64_t memory_budget, unsigned seed, CompileOptions compile)
      : compile_(std::move(compile)),
        m_(m),
        cm_(cm),
        warmup_(warmup),
        repeat_(repeat),
        settle_(settle),
        hot_(hot),
        budget_(memory_budget),
        rng_(seed) {}

  // A slice of `vd` as a configuration (one per (vd, first, last)); [0, L) is the whole model.
  Result<int> add_slice(int vd, int first, int last) {
    const auto key = std::make_tuple(vd, first, last);
    if (auto it = slice_index_.find(key); it != slice_index_.end()) return it->second;
    ASSIGN_OR_RETURN(CheckDevice * d, device_of(vd));
    auto c = std::make_unique<CheckConfig>();
    c->device = cm_.virtual_devices()[static_cast<size_t>(vd)].label;
    const bool whole = first == 0 && last == m_.lg->num_layers();
    c->what = whole ? "whole model" : "slice " + range_text(first, last);
    // A slice runs after the whole model on its device (all of its cached state evicted), or
    // after itself (timed_run); the whole model after itself.
    const bool after_model = !whole && d->whole && !hot_;
    c->predicted = cm_.slice_ms(vd, first, last, after_model ? 1.0 : 0.0);
    c->stages = {{vd, c->predicted}};
    c->on = d;
    if (whole && d->whole) {
      c->program = &*d->whole;
    } else {
      auto s = SliceProgram::compile(*m_.lg, *d->device, first, last, compile_);
      if (!s.ok()) return s.status().with_context(c->device + " " + c->what);
      c->own = std::move(*s);
      c->program = &*c->own;
    }
    const int index = static_cast<int>(configs_.size());
    RETURN_IF_ERROR(admit(std::move(c), whole));
    if (whole) d->whole_config = index;
    slice_index_[key] = index;
    return index;
  }

  // A split plan: stages [cuts[i], cuts[i+1]) on vds[i], run by the executor with every stage
  // its own program (a random plan may put adjacent stages on one device; the cost model prices
  // each stage with its transfers, so the executor must not merge them). Each stage is also
  // added as a slice for the sum-of-slices figure. Returns the plan's configuration.
  Result<int> add_plan(const std::vector<int>& cuts, const std::vector<int>& vds) {
    std::vector<std::pair<int, std::string>> starts;
    std::vector<int> stage_configs;
    auto c = std::make_unique<CheckConfig>();
    c->device = "plan";
    c->what = "split";
    for (size_t i = 0; i < vds.size(); ++i) {
      const int vd = vds[i];
      const std::string& label = cm_.virtual_devices()[static_cast<size_t>(vd)].label;
      starts.emplace_back(cuts[i], label);
      const double ms = cm_.slice_ms(vd, cuts[i], cuts[i + 1]);
      c->predicted += ms;
      c->stages.emplace_back(vd, ms);
      c->what += " " + label + range_text(cuts[i], cuts[i + 1]);
      ASSIGN_OR_RETURN(int stage, add_slice(vd, cuts[i], cuts[i + 1]));
      stage_configs.push_back(stage);
    }
    ASSIGN_OR_RETURN(Plan plan, plan_from_slices(m_.lg->num_layers(), starts));
    plan.model_name = m_.name;
    plan.model_hash = m_.hash;
    plan.planner = "random";
    ExecutorOptions options;
    options.compile = compile_;
    options.merge_same_device = false;
    auto ex = Executor::create(*m_.lg, plan, options);
    if (!ex.ok()) return ex.status().with_context(c->what);
    c->plan = std::move(*ex);
    ASSIGN_OR_RETURN(c->plan_inputs, make_inputs(m_.lg->graph(), m_.lg->graph().inputs()));
    const int index = static_cast<int>(configs_.size());
    RETURN_IF_ERROR(admit(std::move(c), false));
    stage_slices_[static_cast<size_t>(index)] = std::move(stage_configs);
    return index;
  }

  // Layer `layer` split by `method` over `shares` (virtual devices `vds`, in order), run by the
  // composite split device as the executor runs a split stage; predicted by the pricer
  // (price_split_pieces) with this check's cost model and with `uncalibrated` (the profile
  // without its split calibration). Runs after itself.
  Result<int> add_layer_split(int layer, SplitMethod method, const std::vector<int>& vds,
                              const std::vector<DeviceShare>& shares,
                              const CostModel& uncalibrated) {
    std::vector<double> ratios;
    for (const DeviceShare& d : shares) ratios.push_back(d.ratio);
    ASSIGN_OR_RETURN(SplitPrice price, price_split_pieces(cm_, *m_.lg, layer, method, vds, ratios));
    ASSIGN_OR_RETURN(SplitPrice plain,
                     price_split_pieces(uncalibrated, *m_.lg, layer, method, vds, ratios));
    Placement placement;
    placement.devices = shares;
    placement.split = split_method_name(method);
    ASSIGN_OR_RETURN(std::string name, placement.device_name());
    auto c = std::make_unique<CheckConfig>();
    c->device = "split";
    c->what = "layer " + std::to_string(layer) + " " + placement.split;
    for (const DeviceShare& d : shares) {
      char r[32];
      std::snprintf(r, sizeof r, "%.2f", d.ratio);
      c->what += std::string(&d == &shares.front() ? " " : "+") + d.label() + "=" + r;
    }
    c->predicted = price.stage_ms();
    c->predicted_uncalibrated = plain.stage_ms();
    ASSIGN_OR_RETURN(c->split_device, open_device(name));
    const Graph& g = m_.lg->graph();
    const NodeId node = m_.lg->layer(layer).node;
    auto program = c->split_device->compile(g, std::span<const NodeId>(&node, 1), compile_);
    if (!program.ok()) return program.status().with_context(c->what);
    c->split_program = std::move(*program);
    ASSIGN_OR_RETURN(c->plan_inputs, make_inputs(g, c->split_program->input_values()));
    c->plan_outputs.resize(c->split_program->output_values().size());
    const int index = static_cast<int>(configs_.size());
    RETURN_IF_ERROR(admit(std::move(c), false));
    row_configs_.insert(index);
    return index;
  }

  // Times every configuration kept (not measured in a block) in `repeat_` shuffled rounds.
  Status measure() {
    std::vector<TimedRun> runs;
    std::vector<CheckConfig*> kept;
    for (auto& c : configs_) {
      if (c->block) continue;
      runs.push_back(timed_run(*c));
      kept.push_back(c.get());
    }
    if (runs.empty()) return Status();
    ASSIGN_OR_RETURN(auto ms, time_interleaved(runs, repeat_, rng_));
    for (size_t i = 0; i < kept.size(); ++i) kept[i]->ms = std::move(ms[i]);
    interleaved_ = static_cast<int>(kept.size());
    return Status();
  }

  // The rows: per configuration, and per plan its sum of slices.
  std::vector<CheckRow> rows(const std::string& statistic) const {
    std::vector<CheckRow> out;
    for (size_t i = 0; i < configs_.size(); ++i) {
      const CheckConfig& c = *configs_[i];
      if (c.device != "plan" && !row_configs_.count(static_cast<int>(i))) continue;
      CheckRow r{c.device, c.what + (c.block ? " *" : ""), c.predicted,
                 summarize_ms(c.ms, statistic)};
      if (c.what != "whole model") r.normalised = normalised_error(c.stages, c.ms, c.block);
      out.push_back(r);
      if (!std::isnan(c.predicted_uncalibrated)) {
        CheckRow plain{c.device, "  without split calibration", c.predicted_uncalibrated,
                       r.measured};
        plain.primary = false;
        plain.group = "uncalibrated";
        out.push_back(plain);
      }
      auto stages = stage_slices_.find(i);
      if (stages == stage_slices_.end()) continue;
      // The same plan as the sum of its slices, each timed alone (after the whole model).
      CheckRow sum{"plan", "  as the sum of its slices", c.predicted, 0};
      sum.primary = false;
      sum.group = "sum";
      std::vector<double> per_round(static_cast<size_t>(repeat_), 0.0);
      bool block = false;
      for (int s : stages->second) {
        const CheckConfig& sc = *configs_[static_cast<size_t>(s)];
        sum.measured += summarize_ms(sc.ms, statistic);
        block = block || sc.block;
        for (size_t k = 0; k < per_round.size() && k < sc.ms.size(); ++k) per_round[k] += sc.ms[k];
      }
      if (block) sum.what += " *";
      sum.normalised = normalised_error(c.stages, per_round, block);
      out.push_back(sum);
    }
    return out;
  }

  // Marks a configuration as a row of its own (the random slices and whole models).
  void show(int config) { row_configs_.insert(config); }

  // Per device: the whole model's layers (sum of the in-chain layer times) at profile time and
  // now (the same statistic of the layer sums of this check's whole-model runs).
  struct Drift {
    std::string device;
    double profiled = 0;
    double now = 0;
    double wall = 0;  // the same statistic of those runs' wall times
  };
  std::vector<Drift> drift(const Profile& p, const std::vector<int>& vds) const {
    std::vector<Drift> out;
    for (int vd : vds) {
      const VirtualDevice& v = cm_.virtual_devices()[static_cast<size_t>(vd)];
      auto it = devices_.find(v.device);
      const DeviceProfile* dp = p.find(v.device);
      const LevelProfile* level = dp == nullptr ? nullptr : dp->level(v.mhz);
      if (it == devices_.end() || it->second.layer_sums.empty() || level == nullptr ||
          level->layer_chain_ms.size() != static_cast<size_t>(m_.lg->num_layers())) {
        continue;
      }
      Drift d{v.label, 0, summarize_ms(it->second.layer_sums, p.conditions.statistic),
              summarize_ms(it->second.walls, p.conditions.statistic)};
      bool all = true;
      for (const auto& x : level->layer_chain_ms) {
        all = all && x.has_value();
        d.profiled += x.value_or(0);
      }
      if (all && d.profiled > 0) out.push_back(d);
    }
    return out;
  }

  int blocks() const { return blocks_; }
  int interleaved() const { return interleaved_; }

 private:
  // Opens the device of `vd` and compiles the whole model on it, once per device name.
  Result<CheckDevice*> device_of(int vd) {
    const std::string& name = cm_.virtual_devices()[static_cast<size_t>(vd)].device;
    auto [it, fresh] = devices_.try_emplace(name);
    CheckDevice& d = it->second;
    if (fresh) {
      auto device = open_device(name);
      if (!device.ok()) {
        devices_.erase(it);
        return device.status();
      }
      d.device = std::move(*device);
      auto whole = SliceProgram::compile(*m_.lg, *d.device, 0, m_.lg->num_layers(), compile_);
      if (whole.ok()) d.whole = std::move(*whole);
    }
    return &d;
  }

  // Warms `c` up; then keeps it for the interleaved rounds or, when this process's resident
  // memory is above the budget (and `keep` is false), times it now in a block of `repeat_`
  // runs and frees it.
  Status admit(std::unique_ptr<CheckConfig> c, bool keep) {
    for (int i = 0; i < warmup_; ++i) {
      RETURN_IF_ERROR(c->run().with_context(c->device + " " + c->what));
    }
    if (!keep && resident_bytes() > budget_) {
      ASSIGN_OR_RETURN(auto ms, time_interleaved({timed_run(*c)}, repeat_, rng_));
      c->ms = std::move(ms[0]);
      c->block = true;
      c->program = nullptr;
      c->own.reset();
      c->plan.reset();
      ++blocks_;
    }
    configs_.push_back(std::move(c));
    return Status();
  }

  // The timed run of `c` and what runs untimed before it: a slice after the whole model on its
  // device (the whole model after itself), or after itself with --hot or where the whole model
  // does not compile; a plan after itself (a plan is the whole model).
  //
  // Settling (--settle N): each timed run is preceded by N more untimed rounds of the state it is
  // timed in — a slice by N runs of itself each followed by the whole model, a plan or a
  // slice after itself by N more runs of itself, the whole model by N more runs. On the 2-core
  // Intel Xeon VM one untimed run is not enough: a configuration run after other programs
  // takes several runs of its own to return to its steady speed (SqueezeNet on cpu:0, its five
  // random 2-3 stage plans: -8..-19% against their prices after one run of themselves, -2..-10%
  // after 3, 0..-7% after 8; docs/cost-model.md). A plan's stage in a stream runs every
  // frame, and the profile's calibration runs alternate each slice with the chains, so the
  // settled state is the one both are priced in.
  TimedRun timed_run(CheckConfig& c) {
    TimedRun t;
    t.name = c.device + " " + c.what;
    t.run = [&c] { return c.run(); };
    CheckDevice* d = c.on;
    const int settle = settle_;
    if (d != nullptr && d->whole && c.program == &*d->whole) {
      t.before = [d, settle] {
        for (int i = 0; i <= settle; ++i) RETURN_IF_ERROR(d->whole->run());
        return d->run_whole_timed();
      };
    } else if (d != nullptr && d->whole && !hot_) {
      t.before = [d, &c, settle] {  // (slice, whole model) x settle, or the whole model alone
        for (int i = 0; i + 1 < settle; ++i) {
          RETURN_IF_ERROR(c.run());
          RETURN_IF_ERROR(d->whole->run());
        }
        if (settle > 0) RETURN_IF_ERROR(c.run());
        return d->whole->run();
      };
    } else {
      t.before = [&c, settle] {
        for (int i = 0; i <= settle; ++i) RETURN_IF_ERROR(c.run());
        return Status();
      };
    }
    return t;
  }

  // The median over rounds of (sum over stages of predicted_k * measured_whole / predicted_whole
  // of the stage's device in that round) / measured - 1: the error left once each prediction is
  // scaled by how far the whole model on its device measured from its prediction in the same
  // round (machine drift). NaN where a round's whole model is missing.
  double normalised_error(const std::vector<std::pair<int, double>>& stages,
                          const std::vector<double>& measured, bool block) const {
    if (block || stages.empty() || measured.size() != static_cast<size_t>(repeat_)) {
      return std::nan("");
    }
    std::vector<double> errors;
    for (size_t r = 0; r < measured.size(); ++r) {
      double scaled = 0;
      for (const auto& [vd, predicted] : stages) {
        const std::string& name = cm_.virtual_devices()[static_cast<size_t>(vd)].device;
        auto it = devices_.find(name);
        if (it == devices_.end() || it->second.whole_config < 0) return std::nan("");
        const CheckConfig& w = *configs_[static_cast<size_t>(it->second.whole_config)];
        if (w.ms.size() != measured.size() || w.predicted <= 0) return std::nan("");
        scaled += predicted * w.ms[r] / w.predicted;
      }
      if (measured[r] <= 0) return std::nan("");
      errors.push_back(scaled / measured[r] - 1);
    }
    return summarize_ms(std::move(errors), "median");
  }

  CompileOptions compile_;  // every program and plan of the check (int8 ranges)
  const LoadedGraph& m_;
  const CostModel& cm_;
  const int warmup_, repeat_;
  const int settle_;  // --settle (timed_run)
  const bool hot_;
  const uint64_t budget_;
  std::mt19937 rng_;  // the order of the runs in each round
  std::map<std::string, CheckDevice> devices_;
  std::vector<std::unique_ptr<CheckConfig>> configs_;
  std::map<std::tuple<int, int, int>, int> slice_index_;  // (vd, first, last) -> configuration
  std::map<size_t, std::vector<int>> stage_slices_;       // plan -> its stages' slices
  std::set<int> row_configs_;
  int blocks_ = 0, interleaved_ = 0;
};

void print_rows(const std::vector<CheckRow>& rows, bool md) {
  if (md) {
    std::printf(
        "| device | what | predicted ms | measured ms | error | drift-normalised error |\n"
        "|---|---|---:|---:|---:|---:|\n");
  } else {
    std::printf("%-14s %-52s %12s %12s %8s %11s\n", "device", "what", "predicted ms", "measured ms",
                "error", "normalised");
  }
  for (const CheckRow& r : rows) {
    char norm[32] = "-";
    if (!std::isnan(r.normalised)) std::snprintf(norm, sizeof norm, "%+.1f%%", 100 * r.normalised);
    if (md) {
      std::printf("| %s | %s | %.3f | %.3f | %+.1f%% | %s |\n", r.device.c_str(), r.what.c_str(),
                  r.predicted, r.measured, 100 * r.error(), norm);
    } else {
      std::printf("%-14s %-52s %12.3f %12.3f %+7.1f%% %11s\n", r.device.c_str(), r.what.c_str(),
                  r.predicted, r.measured, 100 * r.error(), norm);
    }
  }
}

// Mean absolute error (and count) of `rows` that pass `keep`, on `error` (NaN entries skipped).
template <typename Keep, typename Error>
std::pair<double, int> mean_abs(const std::vector<CheckRow>& rows, Keep keep, Error error) {
  double sum = 0;
  int n = 0;
  for (const CheckRow& r : rows) {
    if (!keep(r) || std::isnan(error(r))) continue;
    sum += std::abs(error(r));
    ++n;
  }
  return {n ? sum / n : 0.0, n};
}

void print_summary(const std::string& model, const std::vector<CheckRow>& rows, bool md) {
  const auto abs_error = [](const CheckRow& r) { return r.error(); };
  const auto normalised = [](const CheckRow& r) { return r.normalised; };
  const auto primary = [](const CheckRow& r) { return r.primary; };
  const auto [all, n] = mean_abs(rows, primary, abs_error);
  const auto [whole, whole_n] = mean_abs(
      rows, [](const CheckRow& r) { return r.what == "whole model"; }, abs_error);
  std::printf("%s%s: mean absolute error %.2f%% over %d runs (whole model %.2f%%)\n",
              md ? "\n" : "", model.c_str(), 100 * all, n, whole_n ? 100 * whole : 0.0);
  // Per device (split plans as "plan"), in order of first appearance.
  std::vector<std::string> order;
  for (const CheckRow& r : rows) {
    if (r.primary && std::find(order.begin(), order.end(), r.device) == order.end()) {
      order.push_back(r.device);
    }
  }
  for (const std::string& d : order) {
    const auto [e, k] = mean_abs(
        rows, [&](const CheckRow& r) { return r.primary && r.device == d; }, abs_error);
    std::printf("%s  %s: mean absolute error %.2f%% over %d runs\n", model.c_str(), d.c_str(),
                100 * e, k);
  }
  const auto [sum, sum_n] = mean_abs(
      rows, [](const CheckRow& r) { return r.group == "sum"; }, abs_error);
  if (sum_n > 0) {
    std::printf(
        "%s  split plans as the sum of their slices (each timed alone, not run by the "
        "executor): mean absolute error %.2f%% over %d plans\n",
        model.c_str(), 100 * sum, sum_n);
  }
  const auto [split, split_n] = mean_abs(
      rows, [](const CheckRow& r) { return r.primary && r.device == "split"; }, abs_error);
  const auto [plain, plain_n] = mean_abs(
      rows, [](const CheckRow& r) { return r.group == "uncalibrated"; }, abs_error);
  if (plain_n > 0) {
    std::printf(
        "%s  layer splits: mean absolute error %.2f%% with the split calibration, %.2f%% "
        "without it (the regression's ratio alone), over %d splits\n",
        model.c_str(), 100 * split, 100 * plain, split_n);
  }
  const auto [norm, norm_n] = mean_abs(rows, primary, normalised);
  if (norm_n > 0) {
    std::printf(
        "%s: drift-normalised mean absolute error %.2f%% over %d runs (predicted / predicted "
        "whole model vs measured / measured whole model of the same round; whole-model rows "
        "left out)\n",
        model.c_str(), 100 * norm, norm_n);
  }
}

// Predicted vs measured latency of the whole model, random slices and random split plans
// (phases above).
int run_check(const LoadedGraph& m, const cli::Args& args) {
  auto profile = Profile::load(args.get("--check"), m.hash);
  if (!profile.ok()) return report_error("profile", profile.status());
  auto cm = CostModel::build(*profile, *m.lg);
  if (!cm.ok()) return report_error("profile", cm.status());
  auto slices = args.get_int("--slices", 10, 0, 100000);
  auto seed = args.get_int("--seed", 1, 0, 1 << 30);
  auto repeat = args.get_int("--repeat", 5, 1, 100000);
  auto warmup = args.get_int("--warmup", 1, 0, 100000);
  auto budget_mib = args.get_int("--interleave-mib", 4096, 0, 1 << 30);
  auto layer_splits = args.get_int("--layer-splits", 0, 0, 100000);
  auto settle = args.get_int("--settle", 3, 0, 1000);
  for (const auto* r : {&slices, &seed, &repeat, &warmup, &budget_mib, &layer_splits, &settle}) {
    if (!r->ok()) return report_error("profile", r->status());
  }
  const int L = m.lg->num_layers();
  std::mt19937 rng(static_cast<unsigned>(*seed));
  const std::vector<int> vds = cm->latency_devices();
  CompileOptions compile;
  {
    auto table = load_calibration_file(m.path, m.hash, args.get("--calibration"));
    if (!table.ok()) return report_error("profile", table.status());
    compile.calibration = std::move(*table);
    std::vector<std::string> names;
    for (const DeviceProfile& d : profile->devices) names.push_back(d.device);
    Status st =
        require_calibration(names, compile.calibration, m.lg->graph(), m.path, "--calibration");
    if (!st.ok()) return report_error("profile", st);
  }
  Check check(m, *cm, *warmup, *repeat, *settle, args.has("--hot"),
              static_cast<uint64_t>(*budget_mib) << 20, static_cast<unsigned>(*seed) + 1,
              std::move(compile));
  // Phase 1: compile (and warm up) every configuration.
  for (int vd : vds) {
    if (!cm->can_run_slice(vd, 0, L)) continue;
    auto whole = check.add_slice(vd, 0, L);
    if (!whole.ok()) return report_error("profile", whole.status());
    check.show(*whole);
    for (int s = 0; s < *slices && L > 1; ++s) {
      int a = static_cast<int>(rng() % static_cast<unsigned>(L));
      int b = static_cast<int>(rng() % static_cast<unsigned>(L));
      if (a > b) std::swap(a, b);
      ++b;
      if (!cm->can_run_slice(vd, a, b)) continue;
      auto slice = check.add_slice(vd, a, b);
      if (!slice.ok()) return report_error("profile", slice.status());
      check.show(*slice);
    }
  }
  // Split plans over the devices: 2 or 3 stages, each on a random device, transfers at the cuts.
  for (int s = 0; s < *slices && L > 2 && !vds.empty(); ++s) {
    const int k = 2 + static_cast<int>(rng() % 2u);
    std::vector<int> cuts = {0, L};
    while (static_cast<int>(cuts.size()) < k + 1) {
      const int c = 1 + static_cast<int>(rng() % static_cast<unsigned>(L - 1));
      if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
    }
    std::sort(cuts.begin(), cuts.end());
    std::vector<int> on;
    bool ok = true;
    for (size_t i = 0; i + 1 < cuts.size() && ok; ++i) {
      on.push_back(vds[rng() % vds.size()]);
      ok = cm->can_run_slice(on.back(), cuts[i], cuts[i + 1]);
    }
    if (!ok) continue;
    auto plan = check.add_plan(cuts, on);
    if (!plan.ok()) return report_error("profile", plan.status());
  }
  // Layer splits over every device, by every method with a rule, the split planner's ratios.
  if (*layer_splits > 0 && vds.size() >= 2) {
    Profile plain_profile = *profile;
    for (DeviceProfile& d : plain_profile.devices) {
      for (LevelProfile& l : d.levels) l.piece_runs.clear();
    }
    auto plain = CostModel::build(plain_profile, *m.lg);
    if (!plain.ok()) return report_error("profile", plain.status());
    std::vector<std::optional<double>> times(static_cast<size_t>(L));
    for (int l = 0; l < L; ++l) {
      bool all = true;
      double slowest = 0;
      for (int vd : vds) {
        all = all && cm->can_run(vd, l);
        slowest = std::max(slowest, cm->exec_ms(vd, l));
      }
      if (all) times[static_cast<size_t>(l)] = slowest;
    }
    for (int layer : split_calibration_layers(*m.lg, times, *layer_splits)) {
      for (SplitMethod method : kAllSplitMethods) {
        const std::vector<DeviceShare> shares =
            balanced_split_shares(*cm, *m.lg, layer, method, vds);
        std::vector<double> ratios;
        for (const DeviceShare& d : shares) ratios.push_back(d.ratio);
        if (!price_split_pieces(*cm, *m.lg, layer, method, vds, ratios).ok()) continue;
        auto split = check.add_layer_split(layer, method, vds, shares, *plain);
        if (!split.ok()) return report_error("profile", split.status());
      }
    }
  }
  // Phase 2: the interleaved rounds.
  Status measured = check.measure();
  if (!measured.ok()) return report_error("profile", measured);
  // Phase 3: the table and the errors.
  const bool md = args.has("--markdown");
  const std::vector<CheckRow> rows = check.rows(profile->conditions.statistic);
  print_rows(rows, md);
  if (rows.empty()) return 0;
  print_summary(m.name, rows, md);
  std::printf(
      "%s: %d configurations timed in %d interleaved rounds (shuffled; %s of the rounds; each "
      "run settled by %d untimed rounds)",
      m.name.c_str(), check.interleaved(), *repeat, profile->conditions.statistic.c_str(), *settle);
  if (check.blocks() > 0) {
    std::printf(
        "; %d more (*) timed each in its own block of %d runs: resident memory above "
        "--interleave-mib %d",
        check.blocks(), *repeat, *budget_mib);
  }
  std::printf("\n");
  for (const Check::Drift& d : check.drift(*profile, vds)) {
    std::printf(
        "%s  %s: machine drift %+.1f%% (the whole model's layers: %.3f ms at profile time, "
        "%.3f ms in this check, in untimed whole-model runs of %.3f ms wall)\n",
        m.name.c_str(), d.device.c_str(), 100 * (d.now / d.profiled - 1), d.profiled, d.now,
        d.wall);
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
    auto p = Platform::load_file_or_board(args->get("--platform"));
    if (!p.ok()) return report_error("profile", p.status());
    platform = std::move(*p);
  } else {
    platform = Platform::detect(sysfs);
  }
  ProfileOptions options;
  options.devices = cli::split_device_list(args->get("--devices"));
  // A remote device (remote:HOST:PORT, a `tessera serve`) is no part of the machine's platform:
  // it joins it here, with the memory its server reports and one fixed level.
  for (const std::string& name : options.devices) {
    if (name.rfind("remote:", 0) != 0 || platform.find(name) != nullptr) continue;
    auto dev = open_device(name);
    if (!dev.ok()) return report_error("profile", dev.status());
    PlatformDevice pd;
    pd.id = name;
    pd.kind = "remote";
    pd.device = name;
    pd.memory_bytes = std::max<uint64_t>(1, (*dev)->memory_capacity());
    pd.dvfs = {DvfsLevel{}};
    pd.sources["memory_bytes"] = "reported by the server";
    platform.devices.push_back(std::move(pd));
  }
  options.repeat = *repeat;
  options.warmup = *warmup;
  options.all_levels = args->has("--all-levels");
  auto calibration = args->get_int("--calibration-slices", 8, 0, 10000);
  if (!calibration.ok()) return report_error("profile", calibration.status());
  options.calibration_slices = *calibration;
  auto split_layers = args->get_int("--split-layers", 0, 0, 100000);
  if (!split_layers.ok()) return report_error("profile", split_layers.status());
  options.split_layers = *split_layers;
  if (args->has("--split-shares")) {
    options.split_shares.clear();
    for (const std::string& item : cli::split_commas(args->get("--split-shares"))) {
      auto v = cli::parse_double("--split-shares", item);
      if (!v.ok()) return report_error("profile", v.status());
      if (!(*v > 0 && *v < 1)) {
        return report_error("profile", invalid_argument("--split-shares: " + quote_name(item) +
                                                        " is not a share in (0, 1)"));
      }
      options.split_shares.push_back(*v);
    }
    if (options.split_shares.empty()) {
      return report_error("profile", invalid_argument("--split-shares: no share given"));
    }
  }
  auto corun_rounds = args->get_int("--corun-rounds", options.repeat, 0, 10000);
  if (!corun_rounds.ok()) return report_error("profile", corun_rounds.status());
  options.corun_rounds = *corun_rounds;
  options.statistic = args->get("--statistic", "median");
  options.sysfs_root = sysfs;
  {
    auto table = load_calibration_file(model->path, model->hash, args->get("--calibration"));
    if (!table.ok()) return report_error("profile", table.status());
    options.calibration = std::move(*table);
    Status st = require_calibration(options.devices, options.calibration, model->lg->graph(),
                                    model->path, "--calibration");
    if (!st.ok()) return report_error("profile", st);
    auto samples = args->get_int("--error-samples", 2, 0, 1000);
    if (!samples.ok()) return report_error("profile", samples.status());
    options.error_samples = *samples;
    const Graph& g = model_graph(*model->model);
    for (const std::string& file : args->all("--error-input")) {
      if (g.inputs().size() != 1) {
        return report_error("profile", invalid_argument("--error-input: the model has " +
                                                        std::to_string(g.inputs().size()) +
                                                        " inputs; one .npy per sample needs one"));
      }
      auto t = read_npy(file);
      if (!t.ok()) return report_error("profile", t.status().with_context("--error-input"));
      const TensorInfo& info = g.value(g.inputs()[0]).info;
      if (t->dtype() != info.dtype || t->shape() != info.shape) {
        return report_error(
            "profile", invalid_argument("--error-input " + file + ": " + t->describe() +
                                        ", the model's input is " + dtype_name(info.dtype) + " " +
                                        info.shape.to_string()));
      }
      options.error_inputs.push_back({std::move(*t)});
    }
  }
  Progress progress("profile " + model->name, args->has("--quiet"));
  options.progress = [&progress](int done, int total, const std::string& what) {
    progress.update(done, total, what);
  };
  auto profile = profile_model(*model->lg, platform, options, model->name, model->hash);
  progress.finish(profile.ok());
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
