// Device names (backends/registry.h): parsing and printing only, without the backends, so that
// the readers of platform and profile files (and their fuzz targets) need nothing else.
#include <cctype>
#include <charconv>
#include <cmath>

#include "backends/registry.h"

namespace tessera {

namespace {

const char* const kKnownKinds[] = {"reference", "cpu", "opencl", "vulkan", "npu", "remote"};

const char kForms[] =
    "expected reference, cpu, cpu:A-B, opencl:N, vulkan:N, npu:N or remote:HOST:PORT, "
    "optionally followed by #PRECISION (f32, bf16, int8) and @MHz";

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::kF32:
      return "f32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
  }
  return "unknown";
}

Result<Precision> parse_precision(std::string_view name) {
  for (Precision p : kAllPrecisions) {
    if (name == precision_name(p)) return p;
  }
  return invalid_argument(quote_name(name) + " is not a precision (expected f32, bf16 or int8)");
}

std::string DeviceName::to_string() const {
  std::string s = kind;
  if (!spec.empty()) s += ":" + spec;
  if (precision != Precision::kF32) s += std::string("#") + precision_name(precision);
  if (mhz > 0) s += "@" + std::to_string(mhz);
  return s;
}

std::string DeviceName::base() const {
  DeviceName d = *this;
  d.precision = Precision::kF32;
  return d.to_string();
}

Result<DeviceName> parse_device_name(const std::string& name) {
  DeviceName d;
  std::string rest = name;
  const size_t at = rest.find('@');
  if (at != std::string::npos) {
    const std::string mhz = rest.substr(at + 1);
    if (!all_digits(mhz) || mhz.size() > 6 || std::stoi(mhz) == 0) {
      return invalid_argument("device " + quote_name(name) + ": " + quote_name("@" + mhz) +
                              " is not a frequency in MHz");
    }
    d.mhz = std::stoi(mhz);
    rest = rest.substr(0, at);
  }
  const size_t hash = rest.find('#');
  if (hash != std::string::npos) {
    Result<Precision> p = parse_precision(rest.substr(hash + 1));
    if (!p.ok()) return p.status().with_context("device " + quote_name(name));
    d.precision = *p;
    rest = rest.substr(0, hash);
  }
  const size_t colon = rest.find(':');
  d.kind = rest.substr(0, colon);
  if (colon != std::string::npos) d.spec = rest.substr(colon + 1);
  bool known = false;
  for (const char* k : kKnownKinds) known = known || d.kind == k;
  if (!known) return invalid_argument("unknown device " + quote_name(name) + ": " + kForms);
  if (d.kind == "reference" && !d.spec.empty()) {
    return invalid_argument("device " + quote_name(name) + ": reference takes no index");
  }
  if ((d.kind == "opencl" || d.kind == "vulkan" || d.kind == "npu") &&
      !(d.spec.empty() || (all_digits(d.spec) && d.spec.size() < 4))) {
    return invalid_argument("device " + quote_name(name) + ": " + quote_name(d.spec) +
                            " is not a device index");
  }
  if (d.kind == "cpu" && !d.spec.empty()) {
    for (char c : d.spec) {
      if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-' && c != ',') {
        return invalid_argument("device " + quote_name(name) + ": " + quote_name(d.spec) +
                                " is not a core set such as 0-3 or 0,2");
      }
    }
  }
  if (d.kind == "remote" && d.spec.rfind(':') == std::string::npos) {
    return invalid_argument("device " + quote_name(name) +
                            ": remote devices are written remote:HOST:PORT");
  }
  return d;
}

std::string format_ratio(double r) {
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof(buf), r);
  return std::string(buf, res.ptr);
}

std::string split_device_name(const SplitSpec& spec) {
  std::string s = std::string("split:") + split_method_name(spec.method) + ":";
  for (size_t i = 0; i < spec.devices.size(); ++i) {
    if (i > 0) s += "+";
    s += spec.devices[i] + "=" + format_ratio(i < spec.ratios.size() ? spec.ratios[i] : 0.0);
  }
  return s;
}

Result<SplitSpec> parse_split_device_name(const std::string& name) {
  const std::string forms =
      "expected split:METHOD:DEVICE=RATIO+DEVICE=RATIO..., e.g. "
      "split:conv-channel:cpu:0=0.5+cpu:1=0.5";
  if (name.rfind("split:", 0) != 0) return invalid_argument(quote_name(name) + ": " + forms);
  const size_t colon = name.find(':', 6);
  if (colon == std::string::npos) return invalid_argument(quote_name(name) + ": " + forms);
  SplitSpec spec;
  auto method = parse_split_method(name.substr(6, colon - 6));
  if (!method.ok()) return method.status().with_context("device " + quote_name(name));
  spec.method = *method;
  std::string rest = name.substr(colon + 1);
  size_t pos = 0;
  while (pos <= rest.size()) {
    size_t plus = rest.find('+', pos);
    if (plus == std::string::npos) plus = rest.size();
    const std::string part = rest.substr(pos, plus - pos);
    const size_t eq = part.rfind('=');
    if (eq == std::string::npos || eq == 0) {
      return invalid_argument("device " + quote_name(name) + ": member " + quote_name(part) +
                              " has no =RATIO; " + forms);
    }
    double r = 0;
    const std::string num = part.substr(eq + 1);
    auto res = std::from_chars(num.data(), num.data() + num.size(), r);
    if (res.ec != std::errc() || res.ptr != num.data() + num.size() || !(r > 0) ||
        !std::isfinite(r)) {
      return invalid_argument("device " + quote_name(name) + ": ratio " + quote_name(num) +
                              " of member " + quote_name(part.substr(0, eq)) +
                              " is not a positive number");
    }
    spec.devices.push_back(part.substr(0, eq));
    spec.ratios.push_back(r);
    pos = plus + 1;
  }
  if (spec.devices.size() < 2) {
    return invalid_argument("device " + quote_name(name) +
                            ": a split needs at least 2 member devices");
  }
  return spec;
}

}  // namespace tessera
