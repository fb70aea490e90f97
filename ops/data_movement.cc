#include "ops/data_movement.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <optional>

#include "ops/kernel_params.h"

namespace tessera {

namespace {

// Writes `bytes` bytes of the repeating `pattern` (pattern_bytes long; bytes is a multiple).
void fill_pattern(uint8_t* dst, size_t bytes, const uint8_t* pattern, size_t pattern_bytes) {
  assert(pattern != nullptr && "gather_copy: a fill position needs a fill value");
  bool zero = true;
  for (size_t i = 0; i < pattern_bytes; ++i) zero = zero && pattern[i] == 0;
  if (zero) {
    std::memset(dst, 0, bytes);
    return;
  }
  const size_t n = bytes / pattern_bytes;
  auto fill_typed = [&](auto tag) {
    using T = decltype(tag);
    T v;
    std::memcpy(&v, pattern, sizeof(T));
    for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * sizeof(T), &v, sizeof(T));
  };
  switch (pattern_bytes) {
    case 1:
      std::memset(dst, pattern[0], bytes);
      return;
    case 2:
      fill_typed(uint16_t{});
      return;
    case 4:
      fill_typed(uint32_t{});
      return;
    case 8:
      fill_typed(uint64_t{});
      return;
    default:
      for (size_t i = 0; i < n; ++i) std::memcpy(dst + i * pattern_bytes, pattern, pattern_bytes);
  }
}

// dst[i] = src[offsets[i]] for n elements of `elem` bytes.
void gather_elements(uint8_t* dst, const uint8_t* src, const int64_t* offsets, int64_t n,
                     size_t elem) {
  auto gather_typed = [&](auto tag) {
    using T = decltype(tag);
    T* d = reinterpret_cast<T*>(dst);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&d[i], src + offsets[i], sizeof(T));
  };
  switch (elem) {
    case 1:
      for (int64_t i = 0; i < n; ++i) dst[i] = src[offsets[i]];
      return;
    case 2:
      gather_typed(uint16_t{});
      return;
    case 4:
      gather_typed(uint32_t{});
      return;
    case 8:
      gather_typed(uint64_t{});
      return;
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * elem, src + offsets[i], elem);
  }
}

// A stretch of the innermost output dimension handled one way.
struct Segment {
  enum Kind { kFill, kContiguous, kGather } kind;
  int64_t begin;  // first output index
  int64_t length;
};

// Splits the innermost offsets into fill runs, contiguous runs (worth a memcpy) and the rest.
std::vector<Segment> segment_row(const std::vector<int64_t>& off, size_t elem) {
  constexpr int64_t kMinContiguous = 4;
  std::vector<Segment> segs;
  const int64_t n = static_cast<int64_t>(off.size());
  auto add = [&](Segment::Kind kind, int64_t begin, int64_t length) {
    if (!segs.empty() && segs.back().kind == kind && kind != Segment::kContiguous) {
      segs.back().length += length;
    } else {
      segs.push_back(Segment{kind, begin, length});
    }
  };
  int64_t i = 0;
  while (i < n) {
    int64_t j = i + 1;
    if (off[i] < 0) {
      while (j < n && off[j] < 0) ++j;
      add(Segment::kFill, i, j - i);
    } else {
      while (j < n && off[j] == off[j - 1] + static_cast<int64_t>(elem)) ++j;
      add(j - i >= kMinContiguous ? Segment::kContiguous : Segment::kGather, i, j - i);
    }
    i = j;
  }
  return segs;
}

}  // namespace

