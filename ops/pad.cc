// Pad (opset 11+): pads, or with negative amounts crops, each dimension. `pads` is a constant
// input [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over all dimensions, or over the
// dimensions named by the optional constant `axes` input (opset 18). Modes:
//   constant  the optional `constant_value` input (same dtype as the data; default 0),
//   reflect   mirror without repeating the edge element; pads longer than the data keep
//             mirroring (as numpy.pad, and the ONNX spec example pads 2 on a length-2 axis),
//   edge      repeat the edge element.
// As in the ONNX reference, cropping happens first and padding applies to the cropped data.
// Any dtype (gather_copy with per-dimension source maps).
#include <algorithm>
#include <cstring>

#include "ops/data_movement.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

namespace {

enum class PadMode { kConstant, kReflect, kEdge };

struct PadParams {
  PadMode mode = PadMode::kConstant;
  // Per dimension: the amounts added before and after it (negative: cropped).
  std::vector<int64_t> begin, end;
  Shape out_shape;
};

Result<PadParams> parse_pad(const OpContext& ctx) {
  PadParams p;
  const TensorInfo& in = ctx.input(0);
  const int rank = in.shape.rank();
  Result<std::string> mode = ctx.attrs().string_or("mode", "constant");
  if (!mode.ok()) return ctx.wrap(mode.status());
  if (*mode == "constant") {
    p.mode = PadMode::kConstant;
  } else if (*mode == "reflect") {
    p.mode = PadMode::kReflect;
  } else if (*mode == "edge") {
    p.mode = PadMode::kEdge;
  } else if (*mode == "wrap") {
    return ctx.unsupported("mode 'wrap' is not supported");
  } else {
    return ctx.error("unknown mode '" + *mode + "'");
  }

  if (ctx.has_input(2)) {
    const TensorInfo& cv = ctx.input(2);
    if (cv.dtype != in.dtype) {
      return ctx.error(std::string("constant_value has dtype ") + dtype_name(cv.dtype) +
                       ", the data has " + dtype_name(in.dtype));
    }
    if (cv.shape.numel() > 1) {
      return ctx.error("constant_value must be a scalar, has shape " + cv.shape.to_string());
    }
  }

  ASSIGN_OR_RETURN(std::vector<int64_t> pads, constant_int_list(ctx, 1, "pads"));
  std::vector<int> axes;
  if (ctx.has_input(3)) {
    ASSIGN_OR_RETURN(std::vector<int64_t> raw, constant_int_list(ctx, 3, "axes"));
    ASSIGN_OR_RETURN(axes, normalize_axes(ctx, raw, rank));
  } else {
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  }
  const size_t n = axes.size();
  if (pads.size() != 2 * n) {
    return ctx.error("pads " + ints_to_string(pads) + " has " + std::to_string(pads.size()) +
                     " entries, expected " + std::to_string(2 * n));
  }
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), end(static_cast<size_t>(rank), 0);
  for (size_t i = 0; i < n; ++i) {
    const int64_t b = pads[i], e = pads[i + n];
    if (b < -kMaxDim || b > kMaxDim || e < -kMaxDim || e > kMaxDim) {
      return ctx.error("pads " + ints_to_string(pads) + " has an absurd amount");
    }
    begin[static_cast<size_t>(axes[i])] = b;
    end[static_cast<size_t>(axes[i])] = e;
  }

