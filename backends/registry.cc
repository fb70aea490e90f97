#include "backends/registry.h"

#include <cctype>

#include "backends/cpu/cpu_device.h"
#include "backends/npu/npu_device.h"
#include "backends/reference/reference_device.h"
#include "backends/remote/remote_device.h"
#include "backends/split/split_device.h"
#ifdef TESSERA_HAVE_VULKAN
#include "backends/vulkan/vulkan_device.h"
#endif
#ifdef TESSERA_HAVE_OPENCL
#include "backends/opencl/opencl_device.h"
#endif

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
      return invalid_argument("device '" + name + "': '@" + mhz + "' is not a frequency in MHz");
    }
    d.mhz = std::stoi(mhz);
    rest = rest.substr(0, at);
  }
  const size_t hash = rest.find('#');
  if (hash != std::string::npos) {
    Result<Precision> p = parse_precision(rest.substr(hash + 1));
    if (!p.ok()) return p.status().with_context("device '" + name + "'");
    d.precision = *p;
    rest = rest.substr(0, hash);
  }
  const size_t colon = rest.find(':');
  d.kind = rest.substr(0, colon);
  if (colon != std::string::npos) d.spec = rest.substr(colon + 1);
  bool known = false;
  for (const char* k : kKnownKinds) known = known || d.kind == k;
  if (!known) return invalid_argument("unknown device '" + name + "': " + kForms);
  if (d.kind == "reference" && !d.spec.empty()) {
    return invalid_argument("device '" + name + "': reference takes no index");
  }
  if ((d.kind == "opencl" || d.kind == "vulkan" || d.kind == "npu") &&
      !(d.spec.empty() || (all_digits(d.spec) && d.spec.size() < 4))) {
    return invalid_argument("device '" + name + "': '" + d.spec + "' is not a device index");
  }
  if (d.kind == "cpu" && !d.spec.empty()) {
    for (char c : d.spec) {
      if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-' && c != ',') {
        return invalid_argument("device '" + name + "': '" + d.spec +
                                "' is not a core set such as 0-3 or 0,2");
      }
    }
  }
  if (d.kind == "remote" && d.spec.rfind(':') == std::string::npos) {
    return invalid_argument("device '" + name + "': remote devices are written remote:HOST:PORT");
  }
  return d;
}

namespace {

// The backends built into this Tessera, in the order `tessera devices` lists them.
const Backend* const kBackends[] = {
    &kReferenceBackend, &kCpuBackend,
#ifdef TESSERA_HAVE_OPENCL
    &kOpenCLBackend,
#endif
#ifdef TESSERA_HAVE_VULKAN
    &kVulkanBackend,
#endif
    &kNpuBackend,       &kRemoteBackend,
};

}  // namespace

Result<std::unique_ptr<Device>> open_device(const std::string& name) {
  // A split placement (backends/split/split_device.h) opens its members through this registry.
  if (name.rfind("split:", 0) == 0) {
    ASSIGN_OR_RETURN(SplitSpec spec, parse_split_device_name(name));
    return open_split_device(spec, [](const std::string& member) { return open_device(member); });
  }
  ASSIGN_OR_RETURN(DeviceName d, parse_device_name(name));
  if (d.precision != Precision::kF32 && d.kind != "cpu") {
    return unimplemented("device '" + name + "': precision " + precision_name(d.precision) +
                         " is offered by cpu devices only");
  }
  for (const Backend* b : kBackends) {
    if (d.kind == b->kind) return b->open(d);
  }
  return not_found("device '" + name + "': the " + d.kind +
                   " backend is not available in this build (run `tessera devices` to list the "
                   "devices this machine offers)");
}

std::vector<DeviceListing> list_devices() {
  std::vector<DeviceListing> out;
  for (const Backend* b : kBackends) b->list(&out);
  return out;
}

}  // namespace tessera