void gather_copy(const GatherCopyPlan& plan_in, const void* src_v, void* dst_v, const void* fill) {
  const uint8_t* src = static_cast<const uint8_t*>(src_v);
  uint8_t* dst = static_cast<uint8_t*>(dst_v);
  const uint8_t* pattern = static_cast<const uint8_t*>(fill);
  const size_t pattern_bytes = plan_in.elem_bytes;
  for (const auto& o : plan_in.offsets) {
    if (o.empty()) return;  // empty output
  }

  // Phase 1: simplify. Size-1 dimensions move into a base offset; trailing dimensions that are
  // copied whole and in order (offsets 0, e, 2e, ...) merge into a larger element.
  int64_t base = 0;
  bool all_fill = false;
  std::vector<std::vector<int64_t>> dims;
  for (const auto& o : plan_in.offsets) {
    if (o.size() == 1) {
      if (o[0] < 0) all_fill = true;
      base += o[0];
    } else {
      dims.push_back(o);
    }
  }
  size_t elem = plan_in.elem_bytes;
  while (!dims.empty()) {
    const std::vector<int64_t>& last = dims.back();
    bool dense = true;
    for (size_t i = 0; i < last.size() && dense; ++i) {
      dense = last[i] == static_cast<int64_t>(i * elem);
    }
    if (!dense) break;
    elem *= last.size();
    dims.pop_back();
  }
  int64_t total = 1;
  for (const auto& o : dims) total *= static_cast<int64_t>(o.size());
  if (all_fill) {
    fill_pattern(dst, static_cast<size_t>(total) * elem, pattern, pattern_bytes);
    return;
  }
  if (dims.empty()) {
    std::memcpy(dst, src + base, elem);
    return;
  }

  // Phase 2: walk the outer dimensions like an odometer; each row is the innermost dimension.
  const std::vector<int64_t>& inner = dims.back();
  const std::vector<Segment> segs = segment_row(inner, elem);
  const int64_t row = static_cast<int64_t>(inner.size());
  const size_t row_bytes = static_cast<size_t>(row) * elem;
  const int outer_rank = static_cast<int>(dims.size()) - 1;
  std::vector<int64_t> counter(static_cast<size_t>(outer_rank), 0);
  int fill_dims = 0;  // outer dimensions currently at a fill position
  for (int d = 0; d < outer_rank; ++d) {
    const int64_t o = dims[static_cast<size_t>(d)][0];
    if (o < 0) {
      ++fill_dims;
    } else {
      base += o;
    }
  }
  const int64_t rows = total / row;
  for (int64_t r = 0; r < rows; ++r, dst += row_bytes) {
    if (fill_dims > 0) {
      fill_pattern(dst, row_bytes, pattern, pattern_bytes);
    } else {
      const uint8_t* s = src + base;
      for (const Segment& seg : segs) {
        uint8_t* d = dst + static_cast<size_t>(seg.begin) * elem;
        const size_t bytes = static_cast<size_t>(seg.length) * elem;
        switch (seg.kind) {
          case Segment::kFill:
            fill_pattern(d, bytes, pattern, pattern_bytes);
            break;
          case Segment::kContiguous:
            std::memcpy(d, s + inner[static_cast<size_t>(seg.begin)], bytes);
            break;
          case Segment::kGather:
            gather_elements(d, s, inner.data() + seg.begin, seg.length, elem);
            break;
        }
      }
    }
    // Advance the odometer, swapping one dimension's offset in and out of `base`.
    for (int d = outer_rank - 1; d >= 0; --d) {
      const std::vector<int64_t>& o = dims[static_cast<size_t>(d)];
      int64_t& c = counter[static_cast<size_t>(d)];
      const int64_t old_off = o[static_cast<size_t>(c)];
      const bool wrap = ++c == static_cast<int64_t>(o.size());
      if (wrap) c = 0;
      const int64_t new_off = o[static_cast<size_t>(c)];
      if (old_off < 0) {
        --fill_dims;
      } else {
        base -= old_off;
      }
      if (new_off < 0) {
        ++fill_dims;
      } else {
        base += new_off;
      }
      if (!wrap) break;
    }
  }
}

GatherCopyPlan gather_plan(const IndexMaps& maps, const std::vector<int64_t>& in_strides,
                           const std::vector<int>& order, size_t elem_bytes, int64_t* base) {
  GatherCopyPlan plan;
  plan.elem_bytes = elem_bytes;
  *base = 0;
  for (size_t k = 0; k < maps.fixed.size() && k < in_strides.size(); ++k) {
    *base += maps.fixed[k] * in_strides[k];
  }
  for (int d : order) {
    const size_t ud = static_cast<size_t>(d);
    const int64_t stride = in_strides[static_cast<size_t>(maps.source_dim[ud])];
    std::vector<int64_t> off = maps.index[ud];
    for (int64_t& o : off) o = o < 0 ? -1 : o * stride;
    plan.offsets.push_back(std::move(off));
  }
  return plan;
}

