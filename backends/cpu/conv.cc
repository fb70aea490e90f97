// Convolution: the variant table, the setup shared by all variants, and the XNNPACK variant:
// 2-D Conv (dense, grouped and depthwise) in NHWC with the weights packed once at build time;
// relu/clip are clamped into the output, other fused activations run as an in-place pass.
#include "backends/cpu/conv.h"

#include <algorithm>
#include <limits>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/onednn.h"

namespace tessera::cpu {

namespace {

class XnnConvKernel final : public NhwcIo<> {
 public:
  XnnConvKernel(const ConvSetup& s, std::string what) : s_(s), what_(std::move(what)) {}

  // Creates the operator for outputs `output_stride` floats apart per pixel (the channel count
  // when dense; XNNPACK fixes the stride at creation), packing the weights from OIHW into
  // XNNPACK's [groups * group_out, kh, kw, group_in].
  Status create(int64_t output_stride) {
    const ConvSetup& s = s_;
    const WindowGeometry& geo = s.geo;
    const int64_t cout = s.cout, cin_g = s.cin_g, kh = s.kh, kw = s.kw;
    std::vector<float> packed(static_cast<size_t>(cout * kh * kw * cin_g) + 16);
    const float* src = s.weight->data<float>();
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t i = 0; i < cin_g; ++i) {
        for (int64_t yx = 0; yx < kh * kw; ++yx) {
          packed[static_cast<size_t>((o * kh * kw + yx) * cin_g + i)] =
              src[(o * cin_g + i) * kh * kw + yx];
        }
      }
    }
    RETURN_IF_ERROR(ensure_xnnpack());
    xnn_operator_t op = nullptr;
    RETURN_IF_ERROR(xnn_check(
        xnn_create_convolution2d_nhwc_f32(
            static_cast<uint32_t>(geo.pads_begin[0]), static_cast<uint32_t>(geo.pads_end[1]),
            static_cast<uint32_t>(geo.pads_end[0]), static_cast<uint32_t>(geo.pads_begin[1]),
            static_cast<uint32_t>(kh), static_cast<uint32_t>(kw),
            static_cast<uint32_t>(geo.strides[0]), static_cast<uint32_t>(geo.strides[1]),
            static_cast<uint32_t>(geo.dilations[0]), static_cast<uint32_t>(geo.dilations[1]),
            static_cast<uint32_t>(s.group), static_cast<size_t>(cin_g),
            static_cast<size_t>(cout / s.group), static_cast<size_t>(s.cin),
            static_cast<size_t>(output_stride), packed.data(),
            s.bias != nullptr ? s.bias->data<float>() : nullptr, s.clamp.min, s.clamp.max, 0, &op),
        what_));
    op_.reset(op);
    output_stride_ = output_stride;
    return Status();
  }

  // Only when no activation pass runs over the output afterwards (that pass reads it densely).
  bool writes_strided_output() const override { return !post_.active(); }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const Shape& x = in[0].shape;
    const Shape& y = out[0].shape;
    const int64_t stride = out[0].pixel_stride_or_dense();
    if (stride != output_stride_) RETURN_IF_ERROR(create(stride));
    RETURN_IF_ERROR(xnn_check(
        xnn_setup_convolution2d_nhwc_f32(op_.get(), static_cast<size_t>(x[0]),
                                         static_cast<size_t>(x[2]), static_cast<size_t>(x[3]),
                                         in[0].f32(), out[0].f32(), pool.pthreadpool()),
        what_));
    return post_.bind(out[0].f32(), out[0].f32(), static_cast<size_t>(y[0] * y[2] * y[3]),
                      static_cast<size_t>(y[1]), pool);
  }

  Status run(ThreadPool& pool) override {
    RETURN_IF_ERROR(xnn_check(xnn_run_operator(op_.get(), pool.pthreadpool()), what_));
    return post_.run(pool);
  }

  std::string describe() const override { return desc_; }
  uint64_t owned_bytes() const override { return packed_bytes_; }

  ConvSetup s_;  // its weight and bias point into the graph, which outlives the program
  XnnOperator op_;
  int64_t output_stride_ = 0;  // of the current operator
  ActivationPass post_;
  std::string what_;
  std::string desc_;
  uint64_t packed_bytes_ = 0;
};

Result<std::unique_ptr<Kernel>> make_xnn_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> setup, conv_setup(req));
  if (!setup || !(setup->clamp.min < setup->clamp.max)) return decline();
  const ConvSetup& s = *setup;
  const Node& n = req.node;
  auto k = std::make_unique<XnnConvKernel>(s, "node " + quote_name(n.name) + " (Conv)");
  RETURN_IF_ERROR(k->create(s.cout));
  if (!activation_is_clamp(s.act)) {
    ASSIGN_OR_RETURN(k->post_, ActivationPass::create(s.act, n.name));
  }
  k->packed_bytes_ = static_cast<uint64_t>(s.cout * (s.kh * s.kw * s.cin_g + 1)) * sizeof(float);
  const bool dw = s.group > 1 && s.cin_g == 1;
  k->desc_ = "xnnpack conv " + std::to_string(s.kh) + "x" + std::to_string(s.kw) + "/" +
             std::to_string(s.geo.strides[0]) +
             (dw            ? " depthwise"
              : s.group > 1 ? " grouped"
                            : "") +
             activation_suffix(s.act);
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

