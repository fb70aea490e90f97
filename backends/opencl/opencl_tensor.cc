// Tensor-manipulation ops on the opencl device (kernels/tensor.cl).
//
//   Concat, Split                     copy_rows_*: one band of rows per input / output
//   Transpose, Slice, Pad, Gather,    gather_*: per-dimension source offset tables computed here
//   nearest Resize                    at compile time (a negative entry selects the pad value)
//   linear Resize                     resize_linear_f32 with per-dimension (i0, i1, w1) tables
//   Gather with run-time indices      gather_indices_*: indices read on the device, range-checked
//   Cast                              cast_*: every pair of dtypes (a same-type Cast is a copy)
//   Reshape, Flatten, Squeeze,        no kernel: the output aliases input 0's buffer
//   Unsqueeze, Identity, Dropout
//   Shape, Constant                   no kernel: computed at compile time, uploaded like weights
//
// Data is moved in 32-bit units when the element size is a multiple of 4 (f32, i32, i64 as two
// units) and in bytes otherwise; values are never interpreted, so every dtype moves.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/opencl/opencl_ops.h"

namespace tessera::opencl {

namespace {

// ---- Shared helpers -------------------------------------------------------------------------

std::vector<int64_t> strides_of(const Shape& s) {
  std::vector<int64_t> st(static_cast<size_t>(s.rank()), 1);
  for (int d = s.rank() - 2; d >= 0; --d) st[static_cast<size_t>(d)] = st[d + 1] * s[d + 1];
  return st;
}

// The integer list in constant input i (rank 0 or 1, i32 or i64).
Result<std::vector<int64_t>> constant_ints(const OpContext& ctx, int i, const char* what) {
  const Tensor* t = ctx.constant(i);
  if (t == nullptr) {
    return ctx.unsupported(std::string(what) + " (input " + std::to_string(i) +
                           ") must be a constant");
  }
  if (t->dtype() != DType::kI32 && t->dtype() != DType::kI64) {
    return ctx.error(std::string(what) + " must be i32 or i64");
  }
  return tensor_to_int64s(*t);
}

// Moving elements of `dtype`: the kernel suffix and how many units one element is.
struct Units {
  const char* suffix;  // "u32" or "u8"
  int64_t per_element;
};
Units units_of(DType dtype) {
  const int64_t e = static_cast<int64_t>(dtype_size(dtype));
  if (e % 4 == 0) return {"u32", e / 4};
  return {"u8", e};
}

// Per-dimension element offsets into the source (-1: the fill value) for each output coordinate.
struct GatherPlan {
  std::vector<std::vector<int64_t>> offsets;
  cl_mem fill = nullptr;  // one element (Pad's constant_value); null: zeros
};

Status add_gather(Lowering& l, cl_mem src, cl_mem dst, DType dtype, GatherPlan plan) {
  const Units u = units_of(dtype);
  if (plan.offsets.empty()) plan.offsets.push_back({0});  // a scalar
  int64_t total = 1;
  for (const auto& o : plan.offsets) total *= static_cast<int64_t>(o.size());
  if (total == 0) return Status();
  if (u.per_element > 1) {
    for (auto& dim : plan.offsets) {
      for (int64_t& o : dim) o = o < 0 ? -1 : o * u.per_element;
    }
    std::vector<int64_t> inner(static_cast<size_t>(u.per_element));
    for (int64_t i = 0; i < u.per_element; ++i) inner[static_cast<size_t>(i)] = i;
    plan.offsets.push_back(std::move(inner));
  }
  const int64_t rank = static_cast<int64_t>(plan.offsets.size());
  std::vector<int32_t> meta, table;
  for (const auto& dim : plan.offsets) meta.push_back(static_cast<int32_t>(dim.size()));
  for (const auto& dim : plan.offsets) {
    meta.push_back(static_cast<int32_t>(table.size()));
    for (int64_t o : dim) table.push_back(static_cast<int32_t>(o));
  }
  ASSIGN_OR_RETURN(cl_mem meta_buf, l.upload_ints(meta));
  ASSIGN_OR_RETURN(cl_mem table_buf, l.upload_ints(table));
  if (plan.fill == nullptr) {
    const int32_t zeros[2] = {0, 0};  // the widest element, i64
    ASSIGN_OR_RETURN(plan.fill, l.upload_ints(zeros));
  }
  const int64_t inner = static_cast<int64_t>(plan.offsets.back().size());
  const int64_t outer = total * (u.per_element > 1 ? u.per_element : 1) / inner;
  const std::string name = std::string("gather_") + u.suffix;
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("tensor", name.c_str()));
  b.mem(src).mem(dst).mem(meta_buf).mem(table_buf).i32(rank).i32(inner).i32(outer);
  b.mem(plan.fill).i32(u.per_element);
  ASSIGN_OR_RETURN(Launch launch,
                   b.finish({static_cast<size_t>(inner), static_cast<size_t>(outer)}));
  l.add(std::move(launch));
  return Status();
}

// Copies `rows` rows of `row_len` elements (strides in elements).
Status add_copy_rows(Lowering& l, DType dtype, cl_mem src, int64_t src_off, int64_t src_stride,
                     cl_mem dst, int64_t dst_off, int64_t dst_stride, int64_t row_len,
                     int64_t rows) {
  if (row_len == 0 || rows == 0) return Status();
  const Units u = units_of(dtype);
  const std::string name = std::string("copy_rows_") + u.suffix;
  const int64_t k = u.per_element;
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("tensor", name.c_str()));
  b.mem(src).i32(src_off * k).i32(src_stride * k).mem(dst).i32(dst_off * k).i32(dst_stride * k);
  b.i32(row_len * k).i32(rows);
  ASSIGN_OR_RETURN(Launch launch,
                   b.finish({static_cast<size_t>(row_len * k), static_cast<size_t>(rows)}));
  l.add(std::move(launch));
  return Status();
}

