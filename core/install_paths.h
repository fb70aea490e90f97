// Where a Tessera binary finds the files installed beside it.
//
// `cmake --install` lays out <prefix>/bin/tessera, <prefix>/<libdir>/libtessera.so,
// <prefix>/<libdir>/tessera/ (the reference NPU driver) and <prefix>/share/tessera/ (platform
// files). A binary finds them relative to its own file (the executable or the shared library
// that holds this code), so an installed tree can be moved as a whole. A build tree has no such
// layout; callers then fall back to the paths compiled in at configure time. A binary may also
// sit at the root of such a tree (the Python module in its package directory, see python/).
//
// Thread rule: both functions are safe to call from any thread.
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// The directory of the executable or shared library that contains Tessera's code, or "" when the
// system cannot tell.
std::string own_binary_dir();

// Kinds of installed files, each with its path relative to the bin and lib directories (set by
// the build from GNUInstallDirs).
enum class InstalledFile {
  kPlatformDir,         // share/tessera/platforms
  kNpuReferenceDriver,  // <libdir>/tessera/libtessera_npu_reference.so
};

// The installed file of `kind` next to this binary, or "" when it is not there (a build tree).
std::string find_installed(InstalledFile kind);

}  // namespace tessera
