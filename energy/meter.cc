#include "energy/meter.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "energy/power_model.h"
#include "energy/sysfs.h"

namespace tessera {

// ---- RAPL ----

std::vector<RaplZone> find_rapl_zones(const std::string& root, bool subzones) {
  std::vector<RaplZone> zones;
  const std::string base = sysfs::join(root, "sys/class/powercap");
  for (const std::string& entry : sysfs::list_dir(base)) {
    // intel-rapl:0 is a package zone, intel-rapl:0:1 a subzone; intel-rapl itself is the control
    // type directory without a counter.
    const size_t colons = static_cast<size_t>(std::count(entry.begin(), entry.end(), ':'));
    if (colons == 0 || (!subzones && colons > 1)) continue;
    const std::string dir = base + "/" + entry;
    if (!sysfs::exists(dir + "/energy_uj")) continue;
    RaplZone z;
    z.dir = dir;
    z.name = sysfs::value_or(sysfs::read_string(dir + "/name"), entry);
    auto range = sysfs::read_int(dir + "/max_energy_range_uj");
    z.max_range_uj = range.ok() && *range > 0 ? static_cast<uint64_t>(*range) : 0;
    zones.push_back(std::move(z));
  }
  return zones;
}

Result<uint64_t> read_energy_uj(const RaplZone& zone) {
  ASSIGN_OR_RETURN(int64_t v, sysfs::read_int(zone.dir + "/energy_uj"));
  if (v < 0) return invalid_argument(zone.dir + "/energy_uj: negative counter");
  return static_cast<uint64_t>(v);
}

uint64_t rapl_delta_uj(uint64_t before, uint64_t after, uint64_t max_range_uj) {
  if (after >= before) return after - before;
  // The counter wrapped: it counts up to max_range_uj and restarts at 0.
  if (max_range_uj == 0 || before > max_range_uj) return after;
  return (max_range_uj - before) + after + 1;
}

// ---- hwmon / INA3221 ----

namespace {

// Splits "power3_input" into ("power", 3, "input").
bool split_attr(const std::string& f, std::string* type, int* index, std::string* item) {
  size_t i = 0;
  while (i < f.size() && std::isalpha(static_cast<unsigned char>(f[i]))) ++i;
  size_t j = i;
  while (j < f.size() && std::isdigit(static_cast<unsigned char>(f[j]))) ++j;
  if (i == 0 || j == i || j >= f.size() || f[j] != '_') return false;
  *type = f.substr(0, i);
  *index = std::stoi(f.substr(i, j - i));
  *item = f.substr(j + 1);
  return true;
}

}  // namespace

std::vector<PowerChannel> find_power_channels(const std::string& root) {
  std::vector<PowerChannel> out;
  // Mainline hwmon (including the ina3221 driver).
  const std::string hwmon = sysfs::join(root, "sys/class/hwmon");
  for (const std::string& entry : sysfs::list_dir(hwmon)) {
    std::string dir = hwmon + "/" + entry;
    // Some drivers keep the attributes under device/.
    if (!sysfs::exists(dir + "/name") && sysfs::exists(dir + "/device/name")) dir += "/device";
    const std::string chip = sysfs::value_or(sysfs::read_string(dir + "/name"), entry);
    struct Ch {
      std::string power, in, curr, label;
    };
    std::map<int, Ch> chans;
    for (const std::string& f : sysfs::list_dir(dir)) {
      std::string type, item;
      int idx = 0;
      if (!split_attr(f, &type, &idx, &item)) continue;
      Ch& c = chans[idx];
      if (item == "label" && (type == "power" || type == "in" || type == "curr")) {
        if (c.label.empty()) c.label = sysfs::value_or(sysfs::read_string(dir + "/" + f), "");
      } else if (item == "input" && type == "power") {
        c.power = dir + "/" + f;
      } else if (item == "input" && type == "in") {
        c.in = dir + "/" + f;
      } else if (item == "input" && type == "curr") {
        c.curr = dir + "/" + f;
      }
    }
    for (const auto& [idx, c] : chans) {
      if (c.power.empty() && (c.in.empty() || c.curr.empty())) continue;
      PowerChannel ch;
      ch.chip = chip;
      ch.label = c.label.empty() ? chip + ":" + std::to_string(idx) : c.label;
      ch.power_path = c.power;
      ch.power_scale = 1e-6;
      if (!c.in.empty() && !c.curr.empty()) {
        ch.voltage_path = c.in;
        ch.current_path = c.curr;
      }
      out.push_back(std::move(ch));
    }
  }
  // NVIDIA's downstream ina3221x iio driver (Jetson TX2, AGX Xavier on L4T 28-32).
  const std::string drv = sysfs::join(root, "sys/bus/i2c/drivers/ina3221x");
  for (const std::string& dev : sysfs::list_dir(drv)) {
    for (const std::string& iio : sysfs::list_dir(drv + "/" + dev)) {
      if (iio.rfind("iio:device", 0) != 0) continue;
      const std::string dir = drv + "/" + dev + "/" + iio;
      for (int k = 0; k < 8; ++k) {
        const std::string n = std::to_string(k);
        const std::string power = dir + "/in_power" + n + "_input";
        const std::string volt = dir + "/in_voltage" + n + "_input";
        const std::string curr = dir + "/in_current" + n + "_input";
        if (!sysfs::exists(power) && !(sysfs::exists(volt) && sysfs::exists(curr))) continue;
        PowerChannel ch;
        ch.chip = "ina3221x:" + dev;
        ch.label = sysfs::value_or(sysfs::read_string(dir + "/rail_name_" + n), ch.chip + ":" + n);
        if (sysfs::exists(power)) ch.power_path = power;
        ch.power_scale = 1e-3;
        if (sysfs::exists(volt) && sysfs::exists(curr)) {
          ch.voltage_path = volt;
          ch.current_path = curr;
        }
        out.push_back(std::move(ch));
      }
    }
  }
  return out;
}

Result<double> read_voltage_v(const PowerChannel& ch) {
  if (ch.voltage_path.empty()) return not_found("channel " + ch.label + " has no voltage");
  ASSIGN_OR_RETURN(int64_t mv, sysfs::read_int(ch.voltage_path));
  return static_cast<double>(mv) * 1e-3;
}

Result<double> read_current_a(const PowerChannel& ch) {
  if (ch.current_path.empty()) return not_found("channel " + ch.label + " has no current");
  ASSIGN_OR_RETURN(int64_t ma, sysfs::read_int(ch.current_path));
  return static_cast<double>(ma) * 1e-3;
}

Result<double> read_power_w(const PowerChannel& ch) {
  if (!ch.power_path.empty()) {
    ASSIGN_OR_RETURN(int64_t p, sysfs::read_int(ch.power_path));
    if (p < 0) return invalid_argument(ch.power_path + ": negative power");
    return static_cast<double>(p) * ch.power_scale;
  }
  ASSIGN_OR_RETURN(double v, read_voltage_v(ch));
  ASSIGN_OR_RETURN(double a, read_current_a(ch));
  return v * a;
}

// ---- frequencies ----

Result<int> cpufreq_current_mhz(const std::string& root, const std::string& policy) {
  const std::string dir = sysfs::join(root, "sys/devices/system/cpu/cpufreq/" + policy);
  auto khz = sysfs::read_int(dir + "/scaling_cur_freq");
  if (!khz.ok()) khz = sysfs::read_int(dir + "/cpuinfo_cur_freq");
  if (!khz.ok()) return khz.status();
  return static_cast<int>(*khz / 1000);
}

Result<int> devfreq_current_mhz(const std::string& root, const std::string& devfreq) {
  ASSIGN_OR_RETURN(
      int64_t hz, sysfs::read_int(sysfs::join(root, "sys/class/devfreq/" + devfreq + "/cur_freq")));
  return static_cast<int>(hz / 1000000);
}

Result<int> current_mhz(const std::string& root, const PlatformDevice& d) {
  if (!d.cpufreq_policy.empty()) return cpufreq_current_mhz(root, d.cpufreq_policy);
  if (!d.devfreq.empty()) return devfreq_current_mhz(root, d.devfreq);
  return not_found("device " + quote_name(d.device) + " names no cpufreq policy or devfreq device");
}

// ---- power traces ----

namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  std::stringstream ss(line);
  while (std::getline(ss, cell, ',')) {
    while (!cell.empty() && std::isspace(static_cast<unsigned char>(cell.back()))) cell.pop_back();
    size_t s = 0;
    while (s < cell.size() && std::isspace(static_cast<unsigned char>(cell[s]))) ++s;
    cells.push_back(cell.substr(s));
  }
  return cells;
}

