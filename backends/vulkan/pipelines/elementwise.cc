// Element-wise ops: the activations (f32_unary) and Add/Sub/Mul/Div with numpy broadcasting
// (f32_binary_broadcast, dimensions merged on the host by ops/broadcast.h), with fused
// activations.
#include "backends/vulkan/pipelines/kernel.h"
#include "ops/broadcast.h"

namespace tessera {

namespace {

constexpr uint32_t kLocal = 256;

Result<Activation> node_activation(const Graph& g, const Node& node) {
  NodeContext nc(g, node);
  ASSIGN_OR_RETURN(std::optional<Activation> a, activation_of_node(nc.ctx()));
  if (!a.has_value())
    return internal_error("node " + quote_name(node.name) + " is not an activation");
  return *a;
}

Capability supports_unary(const Graph& g, const Node& node, const VulkanGpu&) {
  Result<Activation> a = node_activation(g, node);
  if (!a.ok()) return Capability::no(a.status().message());
  return Capability::yes();
}

Status plan_unary(KernelBuilder& b) {
  ASSIGN_OR_RETURN(Activation act, node_activation(b.graph(), b.node()));
  ASSIGN_OR_RETURN(BufferRef x, b.input(0));
  const uint64_t n = static_cast<uint64_t>(b.output_info(0).shape.numel());
  if (n == 0) return Status();
  Dispatch d;
  d.shader = "f32_unary";
  d.spec = {kLocal};
  append_activation_spec(act, &d.spec);
  d.bindings = {x, b.output(0)};
  d.writes = {1};
  d.push = {static_cast<uint32_t>(n)};
  set_linear_groups(n, kLocal, &d);
  b.dispatch(std::move(d));
  return Status();
}

Capability supports_binary(const Graph& g, const Node& node, const VulkanGpu&) {
  const Shape& out = g.value(node.outputs[0]).info.shape;
  const Shape in[2] = {g.value(node.inputs[0]).info.shape, g.value(node.inputs[1]).info.shape};
  const BroadcastPlan p = plan_broadcast(out, in);
  if (p.rank > 6) return Capability::no("broadcast needs more than 6 merged dimensions");
  Result<Activation> a = parse_fused_activation(node.attrs);
  if (!a.ok()) return Capability::no(a.status().message());
  return Capability::yes();
}

Status plan_binary(KernelBuilder& b) {
  const Shape& out = b.output_info(0).shape;
  const Shape in[2] = {b.input_info(0).shape, b.input_info(1).shape};
  const BroadcastPlan p = plan_broadcast(out, in);
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(b.node().attrs));
  ASSIGN_OR_RETURN(BufferRef a, b.input(0));
  ASSIGN_OR_RETURN(BufferRef c, b.input(1));
  if (p.numel == 0) return Status();
  uint32_t op = 0;
  switch (b.node().kind) {
    case OpKind::kAdd:
      op = 0;
      break;
    case OpKind::kSub:
      op = 1;
      break;
    case OpKind::kMul:
      op = 2;
      break;
    default:
      op = 3;
      break;
  }
  Dispatch d;
  d.shader = "f32_binary_broadcast";
  d.spec = {kLocal, op};
  append_activation_spec(act, &d.spec);
  d.bindings = {a, c, b.output(0)};
  d.writes = {2};
  d.push.assign(2 + 18, 0);
  d.push[0] = static_cast<uint32_t>(p.numel);
  d.push[1] = static_cast<uint32_t>(p.rank);
  for (int i = 0; i < p.rank; ++i) {
    d.push[2 + i] = static_cast<uint32_t>(p.dims[i]);
    d.push[8 + i] = static_cast<uint32_t>(p.strides[0][i]);
    d.push[14 + i] = static_cast<uint32_t>(p.strides[1][i]);
  }
  set_linear_groups(static_cast<uint64_t>(p.numel), kLocal, &d);
  b.dispatch(std::move(d));
  return Status();
}

}  // namespace

extern const VulkanKernel kVulkanReluKernel = {OpKind::kRelu, false, -1, supports_unary,
                                               plan_unary};
extern const VulkanKernel kVulkanLeakyReluKernel = {OpKind::kLeakyRelu, false, -1, supports_unary,
                                                    plan_unary};
extern const VulkanKernel kVulkanClipKernel = {OpKind::kClip, false, -1, supports_unary,
                                               plan_unary};
extern const VulkanKernel kVulkanSigmoidKernel = {OpKind::kSigmoid, false, -1, supports_unary,
                                                  plan_unary};
extern const VulkanKernel kVulkanHardSigmoidKernel = {OpKind::kHardSigmoid, false, -1,
                                                      supports_unary, plan_unary};
extern const VulkanKernel kVulkanHardSwishKernel = {OpKind::kHardSwish, false, -1, supports_unary,
                                                    plan_unary};
extern const VulkanKernel kVulkanTanhKernel = {OpKind::kTanh, false, -1, supports_unary,
                                               plan_unary};
extern const VulkanKernel kVulkanAddKernel = {OpKind::kAdd, false, -1, supports_binary,
                                              plan_binary};
extern const VulkanKernel kVulkanSubKernel = {OpKind::kSub, false, -1, supports_binary,
                                              plan_binary};
extern const VulkanKernel kVulkanMulKernel = {OpKind::kMul, false, -1, supports_binary,
                                              plan_binary};
extern const VulkanKernel kVulkanDivKernel = {OpKind::kDiv, false, -1, supports_binary,
                                              plan_binary};

}  // namespace tessera
