#include "backends/cpu/openblas.h"

#include <cpuinfo.h>
#include <dlfcn.h>

#include <strings.h>

#include <cstdlib>

namespace tessera::cpu {

namespace {

OpenBlas load() {
  OpenBlas b;
  const char* const kLibraries[] = {"libopenblas.so.0", "libopenblas.so"};
  void* already = nullptr;
  for (const char* lib : kLibraries) {
    already = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
    if (already != nullptr) break;
  }
  bool set_coretype = false;
  if (already == nullptr && std::getenv("OPENBLAS_CORETYPE") == nullptr && cpuinfo_initialize() &&
      cpuinfo_has_x86_avx512f()) {
    setenv("OPENBLAS_CORETYPE", "SkylakeX", 0);
    set_coretype = true;
  }
  void* handle = already;
  for (const char* lib : kLibraries) {
    if (handle != nullptr) break;
    handle = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  }
  if (set_coretype) unsetenv("OPENBLAS_CORETYPE");  // do not leak it into child processes
  if (handle == nullptr) {
    b.note = "OpenBLAS not found (libopenblas.so.0)";
    return b;
  }
  b.sgemm = reinterpret_cast<decltype(b.sgemm)>(dlsym(handle, "cblas_sgemm"));
  b.set_num_threads =
      reinterpret_cast<decltype(b.set_num_threads)>(dlsym(handle, "openblas_set_num_threads"));
  b.get_corename =
      reinterpret_cast<decltype(b.get_corename)>(dlsym(handle, "openblas_get_corename"));
  if (b.set_num_threads != nullptr) b.set_num_threads(1);
  const std::string core = b.get_corename != nullptr ? b.get_corename() : "?";
  for (const char* fast : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (strcasecmp(core.c_str(), fast) == 0) b.avx512_kernels = true;
  }
  b.note = "OpenBLAS (" + core + (already != nullptr ? ", loaded before Tessera" : "") +
           (set_coretype ? ", OPENBLAS_CORETYPE=SkylakeX" : "") + ")";
  return b;
}

}  // namespace

const OpenBlas& openblas() {
  static const OpenBlas b = load();
  return b;
}

}  // namespace tessera::cpu
