// BatchNormalization (statistics folded into a per-channel scale and shift on the host, then
// f32_channel_affine with the fused activation), Softmax (f32_softmax, a workgroup per row) and
// LRN (f32_lrn).
#include <cmath>

#include "backends/vulkan/pipelines/kernel.h"
#include "ops/data_movement.h"

namespace tessera {

namespace {

Capability supports_bn(const Graph& g, const Node& node, const VulkanGpu&) {
  for (int i = 1; i <= 4; ++i) {
    if (!g.value(node.inputs[static_cast<size_t>(i)]).is_constant) {
      return Capability::no("scale, B, mean and var must be constants on the vulkan backend");
    }
  }
  if (node.outputs.size() > 1) return Capability::no("training outputs are not supported");
  if (g.value(node.inputs[0]).info.shape.rank() < 2) return Capability::no("rank < 2");
  return Capability::yes();
}

Status plan_bn(KernelBuilder& b) {
  const Shape& x = b.input_info(0).shape;
  ASSIGN_OR_RETURN(float eps, b.node().attrs.float_or("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(b.node().attrs));
  const int64_t c = x[1];
  std::vector<float> st(static_cast<size_t>(2 * c));
  const float* scale = b.constant(1)->data<float>();
  const float* bias = b.constant(2)->data<float>();
  const float* mean = b.constant(3)->data<float>();
  const float* var = b.constant(4)->data<float>();
  for (int64_t i = 0; i < c; ++i) {
    const float s = scale[i] / std::sqrt(var[i] + eps);
    st[static_cast<size_t>(i)] = s;
    st[static_cast<size_t>(c + i)] = bias[i] - mean[i] * s;
  }
  ASSIGN_OR_RETURN(BufferRef sb, b.upload(st.data(), st.size() * 4));
  ASSIGN_OR_RETURN(BufferRef in, b.input(0));
  const uint64_t total = static_cast<uint64_t>(x.numel());
  if (total == 0) return Status();
  Dispatch d;
  d.shader = "f32_channel_affine";
  d.spec = {256};
  append_activation_spec(act, &d.spec);
  d.bindings = {in, sb, b.output(0)};
  d.writes = {2};
  d.push = {static_cast<uint32_t>(c), static_cast<uint32_t>(dims_product(x, 2, x.rank())),
            static_cast<uint32_t>(total)};
  set_linear_groups(total, 256, &d);
  b.dispatch(std::move(d));
  return Status();
}

Status plan_softmax(KernelBuilder& b) {
  const Shape& x = b.input_info(0).shape;
  ASSIGN_OR_RETURN(int64_t axis, b.node().attrs.int_or("axis", -1));
  if (axis < -x.rank() || axis >= x.rank()) return b.error("axis out of range");
  const int a = static_cast<int>(axis < 0 ? axis + x.rank() : axis);
  const uint32_t outer = static_cast<uint32_t>(dims_product(x, 0, a));
  const uint32_t inner = static_cast<uint32_t>(dims_product(x, a + 1, x.rank()));
  ASSIGN_OR_RETURN(BufferRef in, b.input(0));
  if (x.numel() == 0) return Status();
  Dispatch d;
  d.shader = "f32_softmax";
  d.bindings = {in, b.output(0)};
  d.writes = {1};
  d.push = {static_cast<uint32_t>(x[a]), inner, outer * inner};
  set_linear_groups(outer * inner, 1, &d);
  b.dispatch(std::move(d));
  return Status();
}

Status plan_lrn(KernelBuilder& b) {
  const Shape& x = b.input_info(0).shape;
  const Attributes& at = b.node().attrs;
  ASSIGN_OR_RETURN(int64_t size, at.get_int("size"));
  ASSIGN_OR_RETURN(float alpha, at.float_or("alpha", 1e-4f));
  ASSIGN_OR_RETURN(float beta, at.float_or("beta", 0.75f));
  ASSIGN_OR_RETURN(float bias, at.float_or("bias", 1.f));
  ASSIGN_OR_RETURN(BufferRef in, b.input(0));
  const uint64_t total = static_cast<uint64_t>(x.numel());
  if (total == 0) return Status();
  Dispatch d;
  d.shader = "f32_lrn";
  d.spec = {256};
  d.bindings = {in, b.output(0)};
  d.writes = {1};
  d.push = {static_cast<uint32_t>(x[1]),
            static_cast<uint32_t>(dims_product(x, 2, x.rank())),
            static_cast<uint32_t>(total),
            static_cast<uint32_t>((size - 1) / 2),
            static_cast<uint32_t>(size / 2),  // ceil((size - 1) / 2)
            float_bits(alpha / static_cast<float>(size)),
            float_bits(beta),
            float_bits(bias)};
  set_linear_groups(total, 256, &d);
  b.dispatch(std::move(d));
  return Status();
}

}  // namespace

extern const VulkanKernel kVulkanBatchNormalizationKernel = {OpKind::kBatchNormalization, false, -1,
                                                             supports_bn, plan_bn};
extern const VulkanKernel kVulkanSoftmaxKernel = {OpKind::kSoftmax, false, -1, nullptr,
                                                  plan_softmax};
extern const VulkanKernel kVulkanLRNKernel = {OpKind::kLRN, false, -1, nullptr, plan_lrn};

}  // namespace tessera
