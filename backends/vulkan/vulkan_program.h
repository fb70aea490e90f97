// A compiled set of layers on one Vulkan device.
//
// Phases:
//   create: give every value the slice computes a device-local buffer (reshapes share their
//           input's), all bound into one arena where values whose lifetimes do not overlap
//           share memory (plan_arena, as the cpu backend plans host memory); upload
//           constants once; let each node's kernel plan its dispatches; create pipelines and
//           descriptor sets; record ONE command buffer: staging -> inputs, the dispatches with
//           barriers only where a dispatch touches bytes written since the last barrier (or
//           writes bytes read since then), timestamps around every node, outputs -> staging.
//   run:    copy inputs into the staging buffers, submit, wait, copy outputs out, read the
//           timestamps.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/vulkan/vulkan_gpu.h"

namespace tessera {

struct VulkanNodeTime {
  NodeId node;
  double ms;  // GPU time between the timestamps around the node's dispatches
};

// Device memory a program holds.
struct VulkanProgramMemory {
  uint64_t arena_bytes = 0;     // activations, sharing memory by lifetime
  uint64_t separate_bytes = 0;  // what one buffer per activation would take
  uint64_t constant_bytes = 0;  // weights and derived constants (index tables, folded scales)
};

class VulkanProgram final : public Program {
 public:
  static Result<std::unique_ptr<VulkanProgram>> create(std::shared_ptr<VulkanGpu> gpu,
                                                       const Graph& g,
                                                       std::span<const NodeId> layers);
  ~VulkanProgram() override;

  const std::vector<ValueId>& input_values() const override { return inputs_; }
  const std::vector<ValueId>& output_values() const override { return outputs_; }
  // The activation arena, the constants and the staging buffers.
  uint64_t peak_memory_bytes() const override;

  // Per-node GPU times of the last run (empty when the queue has no timestamps).
  const std::vector<VulkanNodeTime>& node_times() const { return node_times_; }
  int num_dispatches() const { return num_dispatches_; }
  const VulkanProgramMemory& memory() const { return memory_; }

  struct Impl;  // buffers, staging, descriptor and query pools, the command buffer

 protected:
  // The layers are recorded into one command buffer and submitted at once: cancellation and the
  // deadline are checked when the run starts (Program::run). Timed (options.layer_ms): from the
  // timestamps, each layer runs from the end of the previous layer's dispatches (the first from
  // its own start) to the end of its own, so barriers between layers are charged to the layer
  // that waits. Unimplemented when the queue has no timestamps.
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override;

 private:
  VulkanProgram(std::shared_ptr<VulkanGpu> gpu, const Graph& g);
  Status run_untimed(std::span<const Tensor> inputs, std::span<Tensor> outputs);

  std::shared_ptr<VulkanGpu> gpu_;
  const Graph& g_;
  std::vector<NodeId> layers_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<VulkanNodeTime> node_times_;
  std::vector<double> chained_ms_;  // per layer, see execute()
  int num_dispatches_ = 0;
  VulkanProgramMemory memory_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
