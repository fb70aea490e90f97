// NumPy .npy files (format versions 1.0-3.0), the tensor exchange format of the `tessera` tool.
//
// Reads little-endian C-order arrays of f32, f16, i8, u8, i32, i64 and bool; Fortran order,
// big-endian data, object arrays and structured dtypes are refused with a message. The header
// is parsed strictly and every size is checked against the file before anything is allocated.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/status.h"
#include "core/tensor.h"

namespace tessera {

Result<Tensor> read_npy(const std::string& path);
Result<Tensor> parse_npy(std::span<const uint8_t> bytes);
Status write_npy(const std::string& path, const Tensor& t);

}  // namespace tessera
