// Reduced-precision kernels of the cpu device on oneDNN (Debian's libdnnl, docs/precision.md),
// and oneDNN's f32 convolution as a measured candidate of the f32 kernel table.
//
// bf16: Conv (dense, grouped, depthwise; fused relu/clip/leaky relu/sigmoid/tanh/hard swish and a
// fused residual Add), Gemm and MatMul with a constant weight matrix, MaxPool, AveragePool and
// GlobalAveragePool. Weights are reordered to bf16, in the blocked format oneDNN's chosen
// implementation wants, once when the kernel is built; activations are bf16 in NHWC (rank 4) or
// logical order (others), accumulation is f32, bias f32. Every kernel has Kernel::bf16_io(), so
// consecutive bf16 layers pass bf16 tensors and the program converts only at the edges.
//
// Threads: Debian's oneDNN runs on OpenMP. A kernel runs on the pool's leader thread, which the
// first time (per thread count) starts an OpenMP team of the pool's size and pins its thread i
// to the pool's core i, so oneDNN computes on the device's cores and no others; with the pool
// kept to its leader (ThreadPool::set_use_workers(false)) oneDNN runs on one thread.
//
// Thread rule: a kernel is used by one program, so by one thread at a time (kernel.h); the
// functions below are safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"

namespace tessera::cpu {

// Whether this build has oneDNN (TESSERA_ONEDNN).
bool onednn_available();
// Whether oneDNN has bf16 kernels on this CPU: AVX-512 at least (native with avx512_bf16 or
// AMX, emulated on avx512_core); below it oneDNN 2.6 has none. ONEDNN_MAX_CPU_ISA caps it.
bool onednn_bf16_available();
// What runs bf16 here, for descriptions: "oneDNN 2.6.3 (avx512_core_bf16)", or why none.
std::string onednn_note();

// The bf16 kernel for a node, or null when oneDNN has none for this configuration or has no
// implementation of it on this CPU (the f32 kernels run it). Errors are real errors (bad
// attributes, a oneDNN failure).
Result<std::unique_ptr<Kernel>> make_onednn_bf16_kernel(const KernelRequest& req);

// oneDNN's f32 convolution (NHWC f32 in and out, weights reordered once into the format of the
// implementation oneDNN picks, e.g. brgconv on AVX-512; fused activations and residual Add as
// post-ops), an entry of the f32 kernel table (kConvKernels, "onednn_conv_f32"). The rules never
// pick it (it declines unless req.any_config): measured kernel choice offers it every Conv and
// keeps it where it is the fastest. Null without oneDNN or where oneDNN has no implementation.
Result<std::unique_ptr<Kernel>> make_onednn_f32_conv(const KernelRequest& req);

// The int8 kernel for a node, or null when oneDNN has none for this configuration or a value it
// would read or write in int8 has no quantisation (`quant`, by ValueId; CpuProgram assigns it
// from the calibration table). Conv (dense, grouped, depthwise; fused activations and residual
// Add, requantised straight into the next layer's int8), MaxPool / AveragePool /
// GlobalAveragePool (the output keeps the input's quantisation), Gemm / MatMul with a constant
// weight matrix (f32 output). Weights: s8 with a scale per output channel.
Result<std::unique_ptr<Kernel>> make_onednn_int8_kernel(const KernelRequest& req,
                                                        const std::vector<QuantParam>& quant);

// f32 -> bf16 with round-to-nearest-even (NaN stays NaN), and back (exact).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

}  // namespace tessera::cpu
