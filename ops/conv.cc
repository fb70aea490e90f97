// Conv: N-d convolution over 1 to 3 spatial dims (ONNX Conv-11).
//
//   X [N, C, D1..Dk], W [M, C / group, K1..Kk], optional B [M]  ->  Y [N, M, O1..Ok]
//   Y[n, m, o] = B[m] + sum_{c in group(m), t} X[n, c, o * stride + t * dilation - pad_begin]
//                                              * W[m, c - group_start, t]
// with zero padding. Attributes: group, strides, dilations, pads, auto_pad, kernel_shape
// (optional; must match W). Output sizes follow ops/conv_pool_util.h.
//
// FLOPs: 2 * N * M * prod(O) * (C / group) * prod(K); the bias adds are not counted (the same
// convention as Gemm's C term and the fused activation).
//
// Reference kernel:
//   - group with one input channel (depthwise and channel-multiplier convs): a direct loop that
//     accumulates whole output rows with a contiguous inner loop per kernel tap;
//   - everything else: im2col into packed B panels (ops/gemm_kernel.h) tile by tile, multiplied
//     by the packed weights of the group. No full im2col matrix is ever materialised; scratch is
//     one kGemmKC x tile block plus the packed weights.
#include <algorithm>
#include <string>

#include "ops/conv_pool_util.h"
#include "ops/gemm_kernel.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct ConvDims {
  WindowGeometry geo;
  int64_t batch = 0;
  int64_t cin = 0;
  int64_t cout = 0;
  int64_t group = 1;
  int64_t cin_g = 0;   // input channels per group
  int64_t cout_g = 0;  // output channels per group
};

Result<ConvDims> conv_dims(const OpContext& ctx) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  RETURN_IF_ERROR(require_f32(ctx, 1));
  const Shape& x = ctx.input(0).shape;
  const Shape& w = ctx.input(1).shape;
  RETURN_IF_ERROR(check_spatial_input(ctx, x, "input X"));
  if (w.rank() != x.rank()) {
    return ctx.error("weights W have shape " + w.to_string() + ", expected rank " +
                     std::to_string(x.rank()) + " [M, C / group, kernel...] to match X " +
                     x.to_string());
  }
  ConvDims d;
  Result<int64_t> group = ctx.attrs().int_or("group", 1);
  if (!group.ok()) return ctx.wrap(group.status());
  d.group = *group;
  if (d.group < 1 || d.group > kMaxDim) {
    return ctx.error("attribute 'group' = " + std::to_string(d.group) + " must be positive");
  }
  d.batch = x[0];
  d.cin = x[1];
  d.cout = w[0];
  d.cin_g = w[1];
  if (d.cin % d.group != 0 || d.cin_g * d.group != d.cin) {
    return ctx.error("input X has " + std::to_string(d.cin) + " channels but W " + w.to_string() +
                     " expects " + std::to_string(d.cin_g) + " per group x group " +
                     std::to_string(d.group));
  }
  if (d.cout % d.group != 0) {
    return ctx.error("W has " + std::to_string(d.cout) +
                     " output channels, not divisible by group " + std::to_string(d.group));
  }
  d.cout_g = d.cout / d.group;
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  const std::vector<int64_t> kernel(w.dims().begin() + 2, w.dims().end());
  if (ctx.attrs().has("kernel_shape")) {
    Result<std::vector<int64_t>> ks = ctx.attrs().get_ints("kernel_shape");
    if (!ks.ok()) return ctx.wrap(ks.status());
    if (*ks != kernel) {
      return ctx.error("attribute 'kernel_shape' does not match the spatial dims of W " +
                       w.to_string());
    }
  }
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(require_f32(ctx, 2));
    const Shape& b = ctx.input(2).shape;
    if (b.rank() != 1 || b[0] != d.cout) {
      return ctx.error("bias B has shape " + b.to_string() + ", expected [" +
                       std::to_string(d.cout) + "]");
    }
  }
  ASSIGN_OR_RETURN(d.geo, forward_window(ctx, in, kernel, {}));
  return d;
}

Status infer_conv(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(ConvDims d, conv_dims(ctx));
  std::vector<int64_t> dims = {d.batch, d.cout};
  dims.insert(dims.end(), d.geo.output.begin(), d.geo.output.end());
  outputs->push_back(TensorInfo{DType::kF32, Shape(std::move(dims))});
  return Status();
}

