// Element-wise ops on the opencl device (kernels/elementwise.cl): the activation ops, the
// broadcasting arithmetic Add/Sub/Mul/Div, and inference BatchNormalization as a per-channel
// y = (x - mean) * a + bias (a folded at compile time when its parameters are constants).
#include <cmath>
#include <vector>

#include "backends/opencl/opencl_ops.h"

namespace tessera::opencl {

namespace {

// ---- Activations ----------------------------------------------------------------------------

Capability check_activation(const OpContext& ctx) {
  Capability c = require_f32_input(ctx, 0);
  if (!c.supported) return c;
  Result<std::optional<Activation>> a = activation_of_node(ctx);
  if (!a.ok()) return Capability::no(a.status().message());
  return Capability::yes();
}

Status lower_activation(Lowering& l) {
  const OpContext& ctx = l.ctx();
  Result<std::optional<Activation>> a = activation_of_node(ctx);
  if (!a.ok()) return ctx.wrap(a.status());
  if (!a->has_value()) return ctx.unsupported("not an activation");
  const Activation& act = **a;
  const int64_t n = l.output_info(0).shape.numel();
  if (n == 0) return Status();
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("elementwise", "unary_f32_x4"));
  b.mem(l.input(0)).mem(l.output(0)).i32(n).i32(static_cast<int>(act.kind)).f32(act.alpha);
  b.f32(act.beta);
  ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(n, 4)}));
  l.add(std::move(launch));
  return Status();
}

// ---- Broadcasting arithmetic ----------------------------------------------------------------

Capability check_binary(const OpContext& /*ctx*/) {
  return Capability::yes();  // f32, and the i32 / i64 of shape arithmetic (infer checks dtypes)
}

// The output shape with adjacent dims merged where both inputs walk them alike, and each
// input's element strides (0 where broadcast).
struct MergedBroadcast {
  std::vector<int64_t> dims, a, b;
};

MergedBroadcast merge_broadcast(const Shape& out, const Shape& sa, const Shape& sb) {
  const int r = out.rank();
  std::vector<int64_t> dims, as, bs;
  auto strides_of = [&](const Shape& s) {
    std::vector<int64_t> st(static_cast<size_t>(r), 0);
    int64_t stride = 1;
    for (int d = r - 1; d >= 0; --d) {
      const int sd = d - (r - s.rank());
      const int64_t len = sd >= 0 ? s[sd] : 1;
      st[static_cast<size_t>(d)] = len == 1 ? 0 : stride;
      stride *= len;
    }
    return st;
  };
  const std::vector<int64_t> fa = strides_of(sa), fb = strides_of(sb);
  for (int d = 0; d < r; ++d) {
    const size_t ud = static_cast<size_t>(d);
    if (out[d] == 1) continue;  // size-1 dims do not move anything
    if (!dims.empty()) {
      // Merge into the previous dim when both inputs continue contiguously (or stay put).
      const int64_t len = out[d];
      const bool a_ok = as.back() == fa[ud] * len;
      const bool b_ok = bs.back() == fb[ud] * len;
      if (a_ok && b_ok) {
        dims.back() *= len;
        as.back() = fa[ud];
        bs.back() = fb[ud];
        continue;
      }
    }
    dims.push_back(out[d]);
    as.push_back(fa[ud]);
    bs.push_back(fb[ud]);
  }
  if (dims.empty()) {
    dims.push_back(1);
    as.push_back(0);
    bs.push_back(0);
  }
  return {dims, as, bs};
}

// The merged broadcast as the kernels' meta table: [dims, a strides, b strides].
std::vector<int32_t> broadcast_meta(const MergedBroadcast& mb) {
  std::vector<int32_t> meta;
  for (const std::vector<int64_t>* v : {&mb.dims, &mb.a, &mb.b}) {
    for (int64_t x : *v) meta.push_back(static_cast<int32_t>(x));
  }
  return meta;
}

// i32 / i64 (shape arithmetic): always the broadcasting kernel; Div checks for zero divisors.
Status lower_integer_binary(Lowering& l, int op, const MergedBroadcast& mb, int64_t n) {
  const DType dtype = l.ctx().input(0).dtype;
  if (dtype != DType::kI32 && dtype != DType::kI64) {
    return l.ctx().unsupported(std::string("dtype ") + dtype_name(dtype));
  }
  ASSIGN_OR_RETURN(cl_mem meta_buf, l.upload_ints(broadcast_meta(mb)));
  cl_mem bad = nullptr;
  if (op == 3) {
    ASSIGN_OR_RETURN(bad, l.run_check("integer division by zero in output"));
  } else {
    ASSIGN_OR_RETURN(bad, l.dummy());  // never written
  }
  const int64_t rank = static_cast<int64_t>(mb.dims.size());
  const int64_t inner = mb.dims.back(), outer = n / inner;
  ASSIGN_OR_RETURN(LaunchBuilder b,
                   l.kernel("elementwise", dtype == DType::kI32 ? "binary_i32_broadcast"
                                                                : "binary_i64_broadcast"));
  b.mem(l.input(0)).mem(l.input(1)).mem(l.output(0)).mem(meta_buf).mem(bad).i32(rank);
  b.i32(inner).i32(outer).i32(op);
  ASSIGN_OR_RETURN(Launch launch,
                   b.finish({static_cast<size_t>(inner), static_cast<size_t>(outer)}));
  l.add(std::move(launch));
  return Status();
}

