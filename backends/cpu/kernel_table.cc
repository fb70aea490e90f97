#include "backends/cpu/kernel_table.h"

#include <string_view>

#include "backends/cpu/simd.h"

namespace tessera::cpu {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return "portable";
    case Isa::kAvx512f:
      return "avx512f";
  }
  return "unknown";
}

bool isa_available(Isa isa) {
  switch (isa) {
    case Isa::kPortable:
      return true;
    case Isa::kAvx512f:
      return has_avx512();  // false in builds for other architectures
  }
  return false;
}

const char* build_arch() {
#if defined(__x86_64__)
  return "x86_64";
#elif defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__)
  return "arm";
#elif defined(__riscv)
  return "riscv";
#else
  return "unknown";
#endif
}

Status isa_unavailable(Isa isa, std::string_view variant) {
  std::string who = variant.empty() ? std::string("this kernel variant")
                                    : "kernel variant " + std::string(variant);
  const bool in_build = isa == Isa::kPortable || (isa == Isa::kAvx512f && TESSERA_X86_64);
  if (!in_build) {
    return unimplemented(who + " needs " + isa_name(isa) + ", which this " + build_arch() +
                         " build does not contain");
  }
  return unimplemented(who + " needs " + isa_name(isa) + ", which this CPU does not run");
}

bool entry_available(const KernelEntry& entry) {
  return isa_available(entry.isa);
}

const std::vector<KernelEntry>& all_kernel_entries() {
  static const std::vector<KernelEntry> all = [] {
    std::vector<KernelEntry> v;
    const std::span<const KernelEntry> families[] = {
        {kConvKernels, kNumConvKernels},     {kFullyConnectedKernels, kNumFullyConnectedKernels},
        {kPoolKernels, kNumPoolKernels},     {kElementwiseKernels, kNumElementwiseKernels},
        {kTensorKernels, kNumTensorKernels}, {kReductionKernels, kNumReductionKernels},
        {kDeconvKernels, kNumDeconvKernels},
    };
    for (auto f : families) v.insert(v.end(), f.begin(), f.end());
    return v;
  }();
  return all;
}

bool has_optimised_kernel(OpKind op) {
  for (const KernelEntry& e : all_kernel_entries()) {
    if (e.op == op) return true;
  }
  return false;
}

const KernelEntry* find_kernel_entry(OpKind op, std::string_view variant) {
  for (const KernelEntry& e : all_kernel_entries()) {
    if (e.op == op && variant == e.variant) return &e;
  }
  return nullptr;
}

Result<std::unique_ptr<Kernel>> make_entry_kernel(const KernelEntry& entry,
                                                  const KernelRequest& req, bool any_config) {
  if (!entry_available(entry)) return std::unique_ptr<Kernel>();
  KernelRequest r = req;
  r.any_config = any_config;
  Result<std::unique_ptr<Kernel>> k = entry.make(r);
  if (!k.ok()) {
    // A configuration the library rejects runs elsewhere (the reference kernel reports any real
    // attribute error when it runs); resource and internal errors are real.
    const StatusCode c = k.status().code();
    if (c == StatusCode::kUnimplemented || c == StatusCode::kInvalidArgument)
      return std::unique_ptr<Kernel>();
    return k.status();
  }
  return std::move(*k);
}

Result<std::unique_ptr<Kernel>> build_kernel(const KernelRequest& req, const char* variant) {
  if (variant != nullptr) {
    if (const KernelEntry* e = find_kernel_entry(req.node.kind, variant); e != nullptr) {
      if (!entry_available(*e)) return isa_unavailable(e->isa, e->variant);
      KernelRequest forced = req;
      forced.any_config = true;
      ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, e->make(forced));
      if (k) return k;
      return unimplemented(std::string("kernel variant ") + variant + " cannot run node " +
                           quote_name(req.node.name));
    }
  }
  for (const KernelEntry& e : all_kernel_entries()) {
    if (e.op != req.node.kind) continue;
    ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, make_entry_kernel(e, req, req.any_config));
    if (k) return k;
  }
  return make_reference_kernel(req.node);
}

Result<std::unique_ptr<Kernel>> make_int8_kernel(const KernelRequest& req,
                                                 const std::vector<QuantParam>& quant) {
  switch (req.node.kind) {
    case OpKind::kConcat:
      return make_int8_concat(req, quant);
    case OpKind::kBatchNormalization:
      return make_int8_batch_norm(req, quant);
    case OpKind::kMul:
      return make_int8_channel_gate(req, quant);
    default:
      return std::unique_ptr<Kernel>();
  }
}

}  // namespace tessera::cpu
