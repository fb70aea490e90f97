// Profile: what the profiler measured for one model on the devices of one platform (seed 000
// Sect. V-A). Plain data with a versioned JSON form, so a profile measured on a board can be
// planned and simulated anywhere. The CostModel (scheduler/cost_model.h) turns it into estimates.
//
// Per device and DVFS level it holds
//   layer_chain_ms[l]   the time of layer l inside a chained run (a timed Program::run over the
//                       longest runs of layers the device supports, usually the whole model):
//                       with the caches as the previous layers leave them, without the slice's
//                       copy in and out; the statistic of the repeats, scaled so that a chain's
//                       layers add up to the statistic of its runs (layer_statistics in
//                       profiler.h); the repeats are spread over the device's calibration
//                       runs, each slot after a plain run of the chain. Unset where the backend
//                       cannot time layers in a run; then
//   layer_ms[l]         the median time of layer l compiled and run alone (Program::run, which
//                       includes the layer's own upload/download: the "total cost" of seed 000
//                       Sect. V-B) is used. Unset in both: the layer was not measured (the cost
//                       model then estimates it by regression);
//   slice_runs          calibration runs: random slices [first, last) compiled as one program
//                       and timed whole, on which the cost model fits the per-slice overhead;
//                       where the backend times layers inside a run, each also records the
//                       sum of its layers' times in the same runs, so that the overhead (launch,
//                       copy and layout conversion of the boundary tensors) is measured directly,
//                       and the same layers' sum in the chain runs right before (chain_ms), which
//                       the cost model's cold_scale is fitted against;
//   piece_runs          split calibration (seed 004's "database", docs/split.md): for the
//                       heaviest layers with a split rule, one piece of the layer per split
//                       method and share (a program of the piece graph, graph/split.h) timed
//                       alone, interleaved with the whole layer timed alone the same way, so the
//                       ratio ms / whole_ms is what the piece costs relative to its layer on
//                       this device; the cost model corrects its FLOP/byte regression with it;
//   layer_dynamic_w[l]  dynamic power of layer l (eq. 4) where a power meter exists;
//   upload, download    the transfer microbenchmark and its least-squares fit (eq. 1-2).
// Per device, `unsupported` names the layers it cannot run (op support, memory), each with why:
// their cost is infinite (seed 000 Sect. V-A).
//
// Per device that computes in reduced precision (a precision level such as `cpu#int8`,
// docs/precision.md), `layer_error[l]` is the error that level adds to layer l: the relative L2
// ||y - y_f32|| / ||y_f32|| of the layer's outputs run at that level against the same layer run
// in f32, on the same f32 inputs (the layer's real inputs, from an f32 run of the model on the
// profile's inputs), over all of them; `layer_output_error[l]` is the relative L2 of the
// model's outputs when layer l alone runs at that level and every other layer in f32 (its error
// as it reaches the outputs, amplified or damped by the layers after it); `model_error` is the
// same measure for the whole model run at that level, when it runs there whole. All are
// empty/absent for f32 devices (no error).
// scheduler/error_budget.h composes them into a plan's expected error.
//
// JSON (version 3): {"format": "tessera-profile", "version": 3, "model": {...name, hash, layers
// [{name, op, flops, input_bytes, weight_bytes, output_bytes}], cut_live_bytes}, "platform":
// <platform JSON>, "conditions": {...}, "devices": [{"device", "description", "memory_bytes",
// "unsupported": {"<layer>": "why"}, optional "corun_scale", optional "layer_error": [..|null],
// optional "layer_output_error": [..|null], optional "model_error", "levels": [{"mhz",
// "set_by_governor",
// "energy_source", "layer_ms": [..|null], "layer_chain_ms": [..|null], "layer_dynamic_w":
// [..|null], "slice_runs": [[first, last, ms(, layers_ms(, chain_ms))]..], optional "piece_runs":
// [{"layer", "method", "flops", "bytes", "ms", "whole_ms"}..], "upload": {fit},
// "download": {fit}}]}]}. (layers_ms and chain_ms, the fourth and fifth elements, are optional:
// profiles without them still load.) Version 2 (no layer_error) still loads. Version 1 (layers
// timed alone only) is refused: its times underpredict chained runs. Loading refuses other
// formats/versions, a model hash other than the expected one, negative or non-finite times, lengths
// that disagree with the layer count, and devices the embedded platform does not list; every
// message names the field.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "energy/platform.h"
#include "graph/layer_graph.h"

namespace tessera {

// A least-squares line ms = alpha * bytes + beta over measured (bytes, ms) points (eq. 1-2).
struct TransferFit {
  double alpha_ms_per_byte = 0;
  double beta_ms = 0;
  double r2 = 0;
  std::vector<std::pair<uint64_t, double>> points;  // bytes, median ms; sorted by bytes