Result<int> axis_attr(const OpContext& ctx, int rank, int64_t def) {
  Result<int64_t> a = ctx.attrs().int_or("axis", def);
  if (!a.ok()) return ctx.wrap(a.status());
  Result<int> axis = normalize_axis(*a, rank, "axis");
  if (!axis.ok()) return ctx.wrap(axis.status());
  return *axis;
}

Capability any_dtype(const OpContext& /*ctx*/) {
  return Capability::yes();
}

// ---- Concat and Split -----------------------------------------------------------------------

Status lower_concat(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& out = l.output_info(0).shape;
  ASSIGN_OR_RETURN(int axis, axis_attr(ctx, out.rank(), 0));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= out[d];
  for (int d = axis + 1; d < out.rank(); ++d) inner *= out[d];
  int64_t offset = 0;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const int64_t len = ctx.input(i).shape[axis];
    RETURN_IF_ERROR(add_copy_rows(l, out.rank() > 0 ? l.output_info(0).dtype : DType::kF32,
                                  l.input(i), 0, len * inner, l.output(0), offset * inner,
                                  out[axis] * inner, len * inner, outer));
    offset += len;
  }
  return Status();
}

Status lower_split(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& in = ctx.input(0).shape;
  ASSIGN_OR_RETURN(int axis, axis_attr(ctx, in.rank(), 0));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= in[d];
  for (int d = axis + 1; d < in.rank(); ++d) inner *= in[d];
  int64_t offset = 0;
  for (int o = 0; o < l.num_outputs(); ++o) {
    const int64_t len = l.output_info(o).shape[axis];
    RETURN_IF_ERROR(add_copy_rows(l, ctx.input(0).dtype, l.input(0), offset * inner,
                                  in[axis] * inner, l.output(o), 0, len * inner, len * inner,
                                  outer));
    offset += len;
  }
  return Status();
}

// ---- Transpose, Slice, Pad, Gather ----------------------------------------------------------

Status lower_transpose(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& in = ctx.input(0).shape;
  const int rank = in.rank();
  std::vector<int64_t> perm;
  if (ctx.attrs().has("perm")) {
    Result<std::vector<int64_t>> p = ctx.attrs().get_ints("perm");
    if (!p.ok()) return ctx.wrap(p.status());
    perm = *p;
  } else {
    for (int d = rank - 1; d >= 0; --d) perm.push_back(d);
  }
  if (static_cast<int>(perm.size()) != rank) return ctx.error("perm does not match the rank");
  const std::vector<int64_t> st = strides_of(in);
  GatherPlan plan;
  for (int d = 0; d < rank; ++d) {
    const int64_t src = perm[static_cast<size_t>(d)];
    if (src < 0 || src >= rank) return ctx.error("perm entry out of range");
    std::vector<int64_t> off(static_cast<size_t>(in[static_cast<int>(src)]));
    for (size_t o = 0; o < off.size(); ++o) off[o] = static_cast<int64_t>(o) * st[src];
    plan.offsets.push_back(std::move(off));
  }
  return add_gather(l, l.input(0), l.output(0), ctx.input(0).dtype, std::move(plan));
}

