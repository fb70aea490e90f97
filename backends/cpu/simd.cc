#include "backends/cpu/simd.h"

#include <cpuinfo.h>

namespace tessera::cpu {

bool has_avx512() {
#if TESSERA_X86_64
  static const bool yes = cpuinfo_initialize() && cpuinfo_has_x86_avx512f();
  return yes;
#else
  return false;
#endif
}

}  // namespace tessera::cpu
