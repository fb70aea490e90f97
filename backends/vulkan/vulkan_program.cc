#include "backends/vulkan/vulkan_program.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "backends/arena.h"
#include "backends/vulkan/pipelines/kernel.h"

namespace tessera {

struct VulkanProgram::Impl {
  std::unique_ptr<GpuMemory> arena;                 // activations; outlives their buffers
  std::map<VkBuffer, uint64_t> arena_offset;        // arena buffers -> their offset in it
  std::vector<std::unique_ptr<GpuBuffer>> buffers;  // every buffer the program owns
  std::vector<int> buffer_of;                       // ValueId -> index into buffers, -1
  std::vector<uint64_t> input_offsets, output_offsets;
  std::unique_ptr<GpuBuffer> input_staging, output_staging;
  std::unique_ptr<GpuBuffer> fault;         // host-visible: code, then three detail words
  std::vector<std::string> fault_messages;  // code - 1 -> what the fault means
  VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
  VkQueryPool query_pool = VK_NULL_HANDLE;
  VkCommandBuffer commands = VK_NULL_HANDLE;
  uint32_t num_queries = 0;
};

namespace {

struct PlannedDispatch {
  Dispatch d;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
  int node_index = 0;
};

// The KernelBuilder for one node of a program being created.
class Builder final : public KernelBuilder {
 public:
  Builder(VulkanGpu& gpu, const Graph& g, VulkanProgram::Impl& impl,
          std::vector<PlannedDispatch>* out)
      : gpu_(gpu), g_(g), impl_(impl), out_(out) {}

  void set_node(const Node* n, int index) {
    node_ = n;
    index_ = index;
  }
  const Graph& graph() const override { return g_; }
  const Node& node() const override { return *node_; }
  VulkanGpu& gpu() override { return gpu_; }

  Result<BufferRef> input(int i) override {
    const ValueId v = node_->inputs[static_cast<size_t>(i)];
    if (v == kNoValue) return internal_error("input " + std::to_string(i) + " is omitted");
    RETURN_IF_ERROR(ensure_constant(v));
    const GpuBuffer& b = *impl_.buffers[static_cast<size_t>(impl_.buffer_of[v])];
    return BufferRef{b.handle(), b.size()};
  }
  BufferRef output(int i) override {
    const GpuBuffer& b =
        *impl_
             .buffers[static_cast<size_t>(impl_.buffer_of[node_->outputs[static_cast<size_t>(i)]])];
    return BufferRef{b.handle(), b.size()};
  }
  Result<BufferRef> upload(const void* data, uint64_t bytes) override {
    ASSIGN_OR_RETURN(std::unique_ptr<GpuBuffer> b, gpu_.create_buffer(bytes, false));
    RETURN_IF_ERROR(gpu_.write_buffer(*b, 0, data, bytes));
    BufferRef r{b->handle(), b->size()};
    impl_.buffers.push_back(std::move(b));
    return r;
  }
  Result<FaultSlot> fault(std::string what) override {
    if (impl_.fault == nullptr) {
      ASSIGN_OR_RETURN(impl_.fault, gpu_.create_buffer(16, true));
    }
    impl_.fault_messages.push_back("node " + quote_name(node_->name) + " (" + op_name(node_->kind) +
                                   "): " + what);
    return FaultSlot{BufferRef{impl_.fault->handle(), impl_.fault->size()},
                     static_cast<uint32_t>(impl_.fault_messages.size())};
  }
  void dispatch(Dispatch d) override {
    PlannedDispatch p;
    p.d = std::move(d);
    p.node_index = index_;
    out_->push_back(std::move(p));
  }

  // Uploads constant value v once.
  Status ensure_constant(ValueId v) {
    if (impl_.buffer_of[v] >= 0) return Status();
    const Value& val = g_.value(v);
    if (!val.is_constant) return internal_error("value " + quote_name(val.name) + " has no buffer");
    ASSIGN_OR_RETURN(BufferRef r, upload(val.data.raw(), val.data.byte_size()));
    (void)r;
    impl_.buffer_of[v] = static_cast<int>(impl_.buffers.size()) - 1;
    return Status();
  }

