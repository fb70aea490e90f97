// Aligned host memory.
//
// All host tensors are 64-byte aligned (one cache line, one AVX-512 vector) and carry 64 bytes of
// readable padding past their end, so vector kernels (and XNNPACK, which reads up to 16 bytes
// past an input) never touch unmapped memory.
#pragma once

#include <cstddef>
#include <memory>

#include "core/status.h"

namespace tessera {

inline constexpr size_t kTensorAlignment = 64;
inline constexpr size_t kTensorPadding = 64;

// Allocates `bytes` (+ padding) aligned to kTensorAlignment, zero-filled. The deleter frees it.
Result<std::shared_ptr<uint8_t>> allocate_host(size_t bytes);

// Rounds `n` up to a multiple of `align` (a power of two).
constexpr size_t align_up(size_t n, size_t align) {
  return (n + align - 1) & ~(align - 1);
}

}  // namespace tessera