bool to_double(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size() && std::isfinite(*out);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

Result<PowerTrace> PowerTrace::parse_csv(const std::string& text, const std::string& origin) {
  PowerTrace trace;
  std::stringstream in(text);
  std::string line;
  int line_no = 0;
  int col_t = 0, col_v = 1, col_a = 2;
  double t_scale = 1, a_scale = 1;
  bool header_seen = false;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> cells = split_csv(line);
    double first = 0;
    if (!header_seen && trace.samples_.empty() && !to_double(cells[0], &first)) {
      header_seen = true;
      col_t = col_v = col_a = -1;
      for (size_t i = 0; i < cells.size(); ++i) {
        const std::string h = lower(cells[i]);
        const int c = static_cast<int>(i);
        if (col_t < 0 && h.find("time") != std::string::npos) {
          col_t = c;
          if (h.find("(ms)") != std::string::npos) t_scale = 1e-3;
          if (h.find("(us)") != std::string::npos) t_scale = 1e-6;
        } else if (col_v < 0 && h.find("volt") != std::string::npos) {
          col_v = c;
        } else if (col_a < 0 &&
                   (h.find("amp") != std::string::npos || h.find("current") != std::string::npos ||
                    h.find("(ma)") != std::string::npos)) {
          col_a = c;
          if (h.find("(ma)") != std::string::npos) a_scale = 1e-3;
        }
      }
      if (col_t < 0 || col_v < 0 || col_a < 0) {
        return invalid_argument(origin + ":" + std::to_string(line_no) +
                                ": header must name a time, a voltage and a current column");
      }
      continue;
    }
    const int need = std::max({col_t, col_v, col_a}) + 1;
    if (static_cast<int>(cells.size()) < need) {
      return invalid_argument(origin + ":" + std::to_string(line_no) + ": expected " +
                              std::to_string(need) + " columns, got " +
                              std::to_string(cells.size()));
    }
    PowerSample s;
    const char* bad = nullptr;
    if (!to_double(cells[static_cast<size_t>(col_t)], &s.t_s)) bad = "time";
    if (!bad && !to_double(cells[static_cast<size_t>(col_v)], &s.volts)) bad = "volts";
    if (!bad && !to_double(cells[static_cast<size_t>(col_a)], &s.amps)) bad = "amps";
    if (bad) {
      return invalid_argument(origin + ":" + std::to_string(line_no) + ": " + bad +
                              " is not a number");
    }
    s.t_s *= t_scale;
    s.amps *= a_scale;
    if (s.volts < 0) {
      return invalid_argument(origin + ":" + std::to_string(line_no) + ": negative volts");
    }
    if (!trace.samples_.empty() && s.t_s <= trace.samples_.back().t_s) {
      return invalid_argument(origin + ":" + std::to_string(line_no) + ": time does not ascend");
    }
    trace.samples_.push_back(s);
  }
  if (trace.samples_.size() < 2) {
    return invalid_argument(origin + ": a power trace needs at least two samples");
  }
  return trace;
}

