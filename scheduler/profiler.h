// The profiler (seed 000 Sect. V-A): times every layer of a LayerGraph on every device, at the
// device's minimum and maximum DVFS levels where a governor can set them (otherwise at the level
// the device runs at), with warm-up runs, repeats and the median; runs a transfer microbenchmark
// per device and level and fits eq. 1-2; meters dynamic power (eq. 4) where a sensor exists. The
// result is a Profile (scheduler/profile.h).
//
// Layers are timed where they will run: inside one program holding the longest run of layers
// the device supports (Program::run with RunOptions::layer_ms), so that a layer pays for the cold
// caches and the allocation it meets in a chain. A layer timed alone runs with its weights hot and,
// summed, underpredicts a chained run by 8-40% (docs/cost-model.md). Layers of backends that cannot
// time inside a run are timed alone. Then a few random slices are compiled and timed whole
// (calibration runs) so that the cost model can fit what a slice costs beyond its layers: the
// program launch and the copy/layout conversion of its boundary tensors.
//
// A layer a device cannot run (capability, memory capacity, compile failure) is recorded as
// unsupported with the reason; a device that cannot be opened is skipped with a warning.
//
// Precision levels (`cpu#bf16`, `cpu:0#int8`; docs/precision.md) are profiled like devices, with
// ProfileOptions::calibration for int8 (without it profile_model refuses an int8 level). Their
// error is measured too (measure_layer_errors): per layer against f32 on the layer's real f32
// inputs, recorded in DeviceProfile::layer_error for the fidelity bound of the planners
// (scheduler/error_budget.h).
//
// Thread rule: profile_model and the functions below open their own devices (or use the one
// given for the duration of the call) and run from the calling thread; call one at a time per
// device.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "backends/device.h"
#include "core/calibration_table.h"
#include "core/status.h"
#include "energy/platform.h"
#include "graph/layer_graph.h"
#include "scheduler/profile.h"

namespace tessera {

struct ProfileOptions {
  std::vector<std::string> devices;  // backend device names; empty: every platform device
  int warmup = 1;
  int repeat = 5;
  // The statistic of the repeats: "median" (seed 000), "min" (a quiet machine's time: other
  // processes only ever add time) or "mean" (the one that adds up across layers on a loaded
  // machine, where every run is delayed somewhere).
  std::string statistic = "median";
  bool all_levels = false;  // every DVFS level instead of the minimum and maximum
  // Calibration runs per device and level: random slices timed whole (half of them short).
  int calibration_slices = 8;
  // Split calibration (seed 004's "database", Profile's piece_runs): per device and level, the
  // `split_layers` most expensive layers that have a split rule get one piece per split method
  // and share of `split_shares` timed against the whole layer (measure_piece_runs). 0: none.
  int split_layers = 0;
  std::vector<double> split_shares = {0.5, 0.25};
  // Transfer microbenchmark sizes in bytes (default 4 KiB to 16 MiB, x4 steps).
  std::vector<uint64_t> transfer_sizes;
  // Rounds of the co-run measurement (DeviceProfile::corun_scale) where two or more devices are
  // profiled: per device and round, its chains timed alone, then timed while every other
  // profiled device runs its own chains in a loop on its own thread. -1: `repeat`; 0: none.
  int corun_rounds = -1;
  std::string sysfs_root = "/";
  // int8 activation ranges (CompileOptions::calibration, `tessera calibrate`): required when an
  // int8 level is profiled; every program compiled for profiling gets them.
  std::shared_ptr<const CalibrationTable> calibration;
  // Inputs for the error of reduced-precision devices (one tensor per graph input each); empty:
  // `error_samples` random sets (make_inputs, seeded). error_samples 0 and no error_inputs: no
  // error is measured.
  std::vector<std::vector<Tensor>> error_inputs;
  int error_samples = 2;
  // Progress callback (done, total, what); the CLI draws a bar with it.
  std::function<void(int, int, const std::string&)> progress;
  // Warnings (unreachable devices, levels that cannot be set); default: stderr.
  std::function<void(const std::string&)> warn;
};

// Profiles `lg` on the devices of `platform`. `model_name` and `model_hash` are recorded.
Result<Profile> profile_model(const LayerGraph& lg, const Platform& platform,
                              const ProfileOptions& options, const std::string& model_name,
                              const std::string& model_hash);

// Layers [first, last) compiled as one Program on `device`, with random inputs of the right
// shapes (make_inputs). `outputs` start undefined; the first run allocates them and later runs
// write them in place, as the executor's steps do.
struct SliceProgram {
  std::unique_ptr<Program> program;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;

