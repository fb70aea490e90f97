// The Vulkan device: vulkan:N is the N-th physical device with a compute queue
// (vulkan_context.h). Runs every layer with GLSL compute shaders compiled to SPIR-V at build
// time (pipelines/, shaders/).
//
// Capabilities: a node is supported when a kernel serves its op (pipelines/kernels.cc), its
// tensors are f32 (any dtype for pure reshapes), each tensor fits one storage buffer
// (min(maxStorageBufferRange, heap): 128 MiB on lavapipe) unless its kernel binds it in pieces
// (Gemm splits a large constant FC weight into row chunks: VGG16's 392 MiB first FC layer), and
// the kernel accepts its attributes.
#pragma once

#include <memory>
#include <string>

#include "backends/device.h"
#include "backends/registry.h"
#include "backends/vulkan/vulkan_gpu.h"

namespace tessera {

class VulkanDevice final : public Device {
 public:
  explicit VulkanDevice(std::shared_ptr<VulkanGpu> gpu);
  const std::string& name() const override { return name_; }
  std::string description() const override;
  Capability capabilities(const Graph& g, const Node& node) const override;
  // Device memory (host-visible on integrated GPUs and lavapipe); concurrency 1 (one queue).
  DeviceInfo info() const override;
  uint64_t memory_capacity() const override;
  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override;
  Status download(const Buffer& device, Tensor* host) override;

  VulkanGpu& gpu() { return *gpu_; }
  // Limits the planner reads: the largest single tensor, the workgroup limits, the heaps.
  std::string limits_summary() const;

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override;

 private:
  std::shared_ptr<VulkanGpu> gpu_;
  std::string name_;
};

extern const Backend kVulkanBackend;

}  // namespace tessera
