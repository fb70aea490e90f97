#include "core/calibration_table.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/json.h"

namespace tessera {

std::string CalibrationTable::to_json() const {
  json::Json j;
  j["format"] = "tessera-calibration";
  j["version"] = kVersion;
  j["model_hash"] = model_hash;
  j["method"] = method;
  j["samples"] = samples;
  json::Json r = json::Json::object();
  for (const auto& [name, range] : ranges) r[name] = {range.first, range.second};
  j["ranges"] = std::move(r);
  return j.dump(2) + "\n";
}

Result<CalibrationTable> CalibrationTable::from_json(const std::string& text,
                                                     const std::string& origin) {
  ASSIGN_OR_RETURN(json::Json j, json::parse(text, origin));
  RETURN_IF_ERROR(json::require_object(j, origin));
  ASSIGN_OR_RETURN(std::string format, json::string_field(j, origin, "format"));
  if (format != "tessera-calibration") {
    return invalid_argument(origin + ": format is '" + format +
                            "', expected 'tessera-calibration'");
  }
  ASSIGN_OR_RETURN(int64_t version, json::int_field(j, origin, "version", 1, 1000000));
  if (version != kVersion) {
    return invalid_argument(origin + ": calibration schema version " + std::to_string(version) +
                            " is not supported (this build reads version " +
                            std::to_string(kVersion) + ")");
  }
  CalibrationTable t;
  ASSIGN_OR_RETURN(t.model_hash, json::string_field(j, origin, "model_hash", false));
  ASSIGN_OR_RETURN(t.method, json::string_field(j, origin, "method", false));
  ASSIGN_OR_RETURN(int64_t samples, json::int_field(j, origin, "samples", 0, 1 << 30, false, 0));
  t.samples = static_cast<int>(samples);
  ASSIGN_OR_RETURN(const json::Json* ranges, json::object_field(j, origin, "ranges"));
  const std::string rpath = json::member_path(origin, "ranges");
  for (const auto& [name, r] : ranges->items()) {
    const std::string path = rpath + "." + name;
    if (!r.is_array() || r.size() != 2 || !r[0].is_number() || !r[1].is_number()) {
      return invalid_argument(path + ": expected [lo, hi], two numbers");
    }
    const double lo = r[0].get<double>(), hi = r[1].get<double>();
    if (!std::isfinite(lo) || !std::isfinite(hi) || lo > 0 || hi < 0 || lo > 3e38 || hi > 3e38 ||
        lo < -3e38) {
      return invalid_argument(path + ": range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                              "] must be finite and contain 0");
    }
    t.ranges[name] = {static_cast<float>(lo), static_cast<float>(hi)};
  }
  return t;
}

Status CalibrationTable::save(const std::string& path) const {
  return json::write_text_file(path, to_json());
}

Result<CalibrationTable> CalibrationTable::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(path + ": cannot open the calibration table");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return io_error(path + ": read failed");
  return from_json(ss.str(), path);
}

}  // namespace tessera