 private:
  VulkanGpu& gpu_;
  const Graph& g_;
  VulkanProgram::Impl& impl_;
  std::vector<PlannedDispatch>* out_;
  const Node* node_ = nullptr;
  int index_ = 0;
};

}  // namespace

VulkanProgram::VulkanProgram(std::shared_ptr<VulkanGpu> gpu, const Graph& g)
    : gpu_(std::move(gpu)), g_(g), impl_(std::make_unique<Impl>()) {}

VulkanProgram::~VulkanProgram() {
  const VulkanApi& a = gpu_->api();
  if (impl_->commands != VK_NULL_HANDLE) gpu_->free_command_buffer(impl_->commands);
  if (impl_->descriptor_pool != VK_NULL_HANDLE)
    a.vkDestroyDescriptorPool(gpu_->device(), impl_->descriptor_pool, nullptr);
  if (impl_->query_pool != VK_NULL_HANDLE)
    a.vkDestroyQueryPool(gpu_->device(), impl_->query_pool, nullptr);
}

Result<std::unique_ptr<VulkanProgram>> VulkanProgram::create(std::shared_ptr<VulkanGpu> gpu,
                                                             const Graph& g,
                                                             std::span<const NodeId> layers) {
  std::unique_ptr<VulkanProgram> p(new VulkanProgram(gpu, g));
  p->layers_.assign(layers.begin(), layers.end());
  slice_boundary(g, layers, &p->inputs_, &p->outputs_);
  Impl& impl = *p->impl_;
  VulkanGpu& dev = *gpu;
  const VulkanApi& a = dev.api();
  impl.buffer_of.assign(static_cast<size_t>(g.num_values()), -1);

  // Phase 1: activation buffers in one arena, shared by lifetime. Step 0 copies the inputs in,
  // node li runs at step li + 1, step |layers| + 1 copies the outputs out. Reshape-like nodes
  // share their input's buffer and extend its lifetime to their own consumers.
  std::vector<ValueId> root(static_cast<size_t>(g.num_values()), kNoValue);
  std::vector<ArenaRequest> requests;
  std::vector<ValueId> owners;  // the value of each request
  std::vector<int> request_of(static_cast<size_t>(g.num_values()), -1);
  auto define = [&](ValueId v, int step) {
    root[v] = v;
    request_of[v] = static_cast<int>(requests.size());
    requests.push_back({std::max<uint64_t>(16, g.value(v).info.byte_size()), step, step});
    owners.push_back(v);
  };
  auto use = [&](ValueId v, int step) {
    if (v == kNoValue || root[v] == kNoValue) return;  // constants are not in the arena
    ArenaRequest& r = requests[static_cast<size_t>(request_of[root[v]])];
    r.last_step = std::max(r.last_step, step);
  };
  for (ValueId v : p->inputs_) define(v, 0);
  std::vector<PlannedDispatch> planned;
  Builder builder(dev, g, impl, &planned);
  for (size_t li = 0; li < layers.size(); ++li) {
    const Node& n = g.node(layers[li]);
    const VulkanKernel* k = find_vulkan_kernel(n.kind);
    if (k == nullptr) return internal_error("no vulkan kernel for node " + quote_name(n.name));
    const int step = static_cast<int>(li) + 1;
    for (ValueId v : n.inputs) use(v, step);
    if (k->alias) {
      if (g.value(n.inputs[0]).is_constant) {
        builder.set_node(&n, 0);
        RETURN_IF_ERROR(builder.ensure_constant(n.inputs[0]));
        impl.buffer_of[n.outputs[0]] = impl.buffer_of[n.inputs[0]];
      }
      root[n.outputs[0]] = root[n.inputs[0]];
      continue;
    }
    for (ValueId v : n.outputs) define(v, step);
  }
  for (ValueId v : p->outputs_) use(v, static_cast<int>(layers.size()) + 1);
  const ArenaPlan arena = plan_arena(requests, dev.buffer_alignment(), 0);
  p->memory_.arena_bytes = arena.total_bytes;
  p->memory_.separate_bytes = arena.sum_bytes;
  ASSIGN_OR_RETURN(impl.arena, dev.allocate_memory(arena.total_bytes));
  for (size_t i = 0; i < requests.size(); ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<GpuBuffer> b,
                     dev.create_buffer_at(*impl.arena, arena.offsets[i], requests[i].bytes));
    impl.arena_offset[b->handle()] = arena.offsets[i];
    impl.buffers.push_back(std::move(b));
    impl.buffer_of[owners[i]] = static_cast<int>(impl.buffers.size()) - 1;
  }
  for (ValueId v = 0; v < g.num_values(); ++v) {
    if (root[v] != kNoValue) impl.buffer_of[v] = impl.buffer_of[root[v]];
  }

