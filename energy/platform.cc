#include "energy/platform.h"

#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/cpu/topology.h"
#include "backends/registry.h"
#include "core/allocator.h"
#include "core/install_paths.h"
#include "core/json.h"
#include "energy/sysfs.h"

namespace tessera {

using json::Json;

namespace {

const char* const kKinds[] = {"cpu", "gpu", "npu", "reference", "remote"};
constexpr double kMaxWatts = 1000;

Result<std::map<std::string, std::string>> read_sources(const Json& obj, const std::string& path) {
  std::map<std::string, std::string> out;
  auto it = obj.find("sources");
  if (it == obj.end()) return out;
  const std::string p = json::member_path(path, "sources");
  if (!it->is_object()) return invalid_argument(p + ": expected an object of strings");
  for (const auto& [k, v] : it->items()) {
    if (!v.is_string()) return invalid_argument(p + "." + k + ": expected a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

Result<PlatformDevice> read_device(const Json& d, const std::string& path) {
  PlatformDevice dev;
  RETURN_IF_ERROR(json::require_object(d, path));
  ASSIGN_OR_RETURN(dev.id, json::string_field(d, path, "id"));
  if (dev.id.empty()) return invalid_argument(path + ".id: must not be empty");
  ASSIGN_OR_RETURN(dev.kind, json::string_field(d, path, "kind"));
  if (std::find_if(std::begin(kKinds), std::end(kKinds),
                   [&](const char* k) { return dev.kind == k; }) == std::end(kKinds)) {
    return invalid_argument(path + ".kind: '" + dev.kind +
                            "' is not one of cpu, gpu, npu, reference, remote");
  }
  ASSIGN_OR_RETURN(dev.device, json::string_field(d, path, "device"));
  auto parsed = parse_device_name(dev.device);
  if (!parsed.ok()) return parsed.status().with_context(path + ".device");
  if (parsed->mhz != 0) {
    return invalid_argument(path + ".device: '" + dev.device +
                            "' names a DVFS level; levels belong in dvfs");
  }
  ASSIGN_OR_RETURN(const Json* cores, json::array_field(d, path, "cores", false));
  if (cores != nullptr) {
    std::set<int> seen;
    for (size_t i = 0; i < cores->size(); ++i) {
      const Json& c = (*cores)[i];
      const std::string cp = json::index_path(path + ".cores", i);
      if (!c.is_number_integer() || c.get<int64_t>() < 0 || c.get<int64_t>() > 4095) {
        return invalid_argument(cp + ": expected a core number in [0, 4095]");
      }
      if (!seen.insert(c.get<int>()).second) return invalid_argument(cp + ": core listed twice");
      dev.cores.push_back(c.get<int>());
    }
  }
  ASSIGN_OR_RETURN(int64_t mem, json::int_field(d, path, "memory_bytes", 1, INT64_MAX));
  dev.memory_bytes = static_cast<uint64_t>(mem);
  ASSIGN_OR_RETURN(const Json* dvfs, json::array_field(d, path, "dvfs"));
  const std::string dp = path + ".dvfs";
  if (dvfs->empty()) return invalid_argument(dp + ": empty DVFS table; give at least one level");
  for (size_t i = 0; i < dvfs->size(); ++i) {
    const std::string lp = json::index_path(dp, i);
    DvfsLevel lv;
    ASSIGN_OR_RETURN(int64_t mhz, json::int_field((*dvfs)[i], lp, "mhz", 0, 100000));
    ASSIGN_OR_RETURN(int64_t mv, json::int_field((*dvfs)[i], lp, "mv", 0, 5000));
    ASSIGN_OR_RETURN(lv.static_w, json::number_field((*dvfs)[i], lp, "static_w", 0, kMaxWatts));
    lv.mhz = static_cast<int>(mhz);
    lv.mv = static_cast<int>(mv);
    if (lv.mhz == 0 && dvfs->size() > 1) {
      return invalid_argument(lp +
                              ".mhz: 0 (unknown frequency) is only allowed in a "
                              "single-level table");
    }
    if (i > 0 && lv.mhz <= dev.dvfs.back().mhz) {
      return invalid_argument(lp + ".mhz: " + std::to_string(lv.mhz) +
                              " does not ascend (previous level " +
                              std::to_string(dev.dvfs.back().mhz) + ")");
    }
    if (i > 0 && (lv.mv == 0) != (dev.dvfs.back().mv == 0)) {
      return invalid_argument(lp + ".mv: give the voltage of every level or of none");
    }
    dev.dvfs.push_back(lv);
  }
  ASSIGN_OR_RETURN(dev.dynamic_w, json::number_field(d, path, "dynamic_w", 0, kMaxWatts));
  ASSIGN_OR_RETURN(dev.cpufreq_policy, json::string_field(d, path, "cpufreq_policy", false));
  ASSIGN_OR_RETURN(dev.devfreq, json::string_field(d, path, "devfreq", false));
  ASSIGN_OR_RETURN(dev.power_rail, json::string_field(d, path, "power_rail", false));
  ASSIGN_OR_RETURN(dev.sources, read_sources(d, path));
  return dev;
}

Json sources_json(const std::map<std::string, std::string>& s) {
  Json j = Json::object();
  for (const auto& [k, v] : s) j[k] = v;
  return j;
}

}  // namespace

Result<int> PlatformDevice::level_index(int mhz) const {
  for (size_t i = 0; i < dvfs.size(); ++i) {
    if (dvfs[i].mhz == mhz) return static_cast<int>(i);
  }
  std::string levels;
  for (const DvfsLevel& l : dvfs) levels += (levels.empty() ? "" : ", ") + std::to_string(l.mhz);
  return not_found("device '" + device + "' has no DVFS level at " + std::to_string(mhz) +
                   " MHz (levels: " + levels + ")");
}

Result<Platform> Platform::from_json_text(const std::string& text, const std::string& origin) {
  ASSIGN_OR_RETURN(Json j, json::parse(text, origin));
  Platform p;
  auto fail = [&](const Status& s) { return s.with_context(origin); };
  if (!j.is_object()) return fail(invalid_argument("expected a JSON object"));
  auto format = json::string_field(j, "", "format");
  if (!format.ok()) return fail(format.status());
  if (*format != "tessera-platform") {
    return fail(invalid_argument("format: '" + *format + "' is not 'tessera-platform'"));
  }
  auto version = json::int_field(j, "", "version", 0, INT32_MAX);
  if (!version.ok()) return fail(version.status());
  if (*version != kVersion) {
    return fail(invalid_argument("version: " + std::to_string(*version) +
                                 " is not supported (this Tessera reads version " +
                                 std::to_string(kVersion) + ")"));
  }
  auto name = json::string_field(j, "", "name");
  if (!name.ok()) return fail(name.status());
  p.name = *name;
  auto desc = json::string_field(j, "", "description", false);
  if (!desc.ok()) return fail(desc.status());
  p.description = *desc;
  auto sources = read_sources(j, "");
  if (!sources.ok()) return fail(sources.status());
  p.sources = *sources;
  auto devices = json::array_field(j, "", "devices");
  if (!devices.ok()) return fail(devices.status());
  if ((*devices)->empty()) return fail(invalid_argument("devices: a platform needs a device"));
  std::set<std::string> ids, names;
  for (size_t i = 0; i < (*devices)->size(); ++i) {
    const std::string path = json::index_path("devices", i);
    auto dev = read_device((**devices)[i], path);
    if (!dev.ok()) return fail(dev.status());
    if (!ids.insert(dev->id).second) {
      return fail(invalid_argument(path + ".id: '" + dev->id + "' is used twice"));
    }
    if (!names.insert(dev->device).second) {
      return fail(invalid_argument(path + ".device: '" + dev->device + "' is used twice"));
    }
    p.devices.push_back(std::move(*dev));
  }
  return p;
}

Result<Platform> Platform::load_file_or_board(const std::string& path_or_board) {
  std::error_code ec;
  const bool board_name = path_or_board.find('/') == std::string::npos &&
                          path_or_board.find('.') == std::string::npos &&
                          !std::filesystem::exists(path_or_board, ec);
  if (!board_name) return load(path_or_board);
  const std::string shipped = shipped_platform_dir() + "/" + path_or_board + ".json";
  if (!std::filesystem::exists(shipped, ec)) {
    return not_found("no platform file '" + path_or_board +
                     "' and no shipped board of that name in " + shipped_platform_dir());
  }
  return load(shipped);
}

Result<Platform> Platform::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open platform file");
  std::ostringstream ss;
  ss << in.rdbuf();
  return from_json_text(ss.str(), path);
}

std::string Platform::to_json_text() const {
  Json j;
  j["format"] = "tessera-platform";
  j["version"] = kVersion;
  j["name"] = name;
  j["description"] = description;
  j["sources"] = sources_json(sources);
  Json devs = Json::array();
  for (const PlatformDevice& d : devices) {
    Json jd;
    jd["id"] = d.id;
    jd["kind"] = d.kind;
    jd["device"] = d.device;
    jd["cores"] = d.cores;
    jd["memory_bytes"] = d.memory_bytes;
    Json levels = Json::array();
    for (const DvfsLevel& l : d.dvfs) {
      levels.push_back({{"mhz", l.mhz}, {"mv", l.mv}, {"static_w", l.static_w}});
    }
    jd["dvfs"] = levels;
    jd["dynamic_w"] = d.dynamic_w;
    if (!d.cpufreq_policy.empty()) jd["cpufreq_policy"] = d.cpufreq_policy;
    if (!d.devfreq.empty()) jd["devfreq"] = d.devfreq;
    if (!d.power_rail.empty()) jd["power_rail"] = d.power_rail;
    jd["sources"] = sources_json(d.sources);
    devs.push_back(std::move(jd));
  }
  j["devices"] = devs;
  return j.dump(2) + "\n";
}

Status Platform::save(const std::string& path) const {
  return json::write_text_file(path, to_json_text());
}

const PlatformDevice* Platform::find(const std::string& device) const {
  for (const PlatformDevice& d : devices) {
    if (d.device == device || d.id == device) return &d;
  }
  return nullptr;
}

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

std::string shipped_platform_dir() {
  std::string installed = find_installed(InstalledFile::kPlatformDir);
  if (!installed.empty()) return installed;
#ifdef TESSERA_PLATFORM_DIR
  return TESSERA_PLATFORM_DIR;
#else
  return "energy/platforms";
#endif
}

}  // namespace tessera
