#include "backends/vulkan/vulkan_context.h"

#include <mutex>

#include "core/dl_error.h"

namespace tessera {

uint64_t VulkanPhysicalDevice::device_local_bytes() const {
  uint64_t total = 0;
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i) {
    if (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) {
      total += memory.memoryHeaps[i].size;
    }
  }
  return total;
}

const char* VulkanPhysicalDevice::type_name() const {
  switch (properties.deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU (software Vulkan)";
    default:
      return "other";
  }
}

Result<std::shared_ptr<VulkanContext>> VulkanContext::get() {
  // The context lives until the process ends and is never destroyed at exit: destroying the
  // instance there unloads the driver, whose own one-time allocations (lavapipe keeps one from
  // vkEnumeratePhysicalDevices in a static) then read as leaked to LeakSanitizer, and tearing a
  // driver down during static destruction races with other exit-time work for nothing.
  static std::once_flag once;
  static auto* context = new std::shared_ptr<VulkanContext>();
  static Status probe;
  std::call_once(once, [] {
    std::shared_ptr<VulkanContext> c(new VulkanContext());
    probe = c->init();
    // The loader and the drivers probe optional libraries and symbols with dl* calls that fail;
    // take the message they leave in this thread's dlerror buffer (core/dl_error.h).
    take_dl_error();
    if (probe.ok()) *context = std::move(c);
  });
  if (!probe.ok()) return probe;
  return *context;
}

VulkanContext::~VulkanContext() {
  if (instance_ != VK_NULL_HANDLE) api_.vkDestroyInstance(instance_, nullptr);
  api_.close();
}

Status VulkanContext::init() {
  // Phase 1: loader and instance.
  RETURN_IF_ERROR(api_.open_loader());
  VkApplicationInfo app{};
  app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
  app.pApplicationName = "tessera";
  app.pEngineName = "tessera";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
  info.pApplicationInfo = &app;
  VkResult r = api_.vkCreateInstance(&info, nullptr, &instance_);
  if (r != VK_SUCCESS) {
    instance_ = VK_NULL_HANDLE;
    return not_found(std::string("vulkan: no usable Vulkan driver (vkCreateInstance: ") +
                     vk_result_name(r) + "); install one, e.g. mesa-vulkan-drivers");
  }
  RETURN_IF_ERROR(api_.load_instance_functions(instance_));

  // Phase 2: physical devices with a compute queue.
  uint32_t count = 0;
  r = api_.vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  if (r != VK_SUCCESS) return vk_status(r, "vkEnumeratePhysicalDevices");
  std::vector<VkPhysicalDevice> handles(count);
  if (count > 0) {
    r = api_.vkEnumeratePhysicalDevices(instance_, &count, handles.data());
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) return vk_status(r, "vkEnumeratePhysicalDevices");
  }
  for (VkPhysicalDevice h : handles) {
    VulkanPhysicalDevice d;
    d.handle = h;
    api_.vkGetPhysicalDeviceProperties(h, &d.properties);
    if (d.properties.apiVersion < VK_API_VERSION_1_1) continue;
    api_.vkGetPhysicalDeviceMemoryProperties(h, &d.memory);
    uint32_t nq = 0;
    api_.vkGetPhysicalDeviceQueueFamilyProperties(h, &nq, nullptr);
    std::vector<VkQueueFamilyProperties> families(nq);
    api_.vkGetPhysicalDeviceQueueFamilyProperties(h, &nq, families.data());
    // Prefer a compute-only family (an async compute queue), else any with compute.
    int chosen = -1;
    for (uint32_t q = 0; q < nq; ++q) {
      if (!(families[q].queueFlags & VK_QUEUE_COMPUTE_BIT)) continue;
      if (chosen < 0 || !(families[q].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
        chosen = static_cast<int>(q);
      }
    }
    if (chosen < 0) continue;
    d.compute_queue_family = static_cast<uint32_t>(chosen);
    d.timestamps = families[static_cast<size_t>(chosen)].timestampValidBits > 0 &&
                   d.properties.limits.timestampPeriod > 0;
    devices_.push_back(d);
  }
  if (devices_.empty()) {
    return not_found("vulkan: the driver offers no device with a compute queue");
  }
  return Status();
}

}  // namespace tessera