  // Phase 2: plan every node's dispatches (uploads its constants).
  for (size_t li = 0; li < layers.size(); ++li) {
    const Node& n = g.node(layers[li]);
    const VulkanKernel* k = find_vulkan_kernel(n.kind);
    if (k->alias) continue;
    builder.set_node(&n, static_cast<int>(li));
    Status s = k->plan(builder);
    if (!s.ok()) return Status(s.code(), "vulkan: " + with_node_prefix(n, s.message()));
  }
  p->num_dispatches_ = static_cast<int>(planned.size());
  for (const std::unique_ptr<GpuBuffer>& b : impl.buffers) {
    if (impl.arena_offset.count(b->handle()) == 0) p->memory_.constant_bytes += b->size();
  }

  // Phase 3: pipelines and descriptor sets.
  uint32_t descriptors = 0;
  for (PlannedDispatch& pd : planned) {
    const SpirvShader* shader = find_spirv_shader(pd.d.shader);
    if (shader == nullptr) return internal_error(std::string("vulkan: no shader ") + pd.d.shader);
    if (pd.d.push.size() * 4 > kPushConstantBytes) {
      return internal_error(std::string("vulkan: too many push constants for ") + pd.d.shader);
    }
    ASSIGN_OR_RETURN(pd.pipeline,
                     dev.pipeline(*shader, pd.d.spec, static_cast<int>(pd.d.bindings.size())));
    descriptors += static_cast<uint32_t>(pd.d.bindings.size());
  }
  if (!planned.empty()) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              std::max<uint32_t>(1, descriptors)};
    VkDescriptorPoolCreateInfo pool{};
    pool.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    pool.maxSets = static_cast<uint32_t>(planned.size());
    pool.poolSizeCount = 1;
    pool.pPoolSizes = &size;
    RETURN_IF_ERROR(
        dev.check(a.vkCreateDescriptorPool(dev.device(), &pool, nullptr, &impl.descriptor_pool),
                  "vkCreateDescriptorPool"));
  }
  for (PlannedDispatch& pd : planned) {
    const int nb = static_cast<int>(pd.d.bindings.size());
    VkDescriptorSetLayout layout = dev.set_layout(nb);
    VkDescriptorSetAllocateInfo alloc{};
    alloc.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    alloc.descriptorPool = impl.descriptor_pool;
    alloc.descriptorSetCount = 1;
    alloc.pSetLayouts = &layout;
    RETURN_IF_ERROR(dev.check(a.vkAllocateDescriptorSets(dev.device(), &alloc, &pd.set),
                              "vkAllocateDescriptorSets"));
    VkDescriptorBufferInfo infos[kMaxBindings];
    VkWriteDescriptorSet writes[kMaxBindings];
    for (int i = 0; i < nb; ++i) {
      infos[i] = {pd.d.bindings[i].buffer, 0, VK_WHOLE_SIZE};
      writes[i] = {};
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = pd.set;
      writes[i].dstBinding = static_cast<uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    a.vkUpdateDescriptorSets(dev.device(), static_cast<uint32_t>(nb), writes, 0, nullptr);
  }

  // Phase 4: staging buffers for the program's inputs and outputs.
  uint64_t in_bytes = 0, out_bytes = 0;
  for (ValueId v : p->inputs_) {
    impl.input_offsets.push_back(in_bytes);
    in_bytes += (g.value(v).info.byte_size() + 15) / 16 * 16;
  }
  for (ValueId v : p->outputs_) {
    impl.output_offsets.push_back(out_bytes);
    out_bytes += (g.value(v).info.byte_size() + 15) / 16 * 16;
  }
  ASSIGN_OR_RETURN(impl.input_staging, dev.create_buffer(in_bytes, true));
  ASSIGN_OR_RETURN(impl.output_staging, dev.create_buffer(out_bytes, true));

  // Phase 5: record the command buffer.
  if (dev.physical().timestamps && !layers.empty()) {
    VkQueryPoolCreateInfo q{};
    q.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO;
    q.queryType = VK_QUERY_TYPE_TIMESTAMP;
    q.queryCount = static_cast<uint32_t>(2 * layers.size());
    RETURN_IF_ERROR(dev.check(a.vkCreateQueryPool(dev.device(), &q, nullptr, &impl.query_pool),
                              "vkCreateQueryPool"));
    impl.num_queries = q.queryCount;
  }
  ASSIGN_OR_RETURN(impl.commands, dev.allocate_command_buffer());
  VkCommandBuffer cb = impl.commands;
  VkCommandBufferBeginInfo begin{};
  begin.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
  RETURN_IF_ERROR(dev.check(a.vkBeginCommandBuffer(cb, &begin), "vkBeginCommandBuffer"));
  auto barrier = [&](VkPipelineStageFlags src, VkAccessFlags src_access, VkPipelineStageFlags dst,
                     VkAccessFlags dst_access) {
    VkMemoryBarrier m{};
    m.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER;
    m.srcAccessMask = src_access;
    m.dstAccessMask = dst_access;
    a.vkCmdPipelineBarrier(cb, src, dst, 0, 1, &m, 0, nullptr, 0, nullptr);
  };
  if (impl.query_pool != VK_NULL_HANDLE) {
    a.vkCmdResetQueryPool(cb, impl.query_pool, 0, impl.num_queries);
  }
  for (size_t i = 0; i < p->inputs_.size(); ++i) {
    const GpuBuffer& dst = *impl.buffers[static_cast<size_t>(impl.buffer_of[p->inputs_[i]])];
    const uint64_t bytes = g.value(p->inputs_[i]).info.byte_size();
    if (bytes == 0) continue;
    VkBufferCopy region{impl.input_offsets[i], 0, bytes};
    a.vkCmdCopyBuffer(cb, impl.input_staging->handle(), dst.handle(), 1, &region);
  }
  barrier(VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
          VK_ACCESS_HOST_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
  // Hazards by memory range: arena buffers alias each other's bytes, so a dispatch waits for a
  // barrier when it reads or writes bytes written since the last barrier, or writes bytes read
  // since then (a later value reusing a dead one's memory).
  struct Range {
    uint64_t memory, begin, end;
    bool overlaps(const Range& o) const {
      return memory == o.memory && begin < o.end && o.begin < end;
    }
  };
  std::map<VkBuffer, uint64_t> memory_ids;  // buffers with memory of their own -> 1, 2, ...
  auto range_of = [&](const BufferRef& b) {
    auto it = impl.arena_offset.find(b.buffer);
    if (it != impl.arena_offset.end()) return Range{0, it->second, it->second + b.bytes};
    const auto id = memory_ids.emplace(b.buffer, memory_ids.size() + 1).first;
    return Range{id->second, 0, b.bytes};
  };
  std::vector<Range> written, read;  // since the last barrier
  auto touches = [](const std::vector<Range>& set, const Range& r) {
    return std::any_of(set.begin(), set.end(), [&](const Range& o) { return o.overlaps(r); });
  };
  size_t next = 0;
  for (size_t li = 0; li < layers.size(); ++li) {
    if (impl.query_pool != VK_NULL_HANDLE) {
      a.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, impl.query_pool,
                            static_cast<uint32_t>(2 * li));
    }
    for (; next < planned.size() && planned[next].node_index == static_cast<int>(li); ++next) {
      const PlannedDispatch& pd = planned[next];
      std::vector<Range> ranges(pd.d.bindings.size());
      std::vector<bool> writes(pd.d.bindings.size(), false);
      for (int w : pd.d.writes) writes[static_cast<size_t>(w)] = true;
      bool hazard = false;
      for (size_t bi = 0; bi < ranges.size(); ++bi) {
        ranges[bi] = range_of(pd.d.bindings[bi]);
        hazard =
            hazard || touches(written, ranges[bi]) || (writes[bi] && touches(read, ranges[bi]));
      }
      if (hazard) {
        barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
                VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
        written.clear();
        read.clear();
      }
      for (size_t bi = 0; bi < ranges.size(); ++bi)
        (writes[bi] ? written : read).push_back(ranges[bi]);
      a.vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, pd.pipeline);
      a.vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE,
                                dev.pipeline_layout(static_cast<int>(pd.d.bindings.size())), 0, 1,
                                &pd.set, 0, nullptr);
      if (!pd.d.push.empty()) {
        a.vkCmdPushConstants(cb, dev.pipeline_layout(static_cast<int>(pd.d.bindings.size())),
                             VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             static_cast<uint32_t>(pd.d.push.size() * 4), pd.d.push.data());
      }
      a.vkCmdDispatch(cb, pd.d.groups[0], pd.d.groups[1], pd.d.groups[2]);
    }
    if (impl.query_pool != VK_NULL_HANDLE) {
      a.vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, impl.query_pool,
                            static_cast<uint32_t>(2 * li + 1));
    }
  }
  barrier(VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT,
          VK_PIPELINE_STAGE_TRANSFER_BIT, VK_ACCESS_TRANSFER_READ_BIT);
  for (size_t i = 0; i < p->outputs_.size(); ++i) {
    const GpuBuffer& src = *impl.buffers[static_cast<size_t>(impl.buffer_of[p->outputs_[i]])];
    const uint64_t bytes = g.value(p->outputs_[i]).info.byte_size();
    if (bytes == 0) continue;
    VkBufferCopy region{0, impl.output_offsets[i], bytes};
    a.vkCmdCopyBuffer(cb, src.handle(), impl.output_staging->handle(), 1, &region);
  }
  // Outputs (and the fault words the shaders wrote) become visible to the host.
  barrier(VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
          VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
          VK_ACCESS_HOST_READ_BIT);
  RETURN_IF_ERROR(dev.check(a.vkEndCommandBuffer(cb), "vkEndCommandBuffer"));
  return p;
}

