#include "energy/governor.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "energy/sysfs.h"

namespace tessera {

Governor::Governor(std::string root, const PlatformDevice& device)
    : root_(std::move(root)), device_(device.device) {
  if (!device.cpufreq_policy.empty()) {
    const std::string dir =
        sysfs::join(root_, "sys/devices/system/cpu/cpufreq/" + device.cpufreq_policy);
    if (sysfs::exists(dir)) {
      dir_ = dir;
      cpufreq_ = true;
    }
  } else if (!device.devfreq.empty()) {
    const std::string dir = sysfs::join(root_, "sys/class/devfreq/" + device.devfreq);
    if (sysfs::exists(dir)) dir_ = dir;
  }
}

Governor::~Governor() {
  Status s = restore();
  if (!s.ok()) {
    std::fprintf(stderr, "warning: %s: could not restore the frequency settings: %s\n",
                 device_.c_str(), s.to_string().c_str());
  }
}

namespace {

// The listed frequencies in the domain's own unit (kHz for cpufreq, Hz for devfreq).
std::vector<int64_t> available_native(const std::string& dir, bool cpufreq) {
  if (dir.empty()) return {};
  auto freqs = sysfs::read_ints(
      dir + (cpufreq ? "/scaling_available_frequencies" : "/available_frequencies"));
  if (!freqs.ok()) return {};
  std::vector<int64_t> out = *freqs;
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace

std::vector<int> Governor::available_mhz() const {
  std::vector<int> out;
  for (int64_t f : available_native(dir_, cpufreq_)) {
    out.push_back(static_cast<int>(cpufreq_ ? f / 1000 : f / 1000000));
  }
  return out;
}

Status Governor::write(const std::string& file, const std::string& value) {
  const std::string path = dir_ + "/" + file;
  auto old = sysfs::read_string(path);
  RETURN_IF_ERROR(sysfs::write_string(path, value));
  if (old.ok() && std::find_if(saved_.begin(), saved_.end(),
                               [&](const auto& p) { return p.first == path; }) == saved_.end()) {
    saved_.emplace_back(path, *old);
  }
  return Status();
}

Status Governor::set_mhz(int mhz) {
  if (dir_.empty()) {
    return failed_precondition("device '" + device_ +
                               "' has no cpufreq policy or devfreq device on this machine");
  }
  // Snap to the nearest listed frequency, in the domain's unit.
  int64_t scaled = cpufreq_ ? int64_t{mhz} * 1000 : int64_t{mhz} * 1000000;
  const std::vector<int64_t> avail = available_native(dir_, cpufreq_);
  if (!avail.empty()) {
    const int64_t want = scaled;
    scaled = *std::min_element(avail.begin(), avail.end(), [&](int64_t a, int64_t b) {
      return std::llabs(a - want) < std::llabs(b - want);
    });
  }
  const std::string value = std::to_string(scaled);
  const std::string governors_file =
      cpufreq_ ? "/scaling_available_governors" : "/available_governors";
  const std::string governor_file = cpufreq_ ? "scaling_governor" : "governor";
  const std::string setspeed_file = cpufreq_ ? "scaling_setspeed" : "userspace/set_freq";
  const std::string governors = sysfs::value_or(sysfs::read_string(dir_ + governors_file), "");
  if (governors.find("userspace") != std::string::npos) {
    RETURN_IF_ERROR(write(governor_file, "userspace"));
    return write(setspeed_file, value);
  }
  // No userspace governor: pin the range. Order the writes so min never exceeds max.
  const std::string min_file = cpufreq_ ? "scaling_min_freq" : "min_freq";
  const std::string max_file = cpufreq_ ? "scaling_max_freq" : "max_freq";
  auto cur_min = sysfs::read_int(dir_ + "/" + min_file);
  if (cur_min.ok() && *cur_min > scaled) {
    RETURN_IF_ERROR(write(min_file, value));
    return write(max_file, value);
  }
  RETURN_IF_ERROR(write(max_file, value));
  return write(min_file, value);
}

Status Governor::restore() {
  Status first;
  // Restore limits in an order that always leaves min <= max: max first when raising it.
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    Status s = sysfs::write_string(it->first, it->second);
    if (!s.ok() && first.ok()) first = s;
  }
  saved_.clear();
  return first;
}

bool set_level_or_warn(Governor& governor, const std::string& device, int mhz) {
  Status s = governor.set_mhz(mhz);
  if (s.ok()) return true;
  std::fprintf(stderr, "warning: %s stays at its current frequency (cannot set %d MHz): %s\n",
               device.c_str(), mhz, s.to_string().c_str());
  return false;
}

}  // namespace tessera
