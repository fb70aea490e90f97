// Where: y = condition ? x : y element-wise over the numpy broadcast of the three inputs.
// condition is bool (any nonzero byte is true); x and y share any dtype (the kernel moves
// elements without reading them).
#include <cstring>

#include "ops/broadcast.h"
#include "ops/broadcast_map.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Status infer_where(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  const TensorInfo& c = ctx.input(0);
  const TensorInfo& x = ctx.input(1);
  const TensorInfo& y = ctx.input(2);
  if (c.dtype != DType::kBool) {
    return ctx.error(std::string("condition has dtype ") + dtype_name(c.dtype) + ", not bool");
  }
  if (x.dtype != y.dtype) {
    return ctx.error(std::string("X and Y have different dtypes: ") + dtype_name(x.dtype) +
                     " and " + dtype_name(y.dtype));
  }
  Result<Shape> s = broadcast_shapes(c.shape, x.shape);
  if (!s.ok()) return ctx.wrap(s.status());
  Result<Shape> shape = broadcast_shapes(*s, y.shape);
  if (!shape.ok()) return ctx.wrap(shape.status());
  outputs->push_back(TensorInfo{x.dtype, std::move(shape).value()});
  return Status();
}

// Elements as unsigned integers of their size: a select moves bits.
template <typename T>
void select(const Tensor& c, const Tensor& x, const Tensor& y, Tensor& out) {
  broadcast_map3<uint8_t, T, T, T>(c, x, y, out,
                                   [](uint8_t k, T a, T b) { return k != 0 ? a : b; });
}

Status reference_where(const OpContext& ctx, std::span<const Tensor> inputs,
                       std::span<Tensor> outputs) {
  switch (dtype_size(inputs[1].dtype())) {
    case 1:
      select<uint8_t>(inputs[0], inputs[1], inputs[2], outputs[0]);
      return Status();
    case 2:
      select<uint16_t>(inputs[0], inputs[1], inputs[2], outputs[0]);
      return Status();
    case 4:
      select<uint32_t>(inputs[0], inputs[1], inputs[2], outputs[0]);
      return Status();
    case 8:
      select<uint64_t>(inputs[0], inputs[1], inputs[2], outputs[0]);
      return Status();
    default:
      return ctx.unsupported(std::string("dtype ") + dtype_name(inputs[1].dtype()));
  }
}

}  // namespace

const OpSchema kWhereSchema = {
    .kind = OpKind::kWhere,
    .min_inputs = 3,
    .max_inputs = 3,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_where,
    .cost = nullptr,
    .reference = reference_where,
};

}  // namespace tessera
