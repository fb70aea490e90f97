// Resize (opsets 11-13): scales X to the size given by the constant `scales` (f32, output dim
// = floor(in * scale)) or the constant `sizes` (i64) input; exactly one of them is given (an
// empty tensor counts as absent). `roi` is ignored (it only matters for tf_crop_and_resize).
//
// Each output coordinate x maps back to the input coordinate (scale = out / in when sizes
// are given):
//   half_pixel (default)   (x + 0.5) / scale - 0.5
//   pytorch_half_pixel     as half_pixel, but 0 when the output length is 1
//   align_corners          x * (in - 1) / (out - 1), 0 when the output length is 1
//   asymmetric             x / scale
//   tf_half_pixel_for_nn   (x + 0.5) / scale
// mode = nearest rounds it (nearest_mode round_prefer_floor (default), round_prefer_ceil,
// floor, ceil) and clamps it into the input; works for any dtype (a gather_copy).
// mode = linear interpolates between the two neighbours in every dimension (N-D multilinear,
// computed one dimension at a time), the coordinate clamped into the input; f32 only.
// cubic, tf_crop_and_resize and the opset-18 attributes are Unimplemented.
// Coordinates are computed in float, as ONNX Runtime does.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "ops/data_movement.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

namespace {

enum class CoordMode {
  kHalfPixel,
  kPytorchHalfPixel,
  kAlignCorners,
  kAsymmetric,
  kTfHalfPixelForNn
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil };

struct ResizeParams {
  bool linear = false;
  CoordMode coord = CoordMode::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  std::vector<float> scales;  // per dimension, as used by the coordinate transform
  Shape out_shape;
};

Result<ResizeParams> parse_resize(const OpContext& ctx) {
  ResizeParams p;
  const Attributes& attrs = ctx.attrs();
  const TensorInfo& in = ctx.input(0);
  const int rank = in.shape.rank();

  // Phase 1: attributes.
  Result<std::string> mode = attrs.string_or("mode", "nearest");
  if (!mode.ok()) return ctx.wrap(mode.status());
  if (*mode == "linear") {
    p.linear = true;
  } else if (*mode == "cubic") {
    return ctx.unsupported("mode 'cubic' is not supported");
  } else if (*mode != "nearest") {
    return ctx.error("unknown mode '" + *mode + "'");
  }
  Result<std::string> coord = attrs.string_or("coordinate_transformation_mode", "half_pixel");
  if (!coord.ok()) return ctx.wrap(coord.status());
  if (*coord == "half_pixel") {
    p.coord = CoordMode::kHalfPixel;
  } else if (*coord == "pytorch_half_pixel") {
    p.coord = CoordMode::kPytorchHalfPixel;
  } else if (*coord == "align_corners") {
    p.coord = CoordMode::kAlignCorners;
  } else if (*coord == "asymmetric") {
    p.coord = CoordMode::kAsymmetric;
  } else if (*coord == "tf_half_pixel_for_nn") {
    p.coord = CoordMode::kTfHalfPixelForNn;
  } else if (*coord == "tf_crop_and_resize" || *coord == "half_pixel_symmetric") {
    return ctx.unsupported("coordinate_transformation_mode '" + *coord + "' is not supported");
  } else {
    return ctx.error("unknown coordinate_transformation_mode '" + *coord + "'");
  }
  Result<std::string> nearest = attrs.string_or("nearest_mode", "round_prefer_floor");
  if (!nearest.ok()) return ctx.wrap(nearest.status());
  if (*nearest == "round_prefer_floor") {
    p.nearest = NearestMode::kRoundPreferFloor;
  } else if (*nearest == "round_prefer_ceil") {
    p.nearest = NearestMode::kRoundPreferCeil;
  } else if (*nearest == "floor") {
    p.nearest = NearestMode::kFloor;
  } else if (*nearest == "ceil") {
    p.nearest = NearestMode::kCeil;
  } else {
    return ctx.error("unknown nearest_mode '" + *nearest + "'");
  }
  Result<int64_t> antialias = attrs.int_or("antialias", 0);
  if (!antialias.ok()) return ctx.wrap(antialias.status());
  if (*antialias != 0) return ctx.unsupported("antialias is not supported");
  if (attrs.has("axes")) return ctx.unsupported("attribute 'axes' (opset 18) is not supported");
  Result<std::string> policy = attrs.string_or("keep_aspect_ratio_policy", "stretch");
  if (!policy.ok()) return ctx.wrap(policy.status());
  if (*policy != "stretch") {
    return ctx.unsupported("keep_aspect_ratio_policy '" + *policy + "' is not supported");
  }
  if (p.linear && in.dtype != DType::kF32) {
    return ctx.unsupported(std::string("linear mode supports f32 only, not ") +
                           dtype_name(in.dtype));
  }

  // Phase 2: the output size, from scales or sizes.
  const bool has_scales = ctx.has_input(2) && ctx.input(2).shape.numel() > 0;
  const bool has_sizes = ctx.has_input(3) && ctx.input(3).shape.numel() > 0;
  if (has_scales == has_sizes) {
    return ctx.error("exactly one of scales (input 2) and sizes (input 3) must be given");
  }
  std::vector<int64_t> out_dims(static_cast<size_t>(rank));
  p.scales.resize(static_cast<size_t>(rank));
  if (has_scales) {
    const Tensor* t = ctx.constant(2);
    if (t == nullptr) return ctx.unsupported("scales must be a constant (shapes are static)");
    if (t->dtype() != DType::kF32) {
      return ctx.error(std::string("scales must be f32, not ") + dtype_name(t->dtype()));
    }
    if (t->numel() != rank) {
      return ctx.error("scales has " + std::to_string(t->numel()) + " entries for rank " +
                       std::to_string(rank));
    }
    for (int d = 0; d < rank; ++d) {
      const float s = t->data<float>()[d];
      if (!(s > 0.f) || !std::isfinite(s)) {
        return ctx.error("scale " + std::to_string(s) + " of dimension " + std::to_string(d) +
                         " is not a positive number");
      }
      const double out = std::floor(static_cast<double>(in.shape[d]) * static_cast<double>(s));
      if (out > static_cast<double>(kMaxDim)) {
        return ctx.error("scale " + std::to_string(s) + " makes dimension " + std::to_string(d) +
                         " too large");
      }
      out_dims[static_cast<size_t>(d)] = static_cast<int64_t>(out);
      p.scales[static_cast<size_t>(d)] = s;
    }
  } else {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, constant_int_list(ctx, 3, "sizes"));
    if (static_cast<int>(sizes.size()) != rank) {
      return ctx.error("sizes " + ints_to_string(sizes) + " has " + std::to_string(sizes.size()) +
                       " entries for rank " + std::to_string(rank));
    }
    for (int d = 0; d < rank; ++d) {
      const int64_t s = sizes[static_cast<size_t>(d)];
      if (s <= 0 || s > kMaxDim) {
        return ctx.error("sizes " + ints_to_string(sizes) + " has a bad entry " +
                         std::to_string(s));
      }
      out_dims[static_cast<size_t>(d)] = s;
      p.scales[static_cast<size_t>(d)] =
          in.shape[d] > 0 ? static_cast<float>(s) / static_cast<float>(in.shape[d]) : 1.f;
    }
  }
  for (int d = 0; d < rank; ++d) {
    if (in.shape[d] == 0 && out_dims[static_cast<size_t>(d)] > 0) {
      return ctx.error("cannot resize empty dimension " + std::to_string(d) + " to " +
                       std::to_string(out_dims[static_cast<size_t>(d)]));
    }
  }
  p.out_shape = Shape(std::move(out_dims));
  return p;
}

