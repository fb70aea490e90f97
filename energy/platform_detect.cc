// Platform::detect (energy/platform.h): the platform of the running machine, from sysfs and the
// backend registry. Apart from energy/platform.cc, which reads and writes platform files.
#include <unistd.h>
#include <algorithm>
#include <set>

#include "backends/cpu/topology.h"
#include "backends/registry.h"
#include "core/allocator.h"
#include "energy/platform.h"
#include "energy/sysfs.h"

namespace tessera {

// ---- detection ---------------------------------------------------------------------------------

namespace {

constexpr char kPlaceholder[] =
    "placeholder estimate (no published or measured figure for this machine): 0.5 W static and "
    "3 W dynamic per core; replace with measured values";

struct FreqDomain {
  std::string policy;  // "policy0", or "" when cpufreq is absent
  std::vector<int> cpus;
  std::vector<int> mhz;  // ascending
};

std::vector<FreqDomain> detect_domains(const std::string& root) {
  std::vector<FreqDomain> out;
  const std::string cpufreq = sysfs::join(root, "sys/devices/system/cpu/cpufreq");
  for (const std::string& name : sysfs::list_dir(cpufreq)) {
    if (name.rfind("policy", 0) != 0) continue;
    const std::string dir = cpufreq + "/" + name;
    FreqDomain d;
    d.policy = name;
    auto related = sysfs::read_string(dir + "/related_cpus");
    if (!related.ok()) related = sysfs::read_string(dir + "/affected_cpus");
    if (!related.ok()) continue;
    // related_cpus is space separated ("4 5 6 7"); reuse the list parser on commas.
    std::string list = *related;
    std::replace(list.begin(), list.end(), ' ', ',');
    auto cpus = sysfs::parse_cpu_list(list);
    if (!cpus.ok() || cpus->empty()) continue;
    d.cpus = *cpus;
    auto freqs = sysfs::read_ints(dir + "/scaling_available_frequencies");
    if (freqs.ok() && !freqs->empty()) {
      for (int64_t khz : *freqs) d.mhz.push_back(static_cast<int>(khz / 1000));
    } else {
      auto lo = sysfs::read_int(dir + "/cpuinfo_min_freq");
      auto hi = sysfs::read_int(dir + "/cpuinfo_max_freq");
      if (lo.ok()) d.mhz.push_back(static_cast<int>(*lo / 1000));
      if (hi.ok()) d.mhz.push_back(static_cast<int>(*hi / 1000));
    }
    std::sort(d.mhz.begin(), d.mhz.end());
    d.mhz.erase(std::unique(d.mhz.begin(), d.mhz.end()), d.mhz.end());
    d.mhz.erase(std::remove(d.mhz.begin(), d.mhz.end(), 0), d.mhz.end());
    out.push_back(std::move(d));
  }
  if (out.empty()) {
    // No cpufreq: one domain of the online CPUs at an unknown fixed frequency.
    FreqDomain d;
    auto online = sysfs::read_string(sysfs::join(root, "sys/devices/system/cpu/online"));
    if (online.ok()) {
      auto cpus = sysfs::parse_cpu_list(*online);
      if (cpus.ok()) d.cpus = *cpus;
    }
    out.push_back(std::move(d));
  }
  return out;
}

std::string cpu_list_name(const std::vector<int>& cpus) {
  if (cpus.empty()) return "";
  std::string s;
  size_t i = 0;
  while (i < cpus.size()) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!s.empty()) s += ",";
    s += std::to_string(cpus[i]);
    if (j > i) s += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return s;
}

std::vector<DvfsLevel> levels_of(const FreqDomain& d, size_t cores) {
  std::vector<DvfsLevel> levels;
  const double static_w = 0.5 * static_cast<double>(std::max<size_t>(cores, 1));
  if (d.mhz.empty()) {
    levels.push_back(DvfsLevel{0, 0, static_w});
  } else {
    for (int mhz : d.mhz) levels.push_back(DvfsLevel{mhz, 0, static_w});
  }
  return levels;
}

// The frequency domain holding `core` (the first domain when none does, as when there is one).
const FreqDomain& domain_of(const std::vector<FreqDomain>& domains, int core) {
  for (const FreqDomain& d : domains) {
    if (std::count(d.cpus.begin(), d.cpus.end(), core)) return d;
  }
  return domains.front();
}

// The largest uniform machine whose cores are each listed as a device of their own.
constexpr size_t kMaxPerCoreDevices = 8;

// The core sets to describe besides the whole-cpu device: the clusters of the topology under
// root (capacity, maximum frequency) further split by frequency domain, restricted to the cores
// this process may run on (all online cores for a fixture root); when that leaves one set of 2 to
// kMaxPerCoreDevices cores, one set per core.
std::vector<std::vector<int>> core_set_devices(const std::string& root,
                                               const std::vector<FreqDomain>& domains) {
  const bool live = root.empty() || root == "/";
  std::vector<int> any;
  for (int c = 0; c < cpu::CoreSet::kMaxCore; ++c) any.push_back(c);
  const cpu::CoreSet allowed = live ? cpu::process_affinity() : cpu::CoreSet(std::move(any));
  const cpu::Topology topo =
      cpu::read_topology(sysfs::join(root, "sys/devices/system/cpu"), allowed);
  std::vector<std::vector<int>> sets;
  for (const cpu::Cluster& cl : topo.clusters) {
    // Split the cluster by frequency domain (cores in none go with the first).
    for (const FreqDomain& dom : domains) {
      std::vector<int> cores;
      for (int c : cl.cores.cores()) {
        if (allowed.contains(c) && &domain_of(domains, c) == &dom) cores.push_back(c);
      }
      if (!cores.empty()) sets.push_back(std::move(cores));
    }
  }
  std::sort(sets.begin(), sets.end());
  if (sets.size() == 1 && sets[0].size() >= 2 && sets[0].size() <= kMaxPerCoreDevices) {
    const std::vector<int> cores = sets[0];
    sets.clear();
    for (int c : cores) sets.push_back({c});
  } else if (sets.size() == 1) {
    sets.clear();  // the whole-cpu device already describes it
  }
  return sets;
}

}  // namespace

