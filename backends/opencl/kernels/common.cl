// Shared by every Tessera OpenCL program: prepended to each family's source before it is built.
// OpenCL C 1.2, f32 only (no fp16, no fp64 required).

// Fused activations, numbered as tessera::ActivationKind (ops/activation.h). min/max are written
// as the reference writes them (std::min/std::max), so NaN behaves identically.
#define ACT_NONE 0
#define ACT_RELU 1
#define ACT_LEAKY_RELU 2
#define ACT_CLIP 3
#define ACT_SIGMOID 4
#define ACT_HARD_SIGMOID 5
#define ACT_HARD_SWISH 6
#define ACT_TANH 7

inline float ref_min(float a, float b) { return b < a ? b : a; }
inline float ref_max(float a, float b) { return a < b ? b : a; }

inline float activate(float x, int kind, float alpha, float beta) {
  switch (kind) {
    case ACT_RELU: return x < 0.f ? 0.f : x;
    case ACT_LEAKY_RELU: return x >= 0.f ? x : alpha * x;
    case ACT_CLIP: return ref_min(ref_max(x, alpha), beta);
    case ACT_SIGMOID: return 1.f / (1.f + exp(-x));
    case ACT_HARD_SIGMOID: return ref_max(0.f, ref_min(1.f, alpha * x + beta));
    case ACT_HARD_SWISH: return x * ref_max(0.f, ref_min(1.f, x / 6.f + 0.5f));
    case ACT_TANH: return tanh(x);
    default: return x;
  }
}
