// Shapes: a list of non-negative dimensions, with overflow-checked element and byte counts.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace tessera {

// Limits every shape in Tessera obeys; the model validator and shape inference enforce them so
// that no size computation can overflow and no absurd allocation is attempted.
inline constexpr int kMaxRank = 8;
inline constexpr int64_t kMaxDim = int64_t{1} << 31;       // one dimension
inline constexpr int64_t kMaxElements = int64_t{1} << 34;  // one tensor (64 GiB of f32)

class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& dims() { return dims_; }

  // Product of the dimensions (1 for a scalar; 0 when any dimension is 0). Only meaningful for a
  // validated shape (INT64_MAX when the product overflows).
  int64_t numel() const;
  // Checks rank, each dimension and the element count against the limits above. The element
  // limit bounds the product of the non-zero dimensions, so every product of a subset of the
  // dimensions of a valid shape is within kMaxElements too, even for a shape holding nothing.
  Status validate() const;

  // "[1, 3, 224, 224]"
  std::string to_string() const;

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

// Product of dims [begin, end) of `shape`, failing (naming the shape) if a dimension is negative
// or the product exceeds kMaxElements: for shape arithmetic on dims not known to be validated.
Result<int64_t> checked_dims_product(const Shape& shape, int begin, int end);
// numel * dtype_size, failing on overflow or limit violation.
Result<uint64_t> checked_byte_size(const Shape& shape, DType dtype);
// a * b with overflow detection (both non-negative).
bool checked_mul(uint64_t a, uint64_t b, uint64_t* out);
bool checked_add(uint64_t a, uint64_t b, uint64_t* out);

// Normalises a possibly negative axis against `rank`; fails naming `what` if out of range.
Result<int> normalize_axis(int64_t axis, int rank, const char* what);

}  // namespace tessera
