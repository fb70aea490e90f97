#include "core/status.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace tessera {
namespace {

Result<int> half_of(int x) {
  if (x % 2) return invalid_argument("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> quarter_of(int x) {
  ASSIGN_OR_RETURN(int h, half_of(x));
  ASSIGN_OR_RETURN(int q, half_of(h));
  return q;
}

TEST(Status, OkIsCheapAndDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.to_string(), "OK");
}

TEST(Status, ErrorCarriesCodeAndMessage) {
  Status s = out_of_range("too big");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_EQ(s.to_string(), "OutOfRange: too big");
  EXPECT_EQ(s.with_context("file.tsr").message(), "file.tsr: too big");
}

TEST(Result, PropagatesThroughMacros) {
  EXPECT_EQ(quarter_of(12).value(), 3);
  Result<int> r = quarter_of(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
}

TEST(Shape, ValidatesLimits) {
  EXPECT_TRUE(Shape({1, 3, 224, 224}).validate().ok());
  EXPECT_EQ(Shape({1, -3}).validate().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Shape({kMaxDim + 1}).validate().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Shape({1 << 20, 1 << 20, 1 << 20}).validate().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(Shape(std::vector<int64_t>(kMaxRank + 1, 1)).validate().code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(Shape({}).numel(), 1);
}

// Issue 28 (zero_dim_*.onnx): the element limit used to be checked on the running product, so
// [0, 2^31, 2^31, 2^31] passed (the product stays 0) while [2^31, 2^31, 2^31, 0] did not, and
// code multiplying some of the dims of the first then overflowed int64.
TEST(Shape, ElementLimitDoesNotDependOnDimensionOrder) {
  const int64_t big = int64_t{1} << 31;
  for (const Shape& s : {Shape{0, big, big, big}, Shape{big, big, big, 0}, Shape{big, 0, big, big},
                         Shape{0, big, big}}) {
    SCOPED_TRACE(s.to_string());
    Status v = s.validate();
    EXPECT_EQ(v.code(), StatusCode::kOutOfRange) << v.to_string();
    EXPECT_NE(v.message().find("without its zero dimensions"), std::string::npos) << v.message();
    EXPECT_EQ(s.numel(), 0);  // and no overflow computing it
  }
  // Empty tensors within the limits stay valid, however long their other dimensions.
  EXPECT_TRUE(Shape({0, kMaxDim}).validate().ok());
  EXPECT_TRUE(Shape({kMaxDim, 8, 0}).validate().ok());
  EXPECT_EQ(Shape({kMaxDim, 8, 0}).numel(), 0);
  EXPECT_EQ(Shape({big, big, big}).numel(), INT64_MAX);  // invalid: saturates, no UB
}

TEST(Shape, CheckedDimsProduct) {
  const int64_t big = int64_t{1} << 31;
  const Shape s{0, big, big, big};
  EXPECT_EQ(checked_dims_product(s, 0, 2).value(), 0);
  EXPECT_EQ(checked_dims_product(s, 1, 2).value(), big);
  EXPECT_EQ(checked_dims_product(s, 2, 2).value(), 1);
  Result<int64_t> over = checked_dims_product(s, 1, 4);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(over.status().message().find("[1, 4)"), std::string::npos) << over.status().message();
  EXPECT_FALSE(checked_dims_product(Shape{2, -1}, 0, 2).ok());
}

// The API boundaries (CLI main, C API) turn any exception into a Status with this.
TEST(Status, FromCurrentException) {
  auto from = [](auto thrower) {
    try {
      thrower();
    } catch (...) {
      return status_from_current_exception("load");
    }
    return Status();
  };
  Status oom = from([] { throw std::bad_alloc(); });
  EXPECT_EQ(oom.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.message(), "load: out of memory (std::bad_alloc)");
  Status len = from([] { throw std::length_error("vector::reserve"); });
  EXPECT_EQ(len.code(), StatusCode::kInternal);
  EXPECT_EQ(len.message(), "load: unexpected exception: vector::reserve");
  Status odd = from([] { throw 42; });
  EXPECT_EQ(odd.code(), StatusCode::kInternal);
  EXPECT_EQ(odd.message(), "load: unexpected exception of unknown type");
  try {
    throw std::runtime_error("x");
  } catch (...) {
    EXPECT_EQ(status_from_current_exception("").message(), "unexpected exception: x");
  }
}

TEST(Shape, NormalizesAxes) {
  EXPECT_EQ(normalize_axis(-1, 4, "axis").value(), 3);
  EXPECT_FALSE(normalize_axis(4, 4, "axis").ok());
  EXPECT_FALSE(normalize_axis(-5, 4, "axis").ok());
}

TEST(Tensor, CreateIsAlignedAndZeroed) {
  Tensor t = Tensor::create(DType::kF32, Shape{3, 5}).value();
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw()) % 64, 0u);
  for (float v : t.span<float>()) EXPECT_EQ(v, 0.f);
  EXPECT_EQ(t.byte_size(), 60u);
  EXPECT_EQ(t.describe(), "f32[3, 5]");
}

TEST(Tensor, RefusesAbsurdShapes) {
  EXPECT_FALSE(Tensor::create(DType::kF32, Shape{kMaxDim, kMaxDim}).ok());
}

TEST(DType, HalfRoundTrips) {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 0.333251953125f}) {
    EXPECT_EQ(half_to_float(float_to_half(f)), f) << f;
  }
  EXPECT_TRUE(std::isinf(half_to_float(float_to_half(1e6f))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(NAN))));
}

TEST(Status, QuoteNameEscapesControlBytesAndCutsLongNames) {
  EXPECT_EQ(quote_name("conv1"), "'conv1'");
  EXPECT_EQ(quote_name(std::string("a\nb\x1b[2Jc\x7f\\'\0", 12)),
            "'a\\nb\\x1b[2Jc\\x7f\\\\\\'\\x00'");
  EXPECT_EQ(quote_name(std::string(300, 'x')), "'" + std::string(256, 'x') + "...'");
  EXPECT_EQ(quote_name("caf\xc3\xa9"), "'caf\xc3\xa9'");  // UTF-8 passes through
  // Text from outside (a driver's message): the same escapes, its own quotes kept, a cap.
  EXPECT_EQ(untrusted_text("node 'a\x1b[2J' failed\n"), "node 'a\\x1b[2J' failed\\n");
  EXPECT_EQ(untrusted_text(std::string(10, 'y'), 4), "yyyy...");
}

}  // namespace
}  // namespace tessera
