#include "backends/vulkan/pipelines/kernel.h"

namespace tessera {

const Tensor* KernelBuilder::constant(int i) const {
  if (i >= static_cast<int>(node().inputs.size())) return nullptr;
  const ValueId v = node().inputs[static_cast<size_t>(i)];
  if (v == kNoValue || !graph().value(v).is_constant) return nullptr;
  return &graph().value(v).data;
}

Status KernelBuilder::error(const std::string& msg) const {
  return unimplemented("node '" + node().name + "' (" + op_name(node().kind) + "): " + msg);
}

void append_activation_spec(const Activation& a, std::vector<uint32_t>* spec) {
  spec->push_back(static_cast<uint32_t>(a.kind));
  spec->push_back(float_bits(a.alpha));
  spec->push_back(float_bits(a.beta));
}

void set_linear_groups(uint64_t elements, uint32_t local, Dispatch* d) {
  const uint64_t groups = std::max<uint64_t>(1, (elements + local - 1) / local);
  const uint64_t x = std::min<uint64_t>(groups, 65535);
  d->groups[0] = static_cast<uint32_t>(x);
  d->groups[1] = static_cast<uint32_t>((groups + x - 1) / x);
  d->groups[2] = 1;
}

}  // namespace tessera
