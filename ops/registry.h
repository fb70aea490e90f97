// The schemas of all operators, one defined in each ops/<op>.cc file.
// registry.cc lists them; tests/ops/registry_test.cc checks every OpKind is registered.
#pragma once

#include "ops/op.h"

namespace tessera {

extern const OpSchema kConvSchema;
extern const OpSchema kConvTransposeSchema;
extern const OpSchema kGemmSchema;
extern const OpSchema kMatMulSchema;
extern const OpSchema kBatchNormalizationSchema;
extern const OpSchema kMaxPoolSchema;
extern const OpSchema kAveragePoolSchema;
extern const OpSchema kGlobalAveragePoolSchema;
extern const OpSchema kGlobalMaxPoolSchema;
extern const OpSchema kLRNSchema;
extern const OpSchema kSoftmaxSchema;
extern const OpSchema kReluSchema;
extern const OpSchema kLeakyReluSchema;
extern const OpSchema kClipSchema;
extern const OpSchema kSigmoidSchema;
extern const OpSchema kHardSigmoidSchema;
extern const OpSchema kHardSwishSchema;
extern const OpSchema kTanhSchema;
extern const OpSchema kAddSchema;
extern const OpSchema kSubSchema;
extern const OpSchema kMulSchema;
extern const OpSchema kDivSchema;
extern const OpSchema kConcatSchema;
extern const OpSchema kSplitSchema;
extern const OpSchema kSliceSchema;
extern const OpSchema kFlattenSchema;
extern const OpSchema kReshapeSchema;
extern const OpSchema kTransposeSchema;
extern const OpSchema kSqueezeSchema;
extern const OpSchema kUnsqueezeSchema;
extern const OpSchema kPadSchema;
extern const OpSchema kReduceMeanSchema;
extern const OpSchema kResizeSchema;
extern const OpSchema kGatherSchema;
extern const OpSchema kShapeSchema;
extern const OpSchema kConstantSchema;
extern const OpSchema kCastSchema;
extern const OpSchema kIdentitySchema;
extern const OpSchema kDropoutSchema;
extern const OpSchema kLayerNormalizationSchema;
extern const OpSchema kInstanceNormalizationSchema;
extern const OpSchema kGroupNormalizationSchema;
extern const OpSchema kDepthToSpaceSchema;
extern const OpSchema kSpaceToDepthSchema;
extern const OpSchema kReduceSumSchema;
extern const OpSchema kReduceMaxSchema;
extern const OpSchema kReduceMinSchema;
extern const OpSchema kArgMaxSchema;
extern const OpSchema kArgMinSchema;
extern const OpSchema kTopKSchema;
extern const OpSchema kQuantizeLinearSchema;
extern const OpSchema kDequantizeLinearSchema;
extern const OpSchema kQLinearConvSchema;
extern const OpSchema kQLinearMatMulSchema;
extern const OpSchema kEinsumSchema;
extern const OpSchema kLSTMSchema;
extern const OpSchema kGRUSchema;

}  // namespace tessera