OpCost cost_conv(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  const Shape& w = ctx.input(1).shape;
  // outputs[0] = [N, M, O...]; per output element: (C / group) * prod(K) multiply-adds.
  double macs_per_output = 1;
  for (int i = 1; i < w.rank(); ++i) macs_per_output *= static_cast<double>(w[i]);
  c.flops = 2.0 * static_cast<double>(outputs[0].shape.numel()) * macs_per_output;
  return c;
}

// Depthwise-style groups (one input channel each): for every output row and kernel tap, a
// contiguous multiply-add over the valid output columns.
void conv_direct_single_channel(const Window3& w, const float* x, const float* wk, float* y) {
  const int64_t ktaps_xy = w.k[1] * w.k[2];
  for (int64_t oz = 0; oz < w.out[0]; ++oz) {
    for (int64_t oy = 0; oy < w.out[1]; ++oy) {
      float* yrow = y + (oz * w.out[1] + oy) * w.out[2];
      for (int64_t kz = 0; kz < w.k[0]; ++kz) {
        const int64_t iz = oz * w.s[0] + kz * w.d[0] - w.pb[0];
        if (iz < 0 || iz >= w.in[0]) continue;
        for (int64_t ky = 0; ky < w.k[1]; ++ky) {
          const int64_t iy = oy * w.s[1] + ky * w.d[1] - w.pb[1];
          if (iy < 0 || iy >= w.in[1]) continue;
          const float* xrow = x + (iz * w.in[1] + iy) * w.in[2];
          const float* wrow = wk + kz * ktaps_xy + ky * w.k[2];
          for (int64_t kx = 0; kx < w.k[2]; ++kx) {
            const float wv = wrow[kx];
            const int64_t off = kx * w.d[2] - w.pb[2];
            const IndexRange r = tap_output_range(w.in[2], w.out[2], w.s[2], off);
            if (w.s[2] == 1) {
              for (int64_t ox = r.begin; ox < r.end; ++ox) yrow[ox] += wv * xrow[ox + off];
            } else {
              const int64_t sx = w.s[2];
              for (int64_t ox = r.begin; ox < r.end; ++ox) yrow[ox] += wv * xrow[ox * sx + off];
            }
          }
        }
      }
    }
  }
}

// Writes rows [k0, k0 + kc) x output positions [p0, p0 + np) of the im2col matrix of one group
// (row = (c, kz, ky, kx), column = output position) into packed B panels (ops/gemm_kernel.h),
// zero-filling padding taps and the lanes of the last panel past np.
void im2col_packed(const Window3& w, const float* x, int64_t k0, int64_t kc, int64_t p0, int64_t np,
                   float* bp) {
  const int64_t isp = w.in[0] * w.in[1] * w.in[2];
  const int64_t kvol = w.k[0] * w.k[1] * w.k[2];
  const int64_t panel_stride = kc * kGemmNR;
  for (int64_t kk = 0; kk < kc; ++kk) {
    const int64_t k = k0 + kk;
    const int64_t c = k / kvol;
    const int64_t t = k % kvol;
    const int64_t kz = t / (w.k[1] * w.k[2]);
    const int64_t ky = (t / w.k[2]) % w.k[1];
    const int64_t kx = t % w.k[2];
    const float* xc = x + c * isp;
    const int64_t off_z = kz * w.d[0] - w.pb[0];
    const int64_t off_y = ky * w.d[1] - w.pb[1];
    const int64_t off_x = kx * w.d[2] - w.pb[2];
    const IndexRange valid_x = tap_output_range(w.in[2], w.out[2], w.s[2], off_x);
    const int64_t sx = w.s[2];
    float* row = bp + kk * kGemmNR;  // row kk of panel 0
    auto at = [&](int64_t j) -> float& {
      return row[(j / kGemmNR) * panel_stride + (j % kGemmNR)];
    };
    for_each_row_segment(w.out, p0, np,
                         [&](int64_t z, int64_t y, int64_t xb, int64_t xe, int64_t local) {
                           const int64_t iz = z * w.s[0] + off_z;
                           const int64_t iy = y * w.s[1] + off_y;
                           int64_t lo = xe, hi = xe;  // valid columns within [xb, xe)
                           if (iz >= 0 && iz < w.in[0] && iy >= 0 && iy < w.in[1]) {
                             lo = std::clamp(valid_x.begin, xb, xe);
                             hi = std::clamp(valid_x.end, lo, xe);
                           }
                           int64_t j = local;
                           for (int64_t ox = xb; ox < lo; ++ox) at(j++) = 0.f;
                           if (lo < hi) {
                             const float* xrow = xc + (iz * w.in[1] + iy) * w.in[2];
                             for (int64_t ox = lo; ox < hi; ++ox) at(j++) = xrow[ox * sx + off_x];
                           }
                           for (int64_t ox = hi; ox < xe; ++ox) at(j++) = 0.f;
                         });
    for (int64_t j = np; j < round_up(np, kGemmNR); ++j) at(j) = 0.f;
  }
}