Platform Platform::detect(const std::string& root) {
  Platform p;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  p.name = std::string("detected:") + (host[0] ? host : "localhost");
  p.description = "detected by Platform::detect()";
  p.sources["detect"] =
      "cpufreq policies and online CPUs from sysfs; devices from the backend registry";
  const std::vector<FreqDomain> domains = detect_domains(root);
  std::vector<int> all_cpus;
  for (const FreqDomain& d : domains) all_cpus.insert(all_cpus.end(), d.cpus.begin(), d.cpus.end());
  std::sort(all_cpus.begin(), all_cpus.end());
  const uint64_t host_mem = host_memory_bytes() ? host_memory_bytes() : (1ull << 30);

  auto add_cpu_like = [&](const std::string& id, const std::string& kind, const std::string& device,
                          const std::vector<int>& cores, const FreqDomain& dom) {
    PlatformDevice d;
    d.id = id;
    d.kind = kind;
    d.device = device;
    d.cores = cores;
    d.memory_bytes = host_mem;
    d.dvfs = levels_of(dom, cores.size());
    d.dynamic_w = 3.0 * static_cast<double>(std::max<size_t>(cores.size(), 1));
    d.cpufreq_policy = dom.policy;
    d.sources["dvfs"] = dom.mhz.empty()
                            ? "no cpufreq on this machine: one level, frequency "
                              "unknown"
                            : "sysfs cpufreq " + dom.policy + " (voltages are not exposed: mv 0)";
    d.sources["static_w"] = kPlaceholder;
    d.sources["dynamic_w"] = kPlaceholder;
    d.sources["memory_bytes"] = "host physical memory (sysconf)";
    p.devices.push_back(std::move(d));
  };

  // Core-set devices, as `tessera devices` names them (cpu::read_topology groups cores by
  // capacity and maximum frequency): one per cluster where cores differ (big.LITTLE), one per
  // frequency domain where several domains exist, and on a uniform machine of a few cores one per
  // core (`cpu:0`, ...), so that a planner can place stages on single cores.
  for (const std::vector<int>& cores : core_set_devices(root, domains)) {
    const std::string list = cpu_list_name(cores);
    add_cpu_like("cpu" + list, "cpu", "cpu:" + list, cores, domain_of(domains, cores.front()));
  }
  // Every device the registry lists.
  for (const DeviceListing& listing : list_devices()) {
    if (p.find(listing.name) != nullptr) continue;
    auto name = parse_device_name(listing.name);
    if (!name.ok()) continue;
    if (name->kind == "reference" || name->kind == "cpu") {
      std::vector<int> cores = all_cpus;
      if (name->kind == "cpu" && !name->spec.empty()) {
        auto parsed = sysfs::parse_cpu_list(name->spec);
        if (parsed.ok()) cores = *parsed;
      }
      add_cpu_like(listing.name, name->kind, listing.name, cores,
                   domain_of(domains, cores.empty() ? -1 : cores.front()));
      continue;
    }
    PlatformDevice d;
    d.id = listing.name;
    d.kind = name->kind == "npu" ? "npu" : name->kind == "remote" ? "remote" : "gpu";
    d.device = listing.name;
    d.memory_bytes = host_mem;
    auto dev = open_device(listing.name);
    if (dev.ok() && (*dev)->memory_capacity() > 0) d.memory_bytes = (*dev)->memory_capacity();
    d.dvfs.push_back(DvfsLevel{0, 0, 1.0});
    d.dynamic_w = 5.0;
    d.sources["dvfs"] = "not exposed by the backend: one level, frequency unknown";
    d.sources["static_w"] = "placeholder estimate: 1 W";
    d.sources["dynamic_w"] = "placeholder estimate: 5 W";
    d.sources["memory_bytes"] = "Device::memory_capacity()";
    p.devices.push_back(std::move(d));
  }
  return p;
}

}  // namespace tessera
