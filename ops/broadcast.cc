#include "ops/broadcast.h"

#include <algorithm>
#include <cassert>
#include <vector>

namespace tessera {

Result<Shape> broadcast_shapes(const Shape& a, const Shape& b) {
  const int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) {
    // Align at the right; missing leading dimensions are 1.
    const int ia = i - (rank - a.rank()), ib = i - (rank - b.rank());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1) {
      return invalid_argument("shapes " + a.to_string() + " and " + b.to_string() +
                              " cannot be broadcast (dimension " + std::to_string(i) + ": " +
                              std::to_string(da) + " vs " + std::to_string(db) + ")");
    }
    dims[static_cast<size_t>(i)] = da == 1 ? db : da;
  }
  return Shape(std::move(dims));
}

bool broadcasts_to(const Shape& in, const Shape& out) {
  if (in.rank() > out.rank()) return false;
  const int lead = out.rank() - in.rank();
  for (int i = 0; i < in.rank(); ++i) {
    if (in[i] != 1 && in[i] != out[i + lead]) return false;
  }
  return true;
}

BroadcastPlan plan_broadcast(const Shape& out, std::span<const Shape> inputs) {
  assert(inputs.size() <= static_cast<size_t>(kMaxBroadcastInputs));
  BroadcastPlan p;
  p.num_inputs = static_cast<int>(inputs.size());
  p.numel = out.numel();

  // Phase 1: drop output dimensions of size 1 (every input is 1 there too) and record, per
  // remaining dimension, which inputs are broadcast along it.
  struct Dim {
    int64_t size;
    std::array<bool, kMaxBroadcastInputs> bcast;
  };
  std::vector<Dim> dims;
  for (int d = 0; d < out.rank(); ++d) {
    if (out[d] == 1) continue;
    Dim dim{out[d], {}};
    for (int k = 0; k < p.num_inputs; ++k) {
      const Shape& s = inputs[static_cast<size_t>(k)];
      assert(broadcasts_to(s, out));
      const int id = d - (out.rank() - s.rank());
      dim.bcast[static_cast<size_t>(k)] = id < 0 || s[id] == 1;
    }
    // Phase 2: merge with the previous dimension when every input broadcasts alike on both.
    if (!dims.empty() && dims.back().bcast == dim.bcast) {
      dims.back().size *= dim.size;
    } else {
      dims.push_back(dim);
    }
  }
  if (dims.empty()) dims.push_back(Dim{1, {}});  // a one-element output

  // Phase 3: strides from the inside out; an input's stride only grows over the dimensions it
  // actually has.
  p.rank = static_cast<int>(dims.size());
  for (int k = 0; k < p.num_inputs; ++k) {
    int64_t stride = 1;
    for (int d = p.rank - 1; d >= 0; --d) {
      const Dim& dim = dims[static_cast<size_t>(d)];
      if (dim.bcast[static_cast<size_t>(k)]) {
        p.strides[k][d] = 0;
      } else {
        p.strides[k][d] = stride;
        stride *= dim.size;
      }
    }
  }
  for (int d = 0; d < p.rank; ++d) p.dims[d] = dims[static_cast<size_t>(d)].size;
  return p;
}

}  // namespace tessera
