// ConvTranspose: the transpose (gradient) of Conv over 1 to 3 spatial dims (ONNX
// ConvTranspose-11).
//
//   X [N, C, D1..Dk], W [C, M / group, K1..Kk], optional B [M]  ->  Y [N, M, O1..Ok]
//   Every input element scatters into the output:
//   Y[n, m, i * stride + t * dilation - pad_begin] += X[n, c, i] * W[c, m - group_start, t]
// for c in m's group. Attributes: group, strides, dilations, pads, auto_pad, output_padding,
// output_shape, kernel_shape (optional; must match W). Output sizes and derived pads follow
// ops/conv_pool_util.h.
//
// FLOPs: 2 * N * C * prod(D) * (M / group) * prod(K) (every input element times every weight
// of its group); bias adds not counted.
//
// Reference kernel: per group, cols = W_g^T [(M/group) * prod(K) x C/group] * X_g, a GEMM
// through ops/gemm_kernel.h over tiles of input positions, then col2im scatters each column row
// into Y with a contiguous loop over input x.
#include <algorithm>
#include <string>

#include "ops/conv_pool_util.h"
#include "ops/gemm_kernel.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct ConvTransposeDims {
  WindowGeometry geo;
  int64_t batch = 0;
  int64_t cin = 0;
  int64_t cout = 0;
  int64_t group = 1;
  int64_t cin_g = 0;
  int64_t cout_g = 0;
};

Result<ConvTransposeDims> conv_transpose_dims(const OpContext& ctx) {
  RETURN_IF_ERROR(require_f32(ctx, 0));
  RETURN_IF_ERROR(require_f32(ctx, 1));
  const Shape& x = ctx.input(0).shape;
  const Shape& w = ctx.input(1).shape;
  RETURN_IF_ERROR(check_spatial_input(ctx, x, "input X"));
  if (w.rank() != x.rank()) {
    return ctx.error("weights W have shape " + w.to_string() + ", expected rank " +
                     std::to_string(x.rank()) + " [C, M / group, kernel...] to match X " +
                     x.to_string());
  }
  ConvTransposeDims d;
  Result<int64_t> group = ctx.attrs().int_or("group", 1);
  if (!group.ok()) return ctx.wrap(group.status());
  d.group = *group;
  if (d.group < 1 || d.group > kMaxDim) {
    return ctx.error("attribute 'group' = " + std::to_string(d.group) + " must be positive");
  }
  d.batch = x[0];
  d.cin = x[1];
  if (w[0] != d.cin) {
    return ctx.error("W " + w.to_string() + " has " + std::to_string(w[0]) +
                     " input channels but X " + x.to_string() + " has " + std::to_string(d.cin));
  }
  if (d.cin % d.group != 0) {
    return ctx.error("input channels " + std::to_string(d.cin) + " are not divisible by group " +
                     std::to_string(d.group));
  }
  d.cin_g = d.cin / d.group;
  d.cout_g = w[1];
  d.cout = d.cout_g * d.group;  // both <= kMaxDim: no overflow
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
  ASSIGN_OR_RETURN(d.geo, transpose_window(ctx, in, kernel));
  return d;
}

Status infer_conv_transpose(const OpContext& ctx, int /*num_outputs*/,
                            std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(ConvTransposeDims d, conv_transpose_dims(ctx));
  std::vector<int64_t> dims = {d.batch, d.cout};
  dims.insert(dims.end(), d.geo.output.begin(), d.geo.output.end());
  outputs->push_back(TensorInfo{DType::kF32, Shape(std::move(dims))});
  return Status();
}

OpCost cost_conv_transpose(const OpContext& ctx, std::span<const TensorInfo> outputs) {
  OpCost c = default_cost(ctx, outputs);
  const Shape& w = ctx.input(1).shape;
  // X elements times the weights of one input channel: W[1] * prod(K) multiply-adds each.
  double macs_per_input = 1;
  for (int i = 1; i < w.rank(); ++i) macs_per_input *= static_cast<double>(w[i]);
  c.flops = 2.0 * static_cast<double>(ctx.input(0).shape.numel()) * macs_per_input;
  return c;
}

