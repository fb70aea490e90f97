#include "backends/vulkan/vulkan_api.h"

#include <dlfcn.h>

#include <cstdlib>

#include "core/dl_error.h"

namespace tessera {

namespace {

// Fetches `name` into `*slot`; records the first missing name.
template <typename Fn>
void load(PFN_vkGetInstanceProcAddr gipa, VkInstance instance, Fn* slot, const char* name,
          std::string* missing) {
  *slot = reinterpret_cast<Fn>(gipa(instance, name));
  if (*slot == nullptr && missing->empty()) *missing = name;
}

}  // namespace

Status VulkanApi::open_loader() {
  if (library != nullptr) return Status();
  const char* override_path = std::getenv("TESSERA_VULKAN_LOADER");
  const char* path = override_path != nullptr ? override_path : "libvulkan.so.1";
  library = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);  // ICDs keep threads and TLS
  if (library == nullptr) {
    const std::string err = take_dl_error();
    return not_found(std::string("Vulkan loader '") + path + "' cannot be opened (" +
                     (err.empty() ? "unknown error" : err) +
                     "); install libvulkan1 and a Vulkan driver (e.g. mesa-vulkan-drivers)");
  }
  vkGetInstanceProcAddr =
      reinterpret_cast<PFN_vkGetInstanceProcAddr>(dlsym(library, "vkGetInstanceProcAddr"));
  if (vkGetInstanceProcAddr == nullptr) {
    take_dl_error();
    close();
    return not_found(std::string("Vulkan loader '") + path + "' has no vkGetInstanceProcAddr");
  }
  std::string missing;
  load(vkGetInstanceProcAddr, nullptr, &vkCreateInstance, "vkCreateInstance", &missing);
  if (!missing.empty()) {
    close();
    return not_found(std::string("Vulkan loader '") + path + "' has no " + missing);
  }
  return Status();
}