Capability check_slice(const OpContext& ctx) {
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i) && ctx.constant(i) == nullptr) {
      return Capability::no("input " + std::to_string(i) + " must be a constant");
    }
  }
  return Capability::yes();
}

Status lower_slice(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& in = ctx.input(0).shape;
  const Shape& out = l.output_info(0).shape;
  const int rank = in.rank();
  ASSIGN_OR_RETURN(std::vector<int64_t> starts, constant_ints(ctx, 1, "starts"));
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (ctx.has_input(3)) {
    ASSIGN_OR_RETURN(axes, constant_ints(ctx, 3, "axes"));
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.has_input(4)) {
    ASSIGN_OR_RETURN(steps, constant_ints(ctx, 4, "steps"));
  }
  if (axes.size() != starts.size() || steps.size() != starts.size()) {
    return ctx.error("starts, axes and steps differ in length");
  }
  std::vector<int64_t> start(static_cast<size_t>(rank), 0), step(static_cast<size_t>(rank), 1);
  for (size_t i = 0; i < axes.size(); ++i) {
    Result<int> a = normalize_axis(axes[i], rank, "axes");
    if (!a.ok()) return ctx.wrap(a.status());
    const int64_t dim = in[*a];
    int64_t s = starts[i];
    if (s < 0) s += dim;
    s = steps[i] > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
    start[static_cast<size_t>(*a)] = s;
    step[static_cast<size_t>(*a)] = steps[i];
  }
  const std::vector<int64_t> st = strides_of(in);
  GatherPlan plan;
  for (int d = 0; d < rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    std::vector<int64_t> off(static_cast<size_t>(out[d]));
    for (size_t o = 0; o < off.size(); ++o) {
      off[o] = (start[ud] + static_cast<int64_t>(o) * step[ud]) * st[ud];
    }
    plan.offsets.push_back(std::move(off));
  }
  return add_gather(l, l.input(0), l.output(0), ctx.input(0).dtype, std::move(plan));
}

// pads and axes must be constants (the output shape depends on them); constant_value may arrive
// at run time, as the gather kernels read the fill element from a buffer.
Capability check_pad(const OpContext& ctx) {
  for (int i : {1, 3}) {
    if (ctx.has_input(i) && ctx.constant(i) == nullptr) {
      return Capability::no("input " + std::to_string(i) + " must be a constant");
    }
  }
  return Capability::yes();
}

Status lower_pad(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& in = ctx.input(0).shape;
  const int rank = in.rank();
  Result<std::string> mode = ctx.attrs().string_or("mode", "constant");
  if (!mode.ok()) return ctx.wrap(mode.status());
  if (*mode != "constant" && *mode != "reflect" && *mode != "edge") {
    return ctx.unsupported("mode '" + *mode + "'");
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, constant_ints(ctx, 1, "pads"));
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    ASSIGN_OR_RETURN(axes, constant_ints(ctx, 3, "axes"));
  } else {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t n = axes.size();
  if (pads.size() != 2 * n) return ctx.error("pads does not match the axes");
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < n; ++i) {
    Result<int> a = normalize_axis(axes[i], rank, "axes");
    if (!a.ok()) return ctx.wrap(a.status());
    begin[static_cast<size_t>(*a)] = pads[i];
    end[static_cast<size_t>(*a)] = pads[i + n];
  }
  GatherPlan plan;
  if (ctx.has_input(2) && ctx.input(2).shape.numel() == 1) plan.fill = l.input(2);
  const std::vector<int64_t> st = strides_of(in);
  for (int d = 0; d < rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    const int64_t dim = in[d], b = begin[ud], e = end[ud];
    const int64_t out = dim + b + e;
    // The cropped source range [lo, lo + len), then pb before and pe after it (as the reference).
    const int64_t lo = std::max<int64_t>(-b, 0);
    const int64_t len = dim - lo - std::max<int64_t>(-e, 0);
    const int64_t pb = std::max<int64_t>(b, 0);
    std::vector<int64_t> off(static_cast<size_t>(std::max<int64_t>(out, 0)));
    for (int64_t o = 0; o < out; ++o) {
      const int64_t q = o - pb;
      int64_t src;
      if (q >= 0 && q < len) {
        src = lo + q;
      } else if (*mode == "constant") {
        src = -1;
      } else if (len < 1) {
        return ctx.error("padding needs data to extend");
      } else if (*mode == "edge") {
        src = lo + std::clamp<int64_t>(q, 0, len - 1);
      } else if (len == 1) {
        src = lo;
      } else {
        const int64_t period = 2 * (len - 1);
        int64_t r = q % period;
        if (r < 0) r += period;
        src = lo + (r < len ? r : period - r);
      }
      off[static_cast<size_t>(o)] = src < 0 ? -1 : src * st[ud];
    }
    plan.offsets.push_back(std::move(off));
  }
  return add_gather(l, l.input(0), l.output(0), ctx.input(0).dtype, std::move(plan));
}