Result<PowerTrace> PowerTrace::load_csv(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open power trace");
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_csv(ss.str(), path);
}

double PowerTrace::power_at(double t) const {
  if (t <= samples_.front().t_s) return samples_.front().watts();
  if (t >= samples_.back().t_s) return samples_.back().watts();
  auto it = std::upper_bound(samples_.begin(), samples_.end(), t,
                             [](double x, const PowerSample& s) { return x < s.t_s; });
  const PowerSample& b = *it;
  const PowerSample& a = *(it - 1);
  const double w = (t - a.t_s) / (b.t_s - a.t_s);
  return a.watts() + w * (b.watts() - a.watts());
}

double PowerTrace::energy_j(double t0, double t1) const {
  t0 = std::max(t0, start_s());
  t1 = std::min(t1, end_s());
  if (t1 <= t0) return 0;
  double e = 0;
  double prev_t = t0, prev_p = power_at(t0);
  auto it = std::upper_bound(samples_.begin(), samples_.end(), t0,
                             [](double x, const PowerSample& s) { return x < s.t_s; });
  for (; it != samples_.end() && it->t_s < t1; ++it) {
    e += 0.5 * (prev_p + it->watts()) * (it->t_s - prev_t);
    prev_t = it->t_s;
    prev_p = it->watts();
  }
  e += 0.5 * (prev_p + power_at(t1)) * (t1 - prev_t);
  return e;
}