// The input coordinate of output coordinate `x` along one dimension.
float source_coordinate(CoordMode mode, int64_t x, float scale, int64_t in_len, int64_t out_len) {
  const float xf = static_cast<float>(x);
  switch (mode) {
    case CoordMode::kHalfPixel:
      return (xf + 0.5f) / scale - 0.5f;
    case CoordMode::kPytorchHalfPixel:
      return out_len > 1 ? (xf + 0.5f) / scale - 0.5f : 0.f;
    case CoordMode::kAlignCorners:
      return out_len == 1 ? 0.f
                          : xf * static_cast<float>(in_len - 1) / static_cast<float>(out_len - 1);
    case CoordMode::kAsymmetric:
      return xf / scale;
    case CoordMode::kTfHalfPixelForNn:
      return (xf + 0.5f) / scale;
  }
  return 0.f;
}

int64_t nearest_index(NearestMode mode, float x, int64_t in_len) {
  float r = 0;
  switch (mode) {
    case NearestMode::kRoundPreferFloor:
      r = std::ceil(x - 0.5f);
      break;
    case NearestMode::kRoundPreferCeil:
      r = std::floor(x + 0.5f);
      break;
    case NearestMode::kFloor:
      r = std::floor(x);
      break;
    case NearestMode::kCeil:
      r = std::ceil(x);
      break;
  }
  return static_cast<int64_t>(std::clamp(r, 0.f, static_cast<float>(in_len - 1)));
}

