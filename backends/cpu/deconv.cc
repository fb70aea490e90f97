// ConvTranspose on XNNPACK's deconvolution (2-D, dense or grouped) in NHWC, the weights packed
// once at build time; relu/clip are clamped into the output, other fused activations run as an
// in-place pass. Configurations XNNPACK cannot express (other ranks, an output-size adjustment of
// a stride or more, negative pads) run on the reference kernel.
#include "backends/cpu/activation.h"
#include "backends/cpu/kernel_table.h"
#include "ops/conv_pool_util.h"

namespace tessera::cpu {

namespace {

class XnnDeconvKernel final : public NhwcIo<XnnOperatorKernel> {
 public:
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const Shape& x = in[0].shape;
    const Shape& y = out[0].shape;
    RETURN_IF_ERROR(xnn_check(xnn_setup_deconvolution2d_nhwc_f32(
                                  op_.get(), static_cast<size_t>(x[0]), static_cast<size_t>(x[2]),
                                  static_cast<size_t>(x[3]), adjust_[0], adjust_[1], in[0].f32(),
                                  out[0].f32(), pool.pthreadpool()),
                              what_));
    return post_.bind(out[0].f32(), out[0].f32(), static_cast<size_t>(y[0] * y[2] * y[3]),
                      static_cast<size_t>(y[1]), pool);
  }

  uint32_t adjust_[2] = {0, 0};
};

Result<std::unique_ptr<Kernel>> make_deconv(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& n = req.node;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 4) return decline();
  const Tensor* w = ctx.constant(1);
  const Tensor* b = ctx.constant(2);
  if (w == nullptr || w->dtype() != DType::kF32 || w->rank() != 4 ||
      (ctx.has_input(2) && b == nullptr))
    return decline();
  const Shape& xs = ctx.input(0).shape;
  const Shape& ws = w->shape();  // [C, M / group, kh, kw]
  ASSIGN_OR_RETURN(int64_t group, n.attrs.int_or("group", 1));
  if (group < 1 || xs[1] % group != 0 || ws[0] != xs[1]) return decline();
  const int64_t in[2] = {xs[2], xs[3]};
  const int64_t kernel[2] = {ws[2], ws[3]};
  ASSIGN_OR_RETURN(WindowGeometry geo, transpose_window(ctx, in, kernel));
  // XNNPACK's output size: (in - 1) * stride + effective kernel - pads + adjustment, where the
  // adjustment (ONNX output_padding) is below the stride.
  uint32_t adjust[2];
  for (int i = 0; i < 2; ++i) {
    if (geo.pads_begin[i] < 0 || geo.pads_end[i] < 0) return decline();
    const int64_t base = (geo.input[i] - 1) * geo.strides[i] + geo.effective_kernel(i) -
                         geo.pads_begin[i] - geo.pads_end[i];
    const int64_t a = geo.output[i] - base;
    if (a < 0 || a >= geo.strides[i]) return decline();
    adjust[i] = static_cast<uint32_t>(a);
  }
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  const ClampRange clamp = clamp_of(act);
  if (!(clamp.min < clamp.max)) return decline();

  // [C = group * cin_g, cout_g, kh, kw] -> XNNPACK's [group, cout_g, kh, kw, cin_g].
  const int64_t cin_g = xs[1] / group, cout_g = ws[1], kh = ws[2], kw = ws[3];
  std::vector<float> packed(static_cast<size_t>(group * cout_g * kh * kw * cin_g) + 16);
  const float* src = w->data<float>();
  for (int64_t g = 0; g < group; ++g) {
    for (int64_t c = 0; c < cin_g; ++c) {
      for (int64_t m = 0; m < cout_g; ++m) {
        for (int64_t yx = 0; yx < kh * kw; ++yx) {
          packed[static_cast<size_t>(((g * cout_g + m) * kh * kw + yx) * cin_g + c)] =
              src[((g * cin_g + c) * cout_g + m) * kh * kw + yx];
        }
      }
    }
  }
  auto k = std::make_unique<XnnDeconvKernel>();
  k->what_ = "node " + quote_name(n.name) + " (ConvTranspose)";
  k->adjust_[0] = adjust[0];
  k->adjust_[1] = adjust[1];
  RETURN_IF_ERROR(ensure_xnnpack());
  const auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  xnn_operator_t op = nullptr;
  RETURN_IF_ERROR(xnn_check(
      xnn_create_deconvolution2d_nhwc_f32(
          u(geo.pads_begin[0]), u(geo.pads_end[1]), u(geo.pads_end[0]), u(geo.pads_begin[1]), u(kh),
          u(kw), u(geo.strides[0]), u(geo.strides[1]), u(geo.dilations[0]), u(geo.dilations[1]),
          u(group), static_cast<size_t>(cin_g), static_cast<size_t>(cout_g),
          static_cast<size_t>(xs[1]), static_cast<size_t>(group * cout_g), packed.data(),
          b != nullptr ? b->data<float>() : nullptr, clamp.min, clamp.max, 0, &op),
      k->what_));
  RETURN_IF_ERROR(k->adopt(op, act, n.name));
  k->packed_bytes_ = static_cast<uint64_t>(group * cout_g * (kh * kw * cin_g + 1)) * sizeof(float);
  k->desc_ =
      "xnnpack deconv " + std::to_string(kh) + "x" + std::to_string(kw) + "/" +
      std::to_string(geo.strides[0]) + (group > 1 ? " grouped" : "") +
      (act.kind != ActivationKind::kNone ? std::string(" +") + activation_name(act.kind) : "");
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

const KernelEntry kDeconvKernels[] = {
    {OpKind::kConvTranspose, "xnnpack_deconvolution2d_nhwc_f32", make_deconv},
};
const size_t kNumDeconvKernels = sizeof(kDeconvKernels) / sizeof(kDeconvKernels[0]);

}  // namespace tessera::cpu
