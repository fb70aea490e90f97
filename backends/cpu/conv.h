// Dense 2-D convolution on the cpu device: what every convolution kernel variant shares.
//
// Variants (the kConvKernels table in conv.cc, tried in this order):
//   tessera_direct_conv (conv_direct.cc) few-channel convolutions (the RGB stems, SqueezeNet's
//                        16-channel expand3x3s) straight from the NHWC input: tiles of output
//                        pixels x up to 64 channels in AVX-512 registers, no im2col buffer;
//   tessera_depthwise_conv (conv_depthwise.cc) depthwise convolutions from the NHWC input, one
//                        load per input pixel and kernel row (a sliding window); chosen by
//                        measurement only (kernel_choice.h), never by the rules;
//   winograd_f4x4_3x3 / winograd_f2x2_3x3  (winograd.cc) stride-1 3x3 dense convolutions:
//                        input/output tile transforms written here, the 36/16 element-wise
//                        products as OpenBLAS sgemm calls, weights transformed at build time;
//   tessera_gemm_conv  (conv_gemm.cc, gemm.h) Tessera's AVX-512 GEMM with the weights packed
//                        once: 1x1 convolutions read the NHWC input in place, others gather
//                        their im2col rows straight into the GEMM's A blocks;
//   openblas_gemm_conv (conv_gemm.cc) 1x1 convolutions as one sgemm (no im2col), other dense
//                        convolutions as im2col + sgemm;
//   xnnpack_conv2d_nhwc_f32 (conv.cc) everything else, including grouped and depthwise.
// Each variant accepts only the layers where it measured fastest (docs/performance.md, the
// BM_ConvVariant benchmarks); KernelRequest::any_config lifts that rule so that tests and
// benchmarks can run every variant on every shape it supports.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "backends/cpu/kernel.h"
#include "backends/cpu/xnn_util.h"
#include "ops/activation.h"
#include "ops/conv_pool_util.h"

namespace tessera::cpu {

// A Conv node as the kernels see it: constant f32 weights (OIHW), optional constant bias,
// 4-D f32 input, geometry with floor-rounded output, fused activation.
struct ConvSetup {
  const Tensor* weight = nullptr;
  const Tensor* bias = nullptr;  // null when absent
  int64_t group = 1;
  int64_t cin = 0, cout = 0, cin_g = 0, kh = 0, kw = 0;
  WindowGeometry geo;
  Activation act;
  ClampRange clamp{};  // clamp_of(act)

  bool dense() const { return group == 1; }
  // A fused activation that is a clamp (relu, relu6, clip): applied to the accumulators before
  // they are stored, with `clamp`'s bounds. Any other fused activation runs over the stored output.
  bool clamps() const { return act.kind != ActivationKind::kNone && activation_is_clamp(act); }
  // A fused activation that is not a clamp (sigmoid, hard_swish...): run over the stored output.
  bool activates_after_store() const { return act.kind != ActivationKind::kNone && !clamps(); }
  bool stride1_undilated() const {
    return geo.strides[0] == 1 && geo.strides[1] == 1 && geo.dilations[0] == 1 &&
           geo.dilations[1] == 1;
  }
  // Multiply-adds of one image.
  int64_t macs_per_image() const { return geo.output[0] * geo.output[1] * cout * cin_g * kh * kw; }
  // A residual Add fused into this convolution (Kernel::fuse_residual): the Add's activation
  // becomes the convolution's, applied after the residual. False, changing nothing, when the
  // convolution has its own activation (act(x) + R is not act(x + R)).
  bool take_residual_activation(const Activation& add_act) {
    if (act.kind != ActivationKind::kNone) return false;
    act = add_act;
    clamp = clamp_of(add_act);
    return true;
  }
};

// The setup of a 2-D Conv node, or nullopt for configurations the optimised kernels do not take
// (1-D/3-D, non-constant weights, ceil-rounded output...). Errors are attribute errors.
Result<std::optional<ConvSetup>> conv_setup(const KernelRequest& req);

// What a convolution that reads its NHWC input in place (no im2col: the direct and depthwise
// kernels) binds: its operands and dims, the output columns [fx0, fx1) whose kernel window lies
// inside the image horizontally, and blocks of whole output rows for the pool's threads (about 8
// per thread, taken as threads come free).
struct WindowBinding {
  const float* x = nullptr;
  float* y = nullptr;
  int64_t n = 0, h = 0, w = 0, oh = 0, ow = 0;
  int64_t ldx = 0, ldy = 0;  // floats between consecutive pixels of the input / output
  int64_t fx0 = 0, fx1 = 0;
  int64_t blocks = 0, rows_per_block = 0;

  WindowBinding() = default;
  WindowBinding(const ConvSetup& s, const Operand& in, const Operand& out, int threads);
  // fn(worker, image, output row) for every output row, on the pool's threads.
  void for_each_row(ThreadPool& pool, const std::function<void(int, int64_t, int64_t)>& fn) const;
};

// The epilogue of the GEMM-based kernels: y[r * ldy + k] += bias[k] (bias may be null), then
// the fused activation, over `rows` rows of `k` channels.
void conv_epilogue(const ConvSetup& s, const float* bias, float* y, int64_t rows, int64_t k,
                   int64_t ldy);

// The factories of conv.cc's table.
Result<std::unique_ptr<Kernel>> make_direct_conv(const KernelRequest& req);
Result<std::unique_ptr<Kernel>> make_depthwise_conv(const KernelRequest& req);
Result<std::unique_ptr<Kernel>> make_winograd_f4_conv(const KernelRequest& req);
Result<std::unique_ptr<Kernel>> make_winograd_f2_conv(const KernelRequest& req);
Result<std::unique_ptr<Kernel>> make_tessera_gemm_conv(const KernelRequest& req);
Result<std::unique_ptr<Kernel>> make_gemm_conv(const KernelRequest& req);

// A kernel description suffix for the fused activation: "" or " +relu".
std::string activation_suffix(const Activation& a);

}  // namespace tessera::cpu
