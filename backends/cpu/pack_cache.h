// Packed weights shared between the kernels of one CpuProgram.
//
// A constant read by several nodes (a weight-tied layer applied twice, a recogniser's shared
// projection) is packed once per packing: the first kernel factory that needs the packing
// creates it, the later ones with the same (constant, packing description) get the same bytes.
// The cache holds weak references only, so a packing that no kernel keeps (the losers of a
// measured kernel choice) is freed with its kernel, and bytes() counts the packings the
// program's kernels still hold, each once. docs/performance.md, "Shared packed weights".
//
// Thread rule: not thread-safe. A program's kernels are built on one thread (CpuProgram::create
// and its fusions), which is the only user of its cache.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "graph/graph.h"

namespace tessera::cpu {

// A packing as a kernel holds it: shared through the program's cache, or the kernel's own.
template <typename T>
struct SharedPacking {
  std::shared_ptr<const T> packed;
  bool shared = false;  // held by the cache too: counted by PackCache::bytes(), not the kernel
  // The bytes the kernel counts as its own (Kernel::owned_bytes).
  uint64_t owned_bytes() const { return shared || !packed ? 0 : packed->bytes(); }
};

class PackCache {
 public:
  // The packing of constant `value` described by `how` (which packing and every parameter its
  // bytes depend on, e.g. "gemm conv 3x3 k=.. n=.."): the one an earlier kernel still holds, or
  // pack()'s result (a T with bytes()), kept for the next kernel that asks.
  template <typename T, typename Pack>
  std::shared_ptr<const T> get(ValueId value, const std::string& how, Pack&& pack) {
    Entry& e = entries_[{value, how}];
    if (std::shared_ptr<const void> live = e.packed.lock()) {
      ++hits_;
      return std::static_pointer_cast<const T>(live);
    }
    auto made = std::make_shared<const T>(std::forward<Pack>(pack)());
    e.packed = made;
    e.bytes = made->bytes();
    return made;
  }

  // Bytes of the packings some kernel still holds, each counted once.
  uint64_t bytes() const {
    uint64_t b = 0;
    for (const auto& [key, e] : entries_) {
      if (!e.packed.expired()) b += e.bytes;
    }
    return b;
  }
  // How many times a packing was handed out again instead of packed (tests, describe()).
  int64_t hits() const { return hits_; }

 private:
  struct Entry {
    std::weak_ptr<const void> packed;
    uint64_t bytes = 0;
  };
  std::map<std::pair<ValueId, std::string>, Entry> entries_;
  int64_t hits_ = 0;
};

// The packing through `cache` when there is one (and the constant is a graph value), else the
// kernel's own.
template <typename T, typename Pack>
SharedPacking<T> share_packing(PackCache* cache, ValueId value, const std::string& how,
                               Pack&& pack) {
  SharedPacking<T> s;
  if (cache != nullptr && value != kNoValue) {
    s.packed = cache->get<T>(value, how, std::forward<Pack>(pack));
    s.shared = true;
  } else {
    s.packed = std::make_shared<const T>(std::forward<Pack>(pack)());
  }
  return s;
}

}  // namespace tessera::cpu
