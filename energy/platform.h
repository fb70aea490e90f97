// Platform: the compute devices of one board, with their frequency/voltage (DVFS) tables and
// power figures. Plain data: loaded from a platform JSON, detected on the running machine, or
// written back out; planners and the simulator read it, nothing here runs a model.
//
// The platform JSON format (version 1; docs/platform-format.md has the full description):
//
//   {
//     "format": "tessera-platform", "version": 1,
//     "name": "hikey970", "description": "HiKey 970 (Kirin 970)",
//     "sources": {"kirin970": "seed 000 Sect. III, Table II", ...},   // references by key
//     "devices": [
//       { "id": "big",                 // short unique label (seed 000 B, L, G, N)
//         "kind": "cpu",               // cpu | gpu | npu | reference | remote
//         "device": "cpu:4-7",         // the backend device name it is opened by
//         "cores": [4, 5, 6, 7],       // CPU cores it runs on (may be empty)
//         "memory_bytes": 6442450944,  // capacity for weights + activations
//         "dvfs": [ {"mhz": 682, "mv": 700, "static_w": 0.05}, ... ],  // ascending MHz
//         "dynamic_w": 2.2,            // dynamic power at the top level, typical CNN load
//         "cpufreq_policy": "policy4", // optional: sysfs frequency domain for meters/governors
//         "devfreq": "",               // optional: /sys/class/devfreq/<name>
//         "power_rail": "",            // optional: hwmon/INA3221 channel label metering it
//         "sources": {"dvfs": "seed 000 Table II", "dynamic_w": "estimate: ..."} } ] }
//
// Rules the loader enforces (each violation names the field): the version is 1; at least one
// device; ids and device names unique; every DVFS table non-empty with strictly ascending MHz;
// a single-level table may give mhz 0 (fixed, unknown frequency); mv is either given (> 0) for
// every level or 0 ("unknown") for every level; powers >= 0 and below 1 kW; memory > 0.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera {

// One voltage/frequency operating point.
struct DvfsLevel {
  int mhz = 0;          // 0 only for a single fixed level of unknown frequency
  int mv = 0;           // 0 when the voltage is unknown
  double static_w = 0;  // static (leakage + idle) power at this level, watts
};

struct PlatformDevice {
  std::string id;
  std::string kind;
  std::string device;
  std::vector<int> cores;
  uint64_t memory_bytes = 0;
  std::vector<DvfsLevel> dvfs;  // ascending by mhz, never empty
  double dynamic_w = 0;         // dynamic power at dvfs.back(), watts
  std::string cpufreq_policy;
  std::string devfreq;
  std::string power_rail;
  std::map<std::string, std::string> sources;  // field -> where the figure comes from

  const DvfsLevel& max_level() const { return dvfs.back(); }
  const DvfsLevel& min_level() const { return dvfs.front(); }
  // The index of the level at `mhz`, or NotFound naming the device and the levels it has.
  Result<int> level_index(int mhz) const;
};

struct Platform {
  static constexpr int kVersion = 1;

  std::string name;
  std::string description;
  std::map<std::string, std::string> sources;
  std::vector<PlatformDevice> devices;

  // Parses and validates a platform JSON document; `origin` names it in messages.
  static Result<Platform> from_json_text(const std::string& text, const std::string& origin);
  static Result<Platform> load(const std::string& path);
  // A platform file, or a shipped board by name ("jetson_tx2", see shipped_platform_dir()) when
  // no file of that name exists.
  static Result<Platform> load_file_or_board(const std::string& path_or_board);
  std::string to_json_text() const;
  Status save(const std::string& path) const;

  // Builds the description of the machine it runs on: CPU frequency domains from
  // <root>/sys/devices/system/cpu (cpufreq policies, online CPUs, topology) and every device the
  // backend registry lists. Core-set devices are named as `tessera devices` names them: one per
  // cluster (cores of different cpu_capacity or maximum frequency, split by frequency domain),
  // and on a uniform machine of 2-8 cores one per core (`cpu:0`, `cpu:1`, ...) beside the
  // whole-cpu `cpu`. Figures that cannot be read (voltages, power) are marked unknown or
  // placeholder in `sources`. `root` is "/" except in tests (where every online core counts as
  // allowed; on "/" only those of the process affinity).
  static Platform detect(const std::string& root = "/");

  // The device with backend name `device` (or id), or null.
  const PlatformDevice* find(const std::string& device) const;
};

// The board descriptions shipped in energy/platforms/ (by file stem: hikey970, jetson_tx2,
// jetson_agx_xavier, raspberry_pi3), looked up next to the source tree or installed data.
std::string shipped_platform_dir();

}  // namespace tessera
