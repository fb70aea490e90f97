#include "backends/vulkan/vulkan_device.h"

#include <cstring>

#include "backends/vulkan/pipelines/kernel.h"
#include "backends/vulkan/vulkan_program.h"

namespace tessera {

namespace {

// A tensor uploaded with Device::upload.
class VulkanBuffer final : public Buffer {
 public:
  VulkanBuffer(std::unique_ptr<GpuBuffer> buffer, TensorInfo info)
      : buffer_(std::move(buffer)), info_(std::move(info)) {}
  size_t byte_size() const override { return static_cast<size_t>(info_.byte_size()); }
  const GpuBuffer& buffer() const { return *buffer_; }
  const TensorInfo& info() const { return info_; }

 private:
  std::unique_ptr<GpuBuffer> buffer_;
  TensorInfo info_;
};

std::string mib(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

VulkanDevice::VulkanDevice(std::shared_ptr<VulkanGpu> gpu)
    : gpu_(std::move(gpu)), name_("vulkan:" + std::to_string(gpu_->index())) {}

std::string VulkanDevice::limits_summary() const {
  const VkPhysicalDeviceLimits& l = gpu_->physical().properties.limits;
  std::string heaps;
  const VkPhysicalDeviceMemoryProperties& m = gpu_->physical().memory;
  for (uint32_t i = 0; i < m.memoryHeapCount; ++i) {
    heaps += (heaps.empty() ? "" : " + ") + mib(m.memoryHeaps[i].size) +
             ((m.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? " local" : " host");
  }
  return "max buffer " + mib(gpu_->max_buffer_bytes()) + ", max workgroup " +
         std::to_string(l.maxComputeWorkGroupInvocations) + " (" +
         std::to_string(l.maxComputeWorkGroupSize[0]) + "x" +
         std::to_string(l.maxComputeWorkGroupSize[1]) + "x" +
         std::to_string(l.maxComputeWorkGroupSize[2]) + "), shared " +
         std::to_string(l.maxComputeSharedMemorySize / 1024) + " KiB, heaps " + heaps;
}

std::string VulkanDevice::description() const {
  const VulkanPhysicalDevice& p = gpu_->physical();
  const uint32_t v = p.properties.apiVersion;
  return "Vulkan " + std::to_string(VK_API_VERSION_MAJOR(v)) + "." +
         std::to_string(VK_API_VERSION_MINOR(v)) + " " + p.type_name() + " " +
         quote_name(p.name()) + ", " + limits_summary();
}

Capability VulkanDevice::capabilities(const Graph& g, const Node& node) const {
  if (gpu_->lost()) return Capability::no(gpu_->lost_status().message());
  const VulkanKernel* k = find_vulkan_kernel(node.kind);
  if (k == nullptr) {
    return Capability::no(std::string("the vulkan backend has no kernel for ") +
                          op_name(node.kind));
  }
  const uint64_t max_bytes = gpu_->max_buffer_bytes();
  auto check_value = [&](ValueId v, bool data_input) -> Capability {
    const Value& val = g.value(v);
    if (!val.has_info)
      return Capability::no("value " + quote_name(val.name) + " has no inferred shape");
    if (!k->alias && !k->any_dtype && data_input && val.info.dtype != DType::kF32) {
      return Capability::no("value " + quote_name(val.name) + " is " + dtype_name(val.info.dtype) +
                            "; the vulkan kernels compute f32 only");
    }
    if (val.info.byte_size() > max_bytes) {
      return Capability::no(
          "tensor " + quote_name(val.name) + " (" + std::to_string(val.info.byte_size()) +
          " bytes) exceeds the largest buffer this device can bind (" + std::to_string(max_bytes) +
          " bytes: maxStorageBufferRange " +
          std::to_string(gpu_->physical().properties.limits.maxStorageBufferRange) + ")");
    }
    if (val.info.shape.numel() >= (int64_t{1} << 31)) {
      return Capability::no("tensor " + quote_name(val.name) + " has 2^31 or more elements");
    }
    return Capability::yes();
  };
  for (ValueId v : node.outputs) {
    Capability c = check_value(v, true);
    if (!c.supported) return c;
  }
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const ValueId v = node.inputs[i];
    if (v == kNoValue) continue;
    // Integer constants (shapes, axes, indices) are read on the host; everything else is data.
    const bool data = !(g.value(v).is_constant && g.value(v).info.dtype != DType::kF32);
    if (static_cast<int>(i) == k->split_input && g.value(v).is_constant) continue;
    Capability c = check_value(v, data);
    if (!c.supported) return c;
  }
  if (k->supports != nullptr) return k->supports(g, node, *gpu_);
  return Capability::yes();
}

uint64_t VulkanDevice::memory_capacity() const {
  // Device-local heaps; on a software device (lavapipe) that is host memory shared with the CPU.
  return gpu_->physical().device_local_bytes();
}

DeviceInfo VulkanDevice::info() const {
  const auto type = gpu_->physical().properties.deviceType;
  const bool host_visible =
      type == VK_PHYSICAL_DEVICE_TYPE_CPU || type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU;
  return DeviceInfo{DeviceKind::kGpu, memory_capacity(), host_visible, 1};
}

Result<std::unique_ptr<Program>> VulkanDevice::compile_program(const Graph& g,
                                                               std::span<const NodeId> layers,
                                                               const CompileOptions& /*options*/) {
  RETURN_IF_ERROR(check_capabilities(*this, g, layers));
  ASSIGN_OR_RETURN(std::unique_ptr<VulkanProgram> p, VulkanProgram::create(gpu_, g, layers));
  return std::unique_ptr<Program>(std::move(p));
}

Result<std::unique_ptr<Buffer>> VulkanDevice::upload(const Tensor& host) {
  ASSIGN_OR_RETURN(std::unique_ptr<GpuBuffer> b, gpu_->create_buffer(host.byte_size(), false));
  RETURN_IF_ERROR(gpu_->write_buffer(*b, 0, host.raw(), host.byte_size()));
  return std::unique_ptr<Buffer>(new VulkanBuffer(std::move(b), {host.dtype(), host.shape()}));
}

Status VulkanDevice::download(const Buffer& device, Tensor* host) {
  const auto* vb = dynamic_cast<const VulkanBuffer*>(&device);
  if (vb == nullptr)
    return invalid_argument("buffer does not belong to device " + quote_name(name_));
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(vb->info().dtype, vb->info().shape));
  RETURN_IF_ERROR(gpu_->read_buffer(vb->buffer(), 0, t.raw(), t.byte_size()));
  *host = std::move(t);
  return Status();
}

namespace {

void list_vulkan(std::vector<DeviceListing>* out) {
  Result<std::shared_ptr<VulkanContext>> ctx = VulkanContext::get();
  if (!ctx.ok()) return;  // no loader, no driver: no vulkan devices
  const auto& devices = (*ctx)->physical_devices();
  for (size_t i = 0; i < devices.size(); ++i) {
    Result<std::shared_ptr<VulkanGpu>> gpu = VulkanGpu::open(*ctx, static_cast<int>(i));
    if (!gpu.ok()) continue;  // cannot be opened: not offered
    VulkanDevice d(*gpu);
    out->push_back({d.name(), d.description()});
  }
}

Result<std::unique_ptr<Device>> open_vulkan(const DeviceName& name) {
  if (name.mhz != 0) {
    return unimplemented("device '" + name.to_string() +
                         "': the vulkan backend cannot set clock levels");
  }
  const int index = name.spec.empty() ? 0 : std::stoi(name.spec);
  Result<std::shared_ptr<VulkanContext>> ctx = VulkanContext::get();
  if (!ctx.ok()) return ctx.status().with_context("device " + quote_name(name.to_string()));
  ASSIGN_OR_RETURN(std::shared_ptr<VulkanGpu> gpu, VulkanGpu::open(*ctx, index));
  return std::unique_ptr<Device>(new VulkanDevice(std::move(gpu)));
}

}  // namespace

const Backend kVulkanBackend = {"vulkan", list_vulkan, open_vulkan};

}  // namespace tessera
