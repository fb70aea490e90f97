// Aligned host memory.
//
// All host tensors are 64-byte aligned (one cache line, one AVX-512 vector) and carry 64 bytes of
// readable padding past their end, so vector kernels (and XNNPACK, which reads up to 16 bytes
// past an input) never touch unmapped memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "core/status.h"

namespace tessera {

inline constexpr size_t kTensorAlignment = 64;
inline constexpr size_t kTensorPadding = 64;

// Allocates `bytes` (+ padding) aligned to kTensorAlignment, zero-filled. The deleter frees it.
// From kHugePageBytes on, the memory is placed as allocate_aligned places it.
Result<std::shared_ptr<uint8_t>> allocate_host(size_t bytes);

// Buffers read on every run (packed weights, activation arenas) from this size on start on a
// 2 MiB boundary and are advised as transparent huge pages (madvise MADV_HUGEPAGE: with THP in
// its "madvise" mode, the common default, they otherwise get 4 KiB pages). A 2 MiB page spares
// the TLB misses of streaming large weights, and it fixes which L2 sets a buffer's lines fall
// in (with 4 KiB pages, the physical pages a process happens to get decide the set conflicts
// of each run, and with them part of its speed).
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// `bytes` of uninitialised memory aligned to `alignment` (a power of two, at most
// kHugePageBytes), or to kHugePageBytes and advised as huge pages from kHugePageBytes on; null
// when the allocation fails. Free it with std::free.
void* allocate_aligned(size_t bytes, size_t alignment = kTensorAlignment);

// Host physical memory in bytes (sysconf), or 0 if unknown.
uint64_t host_memory_bytes();

// Rounds `n` up to a multiple of `align` (a power of two).
constexpr size_t align_up(size_t n, size_t align) {
  return (n + align - 1) & ~(align - 1);
}

}  // namespace tessera
