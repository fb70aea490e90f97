// Flatten: reshapes to 2-D [d_0 * ... * d_{axis-1}, d_axis * ... * d_{n-1}]. `axis` defaults to
// 1 and lies in [-rank, rank] (axis 0 gives [1, numel]). Any dtype; the kernel copies bytes.
#include "ops/data_movement.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_flatten(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& in = ctx.input(0);
  const int rank = in.shape.rank();
  Result<int64_t> axis = ctx.attrs().int_or("axis", 1);
  if (!axis.ok()) return ctx.wrap(axis.status());
  if (*axis < -rank || *axis > rank) {
    return ctx.error("axis " + std::to_string(*axis) + " is out of range [" +
                     std::to_string(-rank) + ", " + std::to_string(rank) + "] for shape " +
                     in.shape.to_string());
  }
  const int a = static_cast<int>(*axis < 0 ? *axis + rank : *axis);
  // Checked: the products of a validated shape's dims are bounded, but this must not be UB
  // whatever shape it is given.
  Result<int64_t> rows = checked_dims_product(in.shape, 0, a);
  if (!rows.ok()) return ctx.wrap(rows.status());
  Result<int64_t> cols = checked_dims_product(in.shape, a, rank);
  if (!cols.ok()) return ctx.wrap(cols.status());
  outputs->push_back(TensorInfo{in.dtype, Shape{*rows, *cols}});
  return Status();
}

Status reference_flatten(const OpContext&, std::span<const Tensor> inputs,
                         std::span<Tensor> outputs) {
  copy_tensor_bytes(inputs[0], &outputs[0]);
  return Status();
}

}  // namespace

const OpSchema kFlattenSchema = {
    .kind = OpKind::kFlatten,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_flatten,
    .cost = nullptr,
    .reference = reference_flatten,
};

}  // namespace tessera
