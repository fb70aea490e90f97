// The int8 kernels of the cpu device on XNNPACK (kernel_table.h: make_xnn_int8_kernel).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "backends/cpu/conv.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/xnn_util.h"

namespace tessera::cpu {

Result<bool> use_xnnpack_int8() {
  const char* env = std::getenv("TESSERA_CPU_INT8_KERNELS");
  const std::string_view v = env != nullptr ? env : "";
  if (v.empty()) return !onednn_available();
  if (v == "xnnpack") return true;
  if (v == "onednn") {
    if (!onednn_available()) {
      return unimplemented("TESSERA_CPU_INT8_KERNELS=onednn, but " + onednn_note() +
                           " (xnnpack runs int8 here)");
    }
    return false;
  }
  return invalid_argument("TESSERA_CPU_INT8_KERNELS=" + quote_name(v) +
                          " is not an int8 kernel library (expected onednn or xnnpack)");
}

namespace {

// XNNPACK's signed int8 operators: an s8 quantisation (any zero point in [-128, 127]).
bool xnn_s8(QuantParam q) {
  return q.valid() && !q.is_unsigned && q.zero_point >= -128 && q.zero_point <= 127 &&
         std::isnormal(q.scale);
}

// q = clamp(round(v / scale) + zp) for a clamp bound v (infinite: the type's end).
int8_t quantize_bound(float v, QuantParam q) {
  if (std::isinf(v)) return v < 0 ? -128 : 127;
  const double r = std::nearbyint(static_cast<double>(v) / q.scale) + q.zero_point;
  return static_cast<int8_t>(std::clamp(r, -128.0, 127.0));
}

// The output clamp [lo, hi] in `out`'s int8 that expresses a fused ReLU or Clip; false for any
// other activation and for an empty range.
bool int8_clamp(const Activation& act, QuantParam out, int8_t* lo, int8_t* hi) {
  if (act.kind != ActivationKind::kNone && !activation_is_clamp(act)) return false;
  const ClampRange r = clamp_of(act);
  *lo = quantize_bound(r.min, out);
  *hi = quantize_bound(r.max, out);
  return *lo < *hi;
}

std::string s8_label(QuantParam q) {
  return "s8" + (q.zero_point != 0 ? " zp " + std::to_string(q.zero_point) : std::string());
}

// What the XNNPACK int8 kernels share: one operator, int8 in and out in NHWC (rank 4), checks
// that the bound tensors carry the quantisations the operator was made for.
class XnnInt8Kernel : public Kernel {
 public:
  bool int8_io() const override { return true; }
  std::string describe() const override { return desc_; }
  uint64_t owned_bytes() const override { return owned_bytes_; }
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    Kernel::choose_layouts(available, wanted, produced);
    for (size_t i = 0; i < wanted.size() && i < rank4_inputs_; ++i) wanted[i] = Layout::kNHWC;
    if (rank4_inputs_ > 0) produced[0] = Layout::kNHWC;  // else logical order, as the inputs
  }
  Status run(ThreadPool& pool) override {
    return xnn_check(xnn_run_operator(op_.get(), pool.pthreadpool()), what_);
  }

  // Whether operand `o` is int8 with quantisation `q`.
  Status check_bound(const Operand& o, QuantParam q) const {
    if (!o.int8 || !(o.quant == q))
      return internal_error(what_ + ": bound to a tensor of another quantisation");
    return Status();
  }
  // Input 0 and output 0 as the operator was made for (in_, out_).
  Status check_io(std::span<const Operand> in, std::span<const Operand> out) const {
    RETURN_IF_ERROR(check_bound(in[0], in_));
    return check_bound(out[0], out_);
  }

