// Measured kernel choice for the `cpu` device.
//
// A convolution can run on up to six kernel variants (kernel_table.h: Tessera's direct, Winograd
// and GEMM convolutions, OpenBLAS, XNNPACK). Which one is fastest depends on the layer and on the
// CPU: the static rules in the factories were measured on one machine (an Intel core with two
// 512-bit FMA ports), and on another (an AMD Zen 4 core, 512-bit FMAs on two 256-bit units)
// XNNPACK's 1x1 path beat Tessera's GEMM on every ResNet-50 1x1 layer by 10-25%
// (docs/performance.md). So by default a node with more than one candidate is measured when it is
// compiled: every variant that can run it is built, bound to scratch tensors of the node's
// shapes and timed on the device's own pool, in interleaved rounds; the fastest wins unless the
// rules' own choice is within kKeepRuleWithin of it (noise must not flip a choice back and forth).
//
// Decisions are remembered per (CPU model, core set, node configuration): in the process, and in
// a cache file (kernel_choice_cache_path(); one line per decision), so a configuration is
// measured once per machine, not once per compile. The file is plain text and may be deleted at
// any time; lines of another format version or CPU are ignored.
//
// TESSERA_CPU_KERNELS=rules turns measuring off (the factories' rules alone, as before);
// TESSERA_CPU_KERNEL_CACHE=PATH moves the cache file, =off keeps decisions in the process only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/layout.h"

namespace tessera::cpu {

enum class KernelChoice {
  kRules,     // the first entry of the kernel table that accepts the node
  kMeasured,  // the fastest accepting entry, measured (and cached)
};

// From TESSERA_CPU_KERNELS ("rules" or "measured"; unset: measured).
KernelChoice default_kernel_choice();

// Where decisions are cached: TESSERA_CPU_KERNEL_CACHE, else $XDG_CACHE_HOME/tessera/ or
// ~/.cache/tessera/cpu-kernels.tsv; empty when caching on disk is off.
std::string kernel_choice_cache_path();

// What one measurement found, for tests and `describe`.
struct KernelTiming {
  std::string variant;
  double ms = 0;  // minimum over the rounds
};

// The kernel for `req` by measurement: as build_kernel(req) when at most one entry of the node's
// op accepts it (any_config) or the op is not measured (convolutions, Gemm and MatMul are);
// otherwise the fastest candidate. With req.output_to_concat, a candidate that cannot write
// strided output is charged the copy the Concat then makes (a copy of the output's bytes, timed
// in the same rounds). `timings` (optional) receives what was measured now, charges included
// (empty when the decision came from the cache).
Result<std::unique_ptr<Kernel>> build_measured_kernel(const KernelRequest& req,
                                                      std::vector<KernelTiming>* timings = nullptr);

// In which precision a layer's neighbours hand it input 0 and take its output 0: f32 (an f32
// producer or a slice input; no reader with a reduced kernel) or the reduced precision.
struct NeighbourPrecision {
  bool input_f32 = false;
  bool output_f32 = false;
};

// Measured precision choice inside a bf16 or int8 program (docs/precision.md): whether a layer
// runs its reduced-precision kernel `reduced` (oneDNN, onednn.h; XNNPACK's int8) or its f32
// kernel. A reduced kernel is not always the faster one: each oneDNN call pays an OpenMP
// fork/join and a primitive's overhead, which on small layers (depthwise convolutions, late 1x1
// ones) costs more than the f32 kernel saves by computing in f32 on the pool. Both are bound to
// scratch tensors of the node's shapes and timed in interleaved rounds on the pool, each side
// charged the conversions its neighbours make it need (`neighbours`): input 0 into its precision
// where it arrives in the other, output 0 into the other where the readers want that. The
// reduced kernel is kept unless f32 with its conversions is more than 3% faster. Only
// convolutions, Gemm and MatMul are measured. `in_q`/`out_q`: the int8 quantisation of input 0 and
// output 0 (ignored for bf16). Decisions are cached with the kernel variants' (same file, a key
// naming the precision, the signedness and whether there are zero points). Returns null to keep
// `reduced`, else the f32 kernel (build_measured_kernel) to run instead; the f32 kernel is built
// (and its weights packed) only when the decision is measured now or cached as f32. `timings`
// (optional): what was measured now, as "reduced" and "f32" entries (empty when the decision came
// from the cache).
Result<std::unique_ptr<Kernel>> f32_kernel_if_faster(const KernelRequest& req, Kernel& reduced,
                                                     PrecisionConversion::Reduced precision,
                                                     QuantParam in_q, QuantParam out_q,
                                                     NeighbourPrecision neighbours = {},
                                                     std::vector<KernelTiming>* timings = nullptr);

// The cache key of a node's configuration on a pool (op, shapes, attributes, core set).
std::string kernel_choice_key(const KernelRequest& req);

// Forgets the decisions made in this process (tests); the file is left alone.
void clear_kernel_choices_in_process();

}  // namespace tessera::cpu
