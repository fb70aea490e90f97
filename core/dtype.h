// Element types and memory layouts of tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera {

enum class DType : uint8_t {
  kF32 = 0,
  kF16 = 1,
  kI8 = 2,
  kU8 = 3,
  kI32 = 4,
  kI64 = 5,
  kBool = 6,  // one byte per element; produced by some shape subgraphs, never by layers
};

inline constexpr int kNumDTypes = 7;

// Size of one element in bytes.
size_t dtype_size(DType t);
// "f32", "f16", "i8", "u8", "i32", "i64", "bool".
const char* dtype_name(DType t);
std::optional<DType> dtype_from_name(std::string_view name);
bool dtype_is_valid(int raw);

// The order in which the dimensions of a 4-D activation are stored. Tessera's graph is NCHW (as
// ONNX); backends may keep NHWC internally and convert at slice boundaries.
enum class Layout : uint8_t {
  kNCHW = 0,
  kNHWC = 1,
};

const char* layout_name(Layout l);

// IEEE half <-> float, round-to-nearest-even.
uint16_t float_to_half(float f);
float half_to_float(uint16_t h);

}  // namespace tessera