  QuantParam in_, out_;
  XnnOperator op_;
  size_t rank4_inputs_ = 1;  // inputs 0..n-1 arrive in NHWC (and output 0 leaves so); 0: rank != 4
  std::string what_, desc_;
  uint64_t owned_bytes_ = 0;
};

// An operator set up on one NHWC image batch (N, H, W): the int8 Conv (qc8: per-output-channel
// s8 weights, int32 bias, fused ReLU / Clip as the output clamp) and MaxPool.
class XnnInt8SpatialKernel final : public XnnInt8Kernel {
 public:
  using Setup = xnn_status (*)(xnn_operator_t, size_t batch, size_t height, size_t width,
                               const int8_t* input, int8_t* output, pthreadpool_t);
  explicit XnnInt8SpatialKernel(Setup setup) : setup_(setup) {}
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    RETURN_IF_ERROR(check_io(in, out));
    const Shape& x = in[0].shape;
    return xnn_check(setup_(op_.get(), static_cast<size_t>(x[0]), static_cast<size_t>(x[2]),
                            static_cast<size_t>(x[3]), static_cast<const int8_t*>(in[0].data),
                            static_cast<int8_t*>(out[0].data), pool.pthreadpool()),
                     what_);
  }

 private:
  Setup setup_;
};

Result<std::unique_ptr<Kernel>> make_conv(const KernelRequest& req,
                                          const std::vector<QuantParam>& quant) {
  const QuantParam in = quant_of(quant, req.node.inputs[0]);
  const QuantParam out = quant_of(quant, req.node.outputs[0]);
  if (!xnn_s8(in) || !xnn_s8(out)) return decline();
  ASSIGN_OR_RETURN(std::optional<ConvSetup> setup, conv_setup(req));
  if (!setup) return decline();
  const ConvSetup& s = *setup;
  int8_t lo = 0, hi = 0;
  if (!int8_clamp(s.act, out, &lo, &hi)) return decline();
  const int64_t cout = s.cout, cin_g = s.cin_g, taps = s.kh * s.kw;
  std::vector<int8_t> wq;
  std::vector<float> wscale;
  quantize_weights_per_channel(s.weight->data<float>(), cout, cin_g * taps, &wq, &wscale);
  // OIHW -> XNNPACK's [cout][kh][kw][cin_g]; the bias in the accumulator's scale.
  std::vector<int8_t> packed(static_cast<size_t>(cout * taps * cin_g));
  for (int64_t o = 0; o < cout; ++o) {
    for (int64_t i = 0; i < cin_g; ++i) {
      for (int64_t t = 0; t < taps; ++t) {
        packed[static_cast<size_t>((o * taps + t) * cin_g + i)] =
            wq[static_cast<size_t>((o * cin_g + i) * taps + t)];
      }
    }
  }
  std::vector<int32_t> bias(static_cast<size_t>(cout), 0);
  if (s.bias != nullptr) {
    const float* b = s.bias->data<float>();
    for (int64_t o = 0; o < cout; ++o) {
      const double v = std::nearbyint(static_cast<double>(b[o]) /
                                      (double{in.scale} * wscale[static_cast<size_t>(o)]));
      bias[static_cast<size_t>(o)] = static_cast<int32_t>(
          std::clamp(v == v ? v : 0.0, double{std::numeric_limits<int32_t>::min()},
                     double{std::numeric_limits<int32_t>::max()}));
    }
  }
  RETURN_IF_ERROR(ensure_xnnpack());
  const WindowGeometry& geo = s.geo;
  const auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  xnn_operator_t op = nullptr;
  const xnn_status st = xnn_create_convolution2d_nhwc_qc8(
      u(geo.pads_begin[0]), u(geo.pads_end[1]), u(geo.pads_end[0]), u(geo.pads_begin[1]), u(s.kh),
      u(s.kw), u(geo.strides[0]), u(geo.strides[1]), u(geo.dilations[0]), u(geo.dilations[1]),
      u(s.group), static_cast<size_t>(cin_g), static_cast<size_t>(cout / s.group),
      static_cast<size_t>(s.cin), static_cast<size_t>(cout), static_cast<int8_t>(in.zero_point),
      in.scale, wscale.data(), packed.data(), bias.data(), static_cast<int8_t>(out.zero_point),
      out.scale, lo, hi, 0, &op);
  // Scales whose ratio XNNPACK's requantisation cannot take: the layer keeps its f32 kernel.
  if (st == xnn_status_unsupported_parameter || st == xnn_status_invalid_parameter) {
    return decline();
  }
  auto k = std::make_unique<XnnInt8SpatialKernel>(xnn_setup_convolution2d_nhwc_qc8);
  k->what_ = "node " + quote_name(req.node.name) + " (Conv)";
  RETURN_IF_ERROR(xnn_check(st, k->what_));
  k->op_.reset(op);
  k->in_ = in;
  k->out_ = out;
  k->owned_bytes_ = static_cast<uint64_t>(cout * (taps * cin_g + 8));
  const bool dw = s.group > 1 && s.cin_g == 1;
  k->desc_ = "xnnpack int8 conv " + std::to_string(s.kh) + "x" + std::to_string(s.kw) + "/" +
             std::to_string(geo.strides[0]) +
             (dw            ? " depthwise"
              : s.group > 1 ? " grouped"
                            : "") +
             activation_suffix(s.act) + " " + s8_label(in) + "->" + s8_label(out);
  return std::unique_ptr<Kernel>(std::move(k));
}

