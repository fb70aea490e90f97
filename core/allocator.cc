#include "core/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

namespace tessera {

void* allocate_aligned(size_t bytes, size_t alignment) {
  const bool huge = bytes >= kHugePageBytes;
  if (huge) alignment = kHugePageBytes;
  void* p = std::aligned_alloc(alignment, align_up(std::max<size_t>(bytes, 1), alignment));
#ifdef MADV_HUGEPAGE
  // Advice only: where THP is off or unsupported the memory simply keeps 4 KiB pages.
  if (p != nullptr && huge) (void)madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

Result<std::shared_ptr<uint8_t>> allocate_host(size_t bytes) {
  if (bytes > (size_t{1} << 40)) {
    return resource_exhausted("refusing to allocate " + std::to_string(bytes) + " bytes");
  }
  const size_t total = align_up(bytes + kTensorPadding, kTensorAlignment);
  void* p = allocate_aligned(total);
  if (p == nullptr) {
    return resource_exhausted("host allocation of " + std::to_string(bytes) + " bytes failed");
  }
  std::memset(p, 0, total);
  return std::shared_ptr<uint8_t>(static_cast<uint8_t*>(p), [](uint8_t* q) { std::free(q); });
}

uint64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

}  // namespace tessera
