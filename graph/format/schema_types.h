// Private to graph/format/ and its tests: the generated schema header and conversions between
// Tessera's enums and the schema's.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "graph/format/tessera_model_generated.h"

namespace tessera::format_internal {

// The schema numbers dtypes and layouts as core/dtype.h does, so conversion is a cast.
static_assert(static_cast<int>(fb::DataType::F32) == static_cast<int>(DType::kF32));
static_assert(static_cast<int>(fb::DataType::F16) == static_cast<int>(DType::kF16));
static_assert(static_cast<int>(fb::DataType::I8) == static_cast<int>(DType::kI8));
static_assert(static_cast<int>(fb::DataType::U8) == static_cast<int>(DType::kU8));
static_assert(static_cast<int>(fb::DataType::I32) == static_cast<int>(DType::kI32));
static_assert(static_cast<int>(fb::DataType::I64) == static_cast<int>(DType::kI64));
static_assert(static_cast<int>(fb::DataType::Bool) == static_cast<int>(DType::kBool));
static_assert(static_cast<int>(fb::DataType::MAX) + 1 == kNumDTypes);
static_assert(static_cast<int>(fb::TensorLayout::NCHW) == static_cast<int>(Layout::kNCHW));
static_assert(static_cast<int>(fb::TensorLayout::NHWC) == static_cast<int>(Layout::kNHWC));

inline fb::DataType to_schema(DType t) {
  return static_cast<fb::DataType>(t);
}
inline fb::TensorLayout to_schema(Layout l) {
  return static_cast<fb::TensorLayout>(l);
}

// The size prefix in front of the FlatBuffer.
inline constexpr uint64_t kSizePrefixBytes = sizeof(flatbuffers::uoffset_t);

}  // namespace tessera::format_internal