Status lower_binary(Lowering& l, int op) {
  const OpContext& ctx = l.ctx();
  ASSIGN_OR_RETURN(KernelActivation act, kernel_activation(ctx));
  const Shape& out = l.output_info(0).shape;
  const int64_t n = out.numel();
  if (n == 0) return Status();
  const MergedBroadcast mb = merge_broadcast(out, ctx.input(0).shape, ctx.input(1).shape);
  const DType dtype = ctx.input(0).dtype;
  if (dtype != DType::kF32) return lower_integer_binary(l, op, mb, n);
  if (mb.dims.size() == 1 && mb.a[0] == 1 && mb.b[0] == 1) {
    ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("elementwise", "binary_f32_same_x4"));
    b.mem(l.input(0)).mem(l.input(1)).mem(l.output(0)).i32(n).i32(op);
    b.i32(act.kind).f32(act.alpha).f32(act.beta);
    ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(n, 4)}));
    l.add(std::move(launch));
    return Status();
  }
  ASSIGN_OR_RETURN(cl_mem meta_buf, l.upload_ints(broadcast_meta(mb)));
  const int64_t rank = static_cast<int64_t>(mb.dims.size());
  const int64_t inner = mb.dims.back(), outer = n / inner;
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("elementwise", "binary_f32_broadcast"));
  b.mem(l.input(0)).mem(l.input(1)).mem(l.output(0)).mem(meta_buf).i32(rank).i32(inner);
  b.i32(outer).i32(op).i32(act.kind).f32(act.alpha).f32(act.beta);
  ASSIGN_OR_RETURN(Launch launch,
                   b.finish({static_cast<size_t>(inner), static_cast<size_t>(outer)}));
  l.add(std::move(launch));
  return Status();
}

Status lower_add(Lowering& l) {
  return lower_binary(l, 0);
}
Status lower_sub(Lowering& l) {
  return lower_binary(l, 1);
}
Status lower_mul(Lowering& l) {
  return lower_binary(l, 2);
}
Status lower_div(Lowering& l) {
  return lower_binary(l, 3);
}

// ---- BatchNormalization ---------------------------------------------------------------------

Capability check_batch_norm(const OpContext& ctx) {
  for (int i = 0; i < 5; ++i) {
    Capability c = require_f32_input(ctx, i);
    if (!c.supported) return c;
  }
  return Capability::yes();
}

// y = (x - mean) * a + bias with a = scale / sqrt(var + eps): computed in double on the host when
// scale and var are constants (the usual inference graph), by a kernel on the device otherwise.
Status lower_batch_norm(Lowering& l) {
  const OpContext& ctx = l.ctx();
  ASSIGN_OR_RETURN(KernelActivation act, kernel_activation(ctx));
  Result<float> eps = ctx.attrs().float_or("epsilon", 1e-5f);
  if (!eps.ok()) return ctx.wrap(eps.status());
  const Shape& x = ctx.input(0).shape;
  const int64_t channels = x[1];
  const int64_t inner = x.numel() / std::max<int64_t>(x[0] * channels, 1);
  if (x.numel() == 0) return Status();
  cl_mem a_buf = nullptr;
  if (ctx.constant(1) != nullptr && ctx.constant(4) != nullptr) {
    const float* gamma = ctx.constant(1)->data<float>();
    const float* var = ctx.constant(4)->data<float>();
    std::vector<float> a(static_cast<size_t>(channels));
    for (int64_t c = 0; c < channels; ++c) {
      a[static_cast<size_t>(c)] =
          static_cast<float>(static_cast<double>(gamma[c]) /
                             std::sqrt(static_cast<double>(var[c]) + static_cast<double>(*eps)));
    }
    ASSIGN_OR_RETURN(a_buf, l.upload_floats(a));
  } else {
    ASSIGN_OR_RETURN(a_buf, l.scratch(static_cast<size_t>(channels) * sizeof(float)));
    ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("elementwise", "batch_norm_coefficients_f32"));
    b.mem(l.input(1)).mem(l.input(4)).mem(a_buf).f32(*eps).i32(channels);
    ASSIGN_OR_RETURN(Launch launch, b.finish({static_cast<size_t>(channels)}));
    l.add(std::move(launch));
  }
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("elementwise", "batch_norm_f32_x4"));
  b.mem(l.input(0)).mem(l.output(0)).mem(a_buf).mem(l.input(3)).mem(l.input(2)).i32(channels);
  b.i32(inner).i32(act.kind).f32(act.alpha).f32(act.beta);
  ASSIGN_OR_RETURN(Launch launch,
                   b.finish({ceil_div(inner, 4), static_cast<size_t>(x[0] * channels)}));
  l.add(std::move(launch));
  return Status();
}

const OpenCLOp kElementwiseOps[] = {
    {OpKind::kBatchNormalization, Execution::kKernels, check_batch_norm, lower_batch_norm},
    {OpKind::kRelu, Execution::kKernels, check_activation, lower_activation},
    {OpKind::kLeakyRelu, Execution::kKernels, check_activation, lower_activation},
    {OpKind::kClip, Execution::kKernels, check_activation, lower_activation},
    {OpKind::kSigmoid, Execution::kKernels, check_activation, lower_activation},
    {OpKind::kHardSigmoid, Execution::kKernels, check_activation, lower_activation},
    {OpKind::kHardSwish, Execution::kKernels, check_activation, lower_activation},
    {OpKind::kTanh, Execution::kKernels, check_activation, lower_activation},
    {OpKind::kAdd, Execution::kKernels, check_binary, lower_add},
    {OpKind::kSub, Execution::kKernels, check_binary, lower_sub},
    {OpKind::kMul, Execution::kKernels, check_binary, lower_mul},
    {OpKind::kDiv, Execution::kKernels, check_binary, lower_div},
};

}  // namespace

std::span<const OpenCLOp> opencl_elementwise_ops() {
  return kElementwiseOps;
}

}  // namespace tessera::opencl
