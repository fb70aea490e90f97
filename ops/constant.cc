// Constant: no inputs; outputs the value of exactly one attribute:
//   value         a tensor (any dtype),
//   value_float   an f32 scalar,      value_floats  a 1-D f32 tensor,
//   value_int     an i64 scalar,      value_ints    a 1-D i64 tensor.
// String and sparse values are Unimplemented.
#include <cstring>

#include "ops/registry.h"

namespace tessera {

namespace {

Result<Tensor> constant_value(const OpContext& ctx) {
  const Attributes& a = ctx.attrs();
  const char* const kKnown[] = {"value", "value_float", "value_floats", "value_int", "value_ints"};
  const char* const kUnsupported[] = {"value_string", "value_strings", "sparse_value"};
  for (const char* name : kUnsupported) {
    if (a.has(name))
      return ctx.unsupported(std::string("attribute '") + name + "' is not supported");
  }
  int given = 0;
  for (const char* name : kKnown) given += a.has(name) ? 1 : 0;
  if (given != 1) {
    return ctx.error("exactly one of value, value_float(s), value_int(s) must be set, found " +
                     std::to_string(given));
  }
  if (a.has("value")) {
    Result<Tensor> t = a.get_tensor("value");
    if (!t.ok()) return ctx.wrap(t.status());
    RETURN_IF_ERROR(ctx.wrap(t->shape().validate()));
    if (!t->defined()) return ctx.error("attribute 'value' holds no data");
    return std::move(t).value();
  }
  if (a.has("value_float")) {
    Result<float> v = a.get_float("value_float");
    if (!v.ok()) return ctx.wrap(v.status());
    return Tensor::scalar_f32(*v);
  }
  if (a.has("value_floats")) {
    Result<std::vector<float>> v = a.get_floats("value_floats");
    if (!v.ok()) return ctx.wrap(v.status());
    if (v->empty()) return Tensor::create(DType::kF32, Shape{0});
    return Tensor::from_floats(Shape{static_cast<int64_t>(v->size())}, *v);
  }
  if (a.has("value_int")) {
    Result<int64_t> v = a.get_int("value_int");
    if (!v.ok()) return ctx.wrap(v.status());
    return Tensor::from_int64s(Shape{}, std::span<const int64_t>(&*v, 1));
  }
  Result<std::vector<int64_t>> v = a.get_ints("value_ints");
  if (!v.ok()) return ctx.wrap(v.status());
  if (v->empty()) return Tensor::create(DType::kI64, Shape{0});
  return Tensor::from_int64s(Shape{static_cast<int64_t>(v->size())}, *v);
}

Status infer_constant(const OpContext& ctx, int /*num_outputs*/, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(Tensor t, constant_value(ctx));
  outputs->push_back(TensorInfo{t.dtype(), t.shape()});
  return Status();
}

Status reference_constant(const OpContext& ctx, std::span<const Tensor>,
                          std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(Tensor t, constant_value(ctx));
  if (t.byte_size() > 0) std::memcpy(outputs[0].raw(), t.raw(), t.byte_size());
  return Status();
}

}  // namespace

const OpSchema kConstantSchema = {
    .kind = OpKind::kConstant,
    .min_inputs = 0,
    .max_inputs = 0,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_constant,
    .cost = nullptr,
    .reference = reference_constant,
};

}  // namespace tessera
