// Frequency governors: put a device at a DVFS level through Linux cpufreq or devfreq.
//
//   cpufreq  <root>/sys/devices/system/cpu/cpufreq/<policy>/: the `userspace` governor and
//            scaling_setspeed (kHz) where available, otherwise scaling_min_freq = scaling_max_freq.
//   devfreq  <root>/sys/class/devfreq/<name>/: the `userspace` governor and userspace/set_freq
//            (Hz) where available, otherwise min_freq = max_freq.
//
// Writing these files needs privileges most runs do not have. A refused write is a
// FailedPrecondition naming the file; set_level_or_warn() turns it into one warning on stderr and
// lets the caller go on at whatever frequency the device runs (the plan still runs). A Governor
// restores the governor and limits it changed when it is destroyed.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "energy/platform.h"

namespace tessera {

class Governor {
 public:
  Governor(std::string root, const PlatformDevice& device);
  ~Governor();
  Governor(const Governor&) = delete;
  Governor& operator=(const Governor&) = delete;

  // Whether the device names a frequency domain that exists under root.
  bool has_domain() const { return !dir_.empty(); }
  // The frequencies (MHz, ascending) the domain lists, empty when unknown.
  std::vector<int> available_mhz() const;
  // Sets the domain to the listed frequency nearest `mhz`. FailedPrecondition when the device has
  // no frequency domain or a write is refused.
  Status set_mhz(int mhz);
  // Puts back every file this Governor changed, newest change first.
  Status restore();

 private:
  Status write(const std::string& file, const std::string& value);
  std::string root_;
  std::string device_;
  bool cpufreq_ = false;
  std::string dir_;  // the policy or devfreq directory, empty when none
  std::vector<std::pair<std::string, std::string>> saved_;  // file, original contents
};

// Sets the level; on failure prints "warning: <device> stays at its current frequency: <why>"
// to stderr and returns false.
bool set_level_or_warn(Governor& governor, const std::string& device, int mhz);

}  // namespace tessera
