// CutProfile: what a remote hop at each cut of a model costs and loses, per bitwidth (seed 002
// Sect. 3.4, "d_<s,c> and Acc_<s,c>"; wave2-spec Sect. 2.3). Device-independent apart from the
// pack and unpack times, and profiled once per model, it is the input the `offload` planner
// (scheduler/planners/offload.h) and the pricer (packed hops, scheduler/pricer.h) read.
//
// For every candidate cut k (the client runs layers [0, k), the server [k, L)) the tensors live
// across it are sent, skip connections included, each once (LayerGraph::cut(k).live); f32 ones
// are packed with the codec (backends/remote/packing.h, isq<b>+bitshuffle+lz4), others go raw.
// Per (cut, bits):
//   bytes_mean, bytes_p95   packed bytes of the whole cut per frame, the codec's headers (side
//                           information: min, scale, shape, bits) included;
//   pack_ms, unpack_ms      medians over the frames, one thread;
//   top1, rel_l2            fidelity against the f32 run (scheduler/fidelity.h) of the model's
//                           outputs when the tail [k, L) runs on the unpacked tensors, over the
//                           "choose" inputs (what a planner may select bitwidths on);
//   report_top1, report_rel_l2
//                           the same over the "report" inputs, held apart from the choose set
//                           (seed 002 pitfall 4: fidelity tuned on the inputs it is reported on).
// Tessera's test models have random weights: this is fidelity to the f32 model, not accuracy.
//
// JSON: {"format": "tessera-cut-profile", "version": 1, "model": {"name", "hash", "layers"},
//        "device", "choose_inputs", "report_inputs", "date", "cuts": [k..], "relu": [0|1..],
//        "bits": [b..], "entries": [{"cut", "bits", "bytes_mean", "bytes_p95", "pack_ms",
//        "unpack_ms", "top1", "rel_l2", "report_top1", "report_rel_l2"}..]}
// Loading checks every field (ranges, one entry per cut and bitwidth) and names the bad one.
//
// Thread rule: plain data; measure_cut_profile uses the device it is given and nothing else, so
// calls on different devices may run at once.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backends/device.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/layer_graph.h"

namespace tessera {

// Whether every f32 tensor live across cut k is the output of a ReLU or a clip (ReLU6), alone or
// fused: seed 002's search-space heuristic keeps only these cuts. False for a cut with no f32
// tensor and for the model's inputs (k = 0).
bool cut_is_relu(const LayerGraph& lg, int k);

struct CutBits {
  int cut = 0;
  int bits = 0;  // 2..8 or 16
  double bytes_mean = 0;
  double bytes_p95 = 0;
  double pack_ms = 0;
  double unpack_ms = 0;
  double top1 = 1;
  double rel_l2 = 0;
  double report_top1 = 1;
  double report_rel_l2 = 0;
  bool operator==(const CutBits&) const = default;
};

struct CutProfile {
  static constexpr int kVersion = 1;

  std::string model_name;
  std::string model_hash;
  int num_layers = 0;
  std::string device;  // where pack, unpack and the f32 runs were measured
  int choose_inputs = 0;
  int report_inputs = 0;
  std::string date;
  std::vector<int> cuts;         // ascending, 0..num_layers - 1
  std::vector<char> relu;        // per cut: cut_is_relu
  std::vector<int> bits;         // ascending
  std::vector<CutBits> entries;  // cuts.size() x bits.size(), cut-major

  // The entry of (cut, bits), or null when it was not profiled.
  const CutBits* find(int cut, int bits) const;
  // Checks the structure (sizes, ranges, the entries' order) against a model of `num_layers`.
  Status validate(int num_layers) const;

  std::string to_json_text() const;
  Status save(const std::string& path) const;
  static Result<CutProfile> from_json_text(const std::string& text, const std::string& origin);
  static Result<CutProfile> load(const std::string& path);
  bool operator==(const CutProfile&) const = default;
};

struct CutProfileOptions {
  std::vector<int> cuts;  // empty: every cut 0..L-1
  std::vector<int> bits = {2, 3, 4, 5, 6, 7, 8, 16};
  // The first `choose_inputs` frames form the choose set, the rest the report set (at least one
  // each).
  int choose_inputs = 1;
};

// Runs the model on `device` for every frame of `inputs` (each the model's inputs in order): the
// f32 reference, then at every cut and bitwidth packs and unpacks the live tensors and runs the
// tail [k, L) on them. Costs one tail run per (frame, cut, bitwidth).
Result<CutProfile> measure_cut_profile(const LayerGraph& lg, Device& device,
                                       std::span<const std::vector<Tensor>> inputs,
                                       const CutProfileOptions& options);

}  // namespace tessera