uint64_t VulkanProgram::peak_memory_bytes() const {
  const Impl& impl = *impl_;
  return memory_.arena_bytes + memory_.constant_bytes +
         (impl.input_staging ? impl.input_staging->size() : 0) +
         (impl.output_staging ? impl.output_staging->size() : 0);
}

Status VulkanProgram::execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                              const RunOptions& options) {
  if (options.layer_ms == nullptr) return run_untimed(inputs, outputs);
  if (impl_->query_pool == VK_NULL_HANDLE) {
    return unimplemented("this Vulkan queue has no timestamps to time layers with");
  }
  chained_ms_.clear();
  RETURN_IF_ERROR(run_untimed(inputs, outputs));
  if (chained_ms_.size() != layers_.size()) {
    return unimplemented("the timestamps of this run could not be read");
  }
  *options.layer_ms = chained_ms_;
  return Status();
}

Status VulkanProgram::run_untimed(std::span<const Tensor> inputs, std::span<Tensor> outputs) {
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
    return invalid_argument("program takes " + std::to_string(inputs_.size()) + " inputs and " +
                            std::to_string(outputs_.size()) + " outputs, got " +
                            std::to_string(inputs.size()) + " and " +
                            std::to_string(outputs.size()));
  }
  if (gpu_->lost()) return gpu_->lost_status();
  Impl& impl = *impl_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g_.value(inputs_[i]);
    if (inputs[i].dtype() != v.info.dtype || inputs[i].shape() != v.info.shape) {
      return invalid_argument("input " + quote_name(v.name) + " expects " +
                              dtype_name(v.info.dtype) + v.info.shape.to_string() + ", got " +
                              inputs[i].describe());
    }
    std::memcpy(static_cast<char*>(impl.input_staging->mapped()) + impl.input_offsets[i],
                inputs[i].raw(), inputs[i].byte_size());
  }
  if (impl.fault != nullptr) std::memset(impl.fault->mapped(), 0, 16);
  RETURN_IF_ERROR(gpu_->submit_and_wait(impl.commands));
  if (impl.fault != nullptr) {
    uint32_t f[4];
    std::memcpy(f, impl.fault->mapped(), 16);
    if (f[0] != 0 && f[0] <= impl.fault_messages.size()) {
      const int64_t value = static_cast<int64_t>((uint64_t{f[3]} << 32) | f[2]);
      return invalid_argument("vulkan: " + impl.fault_messages[f[0] - 1] + ": element " +
                              std::to_string(f[1]) + " is " + std::to_string(value));
    }
  }
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const TensorInfo& info = g_.value(outputs_[i]).info;
    Tensor& dst = outputs[i];
    if (dst.raw() == nullptr || dst.dtype() != info.dtype || dst.shape() != info.shape) {
      ASSIGN_OR_RETURN(dst, Tensor::create(info.dtype, info.shape));
    }
    std::memcpy(dst.raw(),
                static_cast<const char*>(impl.output_staging->mapped()) + impl.output_offsets[i],
                info.byte_size());
  }
  node_times_.clear();
  if (impl.query_pool != VK_NULL_HANDLE) {
    std::vector<uint64_t> stamps(impl.num_queries);
    const VkResult r = gpu_->api().vkGetQueryPoolResults(gpu_->device(), impl.query_pool, 0,
                                                         impl.num_queries, stamps.size() * 8,
                                                         stamps.data(), 8, VK_QUERY_RESULT_64_BIT);
    if (r == VK_SUCCESS) {
      const double period_ns = gpu_->physical().properties.limits.timestampPeriod;
      chained_ms_.clear();
      for (size_t li = 0; li < layers_.size(); ++li) {
        const uint64_t t0 = stamps[2 * li], t1 = stamps[2 * li + 1];
        node_times_.push_back({layers_[li], t1 > t0 ? (t1 - t0) * period_ns * 1e-6 : 0.0});
        const uint64_t from = li == 0 ? t0 : stamps[2 * li - 1];
        chained_ms_.push_back(t1 > from ? (t1 - from) * period_ns * 1e-6 : 0.0);
      }
    }
  }
  return Status();
}

}  // namespace tessera
