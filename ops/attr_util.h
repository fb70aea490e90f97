// Attribute getters that name the node on failure: ctx.attrs().X_or(...) wrapped in ctx.wrap, so
// an op file reads an attribute in one line. Pure functions; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "ops/op.h"

namespace tessera {

inline Result<int64_t> int_attr(const OpContext& ctx, const char* name, int64_t def) {
  Result<int64_t> r = ctx.attrs().int_or(name, def);
  if (!r.ok()) return ctx.wrap(r.status());
  return r;
}

inline Result<float> float_attr(const OpContext& ctx, const char* name, float def) {
  Result<float> r = ctx.attrs().float_or(name, def);
  if (!r.ok()) return ctx.wrap(r.status());
  return r;
}

inline Result<std::string> string_attr(const OpContext& ctx, const char* name,
                                       const std::string& def) {
  Result<std::string> r = ctx.attrs().string_or(name, def);
  if (!r.ok()) return ctx.wrap(r.status());
  return r;
}

// Outer / axis / inner extents of `shape` around dimension `axis` (already normalised).
struct AxisSplit {
  int64_t outer = 1;
  int64_t axis = 1;
  int64_t inner = 1;
};
inline AxisSplit split_at_axis(const Shape& shape, int axis) {
  AxisSplit s;
  for (int d = 0; d < axis; ++d) s.outer *= shape[d];
  s.axis = shape[axis];
  for (int d = axis + 1; d < shape.rank(); ++d) s.inner *= shape[d];
  return s;
}

}  // namespace tessera
