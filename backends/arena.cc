#include "backends/arena.h"

#include <algorithm>
#include <cstdint>
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

  // The placed tensors live at each step (steps shifted to start at 0), so that a tensor meets
  // only the placed ones whose lifetimes overlap its own: the work is the sum of the lifetimes it
  // scans, not the number of tensors placed (a 48,000-layer chain took seconds when every tensor
  // looked at all the placed ones).
  // A range given backwards (last before first) counts as the steps between the two.
  auto first_of = [&](size_t i) { return std::min(requests[i].first_step, requests[i].last_step); };
  auto last_of = [&](size_t i) { return std::max(requests[i].first_step, requests[i].last_step); };
  int lo_step = 0, hi_step = -1;
  for (size_t i = 0; i < n; ++i) {
    if (i == 0 || first_of(i) < lo_step) lo_step = first_of(i);
    if (i == 0 || last_of(i) > hi_step) hi_step = last_of(i);
  }
  const size_t steps =
      n == 0 ? 0 : static_cast<size_t>(static_cast<int64_t>(hi_step) - lo_step + 1);
  std::vector<std::vector<size_t>> live(steps);
  std::vector<size_t> seen(n, SIZE_MAX);  // the request that last collected tensor i
  std::vector<std::pair<uint64_t, uint64_t>> busy;
  for (size_t idx : order) {
    const int first = first_of(idx), last = last_of(idx);
    busy.clear();
    for (int s = first; s <= last; ++s) {
      for (size_t p : live[static_cast<size_t>(s - lo_step)]) {
        if (seen[p] == idx) continue;
        seen[p] = idx;
        busy.push_back({plan.offsets[p], plan.offsets[p] + size[p]});
      }
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
    for (int s = first; s <= last; ++s) live[static_cast<size_t>(s - lo_step)].push_back(idx);
  }
  return plan;
}

}  // namespace tessera
