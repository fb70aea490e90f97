#include "backends/cpu/kernel_table.h"

#include <string_view>

namespace tessera::cpu {

std::vector<KernelEntry> all_kernel_entries() {
  std::vector<KernelEntry> all;
  const std::span<const KernelEntry> families[] = {
      {kConvKernels, kNumConvKernels},     {kFullyConnectedKernels, kNumFullyConnectedKernels},
      {kPoolKernels, kNumPoolKernels},     {kElementwiseKernels, kNumElementwiseKernels},
      {kTensorKernels, kNumTensorKernels}, {kReductionKernels, kNumReductionKernels},
      {kDeconvKernels, kNumDeconvKernels},
  };
  for (auto f : families) all.insert(all.end(), f.begin(), f.end());
  return all;
}

bool has_optimised_kernel(OpKind op) {
  for (const KernelEntry& e : all_kernel_entries()) {
    if (e.op == op) return true;
  }
  return false;
}

Result<std::unique_ptr<Kernel>> build_kernel(const KernelRequest& req, const char* variant) {
  static const std::vector<KernelEntry> entries = all_kernel_entries();
  if (variant != nullptr) {
    for (const KernelEntry& e : entries) {
      if (e.op != req.node.kind || std::string_view(e.variant) != variant) continue;
      KernelRequest forced = req;
      forced.any_config = true;
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, e.make(forced));
      if (k) return k;
      return unimplemented(std::string("kernel variant ") + variant + " cannot run node '" +
                           req.node.name + "'");
    }
  }
  for (const KernelEntry& e : entries) {
    if (e.op != req.node.kind) continue;
    Result<std::unique_ptr<Kernel>> k = e.make(req);
    if (!k.ok()) {
      // A configuration the library rejects runs on the reference kernel (which reports any
      // real attribute error when it runs); resource and internal errors are real.
      const StatusCode c = k.status().code();
      if (c == StatusCode::kUnimplemented || c == StatusCode::kInvalidArgument) continue;
      return k.status();
    }
    if (*k) return std::move(*k);
  }
  return make_reference_kernel(req.node);
}

}  // namespace tessera::cpu
