#include "core/install_paths.h"

#include <dlfcn.h>

#include <filesystem>
#include <system_error>

// Relative paths from the installed bin and lib directories, passed by core/CMakeLists.txt.
#ifndef TESSERA_REL_BIN_TO_PLATFORMS
#define TESSERA_REL_BIN_TO_PLATFORMS "../share/tessera/platforms"
#endif
#ifndef TESSERA_REL_LIB_TO_PLATFORMS
#define TESSERA_REL_LIB_TO_PLATFORMS "../share/tessera/platforms"
#endif
#ifndef TESSERA_REL_BIN_TO_NPU_DRIVER
#define TESSERA_REL_BIN_TO_NPU_DRIVER "../lib/tessera/libtessera_npu_reference.so"
#endif
#ifndef TESSERA_REL_LIB_TO_NPU_DRIVER
#define TESSERA_REL_LIB_TO_NPU_DRIVER "tessera/libtessera_npu_reference.so"
#endif

namespace tessera {

std::string own_binary_dir() {
  Dl_info info{};
  // The address of this function lies in the binary that holds Tessera's code.
  if (dladdr(reinterpret_cast<const void*>(&own_binary_dir), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  std::error_code ec;
  std::filesystem::path file = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) return "";
  return file.parent_path().string();
}

std::string find_installed(InstalledFile kind) {
  const std::string dir = own_binary_dir();
  if (dir.empty()) return "";
  const char* from_bin = kind == InstalledFile::kPlatformDir ? TESSERA_REL_BIN_TO_PLATFORMS
                                                             : TESSERA_REL_BIN_TO_NPU_DRIVER;
  const char* from_lib = kind == InstalledFile::kPlatformDir ? TESSERA_REL_LIB_TO_PLATFORMS
                                                             : TESSERA_REL_LIB_TO_NPU_DRIVER;
  // A binary at the root of an installed tree (the Python module inside its package directory).
  const char* from_root = kind == InstalledFile::kPlatformDir
                              ? "share/tessera/platforms"
                              : "lib/tessera/libtessera_npu_reference.so";
  for (const char* rel : {from_bin, from_lib, from_root}) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::path(dir) / rel;
    if (std::filesystem::exists(p, ec)) return std::filesystem::weakly_canonical(p, ec).string();
  }
  return "";
}

}  // namespace tessera
