// MaxPool over 1 to 3 spatial dims (ONNX MaxPool-12).
//
//   X [N, C, D1..Dk] -> Y [N, C, O1..Ok], Y = max over the window of X padded with -inf.
// Attributes: kernel_shape (required), strides, dilations, pads, auto_pad, ceil_mode; output
// sizes follow ops/conv_pool_util.h. Pads must be smaller than the effective kernel, so every
// window overlaps the input; with dilation a window can still miss every input element, and its
// output is then -inf (the max over padding only).
//
// Only the Y output is supported: the optional Indices output is rejected. storage_order
// (0 or 1) only changes Indices, so it is validated and otherwise ignored.
// NaN propagates: a window containing a NaN yields NaN (as numpy's max and PyTorch do).
// FLOPs: one comparison per window element, output elements * prod(kernel).
#include <algorithm>
#include <limits>
#include <string>

#include "ops/conv_pool_util.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Result<WindowGeometry> max_pool_geometry(const OpContext& ctx) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  const Shape& x = ctx.input(0).shape;
  RETURN_IF_ERROR(check_spatial_input(ctx, x, "input X"));
  const int rank = x.rank() - 2;
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, read_pool_kernel(ctx, rank));
  ASSIGN_OR_RETURN(const bool ceil_mode, read_flag(ctx, "ceil_mode"));
  RETURN_IF_ERROR(read_flag(ctx, "storage_order").status());
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  ForwardWindowOptions opts;
  opts.ceil_mode = ceil_mode;
  opts.pads_below_kernel = true;
  return forward_window(ctx, in, kernel, opts);
}

Status infer_max_pool(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs) {
  if (num_outputs != 1) {
    return ctx.unsupported("the optional Indices output is not supported (node has " +
                           std::to_string(num_outputs) + " outputs)");
  }
  ASSIGN_OR_RETURN(WindowGeometry g, max_pool_geometry(ctx));
  const Shape& x = ctx.input(0).shape;
  std::vector<int64_t> dims = {x[0], x[1]};
  dims.insert(dims.end(), g.output.begin(), g.output.end());
  outputs->push_back(TensorInfo{DType::kF32, Shape(std::move(dims))});
  return Status();
}

// NaN-propagating max: v wins if larger or NaN.
inline float max_nan(float cur, float v) {
  return (v > cur || v != v) ? v : cur;
}

Status reference_max_pool(const OpContext& ctx, std::span<const Tensor> inputs,
                          std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(WindowGeometry g, max_pool_geometry(ctx));
  const Window3 w = to_window3(g);
  const Shape& xs = inputs[0].shape();
  const int64_t planes = xs[0] * xs[1];
  const int64_t isp = g.input_volume();
  const int64_t osp = g.output_volume();
  const float* x = inputs[0].data<float>();
  float* y = outputs[0].data<float>();
  for (int64_t p = 0; p < planes; ++p) {
    const float* xp = x + p * isp;
    float* yp = y + p * osp;
    for (int64_t oz = 0; oz < w.out[0]; ++oz) {
      for (int64_t oy = 0; oy < w.out[1]; ++oy) {
        float* yrow = yp + (oz * w.out[1] + oy) * w.out[2];
        std::fill_n(yrow, w.out[2], -std::numeric_limits<float>::infinity());
        for (int64_t kz = 0; kz < w.k[0]; ++kz) {
          const int64_t iz = oz * w.s[0] + kz * w.d[0] - w.pb[0];
          if (iz < 0 || iz >= w.in[0]) continue;
          for (int64_t ky = 0; ky < w.k[1]; ++ky) {
            const int64_t iy = oy * w.s[1] + ky * w.d[1] - w.pb[1];
            if (iy < 0 || iy >= w.in[1]) continue;
            const float* xrow = xp + (iz * w.in[1] + iy) * w.in[2];
            for (int64_t kx = 0; kx < w.k[2]; ++kx) {
              const int64_t off = kx * w.d[2] - w.pb[2];
              const IndexRange r = tap_output_range(w.in[2], w.out[2], w.s[2], off);
              if (w.s[2] == 1) {
                for (int64_t ox = r.begin; ox < r.end; ++ox) {
                  yrow[ox] = max_nan(yrow[ox], xrow[ox + off]);
                }
              } else {
                const int64_t sx = w.s[2];
                for (int64_t ox = r.begin; ox < r.end; ++ox) {
                  yrow[ox] = max_nan(yrow[ox], xrow[ox * sx + off]);
                }
              }
            }
          }
        }
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kMaxPoolSchema = {
    .kind = OpKind::kMaxPool,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 2,
    .accepts_fused_activation = false,
    .infer = infer_max_pool,
    .cost = cost_windowed_pool,
    .reference = reference_max_pool,
};

}  // namespace tessera
