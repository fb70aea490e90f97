#include "backends/cpu/openblas.h"

#include <cpuinfo.h>
#include <dlfcn.h>

#include <strings.h>

#include <cstdlib>
#include <string>

#include "core/dl_error.h"

namespace tessera::cpu {

namespace {

OpenBlas load() {
  OpenBlas b;
  const char* const kLibraries[] = {"libopenblas.so.0", "libopenblas.so"};
  void* already = nullptr;
  for (const char* lib : kLibraries) {
    already = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    take_dl_error();  // not loaded yet is the usual answer
    if (already != nullptr) break;
  }
  // OpenBLAS picks its kernel set once, when it loads, from OPENBLAS_CORETYPE or its own CPU
  // table, which misdetects recent AVX-512 CPUs (a generic kernel set, ~5x slower). Tessera loads
  // its own copy with the kernel set the CPU supports: TESSERA_OPENBLAS_CORETYPE when given
  // (honoured as is), else SkylakeX on AVX-512 CPUs, also over an OPENBLAS_CORETYPE naming an
  // older core (some environments set Haswell globally as a misdetection workaround). The
  // process's own OPENBLAS_CORETYPE is restored right after, so nothing else sees a change.
  std::string coretype;
  if (const char* forced = std::getenv("TESSERA_OPENBLAS_CORETYPE"); forced != nullptr) {
    coretype = forced;
  } else if (cpuinfo_initialize() && cpuinfo_has_x86_avx512f()) {
    coretype = "SkylakeX";
  }
  const char* user_value = std::getenv("OPENBLAS_CORETYPE");
  const std::string saved = user_value != nullptr ? user_value : "";
  const bool had_user_value = user_value != nullptr;
  const bool set_coretype = already == nullptr && !coretype.empty();
  if (set_coretype) setenv("OPENBLAS_CORETYPE", coretype.c_str(), 1);
  void* handle = already;
  for (const char* lib : kLibraries) {
    if (handle != nullptr) break;
    handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) take_dl_error();
  }
  if (set_coretype) {
    // Do not leak it into child processes; give the process back its own value.
    if (had_user_value) {
      setenv("OPENBLAS_CORETYPE", saved.c_str(), 1);
    } else {
      unsetenv("OPENBLAS_CORETYPE");
    }
  }
  if (handle == nullptr) {
    b.note = "OpenBLAS not found (libopenblas.so.0)";
    return b;
  }
  b.sgemm = reinterpret_cast<decltype(b.sgemm)>(dlsym(handle, "cblas_sgemm"));
  b.set_num_threads =
      reinterpret_cast<decltype(b.set_num_threads)>(dlsym(handle, "openblas_set_num_threads"));
  b.get_corename =
      reinterpret_cast<decltype(b.get_corename)>(dlsym(handle, "openblas_get_corename"));
  take_dl_error();  // a missing optional symbol is not an error here
  if (b.set_num_threads != nullptr) b.set_num_threads(1);
  const std::string core = b.get_corename != nullptr ? b.get_corename() : "?";
  for (const char* fast : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (strcasecmp(core.c_str(), fast) == 0) b.avx512_kernels = true;
  }
  b.note = "OpenBLAS (" + core + (already != nullptr ? ", loaded before Tessera" : "") +
           (set_coretype ? ", loaded with OPENBLAS_CORETYPE=" + coretype : "") + ")";
  return b;
}

}  // namespace

const OpenBlas& openblas() {
  static const OpenBlas b = load();
  return b;
}

}  // namespace tessera::cpu