// Add of two int8 tensors of one shape (each with its own quantisation), ReLU / Clip fused.
class XnnInt8AddKernel final : public XnnInt8Kernel {
 public:
  bool reduced_inputs_all() const override { return true; }
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    RETURN_IF_ERROR(check_io(in, out));
    RETURN_IF_ERROR(check_bound(in[1], b_));
    if (in[0].layout != in[1].layout) return internal_error(what_ + ": inputs in two layouts");
    const Shape phys = in[0].physical_shape();
    std::vector<size_t> dims(phys.dims().begin(), phys.dims().end());
    return xnn_check(xnn_setup_add_nd_qs8(op_.get(), dims.size(), dims.data(), dims.size(),
                                          dims.data(), static_cast<const int8_t*>(in[0].data),
                                          static_cast<const int8_t*>(in[1].data),
                                          static_cast<int8_t*>(out[0].data), pool.pthreadpool()),
                     what_);
  }
  QuantParam b_;  // input 1's (input 0's is in_)
};

Result<std::unique_ptr<Kernel>> make_add(const KernelRequest& req,
                                         const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  const OpContext& ctx = req.ctx;
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || n.inputs[0] == n.inputs[1]) return decline();
  if (ctx.constant(0) != nullptr || ctx.constant(1) != nullptr) return decline();
  const TensorInfo& a = ctx.input(0);
  const TensorInfo& b = ctx.input(1);
  // One shape, no broadcasting: the bytes of both are in the same order whatever the layout.
  if (a.dtype != DType::kF32 || b.dtype != DType::kF32 || a.shape != b.shape ||
      a.shape.rank() == 0 || a.shape.rank() > XNN_MAX_TENSOR_DIMS)
    return decline();
  const QuantParam qa = quant_of(quant, n.inputs[0]), qb = quant_of(quant, n.inputs[1]);
  const QuantParam qy = quant_of(quant, n.outputs[0]);
  if (!xnn_s8(qa) || !xnn_s8(qb) || !xnn_s8(qy)) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  int8_t lo = 0, hi = 0;
  if (!int8_clamp(act, qy, &lo, &hi)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  xnn_operator_t op = nullptr;
  const xnn_status st = xnn_create_add_nd_qs8(
      static_cast<int8_t>(qa.zero_point), qa.scale, static_cast<int8_t>(qb.zero_point), qb.scale,
      static_cast<int8_t>(qy.zero_point), qy.scale, lo, hi, 0, &op);
  if (st == xnn_status_unsupported_parameter || st == xnn_status_invalid_parameter) {
    return decline();  // input-to-output scale ratios outside XNNPACK's range
  }
  auto k = std::make_unique<XnnInt8AddKernel>();
  k->what_ = "node " + quote_name(n.name) + " (Add)";
  RETURN_IF_ERROR(xnn_check(st, k->what_));
  k->op_.reset(op);
  k->rank4_inputs_ = a.shape.rank() == 4 ? 2 : 0;
  k->in_ = qa;
  k->b_ = qb;
  k->out_ = qy;
  k->desc_ = "xnnpack int8 add" + activation_suffix(act) + " " + s8_label(qa) + " + " +
             s8_label(qb) + "->" + s8_label(qy);
  return std::unique_ptr<Kernel>(std::move(k));
}