double PowerTrace::average_power_w(double t0, double t1) const {
  return t1 > t0 ? energy_j(t0, t1) / (t1 - t0) : 0;
}

Result<double> PowerTrace::detect_start(double idle_s, double threshold_w) const {
  std::vector<double> idle;
  for (const PowerSample& s : samples_) {
    if (s.t_s > start_s() + idle_s) break;
    idle.push_back(s.watts());
  }
  if (idle.empty()) return failed_precondition("power trace: no samples in the idle window");
  std::nth_element(idle.begin(), idle.begin() + static_cast<std::ptrdiff_t>(idle.size() / 2),
                   idle.end());
  const double base = idle[idle.size() / 2];
  for (const PowerSample& s : samples_) {
    if (s.t_s > start_s() + idle_s && s.watts() > base + threshold_w) return s.t_s;
  }
  return not_found("power trace: power never rises " + std::to_string(threshold_w) +
                   " W above the idle level; cannot find the run");
}

Result<double> PowerTrace::run_energy_j(double offset_s, double duration_s) const {
  if (duration_s <= 0) return invalid_argument("run duration must be positive");
  if (offset_s < 0) {
    ASSIGN_OR_RETURN(offset_s, detect_start(std::min(0.5, (end_s() - start_s()) / 4), 0.2));
  }
  if (offset_s + duration_s > end_s() + 1e-9 || offset_s < start_s()) {
    return out_of_range("power trace covers [" + std::to_string(start_s()) + ", " +
                        std::to_string(end_s()) + "] s, the run needs [" +
                        std::to_string(offset_s) + ", " + std::to_string(offset_s + duration_s) +
                        "] s");
  }
  return energy_j(offset_s, offset_s + duration_s);
}

// ---- meters ----

namespace {

using Clock = std::chrono::steady_clock;

class RaplMeter final : public EnergyMeter {
 public:
  explicit RaplMeter(std::vector<RaplZone> zones) : zones_(std::move(zones)) {}
  bool measured() const override { return true; }
  std::string source() const override {
    std::string s = "rapl:";
    for (size_t i = 0; i < zones_.size(); ++i) s += (i ? "+" : "") + zones_[i].name;
    return s;
  }
  Status begin() override {
    before_.clear();
    for (const RaplZone& z : zones_) {
      ASSIGN_OR_RETURN(uint64_t v, read_energy_uj(z));
      before_.push_back(v);
    }
    t0_ = Clock::now();
    return Status();
  }
  Result<EnergyReading> end() override {
    EnergyReading r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    if (before_.size() != zones_.size()) return failed_precondition("RAPL meter: end before begin");
    uint64_t total = 0;
    for (size_t i = 0; i < zones_.size(); ++i) {
      ASSIGN_OR_RETURN(uint64_t v, read_energy_uj(zones_[i]));
      total += rapl_delta_uj(before_[i], v, zones_[i].max_range_uj);
    }
    r.joules = static_cast<double>(total) * 1e-6;
    r.measured = true;
    r.source = source();
    return r;
  }

