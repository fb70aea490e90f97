// The calibrated activation ranges of a model, as `tessera calibrate` writes them and the int8
// programs read them (docs/precision.md): a sidecar JSON file next to the model,
// `MODEL.tsr.calib.json` by default, with a versioned schema:
//
//   {"format": "tessera-calibration", "version": 1, "model_hash": "...", "method": "percentile",
//    "samples": 16, "ranges": {"VALUE NAME": [lo, hi], ...}}
//
// A range is [lo, hi] with lo <= 0 <= hi, both finite; the names are the values of the model's
// layer graph (after Tessera's graph passes), so a table belongs to one model (`model_hash`).
//
// Thread rule: a table is written by one thread, then read from any number of threads.
#pragma once

#include <map>
#include <string>
#include <utility>

#include "core/status.h"

namespace tessera {

struct CalibrationTable {
  static constexpr int kVersion = 1;
  std::string model_hash;  // the model the ranges belong to
  std::string method;      // "minmax", "percentile" or "mse" (core/calibration.h)
  int samples = 0;         // calibration inputs the ranges come from
  std::map<std::string, std::pair<float, float>> ranges;

  // The range of value `name`, or null when the table has none.
  const std::pair<float, float>* find(const std::string& name) const {
    auto it = ranges.find(name);
    return it == ranges.end() ? nullptr : &it->second;
  }

  std::string to_json() const;
  // Parses and checks a table; errors name `origin` and the field (a wrong format or version, a
  // range that is not finite or does not contain 0).
  static Result<CalibrationTable> from_json(const std::string& text, const std::string& origin);
  Status save(const std::string& path) const;
  static Result<CalibrationTable> load(const std::string& path);
  // Where a model's table lies by default: "MODEL.tsr.calib.json".
  static std::string default_path(const std::string& model_path) {
    return model_path + ".calib.json";
  }
};

}  // namespace tessera
