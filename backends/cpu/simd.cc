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

bool has_avx512_bw_vl() {
#if TESSERA_X86_64
  static const bool yes = has_avx512() && cpuinfo_has_x86_avx512bw() && cpuinfo_has_x86_avx512vl();
  return yes;
#else
  return false;
#endif
}

bool has_avx512_bf16() {
#if TESSERA_X86_64
  static const bool yes = has_avx512_bw_vl() && cpuinfo_has_x86_avx512bf16();
  return yes;
#else
  return false;
#endif
}

bool has_avx512_vnni() {
#if TESSERA_X86_64
  static const bool yes = has_avx512_bw_vl() && cpuinfo_has_x86_avx512vnni();
  return yes;
#else
  return false;
#endif
}

}  // namespace tessera::cpu
