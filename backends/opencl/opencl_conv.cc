// Conv and ConvTranspose on the opencl device (kernels/conv.cl, and gemm.cl for 1x1).
//
// Conv picks one of three kernels per node:
//   1x1, stride 1, no padding, one group  -> gemm_f32_tile64x64 on X directly (W [M, C] x X [C, P])
//   one input channel per group, 2-D      -> conv2d_f32_depthwise_x4
//   anything else (1-3 spatial dims)      -> conv_f32_implicit_gemm_64x64
// Bias and the fused activation are applied in each kernel's epilogue.
#include <vector>

#include "backends/opencl/opencl_ops.h"
#include "ops/conv_pool_util.h"

namespace tessera::opencl {

namespace {

struct ConvShape {
  int64_t batch, cin, cout, group, cin_g, cout_g;
  Window3 w;
};

Result<ConvShape> conv_shape(const OpContext& ctx, bool transpose) {
  const Shape& x = ctx.input(0).shape;
  const Shape& wt = ctx.input(1).shape;
  Result<int64_t> group = ctx.attrs().int_or("group", 1);
  if (!group.ok()) return ctx.wrap(group.status());
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  const std::vector<int64_t> kernel(wt.dims().begin() + 2, wt.dims().end());
  ConvShape s;
  s.batch = x[0];
  s.cin = x[1];
  s.group = *group;
  if (transpose) {
    ASSIGN_OR_RETURN(WindowGeometry geo, transpose_window(ctx, in, kernel));
    s.w = to_window3(geo);
    s.cout_g = wt[1];
    s.cout = s.cout_g * s.group;
    s.cin_g = s.cin / s.group;
  } else {
    ASSIGN_OR_RETURN(WindowGeometry geo, forward_window(ctx, in, kernel, {}));
    s.w = to_window3(geo);
    s.cout = wt[0];
    s.cin_g = wt[1];
    s.cout_g = s.cout / s.group;
  }
  return s;
}

Capability check_conv(const OpContext& ctx) {
  for (int i = 0; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    Capability c = require_f32_input(ctx, i);
    if (!c.supported) return c;
  }
  return Capability::yes();
}

Status lower_conv(Lowering& l) {
  const OpContext& ctx = l.ctx();
  ASSIGN_OR_RETURN(ConvShape s, conv_shape(ctx, false));
  ASSIGN_OR_RETURN(KernelActivation act, kernel_activation(ctx));
  const Window3& w = s.w;
  const int64_t isp = w.in[0] * w.in[1] * w.in[2];
  const int64_t osp = w.out[0] * w.out[1] * w.out[2];
  const int64_t kvol = w.k[0] * w.k[1] * w.k[2];
  if (s.batch == 0 || s.cout == 0 || osp == 0) return Status();
  const bool has_bias = ctx.has_input(2);
  cl_mem bias = has_bias ? l.input(2) : nullptr;
  if (!has_bias) {
    ASSIGN_OR_RETURN(bias, l.dummy());
  }
  bool pointwise = kvol == 1 && s.group == 1;
  for (int d = 0; d < 3; ++d) pointwise = pointwise && w.s[d] == 1 && w.pb[d] == 0 && w.pe[d] == 0;

  if (pointwise) {
    ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("gemm", "gemm_f32_tile64x64"));
    b.i32(s.cout).i32(osp).i32(s.cin);
    b.mem(l.input(1)).i32(0).i32(s.cin).i32(1).i32(0);
    b.mem(l.input(0)).i32(0).i32(isp).i32(1).i32(s.cin * isp);
    b.mem(l.output(0)).i32(0).i32(osp).i32(s.cout * osp);
    b.f32(1.f).mem(bias).i32(has_bias ? 1 : 0).i32(0).i32(1).i32(0).i32(0).f32(1.f);
    b.i32(act.kind).f32(act.alpha).f32(act.beta);
    ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(osp, 64) * 16, ceil_div(s.cout, 64) * 16,
                                              static_cast<size_t>(s.batch)},
                                             {16, 16, 1}));
    l.add(std::move(launch));
    return Status();
  }

  if (s.cin_g == 1 && w.in[0] == 1 && w.k[0] == 1) {
    ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("conv", "conv2d_f32_depthwise_x4"));
    b.mem(l.input(0)).mem(l.input(1)).mem(bias).i32(has_bias ? 1 : 0).mem(l.output(0));
    b.i32(s.cin).i32(s.cout).i32(s.cout_g).i32(w.in[1]).i32(w.in[2]).i32(w.out[1]).i32(w.out[2]);
    b.i32(w.k[1]).i32(w.k[2]).i32(w.s[1]).i32(w.s[2]).i32(w.d[1]).i32(w.d[2]);
    b.i32(w.pb[1]).i32(w.pb[2]).i32(act.kind).f32(act.alpha).f32(act.beta);
    ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(w.out[2], 4), static_cast<size_t>(w.out[1]),
                                              static_cast<size_t>(s.batch * s.cout)}));
    l.add(std::move(launch));
    return Status();
  }

  // General: implicit GEMM. ktab[k] for k = (c, kz, ky, kx).
  const int64_t kc = s.cin_g * kvol;
  std::vector<int32_t> ktab;
  ktab.reserve(static_cast<size_t>(kc * 4));
  for (int64_t c = 0; c < s.cin_g; ++c) {
    for (int64_t kz = 0; kz < w.k[0]; ++kz) {
      for (int64_t ky = 0; ky < w.k[1]; ++ky) {
        for (int64_t kx = 0; kx < w.k[2]; ++kx) {
          ktab.push_back(static_cast<int32_t>(c * isp));
          ktab.push_back(static_cast<int32_t>(kz * w.d[0] - w.pb[0]));
          ktab.push_back(static_cast<int32_t>(ky * w.d[1] - w.pb[1]));
          ktab.push_back(static_cast<int32_t>(kx * w.d[2] - w.pb[2]));
        }
      }
    }
  }
  ASSIGN_OR_RETURN(cl_mem ktab_buf, l.upload_ints(ktab));
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("conv", "conv_f32_implicit_gemm_64x64"));
  b.i32(s.cout_g).i32(osp).i32(kc).i32(s.group);
  b.mem(l.input(0)).i32(s.cin * isp).i32(s.cin_g * isp);
  b.mem(l.input(1)).i32(s.cout_g * kc).mem(ktab_buf);
  b.i32(w.in[0]).i32(w.in[1]).i32(w.in[2]).i32(w.out[1]).i32(w.out[2]);
  b.i32(w.s[0]).i32(w.s[1]).i32(w.s[2]);
  b.mem(l.output(0)).i32(s.cout * osp).i32(s.cout_g * osp);
  b.mem(bias).i32(has_bias ? 1 : 0).i32(act.kind).f32(act.alpha).f32(act.beta);
  ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(osp, 64) * 16, ceil_div(s.cout_g, 64) * 16,
                                            static_cast<size_t>(s.batch * s.group)},
                                           {16, 16, 1}));
  l.add(std::move(launch));
  return Status();
}

