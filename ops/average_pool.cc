// AveragePool over 1 to 3 spatial dims (ONNX AveragePool-11; dilations as in AveragePool-19).
//
//   X [N, C, D1..Dk] -> Y [N, C, O1..Ok], Y = sum of the window's input elements / divisor.
// Attributes: kernel_shape (required), strides, dilations, pads, auto_pad, ceil_mode,
// count_include_pad. Output sizes follow ops/conv_pool_util.h; pads must be smaller than the
// effective kernel.
//
// The divisor, per spatial dim and multiplied together (windows are boxes):
//   count_include_pad = 0: the window taps inside the input;
//   count_include_pad = 1: the window taps inside the padded input [-pad_begin, in + pad_end).
// In ceil_mode the last window may run past the end padding; its taps out there are not
// counted even with count_include_pad = 1 (the window is clipped to input + pads), as in
// PyTorch's avg_pool and ONNX Runtime. Auto pads
// (SAME_*) count as padding. A window with a zero divisor (possible only with dilation) is 0/0
// = NaN.
// FLOPs: one add per window element, output elements * prod(kernel).
#include <algorithm>
#include <string>

#include "ops/conv_pool_util.h"
#include "ops/gemm_kernel.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct AvgPoolParams {
  WindowGeometry geo;
  bool count_include_pad = false;
};

Result<AvgPoolParams> avg_pool_params(const OpContext& ctx) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  const Shape& x = ctx.input(0).shape;
  RETURN_IF_ERROR(check_spatial_input(ctx, x, "input X"));
  const int rank = x.rank() - 2;
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, read_pool_kernel(ctx, rank));
  ASSIGN_OR_RETURN(const bool ceil_mode, read_flag(ctx, "ceil_mode"));
  AvgPoolParams p;
  ASSIGN_OR_RETURN(p.count_include_pad, read_flag(ctx, "count_include_pad"));
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  ForwardWindowOptions opts;
  opts.ceil_mode = ceil_mode;
  opts.pads_below_kernel = true;
  ASSIGN_OR_RETURN(p.geo, forward_window(ctx, in, kernel, opts));
  return p;
}

Status infer_average_pool(const OpContext& ctx, int /*num_outputs*/,
                          std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(AvgPoolParams p, avg_pool_params(ctx));
  const Shape& x = ctx.input(0).shape;
  std::vector<int64_t> dims = {x[0], x[1]};
  dims.insert(dims.end(), p.geo.output.begin(), p.geo.output.end());
  outputs->push_back(TensorInfo{DType::kF32, Shape(std::move(dims))});
  return Status();
}

// The divisor contribution of output position o along one dim (see the header comment).
int64_t window_count(const Window3& w, int dim, int64_t o, bool count_include_pad) {
  const int64_t start = o * w.s[dim] - w.pb[dim];
  const int64_t lo = count_include_pad ? -w.pb[dim] : 0;
  const int64_t hi = count_include_pad ? w.in[dim] + w.pe[dim] : w.in[dim];
  return window_tap_range(start, w.k[dim], w.d[dim], lo, hi).size();
}

Status reference_average_pool(const OpContext& ctx, std::span<const Tensor> inputs,
                              std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(AvgPoolParams p, avg_pool_params(ctx));
  const Window3 w = to_window3(p.geo);
  const Shape& xs = inputs[0].shape();
  const int64_t planes = xs[0] * xs[1];
  const int64_t isp = p.geo.input_volume();
  const int64_t osp = p.geo.output_volume();
  const float* x = inputs[0].data<float>();
  float* y = outputs[0].data<float>();
  // An empty output needs no divisors; sized by its width they could be 2^31 floats.
  if (outputs[0].numel() == 0) return Status();
  // Divisor factors along the innermost dim, shared by every row.
  std::unique_ptr<float[]> count_x = alloc_floats(w.out[2]);
  if (!count_x) return ctx.error("out of memory for pooling scratch");
  for (int64_t ox = 0; ox < w.out[2]; ++ox) {
    count_x[static_cast<size_t>(ox)] =
        static_cast<float>(window_count(w, 2, ox, p.count_include_pad));
  }
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* xp = x + pl * isp;
    float* yp = y + pl * osp;
    for (int64_t oz = 0; oz < w.out[0]; ++oz) {
      for (int64_t oy = 0; oy < w.out[1]; ++oy) {
        float* yrow = yp + (oz * w.out[1] + oy) * w.out[2];
        std::fill_n(yrow, w.out[2], 0.f);
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
                for (int64_t ox = r.begin; ox < r.end; ++ox) yrow[ox] += xrow[ox + off];
              } else {
                const int64_t sx = w.s[2];
                for (int64_t ox = r.begin; ox < r.end; ++ox) yrow[ox] += xrow[ox * sx + off];
              }
            }
          }
        }
        const float count_zy = static_cast<float>(window_count(w, 0, oz, p.count_include_pad) *
                                                  window_count(w, 1, oy, p.count_include_pad));
        for (int64_t ox = 0; ox < w.out[2]; ++ox)
          yrow[ox] /= count_zy * count_x[static_cast<size_t>(ox)];
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kAveragePoolSchema = {
    .kind = OpKind::kAveragePool,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_average_pool,
    .cost = cost_windowed_pool,
    .reference = reference_average_pool,
};

}  // namespace tessera
