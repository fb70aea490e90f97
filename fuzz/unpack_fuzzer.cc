// libFuzzer target: the unpacker of the packing codec (backends/remote/packing.h) on arbitrary
// bytes. Whatever the bytes, unpack_tensor must return an error or a tensor of the declared
// shape whose values are finite and on the declared grid, [min, min + (2^b - 1) * scale]; ASan
// and UBSan catch every out-of-bounds access, overflow and bad cast on the way.
//
// Built only with -DTESSERA_FUZZ=ON and clang (scripts/fuzz.sh).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>

#include "backends/remote/packing.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  UnpackCaps caps;
  caps.max_elements = uint64_t{1} << 22;  // 16 MiB of f32: the fuzzer's memory limit is 2 GiB
  const std::span<const uint8_t> bytes(data, size);
  Result<Tensor> t = unpack_tensor(bytes, caps);
  if (!t.ok()) {
    if (t.status().message().empty()) __builtin_trap();  // every refusal says why
    return 0;
  }
  const PackedHeader h = read_packed_header(bytes, caps).value();
  if (t->shape() != h.shape || static_cast<uint64_t>(t->numel()) != h.elements) __builtin_trap();
  const double top = double{h.min} + double((1u << h.policy.bits) - 1) * double{h.scale};
  const double slack = 1e-6 * (std::fabs(double{h.min}) + std::fabs(top));
  for (float v : t->span<float>()) {
    if (!std::isfinite(v) || v < h.min - slack || v > top + slack) {
      std::fprintf(stderr, "value %g off the grid [%g, %g]\n", double{v}, double{h.min}, top);
      __builtin_trap();
    }
  }
  return 0;
}
