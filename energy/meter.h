// Energy meters and frequency readers over Linux sysfs, and external power traces.
//
// Readers (each takes the sysfs `root`, "/" on a real machine, a fixture tree in tests):
//   RAPL     <root>/sys/class/powercap/<zone>/{name,energy_uj,max_energy_range_uj}: a cumulative
//            energy counter in microjoules that wraps at max_energy_range_uj.
//   hwmon    <root>/sys/class/hwmon/hwmonN/{name, powerK_input (uW), inK_input (mV),
//            currK_input (mA), *_label}: a channel is a power channel when it has powerK_input or
//            both inK_input and currK_input (INA3221 under the mainline driver, JetPack 5: in1-3
//            bus voltages, curr1-3 currents, labelled VDD_IN, VDD_CPU_GPU_CV...).
//   INA3221x <root>/sys/bus/i2c/drivers/ina3221x/<bus-addr>/iio:deviceN/{rail_name_K,
//            in_power K_input (mW), in_voltageK_input (mV), in_currentK_input (mA)}: the
//            NVIDIA downstream driver of Jetson TX2 / AGX Xavier (L4T 28-32).
//   cpufreq  <root>/sys/devices/system/cpu/cpufreq/<policy>/scaling_cur_freq (kHz)
//   devfreq  <root>/sys/class/devfreq/<name>/cur_freq (Hz)
//   traces   CSV of time, volts, amps from an external monitor (Monsoon), aligned to a run.
//
// An EnergyMeter measures the energy of a stretch of work. make_meter() picks a real sensor when
// the machine has one for the device; otherwise it returns a meter that *models* the energy with
// the power model (eq. 4-5) and says so (measured() is false).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "energy/platform.h"

namespace tessera {

// ---- RAPL ----

struct RaplZone {
  std::string dir;   // the zone directory
  std::string name;  // "package-0", "core", "dram", "psys"...
  uint64_t max_range_uj = 0;
};
// Zones with an energy_uj counter, sorted by directory; top-level zones only unless `subzones`.
std::vector<RaplZone> find_rapl_zones(const std::string& root, bool subzones = false);
Result<uint64_t> read_energy_uj(const RaplZone& zone);
// after - before, allowing for one wrap of the counter at max_range_uj.
uint64_t rapl_delta_uj(uint64_t before, uint64_t after, uint64_t max_range_uj);

// ---- hwmon / INA3221 ----

struct PowerChannel {
  std::string chip;          // hwmon "name" (e.g. "ina3221") or the iio device directory
  std::string label;         // rail label (VDD_IN...), or chip:index when unlabelled
  std::string power_path;    // direct power reading, or empty
  double power_scale = 0;    // to watts: 1e-6 for hwmon uW, 1e-3 for ina3221x mW
  std::string voltage_path;  // mV
  std::string current_path;  // mA
};
std::vector<PowerChannel> find_power_channels(const std::string& root);
// Watts now: the power file, or volts * amps.
Result<double> read_power_w(const PowerChannel& ch);
// Volts and amps of a channel that has them.
Result<double> read_voltage_v(const PowerChannel& ch);
Result<double> read_current_a(const PowerChannel& ch);

// ---- frequencies ----

Result<int> cpufreq_current_mhz(const std::string& root, const std::string& policy);
Result<int> devfreq_current_mhz(const std::string& root, const std::string& devfreq);
// The current frequency of a platform device from whichever of the two it names.
Result<int> current_mhz(const std::string& root, const PlatformDevice& d);

// ---- external power traces ----

struct PowerSample {
  double t_s = 0;
  double volts = 0;
  double amps = 0;
  double watts() const { return volts * amps; }
};

class PowerTrace {
 public:
  // Columns time, volts, amps in that order (seconds, V, A) without a header; with a header the
  // columns are found by name ("time", "volt", "current"/"amp"/"main(ma)") and "(ms)"/"(mA)"
  // units are honoured, as in Monsoon exports. Times must ascend; the message names the line.
  static Result<PowerTrace> parse_csv(const std::string& text, const std::string& origin);
  static Result<PowerTrace> load_csv(const std::string& path);

  const std::vector<PowerSample>& samples() const { return samples_; }
  double start_s() const { return samples_.front().t_s; }
  double end_s() const { return samples_.back().t_s; }
  // Energy in joules between t0 and t1 (trace time), trapezoidal, interpolated at the ends.
  double energy_j(double t0, double t1) const;
  double average_power_w(double t0, double t1) const;
  // The first time the power rises above the median of the first `idle_s` seconds by more than
  // `threshold_w`: where a run starts when the monitor was started before it.
  Result<double> detect_start(double idle_s, double threshold_w) const;
  // Energy of a run of `duration_s` starting at `offset_s` trace time (negative: detect it).
  Result<double> run_energy_j(double offset_s, double duration_s) const;

 private:
  double power_at(double t) const;
  std::vector<PowerSample> samples_;
};

// ---- meters ----

struct EnergyReading {
  double joules = 0;
  double seconds = 0;
  bool measured = false;  // false: modelled with the power model
  std::string source;     // "rapl:package-0", "hwmon:VDD_SYS_GPU", "modelled: ..."
  double watts() const { return seconds > 0 ? joules / seconds : 0; }
};

class EnergyMeter {
 public:
  virtual ~EnergyMeter() = default;
  virtual bool measured() const = 0;
  virtual std::string source() const = 0;
  virtual Status begin() = 0;
  virtual Result<EnergyReading> end() = 0;
};

// Sums the top-level RAPL zones (packages, psys skipped when packages exist).
std::unique_ptr<EnergyMeter> make_rapl_meter(std::vector<RaplZone> zones);
// Samples a power channel on a background thread every `period_us` and integrates.
std::unique_ptr<EnergyMeter> make_hwmon_meter(PowerChannel channel, int period_us = 1000);
// Energy = power_w(device, level, dynamic_at_max_w) * elapsed time (eq. 4-5).
std::unique_ptr<EnergyMeter> make_modelled_meter(const PlatformDevice& device, int level,
                                                 double dynamic_at_max_w = -1);
// The best meter for `device`: its power_rail channel, else RAPL for cpu/reference devices,
// else modelled.
std::unique_ptr<EnergyMeter> make_meter(const std::string& root, const PlatformDevice& device,
                                        int level);

}  // namespace tessera
