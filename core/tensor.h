// Tensor: a shape, an element type, a layout and a reference-counted block of host memory.
//
// Copying a Tensor shares its storage (like a shared_ptr); clone() makes a deep copy. A tensor
// may view memory it does not own (a memory-mapped model file): the storage's deleter keeps the
// owner alive.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/status.h"

namespace tessera {

class Tensor {
 public:
  Tensor() = default;

  // Allocates a zero-filled tensor. Fails if the shape is invalid or the allocation fails.
  static Result<Tensor> create(DType dtype, Shape shape, Layout layout = Layout::kNCHW);
  // Wraps existing memory; `owner` keeps it alive (may be null for memory the caller manages
  // and keeps alive for the tensor's lifetime).
  static Tensor view(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner,
                     Layout layout = Layout::kNCHW);
  // Convenience constructors for tests and constant folding.
  static Tensor from_floats(const Shape& shape, std::span<const float> values);
  static Tensor from_int64s(const Shape& shape, std::span<const int64_t> values);
  static Tensor scalar_f32(float v);

  bool defined() const { return data_ != nullptr || numel() == 0; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  Layout layout() const { return layout_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t numel() const { return shape_.numel(); }
  size_t byte_size() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  template <typename T>
  T* data() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(data_);
  }
  template <typename T>
  std::span<T> span() {
    return {data<T>(), static_cast<size_t>(numel())};
  }
  template <typename T>
  std::span<const T> span() const {
    return {data<T>(), static_cast<size_t>(numel())};
  }

  // A deep copy in freshly allocated memory.
  Result<Tensor> clone() const;
  // Same storage, new shape with the same element count.
  Result<Tensor> reshaped(const Shape& shape) const;
  // Reads element i of an integer or float tensor as int64 (for shape subgraphs).
  int64_t int_at(int64_t i) const;
  // Reads element i of any numeric tensor as float.
  float float_at(int64_t i) const;

  // "f32[1, 3, 224, 224]"
  std::string describe() const;

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  Layout layout_ = Layout::kNCHW;
  void* data_ = nullptr;
  std::shared_ptr<void> storage_;
};

// Converts an integer tensor (i32/i64) to a vector of int64.
std::vector<int64_t> tensor_to_int64s(const Tensor& t);

}  // namespace tessera
