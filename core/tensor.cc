#include "core/tensor.h"

#include <cstring>

#include "core/allocator.h"

namespace tessera {

Result<Tensor> Tensor::create(DType dtype, Shape shape, Layout layout) {
  ASSIGN_OR_RETURN(uint64_t bytes, checked_byte_size(shape, dtype));
  ASSIGN_OR_RETURN(std::shared_ptr<uint8_t> mem, allocate_host(static_cast<size_t>(bytes)));
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.layout_ = layout;
  t.data_ = mem.get();
  t.storage_ = std::move(mem);
  return t;
}

Tensor Tensor::view(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner,
                    Layout layout) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.layout_ = layout;
  t.data_ = data;
  t.storage_ = std::move(owner);
  return t;
}

Tensor Tensor::from_floats(const Shape& shape, std::span<const float> values) {
  Tensor t = create(DType::kF32, shape).value();
  assert(static_cast<int64_t>(values.size()) == t.numel());
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(float));
  return t;
}

Tensor Tensor::from_int64s(const Shape& shape, std::span<const int64_t> values) {
  Tensor t = create(DType::kI64, shape).value();
  assert(static_cast<int64_t>(values.size()) == t.numel());
  if (!values.empty()) std::memcpy(t.raw(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

Tensor Tensor::scalar_f32(float v) {
  return from_floats(Shape{}, std::span<const float>(&v, 1));
}

Result<Tensor> Tensor::clone() const {
  ASSIGN_OR_RETURN(Tensor t, create(dtype_, shape_, layout_));
  if (byte_size() > 0) std::memcpy(t.raw(), data_, byte_size());
  return t;
}

Result<Tensor> Tensor::reshaped(const Shape& shape) const {
  RETURN_IF_ERROR(shape.validate());
  if (shape.numel() != numel()) {
    return invalid_argument("cannot reshape " + describe() + " to " + shape.to_string());
  }
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

int64_t Tensor::int_at(int64_t i) const {
  switch (dtype_) {
    case DType::kI64:
      return data<int64_t>()[i];
    case DType::kI32:
      return data<int32_t>()[i];
    case DType::kI8:
      return data<int8_t>()[i];
    case DType::kU8:
    case DType::kBool:
      return data<uint8_t>()[i];
    case DType::kF32:
      return static_cast<int64_t>(data<float>()[i]);
    case DType::kF16:
      return static_cast<int64_t>(half_to_float(data<uint16_t>()[i]));
  }
  return 0;
}

float Tensor::float_at(int64_t i) const {
  switch (dtype_) {
    case DType::kF32:
      return data<float>()[i];
    case DType::kF16:
      return half_to_float(data<uint16_t>()[i]);
    default:
      return static_cast<float>(int_at(i));
  }
}

std::string Tensor::describe() const {
  return std::string(dtype_name(dtype_)) + shape_.to_string();
}

std::vector<int64_t> tensor_to_int64s(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.int_at(i);
  return v;
}

}  // namespace tessera
