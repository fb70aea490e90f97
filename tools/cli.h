// A small command-line parser shared by the `tessera` subcommands.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::cli {

struct FlagSpec {
  std::string name;   // "--output"
  std::string alias;  // "-o" or ""
  bool takes_value = true;
  bool repeatable = false;
  std::string help;
};

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> flags;  // by canonical name

  bool has(const std::string& name) const { return flags.count(name) != 0; }
  std::string get(const std::string& name, const std::string& def = "") const;
  const std::vector<std::string>& all(const std::string& name) const;
  Result<int> get_int(const std::string& name, int def, int min, int max) const;
  // A finite number in [min, max] (the default when the flag is absent).
  Result<double> get_double(const std::string& name, double def, double min, double max) const;
};

// A finite number from `text`, the whole of it; errors name `what` (a flag, "--load cpu:1").
Result<double> parse_double(const std::string& what, const std::string& text);

// Parses argv[first..] against `specs`; unknown flags and missing values are errors.
Result<Args> parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs);

// One --shape flag of the commands that read ONNX models: "images=1x3x640x640" adds
// {"images", {1, 3, 640, 640}} to `shapes`. A missing '=', a dimension that is not a positive
// integer, or a name given twice is an error naming the flag.
Status parse_shape_flag(const std::string& flag,
                        std::map<std::string, std::vector<int64_t>>* shapes);

// "  --output, -o VALUE   help" lines for --help.
std::string usage(const std::vector<FlagSpec>& specs);

// "a,b,,c" -> {"a", "b", "c"}: a comma-separated flag value, empty parts dropped.
std::vector<std::string> split_commas(const std::string& s);

}  // namespace tessera::cli
