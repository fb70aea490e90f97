// Slice (opset 10+): takes data[start:end:step] along the given axes. starts, ends and the
// optional axes and steps are constant 1-D inputs (i32 or i64). Indices are clamped as ONNX
// specifies: negative values count from the end, then for a positive step start and end clamp
// to [0, dim]; for a negative step start clamps to [0, dim - 1] and end to [-1, dim - 1], so
// INT64_MAX / INT64_MIN mean "to the end" in either direction. Any dtype (gather_copy).
#include <algorithm>

#include "ops/data_movement.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct SliceParams {
  // Per data dimension: first index, step and output length.
  std::vector<int64_t> start, step, length;
};

Result<SliceParams> parse_slice(const OpContext& ctx) {
  const Shape& shape = ctx.input(0).shape;
  const int rank = shape.rank();
  ASSIGN_OR_RETURN(std::vector<int64_t> starts, constant_int_list(ctx, 1, "starts"));
  ASSIGN_OR_RETURN(std::vector<int64_t> ends, constant_int_list(ctx, 2, "ends"));
  const size_t n = starts.size();
  if (ends.size() != n) {
    return ctx.error("starts " + ints_to_string(starts) + " and ends " + ints_to_string(ends) +
                     " differ in length");
  }
  std::vector<int64_t> axes_raw(n), steps(n, 1);
  for (size_t i = 0; i < n; ++i) axes_raw[i] = static_cast<int64_t>(i);
  if (ctx.has_input(3)) {
    ASSIGN_OR_RETURN(axes_raw, constant_int_list(ctx, 3, "axes"));
    if (axes_raw.size() != n) {
      return ctx.error("axes " + ints_to_string(axes_raw) + " and starts " +
                       ints_to_string(starts) + " differ in length");
    }
  } else if (static_cast<int>(n) > rank) {
    return ctx.error("starts " + ints_to_string(starts) + " has more entries than rank " +
                     std::to_string(rank));
  }
  if (ctx.has_input(4)) {
    ASSIGN_OR_RETURN(steps, constant_int_list(ctx, 4, "steps"));
    if (steps.size() != n) {
      return ctx.error("steps " + ints_to_string(steps) + " and starts " + ints_to_string(starts) +
                       " differ in length");
    }
  }
  ASSIGN_OR_RETURN(std::vector<int> axes, normalize_axes(ctx, axes_raw, rank));

  SliceParams p;
  p.start.assign(static_cast<size_t>(rank), 0);
  p.step.assign(static_cast<size_t>(rank), 1);
  p.length = shape.dims();
  for (size_t i = 0; i < n; ++i) {
    const int axis = axes[i];
    const int64_t dim = shape[axis];
    int64_t step = steps[i];
    if (step == 0) return ctx.error("steps " + ints_to_string(steps) + " contains 0");
    // A step longer than the dimension selects at most one element; clamping it keeps the
    // arithmetic below free of overflow.
    step = std::clamp<int64_t>(step, -(dim + 1), dim + 1);
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += dim;  // cannot overflow: dim >= 0
    if (end < 0) end += dim;
    int64_t length = 0;
    if (dim > 0) {
      if (step > 0) {
        start = std::clamp<int64_t>(start, 0, dim);
        end = std::clamp<int64_t>(end, 0, dim);
        length = end > start ? (end - start + step - 1) / step : 0;
      } else {
        start = std::clamp<int64_t>(start, 0, dim - 1);
        end = std::clamp<int64_t>(end, -1, dim - 1);
        length = start > end ? (start - end - step - 1) / -step : 0;
      }
    }
    p.start[static_cast<size_t>(axis)] = length > 0 ? start : 0;
    p.step[static_cast<size_t>(axis)] = step;
    p.length[static_cast<size_t>(axis)] = length;
  }
  return p;
}

Status infer_slice(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(SliceParams p, parse_slice(ctx));
  outputs->push_back(TensorInfo{ctx.input(0).dtype, Shape(p.length)});
  return Status();
}

Status reference_slice(const OpContext& ctx, std::span<const Tensor> inputs,
                       std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(IndexMaps maps, slice_index_maps(ctx));
  gather_index_maps_contiguous(maps, inputs[0], &outputs[0], nullptr);
  return Status();
}

}  // namespace

Result<IndexMaps> slice_index_maps(const OpContext& ctx) {
  ASSIGN_OR_RETURN(SliceParams p, parse_slice(ctx));
  IndexMaps maps;
  const int rank = ctx.input(0).shape.rank();
  maps.fixed.assign(static_cast<size_t>(rank), 0);
  // An empty output needs no maps; sized by its other dimensions they could be 2^31 long each.
  const bool empty = Shape(p.length).numel() == 0;
  for (int d = 0; d < rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    std::vector<int64_t> idx(empty ? 0 : static_cast<size_t>(p.length[ud]));
    for (size_t o = 0; o < idx.size(); ++o)
      idx[o] = p.start[ud] + static_cast<int64_t>(o) * p.step[ud];
    maps.source_dim.push_back(d);
    maps.index.push_back(std::move(idx));
  }
  return maps;
}

const OpSchema kSliceSchema = {
    .kind = OpKind::kSlice,
    .min_inputs = 3,
    .max_inputs = 5,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_slice,
    .cost = nullptr,
    .reference = reference_slice,
};

}  // namespace tessera
