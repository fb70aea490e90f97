// One opened Vulkan device: the logical device, its compute queue, memory, pipelines and
// command submission. Shared (shared_ptr) by the Device and every Program compiled on it.
//
// Memory: tensors live in device-local buffers; the host reaches them through host-visible,
// coherent staging buffers and vkCmdCopyBuffer (on unified-memory devices such as lavapipe the
// two memory types may coincide; the copies stay correct).
// Pipelines: one per (shader, specialisation constants), cached; every pipeline uses the layout
// for its number of storage-buffer bindings plus a 128-byte push-constant block.
// Failure: every Vulkan error becomes a Status naming the call (vk_status). After
// VK_ERROR_DEVICE_LOST the device is marked lost and every later call fails fast.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backends/vulkan/spirv.h"
#include "backends/vulkan/vulkan_context.h"
#include "core/status.h"

namespace tessera {

class VulkanGpu;

// A VkBuffer with its own memory. Host-visible buffers stay mapped.
class GpuBuffer {
 public:
  GpuBuffer(std::shared_ptr<VulkanGpu> gpu, VkBuffer buffer, VkDeviceMemory memory, uint64_t size,
            void* mapped);
  ~GpuBuffer();
  GpuBuffer(const GpuBuffer&) = delete;
  GpuBuffer& operator=(const GpuBuffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  void* mapped() const { return mapped_; }  // null for device-local buffers

 private:
  std::shared_ptr<VulkanGpu> gpu_;
  VkBuffer buffer_;
  VkDeviceMemory memory_;
  uint64_t size_;
  void* mapped_;
};

// Device-local memory that several buffers are bound into (a program's activation arena).
class GpuMemory {
 public:
  GpuMemory(std::shared_ptr<VulkanGpu> gpu, VkDeviceMemory memory, uint64_t size);
  ~GpuMemory();
  GpuMemory(const GpuMemory&) = delete;
  GpuMemory& operator=(const GpuMemory&) = delete;

  VkDeviceMemory handle() const { return memory_; }
  uint64_t size() const { return size_; }

 private:
  std::shared_ptr<VulkanGpu> gpu_;
  VkDeviceMemory memory_;
  uint64_t size_;
};

inline constexpr int kMaxBindings = 5;
inline constexpr uint32_t kPushConstantBytes = 128;

class VulkanGpu : public std::enable_shared_from_this<VulkanGpu> {
 public:
  // Opens physical device `index` of the context.
  static Result<std::shared_ptr<VulkanGpu>> open(std::shared_ptr<VulkanContext> context, int index);
  ~VulkanGpu();
  VulkanGpu(const VulkanGpu&) = delete;
  VulkanGpu& operator=(const VulkanGpu&) = delete;

  const VulkanApi& api() const { return context_->api(); }
  VkDevice device() const { return device_; }
  const VulkanPhysicalDevice& physical() const { return physical_; }
  int index() const { return index_; }

  // The largest buffer one descriptor can address: min(maxStorageBufferRange, the largest heap).
  uint64_t max_buffer_bytes() const;

  // Allocates `bytes` (rounded up to 16) of device-local or host-visible memory.
  // ResourceExhausted when the memory is not there.
  Result<std::unique_ptr<GpuBuffer>> create_buffer(uint64_t bytes, bool host_visible);

  // Arenas: one device-local allocation, buffers bound into it at offsets that are multiples of
  // buffer_alignment(). Buffers bound at overlapping ranges alias each other's bytes; the
  // buffer does not own (or free) the memory, which must outlive it.
  uint64_t buffer_alignment() const { return buffer_alignment_; }
  Result<std::unique_ptr<GpuMemory>> allocate_memory(uint64_t bytes);
  Result<std::unique_ptr<GpuBuffer>> create_buffer_at(const GpuMemory& memory, uint64_t offset,
                                                      uint64_t bytes);

  // The pipeline running `shader` with `spec` as specialisation constants 0..n-1 and
  // `bindings` storage buffers at bindings 0..bindings-1.
  Result<VkPipeline> pipeline(const SpirvShader& shader, std::span<const uint32_t> spec,
                              int bindings);
  VkPipelineLayout pipeline_layout(int bindings) const { return pipeline_layouts_[bindings]; }
  VkDescriptorSetLayout set_layout(int bindings) const { return set_layouts_[bindings]; }
  size_t num_pipelines() const { return pipelines_.size(); }

  // Copies host bytes into `dst` at `offset` (through a staging buffer) and waits.
  Status write_buffer(GpuBuffer& dst, uint64_t offset, const void* src, uint64_t bytes);
  // Copies bytes of `src` at `offset` to the host and waits.
  Status read_buffer(const GpuBuffer& src, uint64_t offset, void* dst, uint64_t bytes);

  // Command buffers from the device's pool.
  Result<VkCommandBuffer> allocate_command_buffer();
  void free_command_buffer(VkCommandBuffer cb);
  // Submits one recorded command buffer to the compute queue and waits for it.
  Status submit_and_wait(VkCommandBuffer cb);

  // Checks a result; on VK_ERROR_DEVICE_LOST marks the device lost.
  Status check(VkResult r, const std::string& what);
  bool lost() const { return lost_; }
  Status lost_status() const;

 private:
  VulkanGpu(std::shared_ptr<VulkanContext> context, int index);
  Status init();
  int memory_type(uint32_t type_bits, bool host_visible) const;
  // A storage/transfer VkBuffer of `size` bytes without memory; `what` names it in errors.
  Result<VkBuffer> new_buffer(uint64_t size, const std::string& what);
  // ResourceExhausted when one descriptor cannot address `size` bytes.
  Status check_bindable(uint64_t size, const std::string& what) const;

  std::shared_ptr<VulkanContext> context_;
  int index_;
  VulkanPhysicalDevice physical_;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layouts_[kMaxBindings + 1] = {};
  VkPipelineLayout pipeline_layouts_[kMaxBindings + 1] = {};
  std::map<std::string, VkShaderModule> modules_;
  std::map<std::vector<uint32_t>, VkPipeline> pipelines_;  // key: shader address, bindings, spec
  std::recursive_mutex mutex_;  // guards the caches, the pool and the queue
  bool lost_ = false;
  // Memory requirements every device-local storage buffer shares (same usage flags).
  uint64_t buffer_alignment_ = 256;
  uint32_t buffer_type_bits_ = ~0u;
};

}  // namespace tessera
