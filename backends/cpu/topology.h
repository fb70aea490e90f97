// CPU core sets and the clusters of this machine.
//
// A `cpu` device is bound to a CoreSet, written as in `cpu:0-3` or `cpu:0,2,4` (ranges and lists
// may mix: `cpu:0-1,4`). Clusters are the groups of cores that share a performance level: read
// from sysfs (cpu_capacity where the kernel exposes it, then cpufreq policies' related_cpus and
// maximum frequency); on machines without either, all online cores form one cluster.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::cpu {

// A sorted set of distinct logical CPU ids.
class CoreSet {
 public:
  CoreSet() = default;
  explicit CoreSet(std::vector<int> cores);

  // Parses "0-3", "0,2", "0-1,4". Ids must be < kMaxCore; the message names the bad part.
  static Result<CoreSet> parse(const std::string& spec);

  const std::vector<int>& cores() const { return cores_; }
  int size() const { return static_cast<int>(cores_.size()); }
  bool empty() const { return cores_.empty(); }
  bool contains(int core) const;
  // "0-3", "0,2", "0-1,4" (compact ranges).
  std::string to_string() const;
  bool operator==(const CoreSet& o) const { return cores_ == o.cores_; }

  static constexpr int kMaxCore = 1024;

 private:
  std::vector<int> cores_;
};

// One group of cores of equal performance.
struct Cluster {
  CoreSet cores;
  int64_t capacity = 0;      // relative capacity (cpu_capacity, else max kHz), 0 when unknown
  int64_t max_freq_khz = 0;  // cpufreq cpuinfo_max_freq, 0 when unknown
};

struct Topology {
  CoreSet online;                 // cores the OS runs on now
  CoreSet allowed;                // cores this process may run on (sched_getaffinity)
  std::vector<Cluster> clusters;  // fastest cluster first; one cluster on uniform machines
};

// Reads the topology under `sysfs_root` (normally "/sys/devices/system/cpu"; tests pass a fake
// tree). `allowed` is the process affinity mask.
Topology read_topology(const std::string& sysfs_root, const CoreSet& allowed);
// This machine's topology (read once, cached).
const Topology& machine_topology();

// The process's current affinity mask.
CoreSet process_affinity();

}  // namespace tessera::cpu