// Scatters rows of `cols` ((cout_g * kvol) x np, column j = input position p0 + j) into the
// group's output channels `y` (cout_g planes).
void col2im_add(const Window3& w, const float* cols, int64_t rows, int64_t p0, int64_t np,
                float* y) {
  const int64_t kvol = w.k[0] * w.k[1] * w.k[2];
  const int64_t osp = w.out[0] * w.out[1] * w.out[2];
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t m = r / kvol;
    const int64_t t = r % kvol;
    const int64_t kz = t / (w.k[1] * w.k[2]);
    const int64_t ky = (t / w.k[2]) % w.k[1];
    const int64_t kx = t % w.k[2];
    const int64_t off_z = kz * w.d[0] - w.pb[0];
    const int64_t off_y = ky * w.d[1] - w.pb[1];
    const int64_t off_x = kx * w.d[2] - w.pb[2];
    // Input x positions whose tap kx lands inside the output row.
    const IndexRange valid_x = tap_output_range(w.out[2], w.in[2], w.s[2], off_x);
    const int64_t sx = w.s[2];
    float* ym = y + m * osp;
    const float* crow = cols + r * np;
    for_each_row_segment(
        w.in, p0, np, [&](int64_t z, int64_t yy, int64_t xb, int64_t xe, int64_t local) {
          const int64_t oz = z * w.s[0] + off_z;
          const int64_t oy = yy * w.s[1] + off_y;
          if (oz < 0 || oz >= w.out[0] || oy < 0 || oy >= w.out[1]) return;
          const int64_t lo = std::clamp(valid_x.begin, xb, xe);
          const int64_t hi = std::clamp(valid_x.end, lo, xe);
          float* orow = ym + (oz * w.out[1] + oy) * w.out[2];
          const float* src = crow + local;  // src[ix - xb] is input position (z, yy, ix)
          for (int64_t ix = lo; ix < hi; ++ix) orow[ix * sx + off_x] += src[ix - xb];
        });
  }
}

Status reference_conv_transpose(const OpContext& ctx, std::span<const Tensor> inputs,
                                std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(ConvTransposeDims d, conv_transpose_dims(ctx));
  const Window3 w = to_window3(d.geo);
  const float* x = inputs[0].data<float>();
  const float* wt = inputs[1].data<float>();
  const float* bias = ctx.has_input(2) ? inputs[2].data<float>() : nullptr;
  float* y = outputs[0].data<float>();
  const int64_t isp = d.geo.input_volume();
  const int64_t osp = d.geo.output_volume();
  const int64_t kvol = d.geo.kernel_volume();

  // Phase 1: Y = bias (or 0).
  for (int64_t n = 0; n < d.batch; ++n) {
    for (int64_t m = 0; m < d.cout; ++m) {
      std::fill_n(y + (n * d.cout + m) * osp, osp, bias != nullptr ? bias[m] : 0.f);
    }
  }
  const int64_t rows = d.cout_g * kvol;
  if (d.batch == 0 || rows == 0 || osp == 0 || d.cin_g == 0) return Status();

  // Phase 2: per group and tile of input positions, cols = W_g^T * X_g, then scatter.
  const int64_t tile = std::clamp<int64_t>((int64_t{1} << 20) / rows, 1, isp);
  std::unique_ptr<float[]> cols = alloc_floats(rows * tile);
  if (!cols) return ctx.error("out of memory for transposed-convolution scratch");
  for (int64_t n = 0; n < d.batch; ++n) {
    for (int64_t g = 0; g < d.group; ++g) {
      const float* xg = x + (n * d.cin + g * d.cin_g) * isp;
      // W_g is [cin_g, rows] row-major; its transpose is the A operand.
      const MatrixView a{wt + g * d.cin_g * rows, 1, rows};
      float* yg = y + (n * d.cout + g * d.cout_g) * osp;
      for (int64_t p0 = 0; p0 < isp; p0 += tile) {
        const int64_t np = std::min(tile, isp - p0);
        std::fill_n(cols.get(), rows * np, 0.f);
        Status s = gemm_f32(rows, np, d.cin_g, a, MatrixView{xg + p0, isp, 1}, cols.get(), np);
        if (!s.ok()) return ctx.wrap(s);
        col2im_add(w, cols.get(), rows, p0, np, yg);
      }
    }
  }
  return Status();
}

}  // namespace

const OpSchema kConvTransposeSchema = {
    .kind = OpKind::kConvTranspose,
    .min_inputs = 2,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = true,
    .infer = infer_conv_transpose,
    .cost = cost_conv_transpose,
    .reference = reference_conv_transpose,
};

}  // namespace tessera
