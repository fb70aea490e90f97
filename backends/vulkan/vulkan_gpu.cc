#include "backends/vulkan/vulkan_gpu.h"

#include <algorithm>
#include <cstring>

#include "core/dl_error.h"

namespace tessera {

GpuBuffer::GpuBuffer(std::shared_ptr<VulkanGpu> gpu, VkBuffer buffer, VkDeviceMemory memory,
                     uint64_t size, void* mapped)
    : gpu_(std::move(gpu)), buffer_(buffer), memory_(memory), size_(size), mapped_(mapped) {}

GpuBuffer::~GpuBuffer() {
  const VulkanApi& api = gpu_->api();
  if (mapped_ != nullptr) api.vkUnmapMemory(gpu_->device(), memory_);
  api.vkDestroyBuffer(gpu_->device(), buffer_, nullptr);
  api.vkFreeMemory(gpu_->device(), memory_, nullptr);
}

GpuMemory::GpuMemory(std::shared_ptr<VulkanGpu> gpu, VkDeviceMemory memory, uint64_t size)
    : gpu_(std::move(gpu)), memory_(memory), size_(size) {}

GpuMemory::~GpuMemory() {
  gpu_->api().vkFreeMemory(gpu_->device(), memory_, nullptr);
}

VulkanGpu::VulkanGpu(std::shared_ptr<VulkanContext> context, int index)
    : context_(std::move(context)), index_(index) {}

Result<std::shared_ptr<VulkanGpu>> VulkanGpu::open(std::shared_ptr<VulkanContext> context,
                                                   int index) {
  const int n = static_cast<int>(context->physical_devices().size());
  if (index < 0 || index >= n) {
    return not_found("device 'vulkan:" + std::to_string(index) +
                     "' does not exist: this machine has " + std::to_string(n) +
                     " Vulkan compute device(s) (vulkan:0.." + std::to_string(n - 1) + ")");
  }
  std::shared_ptr<VulkanGpu> gpu(new VulkanGpu(std::move(context), index));
  RETURN_IF_ERROR(gpu->init());
  return gpu;
}

Status VulkanGpu::init() {
  physical_ = context_->physical_devices()[static_cast<size_t>(index_)];
  const VulkanApi& a = api();
  // Phase 1: logical device with one compute queue.
  const float priority = 1.f;
  VkDeviceQueueCreateInfo q{};
  q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
  q.queueFamilyIndex = physical_.compute_queue_family;
  q.queueCount = 1;
  q.pQueuePriorities = &priority;
  VkDeviceCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &q;
  VkResult r = a.vkCreateDevice(physical_.handle, &info, nullptr, &device_);
  // The loader's layers look optional entry points up with dlsym; take the messages the failed
  // lookups leave in this thread's dlerror buffer (core/dl_error.h).
  take_dl_error();
  if (r != VK_SUCCESS) {
    device_ = VK_NULL_HANDLE;
    return vk_status(r, "vkCreateDevice on " + physical_.name());
  }
  a.vkGetDeviceQueue(device_, physical_.compute_queue_family, 0, &queue_);

  // Phase 2: command pool and fence.
  VkCommandPoolCreateInfo pool{};
  pool.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = physical_.compute_queue_family;
  RETURN_IF_ERROR(
      check(a.vkCreateCommandPool(device_, &pool, nullptr, &command_pool_), "vkCreateCommandPool"));
  VkFenceCreateInfo fence{};
  fence.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
  RETURN_IF_ERROR(check(a.vkCreateFence(device_, &fence, nullptr, &fence_), "vkCreateFence"));

  // Phase 3: one descriptor-set and pipeline layout per binding count.
  for (int n = 0; n <= kMaxBindings; ++n) {
    VkDescriptorSetLayoutBinding b[kMaxBindings] = {};
    for (int i = 0; i < n; ++i) {
      b[i].binding = static_cast<uint32_t>(i);
      b[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      b[i].descriptorCount = 1;
      b[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dl{};
    dl.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dl.bindingCount = static_cast<uint32_t>(n);
    dl.pBindings = b;
    RETURN_IF_ERROR(check(a.vkCreateDescriptorSetLayout(device_, &dl, nullptr, &set_layouts_[n]),
                          "vkCreateDescriptorSetLayout"));
    VkPushConstantRange push{};
    push.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    push.size = kPushConstantBytes;
    VkPipelineLayoutCreateInfo pl{};
    pl.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &set_layouts_[n];
    pl.pushConstantRangeCount = 1;
    pl.pPushConstantRanges = &push;
    RETURN_IF_ERROR(check(a.vkCreatePipelineLayout(device_, &pl, nullptr, &pipeline_layouts_[n]),
                          "vkCreatePipelineLayout"));
  }

  // Phase 4: the requirements arena buffers share, from a probe buffer.
  ASSIGN_OR_RETURN(VkBuffer probe, new_buffer(16, "probe buffer"));
  VkMemoryRequirements req{};
  a.vkGetBufferMemoryRequirements(device_, probe, &req);
  a.vkDestroyBuffer(device_, probe, nullptr);
  buffer_alignment_ = std::max<uint64_t>(16, req.alignment);
  buffer_type_bits_ = req.memoryTypeBits;
  return Status();
}

VulkanGpu::~VulkanGpu() {
  if (device_ == VK_NULL_HANDLE) return;
  const VulkanApi& a = api();
  a.vkDeviceWaitIdle(device_);
  for (auto& [key, p] : pipelines_) a.vkDestroyPipeline(device_, p, nullptr);
  for (auto& [name, m] : modules_) a.vkDestroyShaderModule(device_, m, nullptr);
  for (int n = 0; n <= kMaxBindings; ++n) {
    if (pipeline_layouts_[n] != VK_NULL_HANDLE)
      a.vkDestroyPipelineLayout(device_, pipeline_layouts_[n], nullptr);
    if (set_layouts_[n] != VK_NULL_HANDLE)
      a.vkDestroyDescriptorSetLayout(device_, set_layouts_[n], nullptr);
  }
  if (fence_ != VK_NULL_HANDLE) a.vkDestroyFence(device_, fence_, nullptr);
  if (command_pool_ != VK_NULL_HANDLE) a.vkDestroyCommandPool(device_, command_pool_, nullptr);
  a.vkDestroyDevice(device_, nullptr);
}

uint64_t VulkanGpu::max_buffer_bytes() const {
  uint64_t largest_heap = 0;
  for (uint32_t i = 0; i < physical_.memory.memoryHeapCount; ++i) {
    largest_heap = std::max<uint64_t>(largest_heap, physical_.memory.memoryHeaps[i].size);
  }
  return std::min<uint64_t>(physical_.properties.limits.maxStorageBufferRange, largest_heap);
}

Status VulkanGpu::lost_status() const {
  return internal_error("vulkan:" + std::to_string(index_) + " (" + physical_.name() +
                        ") was lost (VK_ERROR_DEVICE_LOST); reopen the device");
}

Status VulkanGpu::check(VkResult r, const std::string& what) {
  if (r == VK_SUCCESS) return Status();
  if (r == VK_ERROR_DEVICE_LOST) lost_ = true;
  return vk_status(r, what + " on vulkan:" + std::to_string(index_));
}

int VulkanGpu::memory_type(uint32_t type_bits, bool host_visible) const {
  const VkMemoryPropertyFlags want =
      host_visible ? (VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT)
                   : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  for (uint32_t i = 0; i < physical_.memory.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (physical_.memory.memoryTypes[i].propertyFlags & want) == want)
      return static_cast<int>(i);
  }
  // A device without device-local memory types: any type will do.
  if (!host_visible) {
    for (uint32_t i = 0; i < physical_.memory.memoryTypeCount; ++i) {
      if (type_bits & (1u << i)) return static_cast<int>(i);
    }
  }
  return -1;
}

Result<std::unique_ptr<GpuBuffer>> VulkanGpu::create_buffer(uint64_t bytes, bool host_visible) {
  if (lost_) return lost_status();
  const uint64_t size = std::max<uint64_t>(16, (bytes + 15) / 16 * 16);
  const std::string what = std::to_string(bytes) + "-byte " +
                           (host_visible ? "staging" : "device-local") +
                           " buffer on vulkan:" + std::to_string(index_);
  if (!host_visible) RETURN_IF_ERROR(check_bindable(size, what));
  const VulkanApi& a = api();
  ASSIGN_OR_RETURN(VkBuffer buffer, new_buffer(size, what));
  VkMemoryRequirements req{};
  a.vkGetBufferMemoryRequirements(device_, buffer, &req);
  const int type = memory_type(req.memoryTypeBits, host_visible);
  if (type < 0) {
    a.vkDestroyBuffer(device_, buffer, nullptr);
    return resource_exhausted("vulkan: no memory type can hold a " + what);
  }
  const uint32_t heap = physical_.memory.memoryTypes[type].heapIndex;
  if (req.size > physical_.memory.memoryHeaps[heap].size) {
    a.vkDestroyBuffer(device_, buffer, nullptr);
    return resource_exhausted("vulkan: a " + what + " is larger than its memory heap (" +
                              std::to_string(physical_.memory.memoryHeaps[heap].size) + " bytes)");
  }
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = req.size;
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  VkResult r = a.vkAllocateMemory(device_, &alloc, nullptr, &memory);
  if (r != VK_SUCCESS) {
    a.vkDestroyBuffer(device_, buffer, nullptr);
    return check(r, "vkAllocateMemory for a " + what);
  }
  r = a.vkBindBufferMemory(device_, buffer, memory, 0);
  void* mapped = nullptr;
  if (r == VK_SUCCESS && host_visible)
    r = a.vkMapMemory(device_, memory, 0, VK_WHOLE_SIZE, 0, &mapped);
  if (r != VK_SUCCESS) {
    a.vkDestroyBuffer(device_, buffer, nullptr);
    a.vkFreeMemory(device_, memory, nullptr);
    return check(r, "binding memory to a " + what);
  }
  return std::make_unique<GpuBuffer>(shared_from_this(), buffer, memory, size, mapped);
}

Status VulkanGpu::check_bindable(uint64_t size, const std::string& what) const {
  if (size <= physical_.properties.limits.maxStorageBufferRange) return Status();
  return resource_exhausted("vulkan: a " + what + " exceeds maxStorageBufferRange (" +
                            std::to_string(physical_.properties.limits.maxStorageBufferRange) +
                            " bytes)");
}

Result<VkBuffer> VulkanGpu::new_buffer(uint64_t size, const std::string& what) {
  VkBufferCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  info.size = size;
  info.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  info.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  VkBuffer buffer = VK_NULL_HANDLE;
  RETURN_IF_ERROR(check(api().vkCreateBuffer(device_, &info, nullptr, &buffer),
                        "vkCreateBuffer for a " + what));
  return buffer;
}

Result<std::unique_ptr<GpuMemory>> VulkanGpu::allocate_memory(uint64_t bytes) {
  if (lost_) return lost_status();
  const std::string what =
      std::to_string(bytes) + "-byte device-local arena on vulkan:" + std::to_string(index_);
  const int type = memory_type(buffer_type_bits_, false);
  if (type < 0) return resource_exhausted("vulkan: no memory type can hold a " + what);
  const uint32_t heap = physical_.memory.memoryTypes[type].heapIndex;
  if (bytes > physical_.memory.memoryHeaps[heap].size) {
    return resource_exhausted("vulkan: a " + what + " is larger than its memory heap (" +
                              std::to_string(physical_.memory.memoryHeaps[heap].size) + " bytes)");
  }
  VkMemoryAllocateInfo alloc{};
  alloc.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
  alloc.allocationSize = std::max<uint64_t>(bytes, buffer_alignment_);
  alloc.memoryTypeIndex = static_cast<uint32_t>(type);
  VkDeviceMemory memory = VK_NULL_HANDLE;
  RETURN_IF_ERROR(check(api().vkAllocateMemory(device_, &alloc, nullptr, &memory),
                        "vkAllocateMemory for a " + what));
  return std::make_unique<GpuMemory>(shared_from_this(), memory, alloc.allocationSize);
}

Result<std::unique_ptr<GpuBuffer>> VulkanGpu::create_buffer_at(const GpuMemory& memory,
                                                               uint64_t offset, uint64_t bytes) {
  if (lost_) return lost_status();
  const uint64_t size = std::max<uint64_t>(16, (bytes + 15) / 16 * 16);
  const std::string what = std::to_string(bytes) + "-byte arena buffer at offset " +
                           std::to_string(offset) + " on vulkan:" + std::to_string(index_);
  RETURN_IF_ERROR(check_bindable(size, what));
  ASSIGN_OR_RETURN(VkBuffer buffer, new_buffer(size, what));
  VkMemoryRequirements req{};
  api().vkGetBufferMemoryRequirements(device_, buffer, &req);
  if (offset % req.alignment != 0 || offset + req.size > memory.size()) {
    api().vkDestroyBuffer(device_, buffer, nullptr);
    return internal_error("vulkan: a " + what + " does not fit its arena of " +
                          std::to_string(memory.size()) + " bytes");
  }
  Status s = check(api().vkBindBufferMemory(device_, buffer, memory.handle(), offset),
                   "binding arena memory to a " + what);
  if (!s.ok()) {
    api().vkDestroyBuffer(device_, buffer, nullptr);
    return s;
  }
  // VK_NULL_HANDLE memory: the buffer leaves the arena to its owner.
  return std::make_unique<GpuBuffer>(shared_from_this(), buffer, VK_NULL_HANDLE, size, nullptr);
}

Result<VkPipeline> VulkanGpu::pipeline(const SpirvShader& shader, std::span<const uint32_t> spec,
                                       int bindings) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (lost_) return lost_status();
  if (bindings < 0 || bindings > kMaxBindings) {
    return internal_error(std::string("vulkan: shader ") + shader.name + " uses " +
                          std::to_string(bindings) + " bindings");
  }
  std::vector<uint32_t> key;
  key.push_back(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(shader.code)));
  key.push_back(static_cast<uint32_t>(reinterpret_cast<uintptr_t>(shader.code) >> 32));
  key.push_back(static_cast<uint32_t>(bindings));
  key.insert(key.end(), spec.begin(), spec.end());
  auto it = pipelines_.find(key);
  if (it != pipelines_.end()) return it->second;

  const VulkanApi& a = api();
  VkShaderModule& module = modules_[shader.name];
  if (module == VK_NULL_HANDLE) {
    VkShaderModuleCreateInfo sm{};
    sm.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    sm.codeSize = shader.num_words * 4;
    sm.pCode = shader.code;
    Status s = check(a.vkCreateShaderModule(device_, &sm, nullptr, &module),
                     std::string("vkCreateShaderModule(") + shader.name + ")");
    if (!s.ok()) {
      modules_.erase(shader.name);
      return s;
    }
  }
  std::vector<VkSpecializationMapEntry> entries(spec.size());
  for (size_t i = 0; i < spec.size(); ++i) {
    entries[i].constantID = static_cast<uint32_t>(i);
    entries[i].offset = static_cast<uint32_t>(i * 4);
    entries[i].size = 4;
  }
  VkSpecializationInfo si{};
  si.mapEntryCount = static_cast<uint32_t>(entries.size());
  si.pMapEntries = entries.data();
  si.dataSize = spec.size() * 4;
  si.pData = spec.data();
  VkComputePipelineCreateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
  info.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
  info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  info.stage.module = module;
  info.stage.pName = "main";
  info.stage.pSpecializationInfo = &si;
  info.layout = pipeline_layouts_[bindings];
  VkPipeline p = VK_NULL_HANDLE;
  RETURN_IF_ERROR(check(a.vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &info, nullptr, &p),
                        std::string("vkCreateComputePipelines(") + shader.name + ")"));
  pipelines_[key] = p;
  return p;
}