void gather_index_maps_contiguous(const IndexMaps& maps, const Tensor& in, Tensor* out,
                                  const void* fill) {
  if (out->numel() == 0) return;
  const int64_t elem = static_cast<int64_t>(dtype_size(in.dtype()));
  std::vector<int64_t> strides = contiguous_strides(in.shape());
  for (int64_t& s : strides) s *= elem;
  std::vector<int> order(maps.index.size());
  for (size_t d = 0; d < order.size(); ++d) order[d] = static_cast<int>(d);
  int64_t base = 0;
  const GatherCopyPlan plan = gather_plan(maps, strides, order, static_cast<size_t>(elem), &base);
  gather_copy(plan, static_cast<const uint8_t*>(in.raw()) + base, out->raw(), fill);
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> s(static_cast<size_t>(shape.rank()));
  int64_t stride = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    s[static_cast<size_t>(d)] = stride;
    stride *= shape[d];
  }
  return s;
}

int64_t dims_product(const Shape& shape, int begin, int end) {
  int64_t p = 1;
  for (int d = begin; d < end; ++d) p *= shape[d];
  return p;
}

void copy_tensor_bytes(const Tensor& in, Tensor* out) {
  const size_t bytes = std::min(in.byte_size(), out->byte_size());
  if (bytes > 0 && in.raw() != out->raw()) std::memmove(out->raw(), in.raw(), bytes);
}

Result<std::vector<int64_t>> constant_int_list(const OpContext& ctx, int i, const char* what) {
  if (!ctx.has_input(i)) return ctx.error(std::string("input '") + what + "' is missing");
  const Tensor* t = ctx.constant(i);
  if (t == nullptr) {
    return ctx.unsupported(std::string("input '") + what +
                           "' must be a constant (shapes are static in Tessera)");
  }
  if (t->dtype() != DType::kI64 && t->dtype() != DType::kI32) {
    return ctx.error(std::string("input '") + what + "' must be i64 or i32, not " +
                     dtype_name(t->dtype()));
  }
  if (t->rank() > 1) {
    return ctx.error(std::string("input '") + what + "' must be 1-D, has shape " +
                     t->shape().to_string());
  }
  return tensor_to_int64s(*t);
}

std::string ints_to_string(const std::vector<int64_t>& v) {
  return Shape(v).to_string();
}

Result<std::optional<std::vector<int64_t>>> axes_from_attribute_or_input(const OpContext& ctx,
                                                                         int input) {
  const bool attr = ctx.attrs().has("axes");
  const bool in = ctx.has_input(input);
  if (attr && in) return ctx.error("axes are given both as an attribute and as an input");
  if (attr) {
    Result<std::vector<int64_t>> axes = ctx.attrs().get_ints("axes");
    if (!axes.ok()) return ctx.wrap(axes.status());
    return std::optional<std::vector<int64_t>>(std::move(axes).value());
  }
  if (in) {
    ASSIGN_OR_RETURN(std::vector<int64_t> axes, constant_int_list(ctx, input, "axes"));
    return std::optional<std::vector<int64_t>>(std::move(axes));
  }
  return std::optional<std::vector<int64_t>>();
}

Result<std::vector<int>> normalize_axes(const OpContext& ctx, const std::vector<int64_t>& axes,
                                        int rank) {
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    Result<int> n = normalize_axis(a, rank, "axis");
    if (!n.ok()) return ctx.wrap(n.status());
    if (seen[static_cast<size_t>(*n)]) {
      return ctx.error("axis " + std::to_string(a) + " is repeated in axes " +
                       ints_to_string(axes));
    }
    seen[static_cast<size_t>(*n)] = true;
    out.push_back(*n);
  }
  return out;
}

}  // namespace tessera
