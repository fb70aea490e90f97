// MaxPool, AveragePool (f32_pool: 1-D, 2-D and 3-D windows, one thread per output),
// GlobalAveragePool, GlobalMaxPool and ReduceMean over consecutive axes (f32_reduce, a workgroup
// per reduced row).
#include "backends/vulkan/pipelines/kernel.h"
#include "ops/conv_pool_util.h"
#include "ops/data_movement.h"

namespace tessera {

namespace {

struct PoolPlan {
  Window3 win;
  bool count_pad = false;
};

Result<PoolPlan> parse_pool(const Graph& g, const Node& node) {
  NodeContext nc(g, node);
  const OpContext& ctx = nc.ctx();
  const Shape& x = ctx.input(0).shape;
  if (node.outputs.size() > 1) return ctx.unsupported("the Indices output is not supported");
  PoolPlan p;
  ForwardWindowOptions opt;
  ASSIGN_OR_RETURN(opt.ceil_mode, read_flag(ctx, "ceil_mode"));
  opt.pads_below_kernel = true;
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  ASSIGN_OR_RETURN(std::vector<int64_t> k, read_pool_kernel(ctx, x.rank() - 2));
  ASSIGN_OR_RETURN(WindowGeometry geo, forward_window(ctx, in, k, opt));
  p.win = to_window3(geo);
  if (node.kind == OpKind::kAveragePool) {
    ASSIGN_OR_RETURN(p.count_pad, read_flag(ctx, "count_include_pad"));
  }
  return p;
}

Capability supports_pool(const Graph& g, const Node& node, const VulkanGpu&) {
  Result<PoolPlan> p = parse_pool(g, node);
  if (!p.ok()) return Capability::no(p.status().message());
  return Capability::yes();
}

Status plan_pool(KernelBuilder& b) {
  ASSIGN_OR_RETURN(PoolPlan p, parse_pool(b.graph(), b.node()));
  const Window3& w = p.win;
  ASSIGN_OR_RETURN(BufferRef x, b.input(0));
  const uint64_t total = static_cast<uint64_t>(b.output_info(0).shape.numel());
  Dispatch d;
  d.shader = "f32_pool";
  d.spec = {b.node().kind == OpKind::kMaxPool ? 1u : 0u,
            static_cast<uint32_t>(w.k[1]),
            static_cast<uint32_t>(w.k[2]),
            static_cast<uint32_t>(w.s[1]),
            static_cast<uint32_t>(w.s[2]),
            static_cast<uint32_t>(w.d[1]),
            static_cast<uint32_t>(w.d[2]),
            p.count_pad ? 1u : 0u,
            128,
            static_cast<uint32_t>(w.k[0]),
            static_cast<uint32_t>(w.s[0]),
            static_cast<uint32_t>(w.d[0])};
  // The padded extent that counts for count_include_pad: clipped at the end padding.
  d.push = {static_cast<uint32_t>(w.in[1]),
            static_cast<uint32_t>(w.in[2]),
            static_cast<uint32_t>(w.out[1]),
            static_cast<uint32_t>(w.out[2]),
            static_cast<uint32_t>(w.pb[1]),
            static_cast<uint32_t>(w.pb[2]),
            static_cast<uint32_t>(std::max<int64_t>(0, w.pe[1])),
            static_cast<uint32_t>(std::max<int64_t>(0, w.pe[2])),
            static_cast<uint32_t>(total),
            static_cast<uint32_t>(w.in[0]),
            static_cast<uint32_t>(w.out[0]),
            static_cast<uint32_t>(w.pb[0]),
            static_cast<uint32_t>(std::max<int64_t>(0, w.pe[0]))};
  d.bindings = {x, b.output(0)};
  d.writes = {1};
  set_linear_groups(total, 128, &d);
  b.dispatch(std::move(d));
  return Status();
}

// [outer, len, inner] of a reduction over consecutive axes [first, last].
struct ReducePlan {
  uint32_t outer = 1, len = 1, inner = 1;
};

Result<ReducePlan> parse_reduce(const Graph& g, const Node& node) {
  const Shape& x = g.value(node.inputs[0]).info.shape;
  ReducePlan p;
  if (node.kind == OpKind::kGlobalAveragePool || node.kind == OpKind::kGlobalMaxPool) {
    p.outer = static_cast<uint32_t>(dims_product(x, 0, 2));
    p.len = static_cast<uint32_t>(dims_product(x, 2, x.rank()));
    return p;
  }
  NodeContext nc(g, node);
  const OpContext& ctx = nc.ctx();
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, axes_from_attribute_or_input(ctx, 1));
  std::vector<int> ax;
  if (axes.has_value() && !axes->empty()) {
    ASSIGN_OR_RETURN(ax, normalize_axes(ctx, *axes, x.rank()));
  } else {
    ASSIGN_OR_RETURN(int64_t noop, node.attrs.int_or("noop_with_empty_axes", 0));
    if (noop != 0) return ctx.unsupported("noop_with_empty_axes is not supported");
    for (int d = 0; d < x.rank(); ++d) ax.push_back(d);
  }
  std::sort(ax.begin(), ax.end());
  for (size_t i = 1; i < ax.size(); ++i) {
    if (ax[i] != ax[i - 1] + 1) {
      return ctx.unsupported("the vulkan kernel reduces consecutive axes only");
    }
  }
  p.outer = static_cast<uint32_t>(dims_product(x, 0, ax.front()));
  p.len = static_cast<uint32_t>(dims_product(x, ax.front(), ax.back() + 1));
  p.inner = static_cast<uint32_t>(dims_product(x, ax.back() + 1, x.rank()));
  return p;
}

Capability supports_reduce(const Graph& g, const Node& node, const VulkanGpu&) {
  Result<ReducePlan> p = parse_reduce(g, node);
  if (!p.ok()) return Capability::no(p.status().message());
  if (p->len == 0) return Capability::no("empty reduction");
  return Capability::yes();
}

Status plan_reduce(KernelBuilder& b) {
  ASSIGN_OR_RETURN(ReducePlan p, parse_reduce(b.graph(), b.node()));
  ASSIGN_OR_RETURN(BufferRef x, b.input(0));
  Dispatch d;
  d.shader = "f32_reduce";
  d.spec = {b.node().kind == OpKind::kGlobalMaxPool ? 1u : 0u};
  const uint32_t count = p.outer * p.inner;
  d.push = {p.len, p.inner, count};
  d.bindings = {x, b.output(0)};
  d.writes = {1};
  set_linear_groups(count, 1, &d);
  b.dispatch(std::move(d));
  return Status();
}

}  // namespace

extern const VulkanKernel kVulkanMaxPoolKernel = {OpKind::kMaxPool, false, -1, supports_pool,
                                                  plan_pool};
extern const VulkanKernel kVulkanAveragePoolKernel = {OpKind::kAveragePool, false, -1,
                                                      supports_pool, plan_pool};
extern const VulkanKernel kVulkanGlobalAveragePoolKernel = {OpKind::kGlobalAveragePool, false, -1,
                                                            supports_reduce, plan_reduce};
extern const VulkanKernel kVulkanGlobalMaxPoolKernel = {OpKind::kGlobalMaxPool, false, -1,
                                                        supports_reduce, plan_reduce};
extern const VulkanKernel kVulkanReduceMeanKernel = {OpKind::kReduceMean, false, -1,
                                                     supports_reduce, plan_reduce};

}  // namespace tessera