  // An error when [first, last) is not a non-empty layer range or the device refuses it.
  static Result<SliceProgram> compile(const LayerGraph& lg, Device& device, int first, int last,
                                      const CompileOptions& options = {});
  Status run() { return program->run(inputs, outputs); }
  Status run_timed(std::vector<double>* layer_ms) {
    return program->run(inputs, outputs, RunOptions::timed(layer_ms));
  }
};

// One configuration of an interleaved measurement: `run` is timed; `before`, when set, runs
// untimed right before each timed run (e.g. the rest of the model, so that `run` meets the
// caches as a plan's stage does). `name` prefixes error messages.
struct TimedRun {
  std::string name;
  std::function<Status()> before;
  std::function<Status()> run;
};

// Times every configuration once per round, for `rounds` rounds, in an order `rng` shuffles
// anew each round: ms[config][round]. Configurations measured in one block each, one after the
// other, are minutes apart on a large model, and a shared machine's speed drifts by 10-20% over
// minutes (docs/cost-model.md); interleaved, each round sees every configuration at about the
// same machine speed, and a configuration's statistic over the rounds is comparable with the
// others'. The first failing run stops the measurement, its error naming the configuration.
Result<std::vector<std::vector<double>>> time_interleaved(const std::vector<TimedRun>& runs,
                                                          int rounds, std::mt19937& rng);

// The statistic ("median", "min" or "mean"; anything else is the median) of `ms`; 0 when empty.
double summarize_ms(std::vector<double> ms, const std::string& statistic);

// Times running layers [first, last) compiled as one Program on `device` (Program::run, so the
// slice's own uploads and downloads are included): the median (or min) of `repeat` runs after
// `warmup`. `before`, when set, runs (untimed) before each timed run: the accuracy check runs
// the whole model there, so that the slice finds the caches as a stage of a plan finds them
// after the other stages (a slice run in a loop of itself keeps its weights and boundary
// tensors in the caches: on this machine 0.1-0.4 ms faster than right after the rest of the
// model). The accuracy benchmark compares this with CostModel::slice_ms.
Result<double> measure_slice_ms(const LayerGraph& lg, const std::string& device, int first,
                                int last, int warmup, int repeat,
                                const std::string& statistic = "median",
                                const std::function<Status()>& before = {});
// The same on an open device.
Result<double> measure_slice_ms(const LayerGraph& lg, Device& device, int first, int last,
                                int warmup, int repeat, const std::string& statistic = "median",
                                const std::function<Status()>& before = {});

// Per layer, the statistic ("median", "min" or "mean") of its times over the runs
// (runs[r][l]: layer l in run r), scaled so that the layers add up to the same statistic of the
// runs' sums. Per-layer medians or minimums alone do not add up: every run meets some delay (a
// preempted thread, a late worker wake-up), in a different layer each time, so their sum falls
// below the median or minimum run (resnet18 on cpu:0 of a loaded 2-core machine: its layers'
// minimums over 31 runs summed to 72 ms, while no run took less than 110 ms). The per-layer
// statistics only share a run's total out among the layers; the mean is unchanged.
std::vector<double> layer_statistics(const std::vector<std::vector<double>>& runs,
                                     const std::string& statistic);

// The error `device` adds to each layer (DeviceProfile::layer_error): every sample of `inputs`
// (one tensor per graph input) is run through the model layer by layer on `f32_device` (each
// layer compiled alone, f32), and each layer is also run on `device` (compiled alone with
// `options` and CompileOptions::keep_reduced: every reduced kernel kept) on the same f32
// inputs; layer l's error is the relative L2 of its f32 outputs over all samples
// (FidelityMeter, scheduler/fidelity.h). A layer `device` cannot compile or run, or
// whose outputs are not f32, has no error (unset). `layer_output_error[l]` is the relative L2 of
// the model's outputs when layer l's outputs are `device`'s and every layer after it runs in f32
// (each later layer that reads a changed value runs again; O(L^2) layer runs at worst per
// sample). `model_error` is the whole model compiled on each device, when both compile it.
// Errors: no samples, a sample of the wrong input count, or a layer the f32 device cannot run.
struct LayerErrors {
  std::vector<std::optional<double>> layer_error;
  std::vector<std::optional<double>> layer_output_error;
  std::optional<double> model_error;
};
Result<LayerErrors> measure_layer_errors(const LayerGraph& lg, Device& device, Device& f32_device,
                                         const std::vector<std::vector<Tensor>>& inputs,
                                         const CompileOptions& options);

// Split calibration of `layers` on `device`: for each layer, every split method with a rule for
// it (ops/split_rule.h) and every share s of `shares` (each in (0, 1)) cut the layer into pieces
// of ratios {s, 1 - s}; the first piece's graph (graph/split.h) is compiled alone, as the
// composite split device compiles it, and timed in `repeat` rounds that alternate, in a shuffled
// order, with the whole layer compiled alone (time_interleaved, after `warmup` runs of each).
// Pieces of one method that come out equal (a small extent) are timed once. A layer or piece the
// device cannot compile is left out; a failing run is an error naming it.
Result<std::vector<PieceRun>> measure_piece_runs(const LayerGraph& lg, Device& device,
                                                 const std::vector<int>& layers,
                                                 const std::vector<double>& shares, int warmup,
                                                 int repeat, const std::string& statistic,
                                                 const CompileOptions& options = {});

// The `count` layers of `times` (one per layer, unset: not measured) that take longest among
// those with a split rule for at least one method, most expensive first.
std::vector<int> split_calibration_layers(const LayerGraph& lg,
                                          const std::vector<std::optional<double>>& times,
                                          int count);

// Random inputs with the shapes and dtypes of `values` (floats in [-1, 1], integers 0).
Result<std::vector<Tensor>> make_inputs(const Graph& g, const std::vector<ValueId>& values);

}  // namespace tessera