Status lower_conv_transpose(Lowering& l) {
  const OpContext& ctx = l.ctx();
  ASSIGN_OR_RETURN(ConvShape s, conv_shape(ctx, true));
  ASSIGN_OR_RETURN(KernelActivation act, kernel_activation(ctx));
  const int64_t total = l.output_info(0).shape.numel();
  if (total == 0) return Status();
  const Window3& w = s.w;
  std::vector<int32_t> geo;
  for (const int64_t* v : {w.in, w.out, w.k, w.s, w.d, w.pb}) {
    for (int d = 0; d < 3; ++d) geo.push_back(static_cast<int32_t>(v[d]));
  }
  geo.push_back(static_cast<int32_t>(s.cin));
  geo.push_back(static_cast<int32_t>(s.cout));
  geo.push_back(static_cast<int32_t>(s.group));
  ASSIGN_OR_RETURN(cl_mem geo_buf, l.upload_ints(geo));
  const bool has_bias = ctx.has_input(2);
  cl_mem bias = has_bias ? l.input(2) : nullptr;
  if (!has_bias) {
    ASSIGN_OR_RETURN(bias, l.dummy());
  }
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("conv", "conv_transpose_f32_direct"));
  b.mem(l.input(0)).mem(l.input(1)).mem(bias).i32(has_bias ? 1 : 0).mem(l.output(0));
  b.mem(geo_buf).i32(total).i32(act.kind).f32(act.alpha).f32(act.beta);
  ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(total, 64) * 64}, {64}));
  l.add(std::move(launch));
  return Status();
}

const OpenCLOp kConvOps[] = {
    {OpKind::kConv, Execution::kKernels, check_conv, lower_conv},
    {OpKind::kConvTranspose, Execution::kKernels, check_conv, lower_conv_transpose},
};

}  // namespace

std::span<const OpenCLOp> opencl_conv_ops() {
  return kConvOps;
}

}  // namespace tessera::opencl
