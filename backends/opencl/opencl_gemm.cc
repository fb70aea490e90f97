// Gemm and MatMul on the opencl device (kernels/gemm.cl).
//
// Every product is one call of a gemm.cl kernel with element strides for A and B, so transposes
// and batch broadcasting need no copies:
//   M >= 5                      -> gemm_f32_tile64x64 (local-memory tiles, 4x4 register blocks)
//   M <= 4, A's and B's k contiguous -> gemm_f32_small_m_dot_x4 (fully connected at batch 1,
//                               transB = 1: float4 loads, B read once for all M rows)
//   M <= 4, B's k contiguous    -> gemm_f32_small_m_dot
//   M <= 4, B's n contiguous    -> gemm_f32_small_m_col
// Gemm's C is a bias broadcast through strides (0 where broadcast), scaled by beta.
#include <algorithm>
#include <vector>

#include "backends/opencl/opencl_ops.h"

namespace tessera::opencl {

namespace {

// One batched product, as gemm.cl takes it.
struct GemmCall {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  cl_mem a = nullptr, b = nullptr, c = nullptr, bias = nullptr;
  int64_t a_off = 0, a_rs = 0, a_cs = 0, a_bs = 0;
  int64_t b_off = 0, b_rs = 0, b_cs = 0, b_bs = 0;
  int64_t c_off = 0, c_rs = 0, c_bs = 0;
  float alpha = 1.f, beta = 1.f;
  bool has_bias = false;
  int64_t bias_off = 0, bias_rs = 0, bias_cs = 0, bias_bs = 0;
};

Status add_gemm(Lowering& l, const GemmCall& g, const KernelActivation& act) {
  if (g.m == 0 || g.n == 0 || g.batch == 0) return Status();
  const bool small_m = g.m <= 4;
  const bool dot_x4 = small_m && g.b_rs == 1 && g.a_cs == 1;
  const char* name = !small_m      ? "gemm_f32_tile64x64"
                     : dot_x4      ? "gemm_f32_small_m_dot_x4"
                     : g.b_rs == 1 ? "gemm_f32_small_m_dot"
                                   : "gemm_f32_small_m_col";
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("gemm", name));
  b.i32(g.m).i32(g.n).i32(g.k);
  b.mem(g.a).i32(g.a_off).i32(g.a_rs).i32(g.a_cs).i32(g.a_bs);
  b.mem(g.b).i32(g.b_off).i32(g.b_rs).i32(g.b_cs).i32(g.b_bs);
  b.mem(g.c).i32(g.c_off).i32(g.c_rs).i32(g.c_bs).f32(g.alpha);
  cl_mem bias = g.bias;
  if (!g.has_bias) {
    ASSIGN_OR_RETURN(bias, l.dummy());
  }
  b.mem(bias).i32(g.has_bias ? 1 : 0).i32(g.bias_off).i32(g.bias_rs).i32(g.bias_cs).i32(g.bias_bs);
  b.f32(g.beta).i32(act.kind).f32(act.alpha).f32(act.beta);
  const size_t batch = static_cast<size_t>(g.batch);
  Result<Launch> launch =
      !small_m ? b.finish({ceil_div(g.n, 64) * 16, ceil_div(g.m, 64) * 16, batch}, {16, 16, 1})
      : dot_x4 ? b.finish({static_cast<size_t>(g.n) * 64, 1, batch}, {64, 1, 1})
      : g.b_rs == 1
          ? b.finish({static_cast<size_t>(g.n) * 64, static_cast<size_t>(g.m), batch}, {64, 1, 1})
          : b.finish({static_cast<size_t>(g.n), static_cast<size_t>(g.m), batch});
  if (!launch.ok()) return launch.status();
  l.add(std::move(*launch));
  return Status();
}

Capability check_f32_inputs(const OpContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    Capability c = require_f32_input(ctx, i);
    if (!c.supported) return c;
  }
  return Capability::yes();
}