LinearTaps linear_taps(const ResizeParams& p, int64_t in_len, int64_t out_len, float scale) {
  LinearTaps t;
  t.identity = in_len == out_len;
  for (int64_t o = 0; o < out_len; ++o) {
    float x = source_coordinate(p.coord, o, scale, in_len, out_len);
    x = std::clamp(x, 0.f, static_cast<float>(in_len - 1));
    const int64_t i0 = static_cast<int64_t>(x);  // x >= 0, so this is floor
    const int64_t i1 = std::min(i0 + 1, in_len - 1);
    const float w1 = x - static_cast<float>(i0);
    t.i0.push_back(i0);
    t.i1.push_back(i1);
    t.w0.push_back(1.f - w1);
    t.w1.push_back(w1);
    t.identity = t.identity && i0 == o && w1 == 0.f;
  }
  return t;
}

// Resizes dimension `axis` of `src` (shape `shape`) into `dst`, which gets length taps.size().
void linear_pass(const float* src, float* dst, const Shape& shape, int axis, const LinearTaps& t) {
  const int64_t outer = dims_product(shape, 0, axis);
  const int64_t inner = dims_product(shape, axis + 1, shape.rank());
  const int64_t in_len = shape[axis];
  const int64_t out_len = static_cast<int64_t>(t.i0.size());
  for (int64_t b = 0; b < outer; ++b) {
    const float* s = src + b * in_len * inner;
    float* d = dst + b * out_len * inner;
    if (inner == 1) {
      for (int64_t o = 0; o < out_len; ++o) {
        const size_t uo = static_cast<size_t>(o);
        d[o] = t.w0[uo] * s[t.i0[uo]] + t.w1[uo] * s[t.i1[uo]];
      }
      continue;
    }
    for (int64_t o = 0; o < out_len; ++o) {
      const size_t uo = static_cast<size_t>(o);
      const float* r0 = s + t.i0[uo] * inner;
      const float* r1 = s + t.i1[uo] * inner;
      const float w0 = t.w0[uo], w1 = t.w1[uo];
      float* row = d + o * inner;
      for (int64_t i = 0; i < inner; ++i) row[i] = w0 * r0[i] + w1 * r1[i];
    }
  }
}

Status infer_resize(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(ResizeParams p, parse_resize(ctx));
  outputs->push_back(TensorInfo{ctx.input(0).dtype, p.out_shape});
  return Status();
}

OpCost cost_resize(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  Result<std::string> mode = ctx.attrs().string_or("mode", "nearest");
  if (mode.ok() && *mode == "linear") {
    // Two multiplies and an add per output element for every resized dimension.
    int resized = 0;
    const Shape& in = ctx.input(0).shape;
    for (int d = 0; d < in.rank(); ++d) resized += in[d] != outputs[0].shape[d];
    c.flops = 3.0 * resized * static_cast<double>(outputs[0].shape.numel());
  }
  return c;
}