// MaxPool: NHWC int8 in and out, one quantisation (a max of values on a grid is on it).
Result<std::unique_ptr<Kernel>> make_max_pool(const KernelRequest& req,
                                              const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  const QuantParam in = quant_of(quant, n.inputs[0]), out = quant_of(quant, n.outputs[0]);
  if (!xnn_s8(in) || !(out == in)) return decline();
  ASSIGN_OR_RETURN(std::optional<XnnPoolWindow> window, xnn_pool_window(req, /*average=*/false));
  if (!window) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  int8_t lo = 0, hi = 0;
  if (!int8_clamp(act, out, &lo, &hi)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  const XnnPoolWindow& w = *window;
  auto k = std::make_unique<XnnInt8SpatialKernel>(xnn_setup_max_pooling2d_nhwc_s8);
  k->what_ = "node " + quote_name(n.name) + " (MaxPool)";
  xnn_operator_t op = nullptr;
  RETURN_IF_ERROR(xnn_check(xnn_create_max_pooling2d_nhwc_s8(
                                w.top, w.right, w.bottom, w.left, w.kh, w.kw, w.sh, w.sw, w.dh,
                                w.dw, w.channels, w.channels, w.channels, lo, hi, 0, &op),
                            k->what_));
  k->op_.reset(op);
  k->in_ = in;
  k->out_ = out;
  k->desc_ = "xnnpack int8 maxpool " + std::to_string(w.kh) + "x" + std::to_string(w.kw) + "/" +
             std::to_string(w.sh) + activation_suffix(act) + " " + s8_label(in);
  return std::unique_ptr<Kernel>(std::move(k));
}

// GlobalAveragePool: NHWC int8 in, [N, C, 1, 1] int8 out.
class XnnInt8GlobalPoolKernel final : public XnnInt8Kernel {
 public:
  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    RETURN_IF_ERROR(check_io(in, out));
    const Shape& x = in[0].shape;
    return xnn_check(xnn_setup_global_average_pooling_nwc_qs8(
                         op_.get(), static_cast<size_t>(x[0]), static_cast<size_t>(x[2] * x[3]),
                         static_cast<const int8_t*>(in[0].data), static_cast<int8_t*>(out[0].data),
                         pool.pthreadpool()),
                     what_);
  }
};

Result<std::unique_ptr<Kernel>> make_global_average_pool(const KernelRequest& req,
                                                         const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  const OpContext& ctx = req.ctx;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 4) return decline();
  const QuantParam in = quant_of(quant, n.inputs[0]), out = quant_of(quant, n.outputs[0]);
  if (!xnn_s8(in) || !xnn_s8(out)) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  int8_t lo = 0, hi = 0;
  if (!int8_clamp(act, out, &lo, &hi)) return decline();
  RETURN_IF_ERROR(ensure_xnnpack());
  const size_t c = static_cast<size_t>(ctx.input(0).shape[1]);
  xnn_operator_t op = nullptr;
  const xnn_status st = xnn_create_global_average_pooling_nwc_qs8(
      c, c, c, static_cast<int8_t>(in.zero_point), in.scale, static_cast<int8_t>(out.zero_point),
      out.scale, lo, hi, 0, &op);
  if (st == xnn_status_unsupported_parameter || st == xnn_status_invalid_parameter) {
    return decline();
  }
  auto k = std::make_unique<XnnInt8GlobalPoolKernel>();
  k->what_ = "node " + quote_name(n.name) + " (GlobalAveragePool)";
  RETURN_IF_ERROR(xnn_check(st, k->what_));
  k->op_.reset(op);
  k->in_ = in;
  k->out_ = out;
  k->desc_ = "xnnpack int8 global avgpool " + s8_label(in) + "->" + s8_label(out);
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_xnn_int8_kernel(const KernelRequest& req,
                                                     const std::vector<QuantParam>& quant) {
  if (req.node.inputs.empty() || req.node.outputs.empty() || req.node.inputs[0] == kNoValue)
    return decline();
  switch (req.node.kind) {
    case OpKind::kConv:
      return make_conv(req, quant);
    case OpKind::kAdd:
      return make_add(req, quant);
    case OpKind::kMaxPool:
      return make_max_pool(req, quant);
    case OpKind::kGlobalAveragePool:
      return make_global_average_pool(req, quant);
    default:
      return decline();
  }
}

}  // namespace tessera::cpu
