// Numpy-style multidirectional broadcasting, shared by every op that combines tensors of
// different shapes element by element (Add, Sub, Mul, Div; reductions reuse the walk).
//
// Shapes are aligned at the right; each pair of dimensions must be equal or one of them 1.
//
// A BroadcastPlan describes how to walk the output once, in order, as a sequence of *rows*: the
// innermost dimension after merging adjacent dimensions that broadcast alike. In a row every
// input either advances with the output (inner stride 1) or stays on one element (inner stride
// 0), so a kernel's inner loop is contiguous and vectorises:
//
//   same shapes                     [N,C,H,W] + [N,C,H,W]  -> one row of N*C*H*W, strides 1/1
//   scalar                          [N,C,H,W] + []         -> one row, strides 1/0
//   per-channel (bias, batch norm)  [N,C,H,W] + [1,C,1,1]  -> N*C rows of H*W, strides 1/0
//
//   BroadcastPlan p = plan_broadcast(out_shape, {a_shape, b_shape});
//   for_each_broadcast_row(p, [&](int64_t y, const int64_t* x, int64_t n) {
//     // y: output offset of the row; x[k]: offset of input k; n: row length
//   });
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "core/shape.h"
#include "core/status.h"

namespace tessera {

// The broadcast of two shapes, or InvalidArgument naming both.
Result<Shape> broadcast_shapes(const Shape& a, const Shape& b);
// True if `in` broadcasts to `out` without changing `out` (unidirectional broadcasting).
bool broadcasts_to(const Shape& in, const Shape& out);

inline constexpr int kMaxBroadcastInputs = 3;

struct BroadcastPlan {
  int rank = 1;        // merged rank, >= 1; dims[rank - 1] is the row length
  int num_inputs = 0;  // <= kMaxBroadcastInputs
  std::array<int64_t, kMaxRank> dims{};
  // Element strides of each input in each merged dimension; 0 where the input is broadcast.
  // The innermost stride is always 0 or 1.
  std::array<std::array<int64_t, kMaxRank>, kMaxBroadcastInputs> strides{};
  int64_t numel = 0;  // output elements

  int64_t row_length() const { return dims[rank - 1]; }
  int64_t inner_stride(int input) const { return strides[input][rank - 1]; }
};

// Plans the walk of `out` for `inputs` (at most kMaxBroadcastInputs), each of which must
// broadcast to `out` (check with broadcast_shapes/broadcasts_to first; asserts otherwise).
BroadcastPlan plan_broadcast(const Shape& out, std::span<const Shape> inputs);

// Calls row(out_offset, input_offsets, n) for each row in output order. Nothing is called for an
// empty output. Offsets are in elements; `input_offsets` points at num_inputs values.
template <typename RowFn>
void for_each_broadcast_row(const BroadcastPlan& p, RowFn&& row) {
  if (p.numel == 0) return;
  const int64_t n = p.row_length();
  const int64_t rows = p.numel / n;
  std::array<int64_t, kMaxRank> counter{};
  std::array<int64_t, kMaxBroadcastInputs> offsets{};
  int64_t out = 0;
  for (int64_t r = 0; r < rows; ++r, out += n) {
    row(out, static_cast<const int64_t*>(offsets.data()), n);
    // Advance the outer dimensions like an odometer, moving each input offset incrementally.
    for (int d = p.rank - 2; d >= 0; --d) {
      if (++counter[d] < p.dims[d]) {
        for (int k = 0; k < p.num_inputs; ++k) offsets[k] += p.strides[k][d];
        break;
      }
      counter[d] = 0;
      for (int k = 0; k < p.num_inputs; ++k) offsets[k] -= p.strides[k][d] * (p.dims[d] - 1);
    }
  }
}

}  // namespace tessera
