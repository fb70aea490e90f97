// libFuzzer target: the .npy reader (core/npy.h) on arbitrary bytes. A refusal must carry a
// message; a tensor must hold exactly the file's data bytes, and write_npy -> read_npy must give
// back the same dtype, shape and bytes.
#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "core/npy.h"
#include "fuzz/fuzz_graph.h"

namespace {

std::string temp_path() {
  static std::string path = [] {
    char dir[] = "/tmp/tessera-fuzz-npy.XXXXXX";
    if (mkdtemp(dir) == nullptr) __builtin_trap();
    return std::string(dir) + "/t.npy";
  }();
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const Result<Tensor> t = parse_npy(std::span<const uint8_t>(data, size));
  fuzz::check_refusal(t.status());
  if (!t.ok()) return 0;
  if (t->byte_size() > size) __builtin_trap();  // more data than the file holds
  const std::string path = temp_path();
  if (!write_npy(path, *t).ok()) __builtin_trap();
  const Result<Tensor> again = read_npy(path);
  if (!again.ok() || again->dtype() != t->dtype() || again->shape() != t->shape() ||
      (t->byte_size() > 0 && std::memcmp(again->raw(), t->raw(), t->byte_size()) != 0)) {
    std::fprintf(stderr, "write_npy -> read_npy changed %s\n", t->describe().c_str());
    __builtin_trap();
  }
  return 0;
}
