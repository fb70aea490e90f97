// Sixteen-float vectors for the cpu device's own AVX-512 loops (GCC/Clang vector extensions).
//
// Functions that use F32x16 carry TESSERA_AVX512 (a target attribute) and run only after
// has_avx512() said yes; the rest of the build keeps the portable flags. Helpers that take or
// return vectors are TESSERA_AVX512_INLINE so they never exist as out-of-line functions with an
// AVX-512 argument ABI.
//
// The AVX-512 code exists only in x86-64 builds: every use sits inside `#if TESSERA_X86_64`, so
// an aarch64 build (scripts/aarch64.sh) compiles no x86 intrinsics at all, and the kernel
// variants built on it decline there by their ISA (kernel_table.h: KernelEntry::isa).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#define TESSERA_X86_64 1
#else
#define TESSERA_X86_64 0
#endif

#if TESSERA_X86_64
#define TESSERA_AVX512 __attribute__((target("avx512f,fma")))
#define TESSERA_AVX512_INLINE __attribute__((always_inline, target("avx512f,fma"))) inline
#endif

namespace tessera::cpu {

// True when this build has the AVX-512 code (x86-64) and this CPU runs AVX-512F (cpuinfo).
bool has_avx512();
// True when has_avx512() and this CPU also runs AVX-512 BW and VL (the byte and word
// instructions of the int8 and bf16 element-wise kernels).
bool has_avx512_bw_vl();
// True when has_avx512_bw_vl() and this CPU also runs AVX512_BF16 (vdpbf16ps, vcvtne2ps2bf16:
// the bf16 GEMV).
bool has_avx512_bf16();
// True when has_avx512_bw_vl() and this CPU also runs AVX512_VNNI (vpdpbusd: the int8 GEMV).
bool has_avx512_vnni();

#if TESSERA_X86_64
typedef float F32x16 __attribute__((vector_size(64)));
constexpr int64_t kF32x16Lanes = 16;

TESSERA_AVX512_INLINE F32x16 load16(const float* p) {
  F32x16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
TESSERA_AVX512_INLINE void store16(float* p, F32x16 v) {
  std::memcpy(p, &v, sizeof(v));
}
#endif  // TESSERA_X86_64

}  // namespace tessera::cpu