Capability check_gather(const OpContext& /*ctx*/) {
  return Capability::yes();  // constant indices become a gather table, others are read on device
}

// Indices that arrive at run time: read by the kernel, which flags any out of range.
Status lower_gather_runtime(Lowering& l, int axis) {
  const OpContext& ctx = l.ctx();
  const Shape& in = ctx.input(0).shape;
  const Units u = units_of(ctx.input(0).dtype);
  int64_t outer = 1, inner = u.per_element;
  for (int d = 0; d < axis; ++d) outer *= in[d];
  for (int d = axis + 1; d < in.rank(); ++d) inner *= in[d];
  const int64_t len = in[axis], count = ctx.input(1).shape.numel();
  if (outer * count * inner == 0) return Status();
  ASSIGN_OR_RETURN(cl_mem bad,
                   l.run_check("an index is out of range for axis " + std::to_string(axis) +
                               " of length " + std::to_string(len)));
  const std::string name = std::string("gather_indices_") + u.suffix;
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("tensor", name.c_str()));
  b.mem(l.input(0)).mem(l.input(1)).mem(l.output(0)).mem(bad);
  b.i32(ctx.input(1).dtype == DType::kI64 ? 1 : 0).i32(len).i32(count).i32(inner).i32(outer);
  ASSIGN_OR_RETURN(Launch launch, b.finish({static_cast<size_t>(inner), static_cast<size_t>(count),
                                            static_cast<size_t>(outer)}));
  l.add(std::move(launch));
  return Status();
}

Status lower_gather(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& in = ctx.input(0).shape;
  ASSIGN_OR_RETURN(int axis, axis_attr(ctx, in.rank(), 0));
  if (ctx.constant(1) == nullptr) return lower_gather_runtime(l, axis);
  ASSIGN_OR_RETURN(std::vector<int64_t> idx, constant_ints(ctx, 1, "indices"));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= in[d];
  for (int d = axis + 1; d < in.rank(); ++d) inner *= in[d];
  const int64_t len = in[axis];
  GatherPlan plan;
  std::vector<int64_t> o0(static_cast<size_t>(outer)), o1, o2(static_cast<size_t>(inner));
  for (int64_t i = 0; i < outer; ++i) o0[static_cast<size_t>(i)] = i * len * inner;
  for (int64_t j : idx) {
    if (j < -len || j >= len) {
      return ctx.error("index " + std::to_string(j) + " is out of range for axis " +
                       std::to_string(axis) + " of length " + std::to_string(len));
    }
    o1.push_back((j < 0 ? j + len : j) * inner);
  }
  for (int64_t i = 0; i < inner; ++i) o2[static_cast<size_t>(i)] = i;
  plan.offsets = {std::move(o0), std::move(o1), std::move(o2)};
  return add_gather(l, l.input(0), l.output(0), ctx.input(0).dtype, std::move(plan));
}

// ---- Resize ---------------------------------------------------------------------------------

// The input coordinate of output coordinate x (as ops/resize.cc, in float).
Result<float> source_coordinate(const OpContext& ctx, const std::string& mode, int64_t x,
                                float scale, int64_t in_len, int64_t out_len) {
  const float xf = static_cast<float>(x);
  if (mode == "half_pixel") return (xf + 0.5f) / scale - 0.5f;
  if (mode == "pytorch_half_pixel") return out_len > 1 ? (xf + 0.5f) / scale - 0.5f : 0.f;
  if (mode == "align_corners") {
    return out_len == 1 ? 0.f
                        : xf * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
  }
  if (mode == "asymmetric") return xf / scale;
  if (mode == "tf_half_pixel_for_nn") return (xf + 0.5f) / scale;
  return ctx.unsupported("coordinate_transformation_mode " + quote_name(mode));
}