Result<VkCommandBuffer> VulkanGpu::allocate_command_buffer() {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (lost_) return lost_status();
  VkCommandBufferAllocateInfo info{};
  info.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
  info.commandPool = command_pool_;
  info.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  info.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  RETURN_IF_ERROR(
      check(api().vkAllocateCommandBuffers(device_, &info, &cb), "vkAllocateCommandBuffers"));
  return cb;
}

void VulkanGpu::free_command_buffer(VkCommandBuffer cb) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (cb != VK_NULL_HANDLE) api().vkFreeCommandBuffers(device_, command_pool_, 1, &cb);
}

Status VulkanGpu::submit_and_wait(VkCommandBuffer cb) {
  std::lock_guard<std::recursive_mutex> lock(mutex_);
  if (lost_) return lost_status();
  const VulkanApi& a = api();
  VkSubmitInfo submit{};
  submit.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &cb;
  RETURN_IF_ERROR(check(a.vkResetFences(device_, 1, &fence_), "vkResetFences"));
  RETURN_IF_ERROR(check(a.vkQueueSubmit(queue_, 1, &submit, fence_), "vkQueueSubmit"));
  // Wait in slices so a hung device is reported instead of blocking forever.
  const uint64_t kSlice = 1'000'000'000ull;  // 1 s
  for (int waited = 0;; ++waited) {
    VkResult r = a.vkWaitForFences(device_, 1, &fence_, VK_TRUE, kSlice);
    if (r == VK_SUCCESS) return Status();
    if (r != VK_TIMEOUT) return check(r, "vkWaitForFences");
    if (waited >= 600) {
      lost_ = true;
      return internal_error("vulkan:" + std::to_string(index_) +
                            ": a submission did not finish within 600 s; the device is treated "
                            "as lost");
    }
  }
}

