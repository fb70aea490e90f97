#include "core/allocator.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace tessera {

Result<std::shared_ptr<uint8_t>> allocate_host(size_t bytes) {
  if (bytes > (size_t{1} << 40)) {
    return resource_exhausted("refusing to allocate " + std::to_string(bytes) + " bytes");
  }
  const size_t total = align_up(bytes + kTensorPadding, kTensorAlignment);
  void* p = std::aligned_alloc(kTensorAlignment, total);
  if (p == nullptr) {
    return resource_exhausted("host allocation of " + std::to_string(bytes) + " bytes failed");
  }
  std::memset(p, 0, total);
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

}  // namespace tessera
