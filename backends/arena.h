// Offsets of a program's intermediate tensors in one arena.
//
// Every tensor is live over an inclusive range of steps. Tensors whose ranges overlap must not
// overlap in memory; others may share it (a range given last-before-first is taken as the steps
// between the two). Planning is greedy by size (largest first), each
// tensor taking the lowest-waste gap among the tensors already placed that it overlaps in time
// (best fit), or the end of the arena: the "greedy by size" strategy of TFLite's arena planner.
// The tensors a request overlaps are found through per-step lists of the placed ones, so the work
// grows with the lifetimes scanned, not with the square of the tensor count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tessera {

struct ArenaRequest {
  uint64_t bytes = 0;
  int first_step = 0;  // written here
  int last_step = 0;   // last read here
};

struct ArenaPlan {
  std::vector<uint64_t> offsets;  // one per request, multiples of the alignment
  uint64_t total_bytes = 0;       // arena size (without the trailing read padding)
  uint64_t sum_bytes = 0;         // what separate allocations would have taken
};

// `alignment` is a power of two; every request is rounded up to it plus `padding` bytes (read
// slack XNNPACK needs past its inputs).
ArenaPlan plan_arena(std::span<const ArenaRequest> requests, uint64_t alignment, uint64_t padding);

}  // namespace tessera
