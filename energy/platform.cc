#include "energy/platform.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "backends/registry.h"
#include "core/install_paths.h"
#include "core/json.h"

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
    if (!v.is_string()) {
      return invalid_argument(p + ": the value of " + quote_name(k) + " is not a string");
    }
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
    return invalid_argument(path + ".kind: " + quote_name(dev.kind) +
                            " is not one of cpu, gpu, npu, reference, remote");
  }
  ASSIGN_OR_RETURN(dev.device, json::string_field(d, path, "device"));
  auto parsed = parse_device_name(dev.device);
  if (!parsed.ok()) return parsed.status().with_context(path + ".device");
  if (parsed->mhz != 0) {
    return invalid_argument(path + ".device: " + quote_name(dev.device) +
                            " names a DVFS level; levels belong in dvfs");
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
  return not_found("device " + quote_name(device) + " has no DVFS level at " + std::to_string(mhz) +
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
    return fail(invalid_argument("format: " + quote_name(*format) + " is not 'tessera-platform'"));
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
      return fail(invalid_argument(path + ".id: " + quote_name(dev->id) + " is used twice"));
    }
    if (!names.insert(dev->device).second) {
      return fail(
          invalid_argument(path + ".device: " + quote_name(dev->device) + " is used twice"));
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
    return not_found("no platform file " + quote_name(path_or_board) +
                     " and no shipped board of that name in " + shipped_platform_dir());
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