  // Cost of moving `tensors` tensors totalling `bytes`, each of bytes / tensors. Where the
  // sweep's points are kept (sorted by size), each tensor is priced on them: linear
  // interpolation between the two sizes around it, the smallest point's time below them, the
  // last segment's slope above. A memory hierarchy makes the cost per byte grow with the size
  // (a CPU copy that fits the L2 runs 3-4x faster per byte than one from DRAM), which one line
  // through 4 KiB-16 MiB prices by its largest sizes. Without points: eq. 1-2, alpha * bytes +
  // beta per tensor.
  double ms(uint64_t bytes, int tensors = 1) const {
    if (tensors <= 0) return 0;
    if (points.size() < 2) {
      return alpha_ms_per_byte * static_cast<double>(bytes) + beta_ms * tensors;
    }
    return tensors * measured_ms(static_cast<double>(bytes) / tensors);
  }
  // The points' cost of one tensor of `bytes` (see ms()); points must be sorted by size.
  double measured_ms(double bytes) const;
  // Sorts the points by size (stable: repeats of one size keep their order).
  void sort_points();
  // Fits alpha and beta to `points` (at least two distinct sizes), and R^2.
  static Result<TransferFit> fit(std::vector<std::pair<uint64_t, double>> points);
};

// One calibration run: layers [first, last) compiled as one program, median (or min) ms.
struct SliceRun {
  int first = 0;
  int last = 0;
  double ms = 0;
  // The same statistic of the sum of the slice's layer times inside those runs (run_timed), so
  // ms - layers_ms is what the slice costs beyond its layers; 0 when the backend cannot time
  // layers inside a run.
  double layers_ms = 0;
  // The same statistic of the sum of the slice's layers inside the untimed-for-the-slice chain
  // runs that preceded its timed runs, one each (the rest of the model, timed layer by layer):
  // what the same layers took in a chain at the same moments, so layers_ms / chain_ms is how
  // much slower they run cold, free of any drift of the machine's speed during profiling. 0 when
  // not recorded.
  double chain_ms = 0;
};

// One split calibration run: a piece of layer `layer` cut by split method `method` (its name,
// ops/split_rule.h), of `flops` and `bytes` (activations read + weights + activations written),
// timed alone (`ms`) in rounds alternating with the whole layer timed alone (`whole_ms`).
struct PieceRun {
  int layer = 0;
  std::string method;
  double flops = 0;
  double bytes = 0;
  double ms = 0;
  double whole_ms = 0;
};

struct LevelProfile {
  int mhz = 0;                   // 0: the frequency is unknown (no DVFS control or reading)
  bool set_by_governor = false;  // the governor put the device at mhz; else it ran as it was
  std::string energy_source;     // the meter used; "" when power was not measured
  std::vector<std::optional<double>> layer_ms;         // alone, transfers included
  std::vector<std::optional<double>> layer_chain_ms;   // in a chained run; empty or one per layer
  std::vector<std::optional<double>> layer_dynamic_w;  // empty, or one per layer
  std::vector<SliceRun> slice_runs;
  std::vector<PieceRun> piece_runs;  // empty: the layers' splits were not calibrated
  TransferFit upload;
  TransferFit download;
};

inline constexpr double kMaxCorunScale = 100;
// The largest relative error a profile may record (a result 1e6 times the size of the f32 one
// means the level does not compute the layer at all).
inline constexpr double kMaxLayerError = 1e6;

struct DeviceProfile {
  std::string device;
  std::string description;
  uint64_t memory_bytes = 0;
  std::map<int, std::string> unsupported;  // layer index -> why it cannot run here
  std::vector<LevelProfile> levels;        // ascending mhz
  // The co-run factor: how much slower the device's chains ran while every other profiled
  // device ran its own chains at the same time (sharing caches and memory bandwidth, as the
  // stages of a pipeline do), the statistic of the co-run runs over that of the runs alone
  // alternated with them; at least 1. 0: not measured (one device profiled, or an older
  // profile). Measured at the level the device was left at, used for all of its levels. At most
  // kMaxCorunScale (more means the devices were time-sliced on shared cores).
  double corun_scale = 0;
  // The relative L2 error each layer gets from this device's arithmetic (see above): empty, or
  // one per layer (unset: not measured, e.g. the layer cannot run here). At most kMaxLayerError.
  std::vector<std::optional<double>> layer_error;
  // The relative L2 error of the model's outputs with layer l alone on this device (see above):
  // empty (a profile made before it was measured), or one per layer. At most kMaxLayerError.
  std::vector<std::optional<double>> layer_output_error;
  // The whole model's relative L2 error on this device; unset when not measured.
  std::optional<double> model_error;

  const LevelProfile* level(int mhz) const;
};

struct ProfileLayer {
  std::string name;
  std::string op;
  double flops = 0;
  uint64_t input_bytes = 0;
  uint64_t weight_bytes = 0;
  uint64_t output_bytes = 0;
};

struct ProfileConditions {
  int threads = 1;
  int repeat = 0;
  int warmup = 0;
  std::string statistic = "median";  // of the repeats: median, min or mean
  std::string date;                  // ISO 8601, UTC
  std::string host;
  std::string tessera_version;
  double profiling_seconds = 0;
};

struct Profile {
  static constexpr int kVersion = 3;
  static constexpr int kOldestVersion = 2;  // still read

  std::string model_name;
  std::string model_hash;
  std::vector<ProfileLayer> layers;
  std::vector<uint64_t> cut_live_bytes;  // num_layers + 1
  Platform platform;
  ProfileConditions conditions;
  std::vector<DeviceProfile> devices;

  int num_layers() const { return static_cast<int>(layers.size()); }
  const DeviceProfile* find(const std::string& device) const;

  // Fills name/op/cost of every layer and the live bytes at every cut from `lg`.
  void describe_model(const LayerGraph& lg);
  // Checks that `lg` is the model profiled (same layer count, names and ops); names the layer.
  Status check_matches(const LayerGraph& lg) const;

  std::string to_json_text() const;
  Status save(const std::string& path) const;
  // `expected_hash`: when not empty, the profile must be of the model with that hash.
  static Result<Profile> from_json_text(const std::string& text, const std::string& origin,
                                        const std::string& expected_hash = "");
  static Result<Profile> load(const std::string& path, const std::string& expected_hash = "");
};

// "fnv1a64:<16 hex digits>" of the bytes of a file (the model hash a profile records).
Result<std::string> model_file_hash(const std::string& path);
std::string bytes_hash(const void* data, size_t size);

}  // namespace tessera
