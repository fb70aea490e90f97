// Convolution (1-D, 2-D and 3-D, any groups, strides, dilations, pads, fused activation).
//   groups == channels with one input channel per group (depthwise), a small window count per
//   output, or 3-D: f32_conv_direct, one thread per output.
//   otherwise: f32_conv2d_tiled, the shared-memory implicit GEMM (pointwise fast path for 1x1,
//   stride 1, no padding).
// ConvTranspose (1-D to 3-D, groups, strides, dilations, pads, output_padding / output_shape):
//   f32_conv_transpose_direct, one thread per output gathering the taps that reach it.
#include "backends/vulkan/pipelines/kernel.h"
#include "ops/conv_pool_util.h"

namespace tessera {

namespace {

struct ConvPlan {
  Window3 win;
  int64_t n = 0, c = 0, m = 0, groups = 1;
  Activation act;
};

// Conv (W is [M, C / group, kernel...]) and ConvTranspose (W is [C, M / group, kernel...]).
Result<ConvPlan> parse_conv(const Graph& g, const Node& node) {
  NodeContext nc(g, node);
  const OpContext& ctx = nc.ctx();
  const Shape& x = ctx.input(0).shape;
  const Shape& w = ctx.input(1).shape;
  const bool transpose = node.kind == OpKind::kConvTranspose;
  ConvPlan p;
  ASSIGN_OR_RETURN(p.groups, node.attrs.int_or("group", 1));
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  std::vector<int64_t> k(w.dims().begin() + 2, w.dims().end());
  ASSIGN_OR_RETURN(WindowGeometry geo,
                   transpose ? transpose_window(ctx, in, k) : forward_window(ctx, in, k, {}));
  p.win = to_window3(geo);
  p.n = x[0];
  p.c = x[1];
  p.m = transpose ? w[1] * p.groups : w[0];
  ASSIGN_OR_RETURN(p.act, parse_fused_activation(node.attrs));
  return p;
}

Capability supports_conv(const Graph& g, const Node& node, const VulkanGpu&) {
  Result<ConvPlan> p = parse_conv(g, node);
  if (!p.ok()) return Capability::no(p.status().message());
  return Capability::yes();
}

// X, W and the bias (W again, bound but unread, without one) at bindings 0-2, Y at 3.
Status bind_conv(KernelBuilder& b, bool* has_bias, Dispatch* d) {
  ASSIGN_OR_RETURN(BufferRef x, b.input(0));
  ASSIGN_OR_RETURN(BufferRef wt, b.input(1));
  *has_bias = b.node().inputs.size() > 2 && b.node().inputs[2] != kNoValue;
  BufferRef bias = wt;
  if (*has_bias) {
    ASSIGN_OR_RETURN(bias, b.input(2));
  }
  d->bindings = {x, wt, bias, b.output(0)};
  d->writes = {3};
  return Status();
}

Status plan_conv(KernelBuilder& b) {
  ASSIGN_OR_RETURN(ConvPlan p, parse_conv(b.graph(), b.node()));
  const Window3& w = p.win;  // index 0: D, 1: H, 2: W (2-D has D = 1, 1-D also H = 1)
  Dispatch d;
  bool has_bias = false;
  RETURN_IF_ERROR(bind_conv(b, &has_bias, &d));
  const int64_t cg = p.c / p.groups, mg = p.m / p.groups;
  const int64_t kvol = cg * w.k[1] * w.k[2];
  const bool direct = cg == 1 || kvol * 4 < 64 || mg < 8 || b.input_info(0).shape.rank() == 5;
  d.spec = {static_cast<uint32_t>(w.k[1]),
            static_cast<uint32_t>(w.k[2]),
            static_cast<uint32_t>(w.s[1]),
            static_cast<uint32_t>(w.s[2]),
            static_cast<uint32_t>(w.d[1]),
            static_cast<uint32_t>(w.d[2]),
            has_bias ? 1u : 0u};
  append_activation_spec(p.act, &d.spec);
  d.push = {static_cast<uint32_t>(cg),       static_cast<uint32_t>(w.in[1]),
            static_cast<uint32_t>(w.in[2]),  static_cast<uint32_t>(w.out[1]),
            static_cast<uint32_t>(w.out[2]), static_cast<uint32_t>(mg),
            static_cast<uint32_t>(w.pb[1]),  static_cast<uint32_t>(w.pb[2]),
            static_cast<uint32_t>(p.groups)};
  const int64_t npix = w.out[0] * w.out[1] * w.out[2];
  if (direct) {
    const uint64_t total = static_cast<uint64_t>(p.n * p.m * npix);
    d.shader = "f32_conv_direct";
    d.spec.insert(d.spec.end(), {128, static_cast<uint32_t>(w.k[0]), static_cast<uint32_t>(w.s[0]),
                                 static_cast<uint32_t>(w.d[0])});
    d.push.insert(d.push.end(), {static_cast<uint32_t>(total), static_cast<uint32_t>(w.in[0]),
                                 static_cast<uint32_t>(w.out[0]), static_cast<uint32_t>(w.pb[0])});
    set_linear_groups(total, 128, &d);
  } else {
    const bool pointwise = w.k[1] == 1 && w.k[2] == 1 && w.s[1] == 1 && w.s[2] == 1 &&
                           w.pb[1] == 0 && w.pb[2] == 0 && w.pe[1] == 0 && w.pe[2] == 0;
    d.shader = "f32_conv2d_tiled";
    d.spec.push_back(pointwise ? 1u : 0u);
    const GemmTile tile = pick_gemm_tile(static_cast<uint64_t>(mg), static_cast<uint64_t>(npix),
                                         static_cast<uint64_t>(p.n * p.groups));
    append_tile_spec(tile, &d.spec);
    d.groups[0] = ceil_div(static_cast<uint64_t>(npix), tile.tile_n());
    d.groups[1] = ceil_div(static_cast<uint64_t>(mg), tile.tile_m());
    d.groups[2] = static_cast<uint32_t>(p.n * p.groups);
    if (d.groups[0] > 65535 || d.groups[2] > 65535) {
      return b.error("output too large for one dispatch");
    }
  }
  b.dispatch(std::move(d));
  return Status();
}

Status plan_conv_transpose(KernelBuilder& b) {
  ASSIGN_OR_RETURN(ConvPlan p, parse_conv(b.graph(), b.node()));
  const Window3& w = p.win;
  const uint64_t total = static_cast<uint64_t>(b.output_info(0).shape.numel());
  if (total == 0) return Status();
  Dispatch d;
  bool has_bias = false;
  RETURN_IF_ERROR(bind_conv(b, &has_bias, &d));
  d.shader = "f32_conv_transpose_direct";
  for (const int64_t* v : {w.k, w.s, w.d}) {
    for (int i = 0; i < 3; ++i) d.spec.push_back(static_cast<uint32_t>(v[i]));
  }
  d.spec.push_back(has_bias ? 1u : 0u);
  append_activation_spec(p.act, &d.spec);
  d.spec.push_back(128);
  d.push = {static_cast<uint32_t>(p.c / p.groups), static_cast<uint32_t>(p.m / p.groups),
            static_cast<uint32_t>(p.groups)};
  for (const int64_t* v : {w.in, w.out, w.pb}) {
    for (int i = 0; i < 3; ++i) d.push.push_back(static_cast<uint32_t>(v[i]));
  }
  d.push.push_back(static_cast<uint32_t>(total));
  set_linear_groups(total, 128, &d);
  b.dispatch(std::move(d));
  return Status();
}

}  // namespace

extern const VulkanKernel kVulkanConvTransposeKernel = {OpKind::kConvTranspose, false, -1,
                                                        supports_conv, plan_conv_transpose};
extern const VulkanKernel kVulkanConvKernel = {OpKind::kConv, false, -1, supports_conv, plan_conv};

}  // namespace tessera