 private:
  std::vector<RaplZone> zones_;
  std::vector<uint64_t> before_;
  Clock::time_point t0_;
};

class HwmonMeter final : public EnergyMeter {
 public:
  HwmonMeter(PowerChannel ch, int period_us) : ch_(std::move(ch)), period_us_(period_us) {}
  ~HwmonMeter() override { stop(); }
  bool measured() const override { return true; }
  std::string source() const override { return "hwmon:" + ch_.label; }
  Status begin() override {
    stop();
    RETURN_IF_ERROR(read_power_w(ch_).status());
    joules_ = 0;
    sampled_s_ = 0;
    failed_ = false;
    running_ = true;
    t0_ = Clock::now();
    thread_ = std::thread([this] {
      auto prev_t = Clock::now();
      double prev_p = sysfs::value_or(read_power_w(ch_), 0);
      while (running_.load()) {
        std::this_thread::sleep_for(std::chrono::microseconds(period_us_));
        const auto t = Clock::now();
        auto p = read_power_w(ch_);
        if (!p.ok()) {
          failed_ = true;
          continue;
        }
        const double dt = std::chrono::duration<double>(t - prev_t).count();
        joules_ += 0.5 * (prev_p + *p) * dt;
        sampled_s_ += dt;
        prev_t = t;
        prev_p = *p;
      }
    });
    return Status();
  }
  Result<EnergyReading> end() override {
    EnergyReading r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    stop();
    if (failed_) return io_error("hwmon meter: reading " + ch_.label + " failed while sampling");
    // The sampled intervals start when the thread does and may end after end() was called (the
    // thread finishes its sleep first): the energy of [begin, end] is the sampled mean power times
    // the run's own duration. A run shorter than one period has no interval: use the power now.
    r.joules = sampled_s_ > 0 ? joules_ / sampled_s_ * r.seconds
                              : sysfs::value_or(read_power_w(ch_), 0) * r.seconds;
    r.measured = true;
    r.source = source();
    return r;
  }

 private:
  void stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }
  PowerChannel ch_;
  int period_us_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  bool failed_ = false;
  double joules_ = 0;
  double sampled_s_ = 0;
  Clock::time_point t0_;
};

class ModelledMeter final : public EnergyMeter {
 public:
  ModelledMeter(const PlatformDevice& d, int level, double dyn)
      : watts_(power_w(d, level, dyn)), device_(d.device) {}
  bool measured() const override { return false; }
  std::string source() const override {
    return "modelled: no power sensor for " + device_ + ", eq. 4-5 power model";
  }
  Status begin() override {
    t0_ = Clock::now();
    return Status();
  }
  Result<EnergyReading> end() override {
    EnergyReading r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    r.joules = watts_ * r.seconds;
    r.measured = false;
    r.source = source();
    return r;
  }

 private:
  double watts_;
  std::string device_;
  Clock::time_point t0_;
};

}  // namespace

std::unique_ptr<EnergyMeter> make_rapl_meter(std::vector<RaplZone> zones) {
  return std::make_unique<RaplMeter>(std::move(zones));
}

std::unique_ptr<EnergyMeter> make_hwmon_meter(PowerChannel channel, int period_us) {
  return std::make_unique<HwmonMeter>(std::move(channel), std::max(period_us, 50));
}

std::unique_ptr<EnergyMeter> make_modelled_meter(const PlatformDevice& device, int level,
                                                 double dynamic_at_max_w) {
  return std::make_unique<ModelledMeter>(device, level, dynamic_at_max_w);
}

std::unique_ptr<EnergyMeter> make_meter(const std::string& root, const PlatformDevice& device,
                                        int level) {
  if (!device.power_rail.empty()) {
    for (PowerChannel& ch : find_power_channels(root)) {
      if (ch.label == device.power_rail && read_power_w(ch).ok()) {
        return make_hwmon_meter(std::move(ch));
      }
    }
  }
  if (device.kind == "cpu" || device.kind == "reference") {
    std::vector<RaplZone> zones;
    for (RaplZone& z : find_rapl_zones(root)) {
      if (z.name.rfind("package", 0) == 0 && read_energy_uj(z).ok()) zones.push_back(z);
    }
    if (!zones.empty()) return make_rapl_meter(std::move(zones));
  }
  return make_modelled_meter(device, level);
}

}  // namespace tessera