  // The output shape, checked (each dimension, then the element limit) before anything is sized
  // from it. Shape inference never builds the index maps: only the kernels need them.
  std::vector<int64_t> out_dims;
  for (int d = 0; d < rank; ++d) {
    const int64_t dim = in.shape[d], b = begin[static_cast<size_t>(d)],
                  e = end[static_cast<size_t>(d)];
    int64_t out;
    if (__builtin_add_overflow(dim, b, &out) || __builtin_add_overflow(out, e, &out) ||
        out > kMaxDim) {
      return ctx.error("pads " + ints_to_string(pads) + " make dimension " + std::to_string(d) +
                       " (size " + std::to_string(dim) + ") larger than the limit of " +
                       std::to_string(kMaxDim));
    }
    if (out < 0) {
      return ctx.error("pads " + ints_to_string(pads) + " crop dimension " + std::to_string(d) +
                       " (size " + std::to_string(dim) + ") below zero");
    }
    const int64_t lo = std::max<int64_t>(-b, 0);
    const int64_t len = dim - lo - std::max<int64_t>(-e, 0);  // < 0 when over-cropped
    if (p.mode != PadMode::kConstant && (b > 0 || e > 0) && len < 1) {
      return ctx.error(std::string(p.mode == PadMode::kEdge ? "edge" : "reflect") +
                       " padding needs data to extend, but dimension " + std::to_string(d) +
                       " is empty after cropping");
    }
    out_dims.push_back(out);
  }
  p.out_shape = Shape(std::move(out_dims));
  if (Status s = p.out_shape.validate(); !s.ok()) {
    return ctx.error("pads " + ints_to_string(pads) + " give an invalid output: " + s.message());
  }
  p.begin = std::move(begin);
  p.end = std::move(end);
  return p;
}

// The output index -> input index map of dimension `d` (-1: the constant).
std::vector<int64_t> pad_map(const PadParams& p, int64_t dim, int d) {
  const size_t ud = static_cast<size_t>(d);
  const int64_t b = p.begin[ud], e = p.end[ud], out = p.out_shape[d];
  // The cropped source range [lo, lo + len), then padding of pb before and pe after it.
  const int64_t lo = std::max<int64_t>(-b, 0);
  const int64_t len = dim - lo - std::max<int64_t>(-e, 0);
  const int64_t pb = std::max<int64_t>(b, 0);
  std::vector<int64_t> map(static_cast<size_t>(out));
  for (int64_t o = 0; o < out; ++o) {
    const int64_t q = o - pb;  // position in the cropped range
    int64_t src;
    if (q >= 0 && q < len) {
      src = lo + q;
    } else if (p.mode == PadMode::kConstant) {
      src = -1;
    } else if (p.mode == PadMode::kEdge) {
      src = lo + std::clamp<int64_t>(q, 0, len - 1);
    } else if (len == 1) {
      src = lo;  // reflecting one element repeats it (as numpy.pad)
    } else {
      // Mirror about the end elements, as often as needed (numpy.pad): period 2 * (len - 1).
      const int64_t period = 2 * (len - 1);
      int64_t r = q % period;
      if (r < 0) r += period;
      src = lo + (r < len ? r : period - r);
    }
    map[static_cast<size_t>(o)] = src;
  }
  return map;
}

Status infer_pad(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(PadParams p, parse_pad(ctx));
  outputs->push_back(TensorInfo{ctx.input(0).dtype, p.out_shape});
  return Status();
}

Status reference_pad(const OpContext& ctx, std::span<const Tensor> inputs,
                     std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(IndexMaps maps, pad_index_maps(ctx));
  const Tensor& in = inputs[0];
  uint8_t fill[8] = {};  // zero unless constant_value says otherwise
  if (ctx.has_input(2) && inputs[2].numel() == 1)
    std::memcpy(fill, inputs[2].raw(), dtype_size(in.dtype()));
  gather_index_maps_contiguous(maps, in, &outputs[0], fill);
  return Status();
}

}  // namespace

Result<IndexMaps> pad_index_maps(const OpContext& ctx) {
  ASSIGN_OR_RETURN(PadParams p, parse_pad(ctx));
  const Shape& in = ctx.input(0).shape;
  IndexMaps maps;
  maps.fixed.assign(static_cast<size_t>(in.rank()), 0);
  // An empty output needs no maps; sized by its other dimensions they could be 2^31 long each.
  const bool empty = p.out_shape.numel() == 0;
  for (int d = 0; d < in.rank(); ++d) {
    maps.source_dim.push_back(d);
    maps.index.push_back(empty ? std::vector<int64_t>() : pad_map(p, in[d], d));
  }
  return maps;
}

const OpSchema kPadSchema = {
    .kind = OpKind::kPad,
    .min_inputs = 2,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_pad,
    .cost = nullptr,
    .reference = reference_pad,
};

}  // namespace tessera
