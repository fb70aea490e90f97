// Small helpers for reading and writing Linux sysfs attribute files under a root directory.
//
// Every sysfs path in energy/ is built from a `root` ("/" on a real machine, a temp directory in
// the tests) so each reader runs unchanged against fixture trees laid out like the real sysfs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace tessera::sysfs {

// root + "/" + rel, without doubled slashes.
std::string join(const std::string& root, const std::string& rel);
bool exists(const std::string& path);
// The file's contents with trailing whitespace removed.
Result<std::string> read_string(const std::string& path);
// The file's contents as a decimal integer (trailing whitespace allowed); names the path on error.
Result<int64_t> read_int(const std::string& path);
// Whitespace-separated integers, e.g. scaling_available_frequencies.
Result<std::vector<int64_t>> read_ints(const std::string& path);
// Writes `value`; PermissionDenied-style failures come back as a FailedPrecondition naming the
// path and the errno text.
Status write_string(const std::string& path, const std::string& value);
// Names of the entries of a directory (sorted), empty when it does not exist.
std::vector<std::string> list_dir(const std::string& path);
// Parses a CPU list such as "0-3,6" into {0,1,2,3,6}.
Result<std::vector<int>> parse_cpu_list(const std::string& text);

}  // namespace tessera::sysfs

namespace tessera::sysfs {

// The value of `r`, or `def` when it failed (for optional attributes).
template <typename T, typename D>
T value_or(Result<T> r, D def) {
  return r.ok() ? std::move(*r) : T(std::move(def));
}

}  // namespace tessera::sysfs