Status reference_resize(const OpContext& ctx, std::span<const Tensor> inputs,
                        std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(ResizeKernelParams p, resize_kernel_params(ctx));
  const Tensor& in = inputs[0];
  Tensor& out = outputs[0];
  if (out.numel() == 0) return Status();
  if (!p.linear) {
    gather_index_maps_contiguous(p.maps, in, &out, nullptr);
    return Status();
  }

  // Linear: one 1-D pass per dimension that actually changes, through scratch buffers. The
  // dimensions that shrink go first, then those that grow (each group in order), so every
  // intermediate holds at most max(input, output) elements: the shrinking passes only reduce
  // the input, the growing ones only approach the output. In order instead, growing H of a
  // [1, 1, 1, 65536] input to 65536 before shrinking W to 1 would need a 2^32-element scratch
  // between two 2^16-element tensors. Resizes in one direction keep the plain order.
  std::vector<int> axes;
  for (int grow = 0; grow < 2; ++grow) {
    for (int d = 0; d < in.rank(); ++d) {
      if (!p.taps[static_cast<size_t>(d)].identity && (out.dim(d) > in.dim(d)) == (grow == 1)) {
        axes.push_back(d);
      }
    }
  }
  if (axes.empty()) {
    copy_tensor_bytes(in, &out);
    return Status();
  }
  const int64_t scratch_limit = std::max(in.numel(), out.numel());
  Shape shape = in.shape();
  const float* src = in.data<float>();
  std::vector<float> scratch[2];
  for (size_t k = 0; k < axes.size(); ++k) {
    Shape next = shape;
    next[axes[k]] = out.dim(axes[k]);
    float* dst = out.data<float>();
    if (k + 1 < axes.size()) {
      if (next.numel() > scratch_limit) {  // cannot happen in the order above; never allocate it
        return ctx.error("linear resize would need a scratch of shape " + next.to_string() +
                         ", larger than its input and output");
      }
      scratch[k % 2].resize(static_cast<size_t>(next.numel()));
      dst = scratch[k % 2].data();
    }
    linear_pass(src, dst, shape, axes[k], p.taps[static_cast<size_t>(axes[k])]);
    src = dst;
    shape = next;
  }
  return Status();
}

}  // namespace

Result<ResizeKernelParams> resize_kernel_params(const OpContext& ctx) {
  ASSIGN_OR_RETURN(ResizeParams p, parse_resize(ctx));
  const Shape& in = ctx.input(0).shape;
  ResizeKernelParams k;
  k.linear = p.linear;
  // An empty output needs no maps or taps; sized by its other dimensions they could be 2^31
  // long each.
  const bool empty = p.out_shape.numel() == 0;
  for (int d = 0; d < in.rank(); ++d) {
    const size_t ud = static_cast<size_t>(d);
    const int64_t in_len = in[d], out_len = empty ? 0 : p.out_shape[d];
    if (p.linear) {
      k.taps.push_back(empty ? LinearTaps() : linear_taps(p, in_len, out_len, p.scales[ud]));
      continue;
    }
    std::vector<int64_t> idx(static_cast<size_t>(out_len));
    for (int64_t o = 0; o < out_len; ++o) {
      const float x = source_coordinate(p.coord, o, p.scales[ud], in_len, out_len);
      idx[static_cast<size_t>(o)] = nearest_index(p.nearest, x, in_len);
    }
    k.maps.source_dim.push_back(d);
    k.maps.index.push_back(std::move(idx));
  }
  k.maps.fixed.assign(static_cast<size_t>(in.rank()), 0);
  return k;
}

const OpSchema kResizeSchema = {
    .kind = OpKind::kResize,
    .min_inputs = 1,
    .max_inputs = 4,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_resize,
    .cost = cost_resize,
    .reference = reference_resize,
};

}  // namespace tessera
