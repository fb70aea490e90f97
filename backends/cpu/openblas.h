// OpenBLAS, loaded at run time.
//
// Debian's OpenBLAS picks its kernels by CPU model and falls back to slow generic ones on CPUs
// newer than its table (about 5x slower on this Sapphire Rapids machine) unless the environment
// variable OPENBLAS_CORETYPE names a known core before the library initialises. Tessera
// therefore never links OpenBLAS: on first use it sets OPENBLAS_CORETYPE=SkylakeX when the user
// has not set it and the CPU has AVX-512F (cpuinfo), then dlopen()s libopenblas.so.0 and looks up
// the few functions it needs. If the library was already loaded by someone else (the variable
// then came too late), that is reported in `note`.
#pragma once

#include <string>

namespace tessera::cpu {

enum OpenBlasOrder { kRowMajor = 101 };
enum OpenBlasTranspose { kNoTrans = 111, kTrans = 112 };

struct OpenBlas {
  // cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc).
  void (*sgemm)(int, int, int, int, int, int, float, const float*, int, const float*, int, float,
                float*, int) = nullptr;
  void (*set_num_threads)(int) = nullptr;
  const char* (*get_corename)() = nullptr;
  std::string note;  // how it was loaded, or why not
  // The core OpenBLAS runs AVX-512 kernels (SkylakeX, Cooperlake, SapphireRapids). Tessera's
  // choice of OpenBLAS-based convolutions was measured with them; with older kernel sets (a
  // user-set OPENBLAS_CORETYPE=Haswell, say) the convolutions stay on XNNPACK.
  bool avx512_kernels = false;

  bool available() const { return sgemm != nullptr; }
};

// The process-wide OpenBLAS (loaded once, with its own threading set to 1: Tessera calls it from
// its pinned pool threads). `available()` is false when the library is missing.
const OpenBlas& openblas();

}  // namespace tessera::cpu
