// Softmax, LRN and ReduceMean on the opencl device (kernels/normalization.cl).
#include <limits>
#include <vector>

#include "backends/opencl/opencl_ops.h"

namespace tessera::opencl {

namespace {

Capability check_f32(const OpContext& ctx) {
  return require_f32_input(ctx, 0);
}

Status lower_softmax(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& x = ctx.input(0).shape;
  Result<int64_t> axis_attr = ctx.attrs().int_or("axis", -1);
  if (!axis_attr.ok()) return ctx.wrap(axis_attr.status());
  Result<int> axis = normalize_axis(*axis_attr, x.rank(), "axis");
  if (!axis.ok()) return ctx.wrap(axis.status());
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < *axis; ++d) outer *= x[d];
  for (int d = *axis + 1; d < x.rank(); ++d) inner *= x[d];
  const int64_t len = x.rank() == 0 ? 1 : x[*axis];
  if (outer * inner * len == 0) return Status();
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("normalization", "softmax_f32"));
  b.mem(l.input(0)).mem(l.output(0)).i32(len).i32(inner);
  ASSIGN_OR_RETURN(Launch launch, b.finish({static_cast<size_t>(outer * inner) * 128}, {128}));
  l.add(std::move(launch));
  return Status();
}

Status lower_lrn(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& x = ctx.input(0).shape;
  const Attributes& at = ctx.attrs();
  Result<int64_t> size = at.get_int("size");
  Result<float> alpha = at.float_or("alpha", 1e-4f), beta = at.float_or("beta", 0.75f),
                bias = at.float_or("bias", 1.f);
  for (const Status& s : {size.status(), alpha.status(), beta.status(), bias.status()}) {
    if (!s.ok()) return ctx.wrap(s);
  }
  const int64_t channels = x[1];
  const int64_t inner = x.numel() / std::max<int64_t>(x[0] * channels, 1);
  if (x.numel() == 0) return Status();
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("normalization", "lrn_f32"));
  b.mem(l.input(0)).mem(l.output(0)).i32(channels).i32(inner).i32((*size - 1) / 2);
  b.i32(*size / 2).f32(*alpha / static_cast<float>(*size)).f32(*beta).f32(*bias);
  ASSIGN_OR_RETURN(Launch launch,
                   b.finish({static_cast<size_t>(inner), static_cast<size_t>(x[0] * channels)}));
  l.add(std::move(launch));
  return Status();
}

// The reduced axes of ReduceMean: the `axes` attribute (opsets 11-17) or constant input 1
// (opset 18); none or empty means all, unless noop_with_empty_axes = 1 (then none).
Result<std::vector<bool>> reduced_axes(const OpContext& ctx) {
  const int rank = ctx.input(0).shape.rank();
  std::vector<int64_t> axes;
  if (ctx.attrs().has("axes")) {
    Result<std::vector<int64_t>> a = ctx.attrs().get_ints("axes");
    if (!a.ok()) return ctx.wrap(a.status());
    axes = *a;
  } else if (ctx.has_input(1)) {
    if (ctx.constant(1) == nullptr) return ctx.unsupported("axes (input 1) must be a constant");
    axes = tensor_to_int64s(*ctx.constant(1));
  }
  Result<int64_t> noop = ctx.attrs().int_or("noop_with_empty_axes", 0);
  if (!noop.ok()) return ctx.wrap(noop.status());
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty() && *noop == 0);
  for (int64_t a : axes) {
    Result<int> axis = normalize_axis(a, rank, "axes");
    if (!axis.ok()) return ctx.wrap(axis.status());
    reduced[static_cast<size_t>(*axis)] = true;
  }
  return reduced;
}

Capability check_reduce_mean(const OpContext& ctx) {
  Capability c = require_f32_input(ctx, 0);
  if (!c.supported) return c;
  Result<std::vector<bool>> r = reduced_axes(ctx);
  if (!r.ok()) return Capability::no(r.status().message());
  return Capability::yes();
}

Status lower_reduce_mean(Lowering& l) {
  const OpContext& ctx = l.ctx();
  const Shape& x = ctx.input(0).shape;
  ASSIGN_OR_RETURN(std::vector<bool> reduced, reduced_axes(ctx));
  const int64_t total = l.output_info(0).shape.numel();
  if (total == 0) return Status();
  std::vector<int32_t> kept_dims, kept_strides, red_dims, red_strides;
  int64_t stride = 1, count = 1;
  for (int d = x.rank() - 1; d >= 0; --d) {
    if (reduced[static_cast<size_t>(d)]) {
      red_dims.insert(red_dims.begin(), static_cast<int32_t>(x[d]));
      red_strides.insert(red_strides.begin(), static_cast<int32_t>(stride));
      count *= x[d];
    } else {
      kept_dims.insert(kept_dims.begin(), static_cast<int32_t>(x[d]));
      kept_strides.insert(kept_strides.begin(), static_cast<int32_t>(stride));
    }
    stride *= x[d];
  }
  if (red_dims.empty()) {  // nothing reduced: a copy, walked as one reduced dim of length 1
    red_dims.push_back(1);
    red_strides.push_back(0);
  }
  std::vector<int32_t> meta = {static_cast<int32_t>(kept_dims.size())};
  meta.insert(meta.end(), kept_dims.begin(), kept_dims.end());
  meta.insert(meta.end(), kept_strides.begin(), kept_strides.end());
  meta.push_back(static_cast<int32_t>(red_dims.size()));
  meta.insert(meta.end(), red_dims.begin(), red_dims.end());
  meta.insert(meta.end(), red_strides.begin(), red_strides.end());
  ASSIGN_OR_RETURN(cl_mem meta_buf, l.upload_ints(meta));
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("normalization", "reduce_mean_f32"));
  b.mem(l.input(0)).mem(l.output(0)).mem(meta_buf).i32(total).i32(count);
  b.f32(count == 0 ? std::numeric_limits<float>::quiet_NaN() : 1.f / static_cast<float>(count));
  ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(total, 64) * 64}, {64}));
  l.add(std::move(launch));
  return Status();
}

const OpenCLOp kNormalizationOps[] = {
    {OpKind::kLRN, Execution::kKernels, check_f32, lower_lrn},
    {OpKind::kSoftmax, Execution::kKernels, check_f32, lower_softmax},
    {OpKind::kReduceMean, Execution::kKernels, check_reduce_mean, lower_reduce_mean},
};

}  // namespace

std::span<const OpenCLOp> opencl_normalization_ops() {
  return kNormalizationOps;
}

}  // namespace tessera::opencl
