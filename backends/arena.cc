#include "backends/arena.h"

#include <algorithm>
#include <numeric>

namespace tessera {

ArenaPlan plan_arena(std::span<const ArenaRequest> requests, uint64_t alignment, uint64_t padding) {
  const size_t n = requests.size();
  ArenaPlan plan;
  plan.offsets.assign(n, 0);
  std::vector<uint64_t> size(n);
  for (size_t i = 0; i < n; ++i) {
    size[i] = (requests[i].bytes + padding + alignment - 1) & ~(alignment - 1);
    plan.sum_bytes += size[i];
  }
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return size[a] > size[b]; });

  std::vector<size_t> placed;  // indices already given an offset
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  for (size_t idx : order) {
    const ArenaRequest& r = requests[idx];
    busy.clear();
    for (size_t p : placed) {
      const ArenaRequest& q = requests[p];
      if (q.last_step < r.first_step || r.last_step < q.first_step) continue;  // disjoint in time
      busy.push_back({plan.offsets[p], plan.offsets[p] + size[p]});
    }
    std::sort(busy.begin(), busy.end());
    uint64_t best = UINT64_MAX, best_waste = UINT64_MAX, cursor = 0;
    for (const auto& [lo, hi] : busy) {
      if (lo >= cursor && lo - cursor >= size[idx] && lo - cursor - size[idx] < best_waste) {
        best = cursor;
        best_waste = lo - cursor - size[idx];
      }
      cursor = std::max(cursor, hi);
    }
    if (best == UINT64_MAX) best = cursor;  // after everything it overlaps
    plan.offsets[idx] = best;
    plan.total_bytes = std::max(plan.total_bytes, best + size[idx]);
    placed.push_back(idx);
  }
  return plan;
}

}  // namespace tessera