Capability check_resize(const OpContext& ctx) {
  Result<std::string> mode = ctx.attrs().string_or("mode", "nearest");
  if (!mode.ok() || (*mode != "nearest" && *mode != "linear")) {
    return Capability::no("only nearest and linear modes run on the OpenCL device");
  }
  if (*mode == "linear") {
    Capability c = require_f32_input(ctx, 0);
    if (!c.supported) return c;
  }
  for (int i = 2; i < 4; ++i) {
    if (ctx.has_input(i) && ctx.input(i).shape.numel() > 0 && ctx.constant(i) == nullptr) {
      return Capability::no("scales and sizes must be constants");
    }
  }
  return Capability::yes();
}

Status lower_resize(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& in = ctx.input(0).shape;
  const Shape& out = l.output_info(0).shape;
  const int rank = in.rank();
  const Attributes& at = ctx.attrs();
  Result<std::string> mode = at.string_or("mode", "nearest");
  Result<std::string> coord = at.string_or("coordinate_transformation_mode", "half_pixel");
  Result<std::string> nearest = at.string_or("nearest_mode", "round_prefer_floor");
  for (const Status& s : {mode.status(), coord.status(), nearest.status()}) {
    if (!s.ok()) return ctx.wrap(s);
  }
  std::vector<float> scales(static_cast<size_t>(rank), 1.f);
  const bool has_scales = ctx.has_input(2) && ctx.input(2).shape.numel() > 0;
  for (int d = 0; d < rank; ++d) {
    if (has_scales) {
      scales[static_cast<size_t>(d)] = ctx.constant(2)->data<float>()[d];
    } else {
      scales[static_cast<size_t>(d)] =
          in[d] > 0 ? static_cast<float>(out[d]) / static_cast<float>(in[d]) : 1.f;
    }
  }
  const std::vector<int64_t> st = strides_of(in);
  if (*mode == "nearest") {
    GatherPlan plan;
    for (int d = 0; d < rank; ++d) {
      std::vector<int64_t> off(static_cast<size_t>(out[d]));
      for (int64_t o = 0; o < out[d]; ++o) {
        ASSIGN_OR_RETURN(float x, source_coordinate(ctx, *coord, o, scales[static_cast<size_t>(d)],
                                                    in[d], out[d]));
        float r;
        if (*nearest == "round_prefer_floor") {
          r = std::ceil(x - 0.5f);
        } else if (*nearest == "round_prefer_ceil") {
          r = std::floor(x + 0.5f);
        } else if (*nearest == "floor") {
          r = std::floor(x);
        } else if (*nearest == "ceil") {
          r = std::ceil(x);
        } else {
          return ctx.unsupported("nearest_mode '" + *nearest + "'");
        }
        const int64_t i = static_cast<int64_t>(std::clamp(r, 0.f, static_cast<float>(in[d] - 1)));
        off[static_cast<size_t>(o)] = i * st[static_cast<size_t>(d)];
      }
      plan.offsets.push_back(std::move(off));
    }
    return add_gather(l, l.input(0), l.output(0), ctx.input(0).dtype, std::move(plan));
  }
  // Linear: (i0, i1, w1) per output coordinate of each dim.
  std::vector<int32_t> meta(static_cast<size_t>(3 * rank)), i0, i1;
  std::vector<float> w1;
  for (int d = 0; d < rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    meta[ud] = static_cast<int32_t>(out[d]);
    meta[static_cast<size_t>(rank) + ud] = static_cast<int32_t>(i0.size());
    bool identity = in[d] == out[d];
    for (int64_t o = 0; o < out[d]; ++o) {
      ASSIGN_OR_RETURN(float x, source_coordinate(ctx, *coord, o, scales[ud], in[d], out[d]));
      x = std::clamp(x, 0.f, static_cast<float>(in[d] - 1));
      const int64_t a = static_cast<int64_t>(x);
      const int64_t b = std::min(a + 1, in[d] - 1);
      const float w = x - static_cast<float>(a);
      identity = identity && a == o && w == 0.f;
      i0.push_back(static_cast<int32_t>(a * st[ud]));
      i1.push_back(static_cast<int32_t>(b * st[ud]));
      w1.push_back(w);
    }
    meta[2 * static_cast<size_t>(rank) + ud] = identity ? 0 : 1;
  }
  const int64_t total = out.numel();
  if (total == 0) return Status();
  ASSIGN_OR_RETURN(cl_mem meta_buf, l.upload_ints(meta));
  ASSIGN_OR_RETURN(cl_mem i0_buf, l.upload_ints(i0));
  ASSIGN_OR_RETURN(cl_mem i1_buf, l.upload_ints(i1));
  ASSIGN_OR_RETURN(cl_mem w1_buf, l.upload_floats(w1));
  const int64_t inner = rank > 0 ? out[rank - 1] : 1;
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("tensor", "resize_linear_f32"));
  b.mem(l.input(0)).mem(l.output(0)).mem(meta_buf).mem(i0_buf).mem(i1_buf).mem(w1_buf);
  b.i32(rank).i32(inner).i32(total / inner);
  ASSIGN_OR_RETURN(Launch launch,
                   b.finish({static_cast<size_t>(inner), static_cast<size_t>(total / inner)}));
  l.add(std::move(launch));
  return Status();
}

