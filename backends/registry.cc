#include "backends/registry.h"

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
    return unimplemented("device " + quote_name(name) + ": precision " +
                         precision_name(d.precision) + " is offered by cpu devices only");
  }
  for (const Backend* b : kBackends) {
    if (d.kind == b->kind) return b->open(d);
  }
  return not_found("device " + quote_name(name) + ": the " + d.kind +
                   " backend is not available in this build (run `tessera devices` to list the "
                   "devices this machine offers)");
}

std::vector<DeviceListing> list_devices() {
  std::vector<DeviceListing> out;
  for (const Backend* b : kBackends) b->list(&out);
  return out;
}

}  // namespace tessera
