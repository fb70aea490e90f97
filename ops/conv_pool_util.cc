#include "ops/conv_pool_util.h"

#include <string>

namespace tessera {

namespace {

std::string dim_label(int i) {
  return "spatial dim " + std::to_string(i);
}

// Reads `pads` (2 * rank values in [0, kMaxDim]) or zeros when absent.
Result<std::vector<int64_t>> read_pads(const OpContext& ctx, int rank) {
  std::vector<int64_t> pads(static_cast<size_t>(2 * rank), 0);
  if (!ctx.attrs().has("pads")) return pads;
  Result<std::vector<int64_t>> r = ctx.attrs().get_ints("pads");
  if (!r.ok()) return ctx.wrap(r.status());
  if (static_cast<int>(r->size()) != 2 * rank) {
    return ctx.error("attribute 'pads' has " + std::to_string(r->size()) + " values, expected " +
                     std::to_string(2 * rank) + " (begin and end for each of " +
                     std::to_string(rank) + " spatial dims)");
  }
  for (size_t i = 0; i < r->size(); ++i) {
    const int64_t v = (*r)[i];
    if (v < 0 || v > kMaxDim) {
      return ctx.error("attribute 'pads'[" + std::to_string(i) + "] = " + std::to_string(v) +
                       " is out of range [0, " + std::to_string(kMaxDim) + "]");
    }
  }
  return std::move(r).value();
}

bool all_zero(const std::vector<int64_t>& v) {
  for (int64_t x : v) {
    if (x != 0) return false;
  }
  return true;
}

Status check_kernel(const OpContext& ctx, std::span<const int64_t> kernel) {
  for (size_t i = 0; i < kernel.size(); ++i) {
    if (kernel[i] < 1 || kernel[i] > kMaxDim) {
      return ctx.error("kernel extent " + std::to_string(kernel[i]) + " along " +
                       dim_label(static_cast<int>(i)) + " is out of range [1, " +
                       std::to_string(kMaxDim) + "]");
    }
  }
  return Status();
}

}  // namespace

int64_t WindowGeometry::input_volume() const {
  int64_t v = 1;
  for (int64_t x : input) v *= x;
  return v;
}
int64_t WindowGeometry::output_volume() const {
  int64_t v = 1;
  for (int64_t x : output) v *= x;
  return v;
}
int64_t WindowGeometry::kernel_volume() const {
  int64_t v = 1;
  for (int64_t x : kernel) v *= x;
  return v;
}

Result<bool> read_flag(const OpContext& ctx, const char* name) {
  Result<int64_t> v = ctx.attrs().int_or(name, 0);
  if (!v.ok()) return ctx.wrap(v.status());
  if (*v != 0 && *v != 1) {
    return ctx.error("attribute '" + std::string(name) + "' = " + std::to_string(*v) +
                     " must be 0 or 1");
  }
  return *v == 1;
}

Result<AutoPad> read_auto_pad(const OpContext& ctx) {
  Result<std::string> r = ctx.attrs().string_or("auto_pad", "NOTSET");
  if (!r.ok()) return ctx.wrap(r.status());
  const std::string& s = *r;
  if (s == "NOTSET" || s.empty()) return AutoPad::kNotSet;
  if (s == "SAME_UPPER") return AutoPad::kSameUpper;
  if (s == "SAME_LOWER") return AutoPad::kSameLower;
  if (s == "VALID") return AutoPad::kValid;
  return ctx.error("attribute 'auto_pad' has unknown value '" + s +
                   "' (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)");
}

Result<std::vector<int64_t>> read_spatial_ints(const OpContext& ctx, const char* name, int rank,
                                               int64_t def, int64_t min_value) {
  if (!ctx.attrs().has(name)) return std::vector<int64_t>(static_cast<size_t>(rank), def);
  Result<std::vector<int64_t>> r = ctx.attrs().get_ints(name);
  if (!r.ok()) return ctx.wrap(r.status());
  if (static_cast<int>(r->size()) != rank) {
    return ctx.error("attribute '" + std::string(name) + "' has " + std::to_string(r->size()) +
                     " values, expected " + std::to_string(rank) + " (one per spatial dim)");
  }
  for (size_t i = 0; i < r->size(); ++i) {
    const int64_t v = (*r)[i];
    if (v < min_value || v > kMaxDim) {
      return ctx.error("attribute '" + std::string(name) + "'[" + std::to_string(i) +
                       "] = " + std::to_string(v) + " is out of range [" +
                       std::to_string(min_value) + ", " + std::to_string(kMaxDim) + "]");
    }
  }
  return std::move(r).value();
}

Status check_spatial_input(const OpContext& ctx, const Shape& x, const char* what) {
  if (x.rank() < 3) {
    return ctx.error(std::string(what) + " has shape " + x.to_string() +
                     "; expected [N, C, spatial...] with at least one spatial dim");
  }
  if (x.rank() > 2 + kMaxSpatialRank) {
    return ctx.unsupported(std::string(what) + " has shape " + x.to_string() + "; at most " +
                           std::to_string(kMaxSpatialRank) + " spatial dims are supported");
  }
  return Status();
}

Result<std::vector<int64_t>> read_pool_kernel(const OpContext& ctx, int rank) {
  if (!ctx.attrs().has("kernel_shape")) return ctx.error("attribute 'kernel_shape' is required");
  return read_spatial_ints(ctx, "kernel_shape", rank, 1, 1);
}

Result<WindowGeometry> forward_window(const OpContext& ctx, std::span<const int64_t> input,
                                      std::span<const int64_t> kernel,
                                      const ForwardWindowOptions& options) {
  WindowGeometry g;
  g.rank = static_cast<int>(input.size());
  g.input.assign(input.begin(), input.end());
  g.kernel.assign(kernel.begin(), kernel.end());
  RETURN_IF_ERROR(check_kernel(ctx, kernel));
  ASSIGN_OR_RETURN(g.strides, read_spatial_ints(ctx, "strides", g.rank, 1, 1));
  ASSIGN_OR_RETURN(g.dilations, read_spatial_ints(ctx, "dilations", g.rank, 1, 1));
  ASSIGN_OR_RETURN(AutoPad auto_pad, read_auto_pad(ctx));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, read_pads(ctx, g.rank));
  if (auto_pad != AutoPad::kNotSet && !all_zero(pads)) {
    return ctx.error("attribute 'pads' is non-zero while 'auto_pad' is set; use one or the other");
  }
  g.pads_begin.assign(pads.begin(), pads.begin() + g.rank);
  g.pads_end.assign(pads.begin() + g.rank, pads.end());
  g.output.resize(static_cast<size_t>(g.rank));

