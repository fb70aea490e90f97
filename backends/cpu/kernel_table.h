// The optimised kernels of the cpu device, as data: one table per op family (conv.cc,
// fully_connected.cc, pool.cc, elementwise.cc, tensor_ops.cc), each entry naming the op it
// implements, the kernel variant and its factory. Dispatch, capabilities, the differential tests
// and the benchmarks all walk the same tables. For a node, the entries of its op are tried in
// table order; the first factory that accepts the configuration builds the kernel, and a node no
// entry accepts runs on the reference kernel.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "backends/cpu/kernel.h"

namespace tessera::cpu {

struct KernelEntry {
  OpKind op;
  const char* variant;  // e.g. "xnnpack_conv2d_nhwc_f32"
  KernelFactory make;
};

extern const KernelEntry kConvKernels[];
extern const size_t kNumConvKernels;
extern const KernelEntry kFullyConnectedKernels[];
extern const size_t kNumFullyConnectedKernels;
extern const KernelEntry kPoolKernels[];
extern const size_t kNumPoolKernels;
extern const KernelEntry kElementwiseKernels[];
extern const size_t kNumElementwiseKernels;
extern const KernelEntry kTensorKernels[];
extern const size_t kNumTensorKernels;

// Every entry of every family, in dispatch order.
std::vector<KernelEntry> all_kernel_entries();
// True when some entry exists for the op (it may still decline particular configurations).
bool has_optimised_kernel(OpKind op);

// Builds the kernel for a node: the first accepting entry, else the reference kernel.
// With `variant` (an entry's name, for tests and benchmarks that compare variants), a node of
// that entry's op gets exactly that variant, built with any_config; it is an Unimplemented error
// when the variant cannot run the node. Nodes of other ops are dispatched as usual.
Result<std::unique_ptr<Kernel>> build_kernel(const KernelRequest& req,
                                             const char* variant = nullptr);

}  // namespace tessera::cpu
