// Sixteen-float vectors for the cpu device's own AVX-512 loops (GCC/Clang vector extensions).
//
// Functions that use F32x16 carry TESSERA_AVX512 (a target attribute) and run only after
// has_avx512() said yes; the rest of the build keeps the portable flags. Helpers that take or
// return vectors are TESSERA_AVX512_INLINE so they never exist as out-of-line functions with an
// AVX-512 argument ABI.
#pragma once

#include <cstdint>
#include <cstring>

#define TESSERA_AVX512 __attribute__((target("avx512f,fma")))
#define TESSERA_AVX512_INLINE __attribute__((always_inline, target("avx512f,fma"))) inline

namespace tessera::cpu {

typedef float F32x16 __attribute__((vector_size(64)));
constexpr int64_t kF32x16Lanes = 16;

// True when this CPU runs AVX-512F (cpuinfo).
bool has_avx512();

TESSERA_AVX512_INLINE F32x16 load16(const float* p) {
  F32x16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
TESSERA_AVX512_INLINE void store16(float* p, F32x16 v) {
  std::memcpy(p, &v, sizeof(v));
}

}  // namespace tessera::cpu