Status lower_gemm(Lowering& l) {
  const OpContext& ctx = l.ctx();
  ASSIGN_OR_RETURN(KernelActivation act, kernel_activation(ctx));
  const Attributes& at = ctx.attrs();
  Result<int64_t> trans_a = at.int_or("transA", 0), trans_b = at.int_or("transB", 0);
  Result<float> alpha = at.float_or("alpha", 1.f), beta = at.float_or("beta", 1.f);
  if (!trans_a.ok()) return ctx.wrap(trans_a.status());
  if (!trans_b.ok()) return ctx.wrap(trans_b.status());
  if (!alpha.ok()) return ctx.wrap(alpha.status());
  if (!beta.ok()) return ctx.wrap(beta.status());
  const Shape& sa = ctx.input(0).shape;
  const Shape& sb = ctx.input(1).shape;
  GemmCall g;
  g.m = *trans_a ? sa[1] : sa[0];
  g.k = *trans_a ? sa[0] : sa[1];
  g.n = *trans_b ? sb[0] : sb[1];
  g.a = l.input(0);
  g.a_rs = *trans_a ? 1 : g.k;
  g.a_cs = *trans_a ? g.m : 1;
  g.b = l.input(1);
  g.b_rs = *trans_b ? 1 : g.n;
  g.b_cs = *trans_b ? g.k : 1;
  g.c = l.output(0);
  g.c_rs = g.n;
  g.alpha = *alpha;
  g.beta = *beta;
  if (ctx.has_input(2) && ctx.input(2).shape.numel() > 0) {
    const Shape& sc = ctx.input(2).shape;
    g.has_bias = true;
    g.bias = l.input(2);
    if (sc.rank() == 1) {
      g.bias_cs = sc[0] == 1 ? 0 : 1;
    } else if (sc.rank() == 2) {
      g.bias_rs = sc[0] == 1 ? 0 : sc[1];
      g.bias_cs = sc[1] == 1 ? 0 : 1;
    }
  }
  return add_gemm(l, g, act);
}

Status lower_matmul(Lowering& l) {
  const OpContext& ctx = l.ctx();
  ASSIGN_OR_RETURN(KernelActivation act, kernel_activation(ctx));
  const Shape& sa = ctx.input(0).shape;
  const Shape& sb = ctx.input(1).shape;
  // Promote 1-D operands: A [K] -> [1, K], B [K] -> [K, 1].
  const std::vector<int64_t> da = sa.rank() == 1
                                      ? std::vector<int64_t>{1, sa[0]}
                                      : std::vector<int64_t>(sa.dims().begin(), sa.dims().end());
  const std::vector<int64_t> db = sb.rank() == 1
                                      ? std::vector<int64_t>{sb[0], 1}
                                      : std::vector<int64_t>(sb.dims().begin(), sb.dims().end());
  const int64_t m = da[da.size() - 2], k = da.back(), n = db.back();
  // Batch dims, right-aligned to a common rank.
  const size_t ra = da.size() - 2, rb = db.size() - 2, r = std::max<size_t>({ra, rb, 1});
  std::vector<int64_t> ba(r, 1), bb(r, 1), bo(r, 1);
  for (size_t i = 0; i < ra; ++i) ba[r - ra + i] = da[i];
  for (size_t i = 0; i < rb; ++i) bb[r - rb + i] = db[i];
  int64_t na = 1, nb = 1, no = 1;
  for (size_t i = 0; i < r; ++i) {
    bo[i] = std::max(ba[i], bb[i]);
    na *= ba[i];
    nb *= bb[i];
    no *= bo[i];
  }
  GemmCall g;
  g.k = k;
  g.n = n;
  g.a = l.input(0);
  g.b = l.input(1);
  g.c = l.output(0);
  g.a_rs = k;
  g.a_cs = 1;
  g.b_rs = n;
  g.b_cs = 1;
  g.c_rs = n;
  if (nb == 1) {
    // One weight matrix: A's batch folds into M, one GEMM.
    g.m = m * na;
    return add_gemm(l, g, act);
  }
  g.m = m;
  if (na == nb || na == 1) {
    g.batch = no;
    g.a_bs = na == 1 ? 0 : m * k;
    g.b_bs = k * n;
    g.c_bs = m * n;
    return add_gemm(l, g, act);
  }
  // Mixed broadcasting: one launch per output batch entry.
  std::vector<int64_t> idx(r, 0);
  for (int64_t e = 0; e < no; ++e) {
    int64_t oa = 0, ob = 0, sa_stride = 1, sb_stride = 1;
    for (size_t i = r; i-- > 0;) {
      oa += (ba[i] == 1 ? 0 : idx[i]) * sa_stride;
      ob += (bb[i] == 1 ? 0 : idx[i]) * sb_stride;
      sa_stride *= ba[i];
      sb_stride *= bb[i];
    }
    GemmCall one = g;
    one.a_off = oa * m * k;
    one.b_off = ob * k * n;
    one.c_off = e * m * n;
    RETURN_IF_ERROR(add_gemm(l, one, act));
    for (size_t i = r; i-- > 0;) {
      if (++idx[i] < bo[i]) break;
      idx[i] = 0;
    }
  }
  return Status();
}

const OpenCLOp kGemmOps[] = {
    {OpKind::kGemm, Execution::kKernels, check_f32_inputs, lower_gemm},
    {OpKind::kMatMul, Execution::kKernels, check_f32_inputs, lower_matmul},
};

}  // namespace

std::span<const OpenCLOp> opencl_gemm_ops() {
  return kGemmOps;
}

}  // namespace tessera::opencl
