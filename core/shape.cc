#include "core/shape.h"

namespace tessera {

int64_t Shape::numel() const {
  // A zero anywhere makes the product 0 whatever the other dimensions are; for a validated shape
  // the remaining product cannot overflow (validate bounds the product of the non-zero dims).
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : dims_) {
    if (d == 0) return 0;
    overflow = __builtin_mul_overflow(n, d, &n) || overflow;
  }
  return overflow ? INT64_MAX : n;  // INT64_MAX: not a valid shape
}

Status Shape::validate() const {
  if (rank() > kMaxRank) {
    return out_of_range("rank " + std::to_string(rank()) + " exceeds the limit of " +
                        std::to_string(kMaxRank) + " in shape " + to_string());
  }
  // The element limit applies to the product of the non-zero dimensions, so that it does not
  // depend on the order of the dimensions: [0, 2^31, 2^31, 2^31] holds no element, but code
  // multiplying any subset of its dimensions (the rows of a Flatten, the inner block of a
  // Softmax) would overflow.
  uint64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return invalid_argument("negative dimension in shape " + to_string());
    if (d > kMaxDim) {
      return out_of_range("dimension " + std::to_string(d) + " exceeds the limit of " +
                          std::to_string(kMaxDim) + " in shape " + to_string());
    }
    if (d == 0) continue;
    if (!checked_mul(n, static_cast<uint64_t>(d), &n) || n > static_cast<uint64_t>(kMaxElements)) {
      return out_of_range("element count of shape " + to_string() +
                          (numel() == 0 ? " (without its zero dimensions)" : "") +
                          " exceeds the limit of " + std::to_string(kMaxElements));
    }
  }
  return Status();
}

Result<int64_t> checked_dims_product(const Shape& shape, int begin, int end) {
  uint64_t n = 1;
  for (int d = begin; d < end; ++d) {
    const int64_t x = shape[d];
    if (x < 0 || !checked_mul(n, static_cast<uint64_t>(x), &n) ||
        n > static_cast<uint64_t>(kMaxElements)) {
      return out_of_range("the product of dimensions [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") of shape " + shape.to_string() +
                          " exceeds the limit of " + std::to_string(kMaxElements));
    }
  }
  return static_cast<int64_t>(n);
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}

bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

Result<uint64_t> checked_byte_size(const Shape& shape, DType dtype) {
  RETURN_IF_ERROR(shape.validate());
  uint64_t bytes;
  if (!checked_mul(static_cast<uint64_t>(shape.numel()), dtype_size(dtype), &bytes)) {
    return out_of_range("byte size of shape " + shape.to_string() + " overflows");
  }
  return bytes;
}

Result<int> normalize_axis(int64_t axis, int rank, const char* what) {
  if (axis < -rank || axis >= rank) {
    return out_of_range(std::string(what) + " " + std::to_string(axis) +
                        " is out of range for rank " + std::to_string(rank));
  }
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

}  // namespace tessera
