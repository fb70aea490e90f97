// Convolution (1-D and 2-D, any groups, strides, dilations, pads, fused activation).
//   groups == channels with one input channel per group (depthwise), or a small window count
//   per output: f32_conv2d_direct, one thread per output.
//   otherwise: f32_conv2d_tiled, the shared-memory implicit GEMM (pointwise fast path for 1x1,
//   stride 1, no padding).
#include "backends/vulkan/pipelines/kernel.h"
#include "ops/conv_pool_util.h"

namespace tessera {

namespace {

struct ConvPlan {
  Window3 win;
  int64_t n = 0, c = 0, m = 0, groups = 1;
  Activation act;
};

Result<ConvPlan> parse_conv(const Graph& g, const Node& node) {
  NodeContext nc(g, node);
  const OpContext& ctx = nc.ctx();
  const Shape& x = ctx.input(0).shape;
  const Shape& w = ctx.input(1).shape;
  if (x.rank() != 3 && x.rank() != 4) {
    return ctx.unsupported("the vulkan kernel takes 1-D or 2-D convolutions only");
  }
  ConvPlan p;
  ASSIGN_OR_RETURN(p.groups, node.attrs.int_or("group", 1));
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  std::vector<int64_t> k(w.dims().begin() + 2, w.dims().end());
  ASSIGN_OR_RETURN(WindowGeometry geo, forward_window(ctx, in, k, {}));
  p.win = to_window3(geo);
  p.n = x[0];
  p.c = x[1];
  p.m = w[0];
  ASSIGN_OR_RETURN(p.act, parse_fused_activation(node.attrs));
  return p;
}

Capability supports_conv(const Graph& g, const Node& node, const VulkanGpu&) {
  Result<ConvPlan> p = parse_conv(g, node);
  if (!p.ok()) return Capability::no(p.status().message());
  return Capability::yes();
}

Status plan_conv(KernelBuilder& b) {
  ASSIGN_OR_RETURN(ConvPlan p, parse_conv(b.graph(), b.node()));
  const Window3& w = p.win;  // index 1: H, 2: W (1-D convolutions have H = 1)
  ASSIGN_OR_RETURN(BufferRef x, b.input(0));
  ASSIGN_OR_RETURN(BufferRef wt, b.input(1));
  const bool has_bias = b.node().inputs.size() > 2 && b.node().inputs[2] != kNoValue;
  BufferRef bias = wt;  // bound but unread without a bias
  if (has_bias) {
    ASSIGN_OR_RETURN(bias, b.input(2));
  }
  const int64_t cg = p.c / p.groups, mg = p.m / p.groups;
  const int64_t kvol = cg * w.k[1] * w.k[2];
  const bool direct = cg == 1 || kvol * 4 < 64 || mg < 8;
  Dispatch d;
  d.spec = {static_cast<uint32_t>(w.k[1]),
            static_cast<uint32_t>(w.k[2]),
            static_cast<uint32_t>(w.s[1]),
            static_cast<uint32_t>(w.s[2]),
            static_cast<uint32_t>(w.d[1]),
            static_cast<uint32_t>(w.d[2]),
            has_bias ? 1u : 0u};
  append_activation_spec(p.act, &d.spec);
  d.bindings = {x, wt, bias, b.output(0)};
  d.writes = {3};
  d.push = {static_cast<uint32_t>(cg),       static_cast<uint32_t>(w.in[1]),
            static_cast<uint32_t>(w.in[2]),  static_cast<uint32_t>(w.out[1]),
            static_cast<uint32_t>(w.out[2]), static_cast<uint32_t>(mg),
            static_cast<uint32_t>(w.pb[1]),  static_cast<uint32_t>(w.pb[2]),
            static_cast<uint32_t>(p.groups)};
  const int64_t npix = w.out[1] * w.out[2];
  if (direct) {
    const uint64_t total = static_cast<uint64_t>(p.n * p.m * npix);
    d.shader = "f32_conv2d_direct";
    d.spec.push_back(128);
    d.push.push_back(static_cast<uint32_t>(total));
    set_linear_groups(total, 128, &d);
  } else {
    const bool pointwise = w.k[1] == 1 && w.k[2] == 1 && w.s[1] == 1 && w.s[2] == 1 &&
                           w.pb[1] == 0 && w.pb[2] == 0 && w.pe[1] == 0 && w.pe[2] == 0;
    d.shader = "f32_conv2d_tiled";
    d.spec.push_back(pointwise ? 1u : 0u);
    d.groups[0] = ceil_div(static_cast<uint64_t>(npix), 64);
    d.groups[1] = ceil_div(static_cast<uint64_t>(mg), 64);
    d.groups[2] = static_cast<uint32_t>(p.n * p.groups);
    if (d.groups[0] > 65535 || d.groups[2] > 65535) {
      return b.error("output too large for one dispatch");
    }
  }
  b.dispatch(std::move(d));
  return Status();
}

}  // namespace

extern const VulkanKernel kVulkanConvKernel = {OpKind::kConv, false, -1, supports_conv, plan_conv};

}  // namespace tessera
