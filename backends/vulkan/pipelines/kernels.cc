// Every kernel of the Vulkan backend, one per OpKind it serves. Each is defined next to its
// planner in this folder; tests/backends/vulkan_ops_test.cc checks the table against the ops.
#include <array>

#include "backends/vulkan/pipelines/kernel.h"

namespace tessera {

extern const VulkanKernel kVulkanConvKernel, kVulkanConvTransposeKernel, kVulkanGemmKernel,
    kVulkanMatMulKernel, kVulkanBatchNormalizationKernel, kVulkanMaxPoolKernel,
    kVulkanAveragePoolKernel, kVulkanGlobalAveragePoolKernel, kVulkanGlobalMaxPoolKernel,
    kVulkanLRNKernel, kVulkanSoftmaxKernel, kVulkanReluKernel, kVulkanLeakyReluKernel,
    kVulkanClipKernel, kVulkanSigmoidKernel, kVulkanHardSigmoidKernel, kVulkanHardSwishKernel,
    kVulkanTanhKernel, kVulkanAddKernel, kVulkanSubKernel, kVulkanMulKernel, kVulkanDivKernel,
    kVulkanConcatKernel, kVulkanSplitKernel, kVulkanSliceKernel, kVulkanFlattenKernel,
    kVulkanReshapeKernel, kVulkanTransposeKernel, kVulkanSqueezeKernel, kVulkanUnsqueezeKernel,
    kVulkanPadKernel, kVulkanReduceMeanKernel, kVulkanResizeKernel, kVulkanGatherKernel,
    kVulkanShapeKernel, kVulkanConstantKernel, kVulkanCastKernel, kVulkanIdentityKernel,
    kVulkanDropoutKernel;

namespace {

// Every OpKind of ops/registry.cc (tests/backends/vulkan_ops_test.cc checks it).
const VulkanKernel* const kKernels[] = {
    &kVulkanConvKernel,
    &kVulkanConvTransposeKernel,
    &kVulkanGemmKernel,
    &kVulkanMatMulKernel,
    &kVulkanBatchNormalizationKernel,
    &kVulkanMaxPoolKernel,
    &kVulkanAveragePoolKernel,
    &kVulkanGlobalAveragePoolKernel,
    &kVulkanGlobalMaxPoolKernel,
    &kVulkanLRNKernel,
    &kVulkanSoftmaxKernel,
    &kVulkanReluKernel,
    &kVulkanLeakyReluKernel,
    &kVulkanClipKernel,
    &kVulkanSigmoidKernel,
    &kVulkanHardSigmoidKernel,
    &kVulkanHardSwishKernel,
    &kVulkanTanhKernel,
    &kVulkanAddKernel,
    &kVulkanSubKernel,
    &kVulkanMulKernel,
    &kVulkanDivKernel,
    &kVulkanConcatKernel,
    &kVulkanSplitKernel,
    &kVulkanSliceKernel,
    &kVulkanFlattenKernel,
    &kVulkanReshapeKernel,
    &kVulkanTransposeKernel,
    &kVulkanSqueezeKernel,
    &kVulkanUnsqueezeKernel,
    &kVulkanPadKernel,
    &kVulkanReduceMeanKernel,
    &kVulkanResizeKernel,
    &kVulkanGatherKernel,
    &kVulkanShapeKernel,
    &kVulkanConstantKernel,
    &kVulkanCastKernel,
    &kVulkanIdentityKernel,
    &kVulkanDropoutKernel,
};

}  // namespace

const VulkanKernel* find_vulkan_kernel(OpKind kind) {
  static const std::array<const VulkanKernel*, kNumOpKinds> table = [] {
    std::array<const VulkanKernel*, kNumOpKinds> t{};
    for (const VulkanKernel* k : kKernels) t[static_cast<size_t>(k->kind)] = k;
    return t;
  }();
  return table[static_cast<size_t>(kind)];
}

}  // namespace tessera
