#include "backends/cpu/topology.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

namespace tessera::cpu {

CoreSet::CoreSet(std::vector<int> cores) : cores_(std::move(cores)) {
  std::sort(cores_.begin(), cores_.end());
  cores_.erase(std::unique(cores_.begin(), cores_.end()), cores_.end());
}

bool CoreSet::contains(int core) const {
  return std::binary_search(cores_.begin(), cores_.end(), core);
}

namespace {

Result<int> parse_core_id(const std::string& spec, const std::string& part) {
  if (part.empty() || part.size() > 4 ||
      part.find_first_not_of("0123456789") != std::string::npos) {
    return invalid_argument("core set " + quote_name(spec) + ": " + quote_name(part) +
                            " is not a core number");
  }
  const int v = std::stoi(part);
  if (v >= CoreSet::kMaxCore) {
    return invalid_argument("core set " + quote_name(spec) + ": core " + part +
                            " is out of range (max " + std::to_string(CoreSet::kMaxCore - 1) + ")");
  }
  return v;
}

}  // namespace

Result<CoreSet> CoreSet::parse(const std::string& spec) {
  if (spec.empty()) return invalid_argument("empty core set (expected e.g. 0-3 or 0,2)");
  std::vector<int> cores;
  std::stringstream ss(spec);
  std::string item;
  size_t items = 0;
  while (std::getline(ss, item, ',')) {
    ++items;
    const size_t dash = item.find('-');
    if (dash == std::string::npos) {
      ASSIGN_OR_RETURN(int c, parse_core_id(spec, item));
      cores.push_back(c);
      continue;
    }
    ASSIGN_OR_RETURN(int lo, parse_core_id(spec, item.substr(0, dash)));
    ASSIGN_OR_RETURN(int hi, parse_core_id(spec, item.substr(dash + 1)));
    if (hi < lo) {
      return invalid_argument("core set " + quote_name(spec) + ": range " + quote_name(item) +
                              " is reversed");
    }
    for (int c = lo; c <= hi; ++c) cores.push_back(c);
  }
  if (items == 0 || spec.back() == ',') {
    return invalid_argument("core set " + quote_name(spec) + ": empty item");
  }
  return CoreSet(std::move(cores));
}

std::string CoreSet::to_string() const {
  std::string s;
  size_t i = 0;
  while (i < cores_.size()) {
    size_t j = i;
    while (j + 1 < cores_.size() && cores_[j + 1] == cores_[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(cores_[i]);
    if (j > i) s += "-" + std::to_string(cores_[j]);
    i = j + 1;
  }
  return s;
}

namespace {

bool read_line(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::getline(f, *out);
  return true;
}

int64_t read_int(const std::string& path) {
  std::string s;
  if (!read_line(path, &s)) return 0;
  try {
    return std::stoll(s);
  } catch (...) {
    return 0;
  }
}

}  // namespace

Topology read_topology(const std::string& sysfs_root, const CoreSet& allowed) {
  Topology t;
  t.allowed = allowed;
  std::string online;
  Result<CoreSet> parsed = read_line(sysfs_root + "/online", &online) ? CoreSet::parse(online)
                                                                      : Result<CoreSet>(CoreSet());
  t.online = parsed.ok() ? *parsed : allowed;
  if (t.online.empty()) t.online = allowed;

  // Group the online cores by (capacity, max frequency): cores in one cpufreq policy share both.
  std::map<std::pair<int64_t, int64_t>, std::vector<int>> groups;
  for (int c : t.online.cores()) {
    const std::string dir = sysfs_root + "/cpu" + std::to_string(c);
    const int64_t cap = read_int(dir + "/cpu_capacity");
    const int64_t freq = read_int(dir + "/cpufreq/cpuinfo_max_freq");
    groups[{cap, freq}].push_back(c);
  }
  for (auto& [key, cores] : groups) {
    Cluster cl;
    cl.cores = CoreSet(cores);
    cl.capacity = key.first != 0 ? key.first : key.second;
    cl.max_freq_khz = key.second;
    t.clusters.push_back(std::move(cl));
  }
  std::stable_sort(t.clusters.begin(), t.clusters.end(),
                   [](const Cluster& a, const Cluster& b) { return a.capacity > b.capacity; });
  return t;
}

CoreSet process_affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int c = 0; c < CPU_SETSIZE && c < CoreSet::kMaxCore; ++c) {
      if (CPU_ISSET(c, &set)) cores.push_back(c);
    }
  }
  return CoreSet(std::move(cores));
}

const Topology& machine_topology() {
  static const Topology t = read_topology("/sys/devices/system/cpu", process_affinity());
  return t;
}

}  // namespace tessera::cpu