// ---- Aliases and compile-time ops -----------------------------------------------------------

// ---- Cast ------------------------------------------------------------------------------------

// Every dtype pair converts (the target dtype was checked by shape inference). A same-type Cast
// is a copy, except bool -> bool, which normalises every byte to 0 or 1 as the reference does.
Status lower_cast(Lowering& l) {
  // The kernel numbers dtypes as core/dtype.h does.
  static_assert(static_cast<int>(DType::kF32) == 0 && static_cast<int>(DType::kF16) == 1 &&
                static_cast<int>(DType::kI8) == 2 && static_cast<int>(DType::kU8) == 3 &&
                static_cast<int>(DType::kI32) == 4 && static_cast<int>(DType::kI64) == 5 &&
                static_cast<int>(DType::kBool) == 6);
  const OpContext& ctx = l.ctx();
  const DType from = ctx.input(0).dtype, to = l.output_info(0).dtype;
  const int64_t n = ctx.input(0).shape.numel();
  if (n == 0) return Status();
  if (from == to && from != DType::kBool) {
    return add_copy_rows(l, from, l.input(0), 0, n, l.output(0), 0, n, n, 1);
  }
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("tensor", "cast_f32_f16_i8_u8_i32_i64_bool"));
  b.mem(l.input(0)).mem(l.output(0)).i32(n).i32(static_cast<int>(from));
  b.i32(static_cast<int>(to));
  ASSIGN_OR_RETURN(Launch launch, b.finish({static_cast<size_t>(n)}));
  l.add(std::move(launch));
  return Status();
}

const OpenCLOp kTensorOps[] = {
    {OpKind::kConcat, Execution::kKernels, any_dtype, lower_concat},
    {OpKind::kSplit, Execution::kKernels, any_dtype, lower_split},
    {OpKind::kSlice, Execution::kKernels, check_slice, lower_slice},
    {OpKind::kFlatten, Execution::kAlias, nullptr, nullptr},
    {OpKind::kReshape, Execution::kAlias, nullptr, nullptr},
    {OpKind::kTranspose, Execution::kKernels, any_dtype, lower_transpose},
    {OpKind::kSqueeze, Execution::kAlias, nullptr, nullptr},
    {OpKind::kUnsqueeze, Execution::kAlias, nullptr, nullptr},
    {OpKind::kPad, Execution::kKernels, check_pad, lower_pad},
    {OpKind::kResize, Execution::kKernels, check_resize, lower_resize},
    {OpKind::kGather, Execution::kKernels, check_gather, lower_gather},
    {OpKind::kShape, Execution::kCompileTime, nullptr, nullptr},
    {OpKind::kConstant, Execution::kCompileTime, nullptr, nullptr},
    {OpKind::kCast, Execution::kKernels, any_dtype, lower_cast},
    {OpKind::kIdentity, Execution::kAlias, nullptr, nullptr},
    {OpKind::kDropout, Execution::kAlias, nullptr, nullptr},
};

}  // namespace

std::span<const OpenCLOp> opencl_tensor_ops() {
  return kTensorOps;
}

}  // namespace tessera::opencl