  for (int i = 0; i < g.rank; ++i) {
    const size_t u = static_cast<size_t>(i);
    const int64_t in = g.input[u];
    const int64_t s = g.strides[u];
    const int64_t ek = g.effective_kernel(i);  // <= 2^62: both factors <= kMaxDim
    if (auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower) {
      const int64_t out = (in + s - 1) / s;
      const int64_t total = out == 0 ? 0 : std::max<int64_t>(0, (out - 1) * s + ek - in);
      const int64_t small = total / 2;
      g.pads_begin[u] = auto_pad == AutoPad::kSameUpper ? small : total - small;
      g.pads_end[u] = total - g.pads_begin[u];
      g.output[u] = out;
    } else {
      const int64_t padded = in + g.pads_begin[u] + g.pads_end[u];
      if (padded < ek) {
        return ctx.error("effective kernel extent " + std::to_string(ek) + " (kernel " +
                         std::to_string(g.kernel[u]) + ", dilation " +
                         std::to_string(g.dilations[u]) + ") exceeds the padded input extent " +
                         std::to_string(padded) + " along " + dim_label(i));
      }
      const int64_t span = padded - ek;
      int64_t out = span / s + 1;
      if (options.ceil_mode && span % s != 0) {
        ++out;
        if ((out - 1) * s >= in + g.pads_begin[u]) --out;  // would start in the end padding
      }
      g.output[u] = out;
    }
    if (options.pads_below_kernel && (g.pads_begin[u] >= ek || g.pads_end[u] >= ek)) {
      return ctx.error("pads " + std::to_string(g.pads_begin[u]) + " and " +
                       std::to_string(g.pads_end[u]) + " along " + dim_label(i) +
                       " must be smaller than the effective kernel extent " + std::to_string(ek));
    }
  }
  return g;
}

