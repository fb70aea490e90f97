// Shared by every Tessera compute shader.
//
// Fused activation: a shader defines ACT_ID (the first of three specialisation-constant ids)
// before including this file; the kinds follow ActivationKind in ops/activation.h.
#ifdef ACT_ID
layout(constant_id = ACT_ID) const uint ACT_KIND = 0;
layout(constant_id = ACT_ID + 1) const float ACT_ALPHA = 0.0;
layout(constant_id = ACT_ID + 2) const float ACT_BETA = 0.0;

float activate(float x) {
  if (ACT_KIND == 1) return x < 0.0 ? 0.0 : x;                        // relu
  if (ACT_KIND == 2) return x >= 0.0 ? x : ACT_ALPHA * x;             // leaky_relu
  if (ACT_KIND == 3) return min(max(x, ACT_ALPHA), ACT_BETA);         // clip
  if (ACT_KIND == 4) return 1.0 / (1.0 + exp(-x));                    // sigmoid
  if (ACT_KIND == 5) return max(0.0, min(1.0, ACT_ALPHA * x + ACT_BETA));  // hard_sigmoid
  if (ACT_KIND == 6) return x * max(0.0, min(1.0, x / 6.0 + 0.5));   // hard_swish
  if (ACT_KIND == 7) return tanh(clamp(x, -15.0, 15.0));              // tanh (1 in f32 beyond)
  return x;
}
#endif

// The flat index of this invocation in a 1-D launch spread over a 2-D grid of workgroups.
uint linear_index() {
  return gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * gl_WorkGroupSize.x;
}
// The flat workgroup index of a 2-D grid of workgroups.
uint linear_group() { return gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x; }
