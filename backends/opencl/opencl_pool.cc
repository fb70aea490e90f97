// MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool on the opencl device
// (kernels/pool.cl). Window geometry comes from ops/conv_pool_util.h, as in the reference.
#include <vector>

#include "backends/opencl/opencl_ops.h"
#include "ops/conv_pool_util.h"

namespace tessera::opencl {

namespace {

Capability check_pool(const OpContext& ctx) {
  return require_f32_input(ctx, 0);
}

Status lower_window_pool(Lowering& l, bool average) {
  const OpContext& ctx = l.ctx();
  const Shape& x = ctx.input(0).shape;
  const int rank = x.rank() - 2;
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, read_pool_kernel(ctx, rank));
  ASSIGN_OR_RETURN(bool ceil_mode, read_flag(ctx, "ceil_mode"));
  const std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  ASSIGN_OR_RETURN(WindowGeometry geo, forward_window(ctx, in, kernel, {ceil_mode, true}));
  const Window3 w = to_window3(geo);
  const int64_t total = l.output_info(0).shape.numel();
  if (total == 0) return Status();
  std::vector<int32_t> table;
  for (const int64_t* v : {w.in, w.out, w.k, w.s, w.d, w.pb, w.pe}) {
    for (int d = 0; d < 3; ++d) table.push_back(static_cast<int32_t>(v[d]));
  }
  ASSIGN_OR_RETURN(cl_mem geo_buf, l.upload_ints(table));
  ASSIGN_OR_RETURN(LaunchBuilder b,
                   l.kernel("pool", average ? "pool_f32_average" : "pool_f32_max"));
  b.mem(l.input(0)).mem(l.output(0)).mem(geo_buf).i32(total);
  if (average) {
    ASSIGN_OR_RETURN(bool include_pad, read_flag(ctx, "count_include_pad"));
    b.i32(include_pad ? 1 : 0);
  }
  ASSIGN_OR_RETURN(Launch launch, b.finish({ceil_div(total, 64) * 64}, {64}));
  l.add(std::move(launch));
  return Status();
}

Status lower_max_pool(Lowering& l) {
  return lower_window_pool(l, false);
}
Status lower_average_pool(Lowering& l) {
  return lower_window_pool(l, true);
}

Status lower_global_pool(Lowering& l, int mode) {
  const Shape& x = l.ctx().input(0).shape;
  const int64_t planes = x[0] * x[1];
  const int64_t plane = x.numel() / std::max<int64_t>(planes, 1);
  if (planes == 0) return Status();
  ASSIGN_OR_RETURN(LaunchBuilder b, l.kernel("pool", "global_pool_f32"));
  b.mem(l.input(0)).mem(l.output(0)).i32(plane).i32(mode);
  ASSIGN_OR_RETURN(Launch launch, b.finish({static_cast<size_t>(planes) * 64}, {64}));
  l.add(std::move(launch));
  return Status();
}

Status lower_global_average_pool(Lowering& l) {
  return lower_global_pool(l, 0);
}
Status lower_global_max_pool(Lowering& l) {
  return lower_global_pool(l, 1);
}

const OpenCLOp kPoolOps[] = {
    {OpKind::kMaxPool, Execution::kKernels, check_pool, lower_max_pool},
    {OpKind::kAveragePool, Execution::kKernels, check_pool, lower_average_pool},
    {OpKind::kGlobalAveragePool, Execution::kKernels, check_pool, lower_global_average_pool},
    {OpKind::kGlobalMaxPool, Execution::kKernels, check_pool, lower_global_max_pool},
};

}  // namespace

std::span<const OpenCLOp> opencl_pool_ops() {
  return kPoolOps;
}

}  // namespace tessera::opencl
