#include "tools/cli.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "tools/commands.h"

namespace tessera::cli {

std::string Args::get(const std::string& name, const std::string& def) const {
  auto it = flags.find(name);
  return it == flags.end() || it->second.empty() ? def : it->second.back();
}

const std::vector<std::string>& Args::all(const std::string& name) const {
  static const std::vector<std::string> kEmpty;
  auto it = flags.find(name);
  return it == flags.end() ? kEmpty : it->second;
}

Result<int> Args::get_int(const std::string& name, int def, int min, int max) const {
  if (!has(name)) return def;
  const std::string v = get(name);
  char* end = nullptr;
  const long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < min || x > max) {
    return invalid_argument(name + " expects an integer in [" + std::to_string(min) + ", " +
                            std::to_string(max) + "], got " + quote_name(v));
  }
  return static_cast<int>(x);
}

Result<double> parse_double(const std::string& what, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double x = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(x)) {
    return invalid_argument(what + " expects a number, got " + quote_name(text));
  }
  return x;
}

Result<double> Args::get_double(const std::string& name, double def, double min, double max) const {
  if (!has(name)) return def;
  ASSIGN_OR_RETURN(double x, parse_double(name, get(name)));
  if (x < min || x > max) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    return invalid_argument(name + " expects a number in " + range.str() + ", got '" + get(name) +
                            "'");
  }
  return x;
}

Result<Args> parse(int argc, char** argv, int first, const std::vector<FlagSpec>& specs) {
  Args args;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.size() < 2 || a[0] != '-') {
      args.positional.push_back(a);
      continue;
    }
    std::string key = a, value;
    bool has_value = false;
    const size_t eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      key = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    const FlagSpec* spec = nullptr;
    for (const FlagSpec& s : specs) {
      if (s.name == key || (!s.alias.empty() && s.alias == key)) spec = &s;
    }
    if (spec == nullptr)
      return invalid_argument("unknown option " + quote_name(key) + " (see --help)");
    if (spec->takes_value) {
      if (!has_value) {
        if (i + 1 >= argc) return invalid_argument("option " + spec->name + " needs a value");
        value = argv[++i];
      }
    } else if (has_value) {
      return invalid_argument("option " + spec->name + " takes no value");
    }
    auto& slot = args.flags[spec->name];
    if (!slot.empty() && !spec->repeatable) {
      return invalid_argument("option " + spec->name + " given more than once");
    }
    slot.push_back(value);
  }
  return args;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, ',')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

std::vector<std::string> split_device_list(const std::string& s) {
  std::vector<std::string> out;
  for (const std::string& part : split_commas(s)) {
    if (!out.empty() && std::isdigit(static_cast<unsigned char>(part[0]))) {
      out.back() += "," + part;
    } else {
      out.push_back(part);
    }
  }
  return out;
}

Result<std::map<std::string, double>> parse_device_factors(const std::string& flag,
                                                           const std::vector<std::string>& values) {
  std::map<std::string, double> out;
  for (const std::string& value : values) {
    for (const std::string& item : split_device_list(value)) {
      const size_t eq = item.rfind('=');
      if (eq == std::string::npos || eq == 0) {
        return invalid_argument(flag + ": " + quote_name(item) +
                                " is not DEVICE=FACTOR (e.g. cpu:0,3-5=0.5)");
      }
      const std::string device = item.substr(0, eq);
      ASSIGN_OR_RETURN(double f,
                       parse_double(flag + " " + quote_name(device), item.substr(eq + 1)));
      if (!out.emplace(device, f).second) {
        return invalid_argument(flag + ": " + quote_name(device) + " is given twice");
      }
    }
  }
  return out;
}

std::string usage(const std::vector<FlagSpec>& specs) {
  std::string s;
  for (const FlagSpec& f : specs) {
    std::string left = "  " + f.name;
    if (!f.alias.empty()) left += ", " + f.alias;
    if (f.takes_value) left += " VALUE";
    if (left.size() < 26) left.append(26 - left.size(), ' ');
    s += left + " " + f.help + "\n";
  }
  return s;
}

Status parse_shape_flag(const std::string& flag, std::map<std::string, std::vector<int64_t>>* out) {
  const size_t eq = flag.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    return invalid_argument("--shape '" + flag +
                            "': expected NAME=DIMxDIMx... (e.g. x=1x3x224x224)");
  }
  const std::string name = flag.substr(0, eq);
  std::vector<int64_t> dims;
  size_t start = eq + 1;
  while (true) {
    const size_t x = flag.find('x', start);
    const std::string part = flag.substr(start, x == std::string::npos ? x : x - start);
    char* end = nullptr;
    const long long v = part.empty() ? 0 : std::strtoll(part.c_str(), &end, 10);
    if (part.empty() || *end != '\0' || v < 1) {
      return invalid_argument("--shape " + quote_name(flag) + ": dimension " +
                              std::to_string(dims.size()) + " (" + quote_name(part) +
                              ") is not a positive integer");
    }
    dims.push_back(v);
    if (x == std::string::npos) break;
    start = x + 1;
  }
  if (!out->emplace(name, std::move(dims)).second)
    return invalid_argument("--shape given twice for input " + quote_name(name));
  return Status();
}

}  // namespace tessera::cli

namespace tessera::tools {

int report_error(const char* command, const Status& s) {
  std::fprintf(stderr, "tessera %s: error: %s\n", command, s.to_string().c_str());
  return 1;
}

}  // namespace tessera::tools
