#include "tools/calibration_file.h"

#include <cstdio>
#include <filesystem>

#include "backends/registry.h"
#include "graph/qdq.h"

namespace tessera::tools {

Result<std::shared_ptr<const CalibrationTable>> load_calibration_file(const std::string& model_path,
                                                                      const std::string& hash,
                                                                      const std::string& named) {
  const std::string path = named.empty() ? CalibrationTable::default_path(model_path) : named;
  if (named.empty() && !std::filesystem::exists(path)) {
    return std::shared_ptr<const CalibrationTable>();
  }
  ASSIGN_OR_RETURN(CalibrationTable t, CalibrationTable::load(path));
  if (!t.model_hash.empty() && t.model_hash != hash) {
    if (!named.empty()) {
      return failed_precondition(path + ": the calibration is for model " + t.model_hash + ", " +
                                 model_path + " is " + hash);
    }
    std::fprintf(stderr, "note: %s is for another model (%s); ignored\n", path.c_str(),
                 t.model_hash.c_str());
    return std::shared_ptr<const CalibrationTable>();
  }
  return std::make_shared<const CalibrationTable>(std::move(t));
}

Status require_calibration(const std::vector<std::string>& devices,
                           const std::shared_ptr<const CalibrationTable>& table, const Graph& g,
                           const std::string& model_path, const std::string& flag) {
  if (table) return Status();
  bool int8 = false;
  for (const std::string& d : devices) {
    const Result<DeviceName> parsed = parse_device_name(d.substr(0, d.find('@')));
    int8 = int8 || (parsed.ok() && parsed->precision == Precision::kInt8);
  }
  if (!int8 || has_qdq_pairs(g)) return Status();
  for (const std::string& d : devices) {
    std::string name = d;
    if (const size_t at = name.find('@'); at != std::string::npos) name.resize(at);
    const Result<DeviceName> parsed = parse_device_name(name);
    if (!parsed.ok() || parsed->precision != Precision::kInt8) continue;
    return failed_precondition("device " + quote_name(d) +
                               " computes in int8 and needs the model's activation ranges, but " +
                               CalibrationTable::default_path(model_path) +
                               " does not exist: run `tessera calibrate " + model_path +
                               " -i INPUTS` (or name a table with " + flag + " FILE)");
  }
  return Status();
}

}  // namespace tessera::tools
