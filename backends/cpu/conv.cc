// Convolution on XNNPACK: 2-D Conv (dense, grouped and depthwise) in NHWC with the weights
// packed once at build time; relu/clip are clamped into the output, other fused activations run
// as an in-place pass.
#include <limits>

#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_table.h"
#include "ops/conv_pool_util.h"

namespace tessera::cpu {

namespace {

class XnnConvKernel final : public Kernel {
 public:
  void choose_layouts(std::span<const Layout> /*available*/, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    wanted[0] = Layout::kNHWC;
    produced[0] = Layout::kNHWC;
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const Shape& x = in[0].shape;
    const Shape& y = out[0].shape;
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

  XnnOperator op_;
  ActivationPass post_;
  std::string what_;
  std::string desc_;
  uint64_t packed_bytes_ = 0;
};

Result<std::unique_ptr<Kernel>> make_conv(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& n = req.node;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 4) return decline();
  const Tensor* w = ctx.constant(1);
  const Tensor* b = ctx.constant(2);
  if (w == nullptr || w->dtype() != DType::kF32 || (ctx.has_input(2) && b == nullptr))
    return decline();
  const Shape& xs = ctx.input(0).shape;
  const Shape& ws = w->shape();
  ASSIGN_OR_RETURN(int64_t group, n.attrs.int_or("group", 1));
  if (group < 1 || xs[1] % group != 0 || ws[0] % group != 0 || ws[1] * group != xs[1])
    return decline();
  const int64_t in[2] = {xs[2], xs[3]};
  const int64_t kernel[2] = {ws[2], ws[3]};
  ASSIGN_OR_RETURN(WindowGeometry geo, forward_window(ctx, in, kernel, {}));
  // XNNPACK derives the output size from the padding with floor rounding: it must agree.
  for (int i = 0; i < 2; ++i) {
    const int64_t out =
        (geo.input[i] + geo.pads_begin[i] + geo.pads_end[i] - geo.effective_kernel(i)) /
            geo.strides[i] +
        1;
    if (out != geo.output[i] || geo.pads_begin[i] < 0 || geo.pads_end[i] < 0) return decline();
  }
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  const ClampRange clamp = clamp_of(act);
  if (!(clamp.min < clamp.max)) return decline();

  // OIHW -> OHWI (XNNPACK's [groups * group_out, kh, kw, group_in]).
  const int64_t cout = ws[0], cin_g = ws[1], kh = ws[2], kw = ws[3];
  std::vector<float> packed(static_cast<size_t>(cout * kh * kw * cin_g) + 16);
  const float* src = w->data<float>();
  for (int64_t o = 0; o < cout; ++o) {
    for (int64_t i = 0; i < cin_g; ++i) {
      for (int64_t yx = 0; yx < kh * kw; ++yx) {
        packed[static_cast<size_t>((o * kh * kw + yx) * cin_g + i)] =
            src[(o * cin_g + i) * kh * kw + yx];
      }
    }
  }
  auto k = std::make_unique<XnnConvKernel>();
  k->what_ = "node '" + n.name + "' (Conv)";
  RETURN_IF_ERROR(ensure_xnnpack());
  xnn_operator_t op = nullptr;
  RETURN_IF_ERROR(xnn_check(
      xnn_create_convolution2d_nhwc_f32(
          static_cast<uint32_t>(geo.pads_begin[0]), static_cast<uint32_t>(geo.pads_end[1]),
          static_cast<uint32_t>(geo.pads_end[0]), static_cast<uint32_t>(geo.pads_begin[1]),
          static_cast<uint32_t>(kh), static_cast<uint32_t>(kw),
          static_cast<uint32_t>(geo.strides[0]), static_cast<uint32_t>(geo.strides[1]),
          static_cast<uint32_t>(geo.dilations[0]), static_cast<uint32_t>(geo.dilations[1]),
          static_cast<uint32_t>(group), static_cast<size_t>(cin_g),
          static_cast<size_t>(cout / group), static_cast<size_t>(xs[1]), static_cast<size_t>(cout),
          packed.data(), b != nullptr ? b->data<float>() : nullptr, clamp.min, clamp.max, 0, &op),
      k->what_));
  k->op_.reset(op);
  if (!activation_is_clamp(act)) {
    ASSIGN_OR_RETURN(k->post_, ActivationPass::create(act, n.name));
  }
  k->packed_bytes_ = static_cast<uint64_t>(cout * (kh * kw * cin_g + 1)) * sizeof(float);
  const bool dw = group > 1 && cin_g == 1;
  k->desc_ =
      "xnnpack conv " + std::to_string(kh) + "x" + std::to_string(kw) + "/" +
      std::to_string(geo.strides[0]) +
      (dw          ? " depthwise"
       : group > 1 ? " grouped"
                   : "") +
      (act.kind != ActivationKind::kNone ? std::string(" +") + activation_name(act.kind) : "");
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

const KernelEntry kConvKernels[] = {
    {OpKind::kConv, "xnnpack_conv2d_nhwc_f32", make_conv},
};
const size_t kNumConvKernels = sizeof(kConvKernels) / sizeof(kConvKernels[0]);

}  // namespace tessera::cpu