Status reference_conv(const OpContext& ctx, std::span<const Tensor> inputs,
                      std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(ConvDims d, conv_dims(ctx));
  const Window3 w = to_window3(d.geo);
  const float* x = inputs[0].data<float>();
  const float* wt = inputs[1].data<float>();
  const float* bias = ctx.has_input(2) ? inputs[2].data<float>() : nullptr;
  float* y = outputs[0].data<float>();
  const int64_t isp = d.geo.input_volume();
  const int64_t osp = d.geo.output_volume();
  const int64_t kvol = d.geo.kernel_volume();

  // Phase 1: Y = bias (or 0); everything after accumulates.
  for (int64_t n = 0; n < d.batch; ++n) {
    for (int64_t m = 0; m < d.cout; ++m) {
      std::fill_n(y + (n * d.cout + m) * osp, osp, bias != nullptr ? bias[m] : 0.f);
    }
  }
  if (d.batch == 0 || d.cout == 0 || osp == 0) return Status();

  // Phase 2a: one input channel per group.
  if (d.cin_g == 1) {
    for (int64_t n = 0; n < d.batch; ++n) {
      for (int64_t m = 0; m < d.cout; ++m) {
        const int64_t c = m / d.cout_g;  // the group's only input channel
        conv_direct_single_channel(w, x + (n * d.cin + c) * isp, wt + m * kvol,
                                   y + (n * d.cout + m) * osp);
      }
    }
    return Status();
  }

  // Phase 2b: per group, Y_g[cout_g x osp] += W_g[cout_g x K] * im2col(X_g)[K x osp], with
  // K = cin_g * kvol. The weights are packed once; im2col is produced tile by tile.
  const int64_t kdim = d.cin_g * kvol;
  if (kdim == 0) return Status();  // no input channels: Y is the bias
  const int64_t a_floats = packed_a_floats(d.cout_g, kdim);
  std::unique_ptr<float[]> apack = alloc_floats(a_floats * d.group);
  const int64_t kc_max = std::min(kdim, kGemmKC);
  // Output positions per tile: a kc_max x tile block of B of about 512 KiB (L2-resident).
  const int64_t tile = std::clamp<int64_t>((int64_t{1} << 17) / kc_max / kGemmNR * kGemmNR, kGemmNR,
                                           round_up(osp, kGemmNR));
  std::unique_ptr<float[]> bpack = alloc_floats(kc_max * tile);
  if (!apack || !bpack) return ctx.error("out of memory for convolution scratch");
  for (int64_t g = 0; g < d.group; ++g) {
    pack_a(MatrixView{wt + g * d.cout_g * kdim, kdim, 1}, d.cout_g, kdim,
           apack.get() + g * a_floats);
  }
  for (int64_t n = 0; n < d.batch; ++n) {
    for (int64_t g = 0; g < d.group; ++g) {
      const float* xg = x + (n * d.cin + g * d.cin_g) * isp;
      float* yg = y + (n * d.cout + g * d.cout_g) * osp;
      const float* ag = apack.get() + g * a_floats;
      for (int64_t p0 = 0; p0 < osp; p0 += tile) {
        const int64_t np = std::min(tile, osp - p0);
        for (int64_t k0 = 0; k0 < kdim; k0 += kGemmKC) {
          const int64_t kc = std::min(kGemmKC, kdim - k0);
          im2col_packed(w, xg, k0, kc, p0, np, bpack.get());
          gemm_packed(d.cout_g, np, kc, ag + k0 * kGemmMR, kdim * kGemmMR, bpack.get(),
                      kc * kGemmNR, yg + p0, osp);
        }
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kConvSchema = {
    .kind = OpKind::kConv,
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = true,
    .infer = infer_conv,
    .cost = cost_conv,
    .reference = reference_conv,
};

}  // namespace tessera
