// The profiler (seed 000 Sect. V-A): runs every layer of a LayerGraph alone on every device, at
// the device's minimum and maximum DVFS levels where a governor can set them (otherwise at the
// level the device runs at), with warm-up runs, repeats and the median; runs a transfer
// microbenchmark per device and level and fits eq. 1-2; meters dynamic power (eq. 4) where a
// sensor exists. The result is a Profile (scheduler/profile.h).
//
// A layer a device cannot run (capability, memory capacity, compile failure) is recorded as
// unsupported with the reason; a device that cannot be opened is skipped with a warning.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "energy/platform.h"
#include "graph/layer_graph.h"
#include "scheduler/profile.h"

namespace tessera {

struct ProfileOptions {
  std::vector<std::string> devices;  // backend device names; empty: every platform device
  int warmup = 1;
  int repeat = 5;
  // The statistic of the repeats: "median" (seed 000) or "min" (robust on a loaded machine,
  // where other processes only ever add time).
  std::string statistic = "median";
  bool all_levels = false;  // every DVFS level instead of the minimum and maximum
  // Transfer microbenchmark sizes in bytes (default 4 KiB to 16 MiB, x4 steps).
  std::vector<uint64_t> transfer_sizes;
  std::string sysfs_root = "/";
  // Progress callback (done, total, what); the CLI draws a bar with it.
  std::function<void(int, int, const std::string&)> progress;
  // Warnings (unreachable devices, levels that cannot be set); default: stderr.
  std::function<void(const std::string&)> warn;
};

// Profiles `lg` on the devices of `platform`. `model_name` and `model_hash` are recorded.
Result<Profile> profile_model(const LayerGraph& lg, const Platform& platform,
                              const ProfileOptions& options, const std::string& model_name,
                              const std::string& model_hash);

// Times running layers [first, last) compiled as one Program on `device` (Program::run, so the
// slice's own uploads and downloads are included): the median (or min) of `repeat` runs after
// `warmup`. The accuracy benchmark compares this with CostModel::slice_ms.
Result<double> measure_slice_ms(const LayerGraph& lg, const std::string& device, int first,
                                int last, int warmup, int repeat,
                                const std::string& statistic = "median");

// Random inputs with the shapes and dtypes of `values` (floats in [-1, 1], integers 0).
Result<std::vector<Tensor>> make_inputs(const Graph& g, const std::vector<ValueId>& values);

}  // namespace tessera