Status VulkanApi::load_instance_functions(VkInstance instance) {
  std::string m;
  const PFN_vkGetInstanceProcAddr g = vkGetInstanceProcAddr;
  load(g, instance, &vkDestroyInstance, "vkDestroyInstance", &m);
  load(g, instance, &vkEnumeratePhysicalDevices, "vkEnumeratePhysicalDevices", &m);
  load(g, instance, &vkGetPhysicalDeviceProperties, "vkGetPhysicalDeviceProperties", &m);
  load(g, instance, &vkGetPhysicalDeviceQueueFamilyProperties,
       "vkGetPhysicalDeviceQueueFamilyProperties", &m);
  load(g, instance, &vkGetPhysicalDeviceMemoryProperties, "vkGetPhysicalDeviceMemoryProperties",
       &m);
  load(g, instance, &vkCreateDevice, "vkCreateDevice", &m);
  load(g, instance, &vkDestroyDevice, "vkDestroyDevice", &m);
  load(g, instance, &vkGetDeviceQueue, "vkGetDeviceQueue", &m);
  load(g, instance, &vkDeviceWaitIdle, "vkDeviceWaitIdle", &m);
  load(g, instance, &vkCreateBuffer, "vkCreateBuffer", &m);
  load(g, instance, &vkDestroyBuffer, "vkDestroyBuffer", &m);
  load(g, instance, &vkGetBufferMemoryRequirements, "vkGetBufferMemoryRequirements", &m);
  load(g, instance, &vkAllocateMemory, "vkAllocateMemory", &m);
  load(g, instance, &vkFreeMemory, "vkFreeMemory", &m);
  load(g, instance, &vkBindBufferMemory, "vkBindBufferMemory", &m);
  load(g, instance, &vkMapMemory, "vkMapMemory", &m);
  load(g, instance, &vkUnmapMemory, "vkUnmapMemory", &m);
  load(g, instance, &vkFlushMappedMemoryRanges, "vkFlushMappedMemoryRanges", &m);
  load(g, instance, &vkInvalidateMappedMemoryRanges, "vkInvalidateMappedMemoryRanges", &m);
  load(g, instance, &vkCreateShaderModule, "vkCreateShaderModule", &m);
  load(g, instance, &vkDestroyShaderModule, "vkDestroyShaderModule", &m);
  load(g, instance, &vkCreateDescriptorSetLayout, "vkCreateDescriptorSetLayout", &m);
  load(g, instance, &vkDestroyDescriptorSetLayout, "vkDestroyDescriptorSetLayout", &m);
  load(g, instance, &vkCreatePipelineLayout, "vkCreatePipelineLayout", &m);
  load(g, instance, &vkDestroyPipelineLayout, "vkDestroyPipelineLayout", &m);
  load(g, instance, &vkCreateComputePipelines, "vkCreateComputePipelines", &m);
  load(g, instance, &vkDestroyPipeline, "vkDestroyPipeline", &m);
  load(g, instance, &vkCreateDescriptorPool, "vkCreateDescriptorPool", &m);
  load(g, instance, &vkDestroyDescriptorPool, "vkDestroyDescriptorPool", &m);
  load(g, instance, &vkAllocateDescriptorSets, "vkAllocateDescriptorSets", &m);
  load(g, instance, &vkUpdateDescriptorSets, "vkUpdateDescriptorSets", &m);
  load(g, instance, &vkCreateCommandPool, "vkCreateCommandPool", &m);
  load(g, instance, &vkDestroyCommandPool, "vkDestroyCommandPool", &m);
  load(g, instance, &vkAllocateCommandBuffers, "vkAllocateCommandBuffers", &m);
  load(g, instance, &vkFreeCommandBuffers, "vkFreeCommandBuffers", &m);
  load(g, instance, &vkBeginCommandBuffer, "vkBeginCommandBuffer", &m);
  load(g, instance, &vkEndCommandBuffer, "vkEndCommandBuffer", &m);
  load(g, instance, &vkCmdBindPipeline, "vkCmdBindPipeline", &m);
  load(g, instance, &vkCmdBindDescriptorSets, "vkCmdBindDescriptorSets", &m);
  load(g, instance, &vkCmdPushConstants, "vkCmdPushConstants", &m);
  load(g, instance, &vkCmdDispatch, "vkCmdDispatch", &m);
  load(g, instance, &vkCmdPipelineBarrier, "vkCmdPipelineBarrier", &m);
  load(g, instance, &vkCmdCopyBuffer, "vkCmdCopyBuffer", &m);
  load(g, instance, &vkCmdResetQueryPool, "vkCmdResetQueryPool", &m);
  load(g, instance, &vkCmdWriteTimestamp, "vkCmdWriteTimestamp", &m);
  load(g, instance, &vkCreateQueryPool, "vkCreateQueryPool", &m);
  load(g, instance, &vkDestroyQueryPool, "vkDestroyQueryPool", &m);
  load(g, instance, &vkGetQueryPoolResults, "vkGetQueryPoolResults", &m);
  load(g, instance, &vkCreateFence, "vkCreateFence", &m);
  load(g, instance, &vkDestroyFence, "vkDestroyFence", &m);
  load(g, instance, &vkResetFences, "vkResetFences", &m);
  load(g, instance, &vkWaitForFences, "vkWaitForFences", &m);
  load(g, instance, &vkQueueSubmit, "vkQueueSubmit", &m);
  if (!m.empty()) return internal_error("the Vulkan loader does not provide " + m);
  return Status();
}

void VulkanApi::close() {
  if (library != nullptr) dlclose(library);
  *this = VulkanApi();
}

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT";
    case VK_INCOMPLETE:
      return "VK_INCOMPLETE";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED:
      return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FORMAT_NOT_SUPPORTED:
      return "VK_ERROR_FORMAT_NOT_SUPPORTED";
    case VK_ERROR_FRAGMENTED_POOL:
      return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "VkResult error";
  }
}

Status vk_status(VkResult r, const std::string& what) {
  const std::string msg = "vulkan: " + what + " failed: " + vk_result_name(r) + " (" +
                          std::to_string(static_cast<int>(r)) + ")";
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS:
      return resource_exhausted(msg);
    case VK_ERROR_DEVICE_LOST:
      return internal_error(msg + "; the device was lost (driver reset or hang), reopen it");
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_INITIALIZATION_FAILED:
      return not_found(msg);
    default:
      return internal_error(msg);
  }
}

}  // namespace tessera