Result<std::optional<ConvSetup>> conv_setup(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& n = req.node;
  const std::optional<ConvSetup> none;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 4) return none;
  ConvSetup s;
  s.weight = ctx.constant(1);
  s.bias = ctx.constant(2);
  if (s.weight == nullptr || s.weight->dtype() != DType::kF32 || s.weight->rank() != 4 ||
      (ctx.has_input(2) && (s.bias == nullptr || s.bias->dtype() != DType::kF32))) {
    return none;
  }
  const Shape& xs = ctx.input(0).shape;
  const Shape& ws = s.weight->shape();
  ASSIGN_OR_RETURN(s.group, n.attrs.int_or("group", 1));
  if (s.group < 1 || xs[1] % s.group != 0 || ws[0] % s.group != 0 || ws[1] * s.group != xs[1])
    return none;
  if (s.bias != nullptr && s.bias->numel() != ws[0]) return none;
  s.cin = xs[1];
  s.cout = ws[0];
  s.cin_g = ws[1];
  s.kh = ws[2];
  s.kw = ws[3];
  const int64_t in[2] = {xs[2], xs[3]};
  const int64_t kernel[2] = {ws[2], ws[3]};
  ASSIGN_OR_RETURN(s.geo, forward_window(ctx, in, kernel, {}));
  // The kernels derive the output size from the padding with floor rounding: it must agree.
  for (int i = 0; i < 2; ++i) {
    const WindowGeometry& g = s.geo;
    const int64_t out =
        (g.input[i] + g.pads_begin[i] + g.pads_end[i] - g.effective_kernel(i)) / g.strides[i] + 1;
    if (out != g.output[i] || g.pads_begin[i] < 0 || g.pads_end[i] < 0) return none;
  }
  ASSIGN_OR_RETURN(s.act, parse_fused_activation(n.attrs));
  s.clamp = clamp_of(s.act);
  return std::optional<ConvSetup>(std::move(s));
}

void conv_epilogue(const ConvSetup& s, const float* bias, float* y, int64_t rows, int64_t k,
                   int64_t ldy) {
  const bool clamp = s.clamps();
  const float lo = s.clamp.min, hi = s.clamp.max;
  for (int64_t r = 0; r < rows; ++r) {
    float* row = y + r * ldy;
    if (bias != nullptr) {
      for (int64_t c = 0; c < k; ++c) row[c] += bias[c];
    }
    if (clamp) {
      for (int64_t c = 0; c < k; ++c) row[c] = std::min(std::max(row[c], lo), hi);
    } else if (s.activates_after_store()) {
      apply_activation(s.act, row, k);
    }
  }
}

std::string activation_suffix(const Activation& a) {
  return a.kind != ActivationKind::kNone ? std::string(" +") + activation_name(a.kind) : "";
}

WindowBinding::WindowBinding(const ConvSetup& s, const Operand& in, const Operand& out,
                             int threads) {
  x = in.f32();
  y = out.f32();
  n = in.shape[0];
  h = in.shape[2];
  w = in.shape[3];
  oh = out.shape[2];
  ow = out.shape[3];
  ldx = in.pixel_stride_or_dense();
  ldy = out.pixel_stride_or_dense();
  const int64_t sx = s.geo.strides[1], pl = s.geo.pads_begin[1];
  fx0 = std::min(ow, (pl + sx - 1) / sx);
  fx1 = fx0;
  if (w + pl >= s.kw) fx1 = std::max(fx0, std::min(ow, (w + pl - s.kw) / sx + 1));
  const int64_t rows = n * oh;
  rows_per_block = std::max<int64_t>(1, rows / (8 * std::max(threads, 1)));
  blocks = (rows + rows_per_block - 1) / rows_per_block;
}

void WindowBinding::for_each_row(ThreadPool& pool,
                                 const std::function<void(int, int64_t, int64_t)>& fn) const {
  if (n * oh * ow == 0) return;
  pool.parallel_items(static_cast<size_t>(blocks), [&](int worker, size_t b) {
    const int64_t r0 = static_cast<int64_t>(b) * rows_per_block;
    const int64_t r1 = std::min(n * oh, r0 + rows_per_block);
    for (int64_t r = r0; r < r1; ++r) fn(worker, r / oh, r % oh);
  });
}

const KernelEntry kConvKernels[] = {
    {OpKind::kConv, "tessera_direct_conv", make_direct_conv, Isa::kAvx512f},
    {OpKind::kConv, "tessera_depthwise_conv", make_depthwise_conv, Isa::kAvx512f},
    {OpKind::kConv, "winograd_f4x4_3x3", make_winograd_f4_conv, Isa::kAvx512f,
     /*measured_candidate=*/false},
    {OpKind::kConv, "winograd_f2x2_3x3", make_winograd_f2_conv, Isa::kAvx512f},
    {OpKind::kConv, "tessera_gemm_conv", make_tessera_gemm_conv, Isa::kAvx512f},
    {OpKind::kConv, "openblas_gemm_conv", make_gemm_conv},
    {OpKind::kConv, "xnnpack_conv2d_nhwc_f32", make_xnn_conv},
    {OpKind::kConv, "onednn_conv_f32", make_onednn_f32_conv},
};
const size_t kNumConvKernels = sizeof(kConvKernels) / sizeof(kConvKernels[0]);

}  // namespace tessera::cpu
