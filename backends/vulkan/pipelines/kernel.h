// How the Vulkan backend turns one node into GPU work.
//
// Each op family (pipelines/conv.cc, gemm.cc, pool.cc, elementwise.cc, normalization.cc,
// tensor.cc) registers one VulkanKernel per OpKind it serves, next to its planner. At compile
// time the program asks the kernel whether it supports the node (`supports`, after the generic
// dtype and buffer-size checks in vulkan_device.cc), then lets it `plan` the node: the planner
// reads attributes and shapes, uploads any derived constants (folded scales, index tables) and
// appends Dispatches. A Dispatch names an embedded shader (spirv.h), its specialisation constants
// (tile sizes, kernel geometry, fused activation: a new pipeline per distinct set), the buffers
// bound at bindings 0..n-1 and push constants (tensor extents: shared pipelines across layers).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/vulkan/vulkan_gpu.h"
#include "graph/graph.h"
#include "ops/activation.h"

namespace tessera {

// A whole device buffer bound at one binding.
struct BufferRef {
  VkBuffer buffer = VK_NULL_HANDLE;
  uint64_t bytes = 0;
};

// Where a shader reports a bad run-time value (an index out of range): the first offending
// invocation stores `code` and three words of detail in `buffer`, and the program turns it into
// an InvalidArgument naming the node after the run.
struct FaultSlot {
  BufferRef buffer;
  uint32_t code = 0;
};

struct Dispatch {
  const char* shader = nullptr;  // base name of backends/vulkan/shaders/<shader>.comp
  std::vector<uint32_t> spec;    // specialisation constants 0..n-1
  std::vector<BufferRef> bindings;
  std::vector<uint32_t> push;  // at most kPushConstantBytes / 4 words
  uint32_t groups[3] = {1, 1, 1};
  // Bindings the dispatch writes (indices into `bindings`); the program inserts a barrier before
  // a dispatch that reads or writes a buffer written since the last barrier.
  std::vector<int> writes;
};

// What a planner sees while its node is compiled.
class KernelBuilder {
 public:
  virtual ~KernelBuilder() = default;
  virtual const Graph& graph() const = 0;
  virtual const Node& node() const = 0;
  virtual VulkanGpu& gpu() = 0;
  // The buffer holding node input i (an activation, or a constant uploaded once per program).
  virtual Result<BufferRef> input(int i) = 0;
  virtual BufferRef output(int i) = 0;
  // Uploads derived constant data for this node.
  virtual Result<BufferRef> upload(const void* data, uint64_t bytes) = 0;
  virtual void dispatch(Dispatch d) = 0;
  // The program's fault buffer and a code for this node; `what` describes the fault.
  virtual Result<FaultSlot> fault(std::string what) = 0;

  const TensorInfo& input_info(int i) const { return graph().value(node().inputs[i]).info; }
  const TensorInfo& output_info(int i) const { return graph().value(node().outputs[i]).info; }
  // Null unless input i is a constant.
  const Tensor* constant(int i) const;
  Status error(const std::string& msg) const;
};

struct VulkanKernel {
  OpKind kind;
  // The output is input 0's bytes under another shape (Reshape, Flatten...): no dispatch, the
  // output shares the input's buffer.
  bool alias;
  // A constant input the kernel binds in pieces when it exceeds one storage buffer (-1: none);
  // the generic buffer-size check skips it and `supports` decides.
  int split_input;
  // Node-specific support beyond the generic checks; null means supported.
  Capability (*supports)(const Graph& g, const Node& n, const VulkanGpu& gpu);
  Status (*plan)(KernelBuilder& b);
  // The kernel takes any dtype and `supports` checks them; otherwise the generic check admits
  // f32 tensors only (integer constants are read on the host).
  bool any_dtype = false;
};

// The kernel serving `kind`, or null (pipelines/kernels.cc lists them).
const VulkanKernel* find_vulkan_kernel(OpKind kind);

// Helpers shared by the planners.
inline uint32_t ceil_div(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
// Appends (kind, alpha, beta) of a fused activation as three specialisation constants, in the
// order shaders/activation.glsl declares them.
void append_activation_spec(const Activation& a, std::vector<uint32_t>* spec);
// The output tile of the shared-memory GEMM shaders (f32_gemm_tiled, f32_conv2d_tiled): a
// wg_m x wg_n grid of threads computing 4x4 outputs each, passed as specialisation constants.
struct GemmTile {
  uint32_t wg_m = 16, wg_n = 16;
  uint32_t tile_m() const { return 4 * wg_m; }
  uint32_t tile_n() const { return 4 * wg_n; }
  uint32_t threads() const { return wg_m * wg_n; }
};
// Picks the tile for an m x n output (`batch` of them): among 64x64, 64x32, 32x64, 32x32, 64x16
// and 16x64 (64 threads at least), the ones that give the device enough workgroups, then the
// least padded work, then the largest tile (most reuse through shared memory). Small late layers
// (7x7 outputs, few channels) get smaller tiles; large ones keep 64x64.
GemmTile pick_gemm_tile(uint64_t m, uint64_t n, uint64_t batch);
// Appends (wg_n, wg_m, local size) as three specialisation constants.
void append_tile_spec(const GemmTile& t, std::vector<uint32_t>* spec);

// Splits a 1-D element count over workgroups of `local` threads in a 2-D grid (x <= 65535).
void set_linear_groups(uint64_t elements, uint32_t local, Dispatch* d);

}  // namespace tessera
