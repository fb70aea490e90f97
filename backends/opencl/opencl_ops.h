// How the opencl device turns graph nodes into kernel launches.
//
// Each op family has one host file next to its kernels (opencl_conv.cc with kernels/conv.cl,
// opencl_gemm.cc with kernels/gemm.cl, ...) defining a table of OpenCLOp entries: whether the
// device can take a node (beyond the checks every node gets: f32 or byte-moving dtypes, every
// tensor within the device's maximum allocation), and how to lower it. opencl_ops.cc joins the
// tables; tests/backends/opencl_ops_test.cc checks every foundation op has an entry.
//
// Lowering happens once, in Device::compile: buffers are already assigned (weights uploaded,
// activations planned), so a lowering binds every kernel argument and records Launches; running
// the program only enqueues them.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/opencl/opencl_runtime.h"
#include "graph/graph.h"
#include "ops/activation.h"

namespace tessera::opencl {

// One kernel launch of a compiled program, its arguments bound.
struct Launch {
  KernelHandle kernel;
  std::string label;  // "node 'conv1' (Conv): conv_f32_implicit_gemm_64x64"
  cl_uint dims = 1;
  size_t global[3] = {1, 1, 1};
  size_t local[3] = {0, 0, 0};  // all 0: the driver chooses
  bool has_local() const { return local[0] != 0; }
};

// A condition only the kernels can detect (a run-time index out of range): a 4-byte device flag
// the kernel sets to (element + 1) of the first offender it sees, cleared before every run and
// read after it; a non-zero flag fails the run with `what` and the element.
struct RunCheck {
  cl_mem flag = nullptr;  // owned by the program's auxiliary buffers
  std::string what;       // "node 'g' (Gather): index out of range ..."
};

// Binds a kernel's arguments in order; the first failure is kept and reported by finish().
class LaunchBuilder {
 public:
  LaunchBuilder(KernelHandle kernel, std::string label)
      : kernel_(std::move(kernel)), label_(std::move(label)) {}
  LaunchBuilder& mem(cl_mem m) { return raw(sizeof(cl_mem), &m); }
  LaunchBuilder& i32(int64_t v);
  LaunchBuilder& u32(uint32_t v) { return raw(sizeof(v), &v); }
  LaunchBuilder& f32(float v) { return raw(sizeof(v), &v); }
  // Global size rounded up to multiples of `local` (when given).
  Result<Launch> finish(std::initializer_list<size_t> global,
                        std::initializer_list<size_t> local = {});

 private:
  LaunchBuilder& raw(size_t size, const void* value);
  KernelHandle kernel_;
  std::string label_;
  cl_uint next_ = 0;
  Status status_;
};

// What a lowering sees: the node, its OpContext (constants visible), its buffers, and where to
// put launches and the auxiliary buffers (index tables, folded weights) the program keeps.
class Lowering {
 public:
  Lowering(Runtime& rt, const Graph& g, const Node& node, const OpContext& ctx,
           std::vector<cl_mem> inputs, std::vector<cl_mem> outputs, std::vector<MemHandle>* aux,
           std::vector<Launch>* launches, std::vector<RunCheck>* checks)
      : rt_(rt),
        g_(g),
        node_(node),
        ctx_(ctx),
        inputs_(std::move(inputs)),
        outputs_(std::move(outputs)),
        aux_(aux),
        launches_(launches),
        checks_(checks) {}

  Runtime& runtime() { return rt_; }
  const Graph& graph() const { return g_; }
  const Node& node() const { return node_; }
  const OpContext& ctx() const { return ctx_; }
  const TensorInfo& input_info(int i) const { return ctx_.input(i); }
  const TensorInfo& output_info(int i) const {
    return g_.value(node_.outputs[static_cast<size_t>(i)]).info;
  }
  // Device buffers of input / output i (null for an omitted optional input).
  cl_mem input(int i) const { return inputs_[static_cast<size_t>(i)]; }
  cl_mem output(int i) const { return outputs_[static_cast<size_t>(i)]; }
  int num_outputs() const { return static_cast<int>(outputs_.size()); }

  // A read-only buffer with a copy of `values`, kept for the program's lifetime.
  Result<cl_mem> upload_ints(std::span<const int32_t> values);
  Result<cl_mem> upload_floats(std::span<const float> values);
  // A device buffer of `bytes` the launches use as scratch, kept for the program's lifetime.
  Result<cl_mem> scratch(size_t bytes);
  // A RunCheck flag for this node; `what` says what a set flag means.
  Result<cl_mem> run_check(const std::string& what);
  // A 4-byte placeholder bound where a kernel takes a buffer it will not read (no bias).
  Result<cl_mem> dummy();

  // Starts a launch of `kernel_name` from family `family`, labelled with the node.
  Result<LaunchBuilder> kernel(const char* family, const char* kernel_name);
  void add(Launch launch) { launches_->push_back(std::move(launch)); }

 private:
  Runtime& rt_;
  const Graph& g_;
  const Node& node_;
  const OpContext& ctx_;
  std::vector<cl_mem> inputs_;
  std::vector<cl_mem> outputs_;
  std::vector<MemHandle>* aux_;
  std::vector<Launch>* launches_;
  std::vector<RunCheck>* checks_;
  cl_mem dummy_ = nullptr;
};

// How the device executes one OpKind.
enum class Execution {
  kKernels,      // lower() records kernel launches
  kAlias,        // the output is input 0's bytes reinterpreted (Reshape, Flatten, Identity...)
  kCompileTime,  // the output depends only on shapes and constants (Shape, Constant): computed
                 // once at compile time by the reference kernel and uploaded like a weight
};

struct OpenCLOp {
  OpKind kind;
  Execution execution;
  // Node-specific conditions (dtypes, attributes, constant inputs); null when any node that
  // passed shape inference runs.
  Capability (*check)(const OpContext& ctx);
  // Records the launches (kKernels only).
  Status (*lower)(Lowering& l);
};

// The family tables, one per opencl_<family>.cc.
std::span<const OpenCLOp> opencl_conv_ops();
std::span<const OpenCLOp> opencl_gemm_ops();
std::span<const OpenCLOp> opencl_pool_ops();
std::span<const OpenCLOp> opencl_elementwise_ops();
std::span<const OpenCLOp> opencl_normalization_ops();
std::span<const OpenCLOp> opencl_tensor_ops();

// The entry for `kind`, or null when the device has none.
const OpenCLOp* find_opencl_op(OpKind kind);

// Helpers shared by the family files.
// The node's fused activation as kernel arguments (kind number, alpha, beta).
struct KernelActivation {
  int kind = 0;
  float alpha = 0;
  float beta = 0;
};
Result<KernelActivation> kernel_activation(const OpContext& ctx);
// Capability::no naming the input when input i is not f32.
Capability require_f32_input(const OpContext& ctx, int i);
// Ceiling division for launch sizes.
inline size_t ceil_div(int64_t a, int64_t b) {
  return static_cast<size_t>((a + b - 1) / b);
}

}  // namespace tessera::opencl
