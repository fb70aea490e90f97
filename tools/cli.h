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

// A comma-separated list of device names (--devices, --prefer, and the DEVICE=FACTOR lists of
// --load and --scale). A cpu core set holds commas itself (cpu:0,3-5), and no device name starts
// with a digit, so a comma followed by a digit continues the core set of the item before it:
// "cpu:0,3-5,npu:0" -> {"cpu:0,3-5", "npu:0"}; "cpu:0,3-5=0.5,npu:0=2" -> {"cpu:0,3-5=0.5",
// "npu:0=2"}. Empty parts are dropped.
std::vector<std::string> split_device_list(const std::string& s);

// The values of a repeatable DEVICE=FACTOR[,...] flag (`flag` names it in errors), each split
// by split_device_list and cut at its last '=': {"cpu:0,3-5=0.5,npu:0=2", "cpu:1=3"} ->
// {cpu:0,3-5: 0.5, npu:0: 2, cpu:1: 3}. An item without '=' or with no device before it, a factor
// that is not a finite number, or a device named twice is an InvalidArgument quoting the item
// (the range of a factor is the caller's to check).
Result<std::map<std::string, double>> parse_device_factors(const std::string& flag,
                                                           const std::vector<std::string>& values);

}  // namespace tessera::cli