namespace {

// Records a one-off copy between two buffers into a fresh command buffer and runs it.
Status copy_and_wait(VulkanGpu& gpu, VkBuffer src, uint64_t src_offset, VkBuffer dst,
                     uint64_t dst_offset, uint64_t bytes) {
  ASSIGN_OR_RETURN(VkCommandBuffer cb, gpu.allocate_command_buffer());
  const VulkanApi& a = gpu.api();
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  Status s = gpu.check(a.vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer");
  if (s.ok()) {
    VkBufferCopy region{src_offset, dst_offset, bytes};
    a.vkCmdCopyBuffer(cb, src, dst, 1, &region);
    s = gpu.check(a.vkEndCommandBuffer(cb), "vkEndCommandBuffer");
  }
  if (s.ok()) s = gpu.submit_and_wait(cb);
  gpu.free_command_buffer(cb);
  return s;
}

constexpr uint64_t kStagingChunk = 32ull << 20;

}  // namespace

Status VulkanGpu::write_buffer(GpuBuffer& dst, uint64_t offset, const void* src, uint64_t bytes) {
  if (offset + bytes > dst.size()) return internal_error("vulkan: write past the end of a buffer");
  if (bytes == 0) return Status();
  if (dst.mapped() != nullptr) {
    std::memcpy(static_cast<char*>(dst.mapped()) + offset, src, bytes);
    return Status();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GpuBuffer> staging,
                   create_buffer(std::min(bytes, kStagingChunk), true));
  for (uint64_t done = 0; done < bytes; done += kStagingChunk) {
    const uint64_t n = std::min(kStagingChunk, bytes - done);
    std::memcpy(staging->mapped(), static_cast<const char*>(src) + done, n);
    RETURN_IF_ERROR(copy_and_wait(*this, staging->handle(), 0, dst.handle(), offset + done, n));
  }
  return Status();
}

Status VulkanGpu::read_buffer(const GpuBuffer& src, uint64_t offset, void* dst, uint64_t bytes) {
  if (offset + bytes > src.size()) return internal_error("vulkan: read past the end of a buffer");
  if (bytes == 0) return Status();
  if (src.mapped() != nullptr) {
    std::memcpy(dst, static_cast<const char*>(src.mapped()) + offset, bytes);
    return Status();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<GpuBuffer> staging,
                   create_buffer(std::min(bytes, kStagingChunk), true));
  for (uint64_t done = 0; done < bytes; done += kStagingChunk) {
    const uint64_t n = std::min(kStagingChunk, bytes - done);
    RETURN_IF_ERROR(copy_and_wait(*this, src.handle(), offset + done, staging->handle(), 0, n));
    std::memcpy(static_cast<char*>(dst) + done, staging->mapped(), n);
  }
  return Status();
}

}  // namespace tessera
