// The process-wide Vulkan instance and the physical devices that can run compute.
//
// Probed once, on first use: open the loader, create an instance (Vulkan 1.1), enumerate
// physical devices and keep those with a compute queue family. A failure at any step (no loader,
// no driver/ICD, no device) is remembered as a Status: the registry then lists no vulkan device
// and open_device("vulkan:0") returns that Status.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_api.h"
#include "core/status.h"

namespace tessera {

// One physical device as the context found it. vulkan:N is physical_devices()[N].
struct VulkanPhysicalDevice {
  VkPhysicalDevice handle = VK_NULL_HANDLE;
  VkPhysicalDeviceProperties properties{};
  VkPhysicalDeviceMemoryProperties memory{};
  uint32_t compute_queue_family = 0;
  bool timestamps = false;  // the compute queue supports timestamp queries

  std::string name() const { return properties.deviceName; }
  // Software rasterisers (lavapipe/llvmpipe) report VK_PHYSICAL_DEVICE_TYPE_CPU.
  bool is_cpu() const { return properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU; }
  // Sum of the device-local heaps.
  uint64_t device_local_bytes() const;
  // "discrete GPU", "integrated GPU", "CPU (software)"...
  const char* type_name() const;
};

class VulkanContext {
 public:
  // The shared context, or the Status of the failed probe.
  static Result<std::shared_ptr<VulkanContext>> get();
  ~VulkanContext();
  VulkanContext(const VulkanContext&) = delete;
  VulkanContext& operator=(const VulkanContext&) = delete;

  const VulkanApi& api() const { return api_; }
  VkInstance instance() const { return instance_; }
  const std::vector<VulkanPhysicalDevice>& physical_devices() const { return devices_; }

 private:
  VulkanContext() = default;
  Status init();

  VulkanApi api_;
  VkInstance instance_ = VK_NULL_HANDLE;
  std::vector<VulkanPhysicalDevice> devices_;
};

}  // namespace tessera