Result<WindowGeometry> transpose_window(const OpContext& ctx, std::span<const int64_t> input,
                                        std::span<const int64_t> kernel) {
  WindowGeometry g;
  g.rank = static_cast<int>(input.size());
  g.input.assign(input.begin(), input.end());
  g.kernel.assign(kernel.begin(), kernel.end());
  RETURN_IF_ERROR(check_kernel(ctx, kernel));
  ASSIGN_OR_RETURN(g.strides, read_spatial_ints(ctx, "strides", g.rank, 1, 1));
  ASSIGN_OR_RETURN(g.dilations, read_spatial_ints(ctx, "dilations", g.rank, 1, 1));
  ASSIGN_OR_RETURN(std::vector<int64_t> output_padding,
                   read_spatial_ints(ctx, "output_padding", g.rank, 0, 0));
  ASSIGN_OR_RETURN(AutoPad auto_pad, read_auto_pad(ctx));
  ASSIGN_OR_RETURN(std::vector<int64_t> pads, read_pads(ctx, g.rank));
  const bool has_output_shape = ctx.attrs().has("output_shape");
  std::vector<int64_t> output_shape;
  if (has_output_shape) {
    Result<std::vector<int64_t>> r = ctx.attrs().get_ints("output_shape");
    if (!r.ok()) return ctx.wrap(r.status());
    output_shape = std::move(r).value();
    // The spec wants spatial dims only; some exporters write [N, C, spatial...].
    if (static_cast<int>(output_shape.size()) == g.rank + 2) {
      output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
    }
    if (static_cast<int>(output_shape.size()) != g.rank) {
      return ctx.error("attribute 'output_shape' has " + std::to_string(output_shape.size()) +
                       " values, expected " + std::to_string(g.rank) + " (one per spatial dim)");
    }
    for (size_t i = 0; i < output_shape.size(); ++i) {
      if (output_shape[i] < 0 || output_shape[i] > kMaxDim) {
        return ctx.error("attribute 'output_shape'[" + std::to_string(i) +
                         "] = " + std::to_string(output_shape[i]) + " is out of range [0, " +
                         std::to_string(kMaxDim) + "]");
      }
    }
  } else if (auto_pad != AutoPad::kNotSet && !all_zero(pads)) {
    return ctx.error("attribute 'pads' is non-zero while 'auto_pad' is set; use one or the other");
  }
  g.pads_begin.assign(pads.begin(), pads.begin() + g.rank);
  g.pads_end.assign(pads.begin() + g.rank, pads.end());
  g.output.resize(static_cast<size_t>(g.rank));

  for (int i = 0; i < g.rank; ++i) {
    const size_t u = static_cast<size_t>(i);
    const int64_t in = g.input[u];
    const int64_t s = g.strides[u];
    if (in < 1) return ctx.error("input extent along " + dim_label(i) + " is 0");
    // full = s * (in - 1) + output_padding + ek; every term <= 2^62, so check the sum.
    int64_t full = 0;
    if (__builtin_add_overflow(s * (in - 1), output_padding[u], &full) ||
        __builtin_add_overflow(full, g.effective_kernel(i), &full) || full > (int64_t{1} << 62)) {
      return ctx.error("transposed output extent along " + dim_label(i) + " overflows");
    }
    const bool derive_pads =
        has_output_shape || auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower;
    if (derive_pads) {
      // total = full - target; a negative total (target beyond the full result) becomes zero
      // padding: with output_shape the extra output lies at the end (bias only), for SAME the
      // output is just the full result.
      int64_t out = has_output_shape ? output_shape[u] : in * s;
      const int64_t total = full - out;
      if (total < 0) {
        if (!has_output_shape) out = full;
        g.pads_begin[u] = 0;
        g.pads_end[u] = has_output_shape ? total : 0;
      } else {
        const int64_t half = total / 2;
        g.pads_begin[u] = auto_pad == AutoPad::kSameUpper ? half : total - half;
        g.pads_end[u] = total - g.pads_begin[u];
      }
      g.output[u] = out;
    } else if (auto_pad == AutoPad::kValid) {
      g.pads_begin[u] = g.pads_end[u] = 0;
      g.output[u] = full;
    } else {
      const int64_t out = full - g.pads_begin[u] - g.pads_end[u];
      if (out < 0) {
        return ctx.error("pads " + std::to_string(g.pads_begin[u]) + " and " +
                         std::to_string(g.pads_end[u]) + " along " + dim_label(i) +
                         " exceed the transposed output extent " + std::to_string(full));
      }
      g.output[u] = out;
    }
  }
  return g;
}

Window3 to_window3(const WindowGeometry& g) {
  Window3 w;
  const int lead = 3 - g.rank;
  for (int i = 0; i < 3; ++i) {
    if (i < lead) {
      w.in[i] = w.out[i] = w.k[i] = w.s[i] = w.d[i] = 1;
      w.pb[i] = w.pe[i] = 0;
      continue;
    }
    const size_t u = static_cast<size_t>(i - lead);
    w.in[i] = g.input[u];
    w.out[i] = g.output[u];
    w.k[i] = g.kernel[u];
    w.s[i] = g.strides[u];
    w.d[i] = g.dilations[u];
    w.pb[i] = g.pads_begin[u];
    w.pe[i] = g.pads_end[u];
  }
  return w;
}

Status infer_global_pool(const OpContext& ctx, int /*num_outputs*/,
                         std::vector<TensorInfo>* outputs) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  const Shape& x = ctx.input(0).shape;
  if (x.rank() < 3) {
    return ctx.error("input X has shape " + x.to_string() + ", expected [N, C, spatial...]");
  }
  std::vector<int64_t> dims = {x[0], x[1]};
  for (int i = 2; i < x.rank(); ++i) {
    if (x[i] == 0) return ctx.error("input X " + x.to_string() + " has an empty spatial extent");
    dims.push_back(1);
  }
  outputs->push_back(TensorInfo{DType::kF32, Shape(std::move(dims))});
  return Status();
}

OpCost cost_global_pool(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  c.flops = static_cast<double>(ctx.input(0).shape.numel());
  return c;
}

OpCost cost_windowed_pool(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  Result<std::vector<int64_t>> kernel = ctx.attrs().get_ints("kernel_shape");
  double window = 1;
  if (kernel.ok()) {
    for (int64_t k : *kernel) window *= static_cast<double>(k);
  }
  c.flops = static_cast<double>(outputs[0].shape.numel()) * window;
  return c;
}

}  // namespace tessera
