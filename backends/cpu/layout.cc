#include "backends/cpu/layout.h"

#include <algorithm>
#include <cstring>

namespace tessera::cpu {

Shape Operand::physical_shape() const {
  if (layout == Layout::kNHWC && shape.rank() == 4)
    return Shape{shape[0], shape[2], shape[3], shape[1]};
  return shape;
}

bool layout_trivial(const Shape& s) {
  return s.rank() == 4 && (s[1] == 1 || s[2] * s[3] == 1);
}

void Kernel::choose_layouts(std::span<const Layout> /*available*/, std::span<Layout> wanted,
                            std::span<Layout> produced) const {
  std::fill(wanted.begin(), wanted.end(), Layout::kNCHW);
  std::fill(produced.begin(), produced.end(), Layout::kNCHW);
}

namespace {

constexpr int64_t kTile = 32;

// dst[j][i] = src[i][j] for an rows x cols block of a matrix with leading dims ld_src / ld_dst.
void transpose_block(const float* src, float* dst, int64_t rows, int64_t cols, int64_t ld_src,
                     int64_t ld_dst) {
  for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
    const int64_t i1 = std::min(rows, i0 + kTile);
    for (int64_t j0 = 0; j0 < cols; j0 += kTile) {
      const int64_t j1 = std::min(cols, j0 + kTile);
      for (int64_t i = i0; i < i1; ++i) {
        const float* s = src + i * ld_src;
        for (int64_t j = j0; j < j1; ++j) dst[j * ld_dst + i] = s[j];
      }
    }
  }
}

// Transposes n matrices rows x cols -> cols x rows, split over the pool into blocks of up to
// kTile rows by a multiple of kTile columns holding >= kBlockElems elements: a 3-channel image
// (rows = 3) still gets one block per 2-3 K pixels, so the input conversion at a slice boundary
// is spread over the threads too. Below kSerialElems in all it stays on the calling thread
// (a fork/join costs more than the copy).
void transpose_batched(const float* src, float* dst, int64_t n, int64_t rows, int64_t cols,
                       ThreadPool* pool) {
  constexpr int64_t kBlockElems = 8192, kSerialElems = 16384;
  if (n <= 0 || rows <= 0 || cols <= 0) return;
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  const int64_t tile_rows = std::min(rows, kTile);
  const int64_t col_block =
      std::min(cols, (std::max<int64_t>(1, kBlockElems / tile_rows) + kTile - 1) / kTile * kTile);
  const int64_t col_blocks = (cols + col_block - 1) / col_block;
  auto body = [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      const int64_t task = static_cast<int64_t>(t);
      const int64_t img = task / (row_tiles * col_blocks);
      const int64_t r0 = (task / col_blocks % row_tiles) * kTile;
      const int64_t c0 = task % col_blocks * col_block;
      const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + col_block);
      const float* s = src + img * rows * cols;
      float* d = dst + img * rows * cols;
      transpose_block(s + r0 * cols + c0, d + c0 * rows + r0, r1 - r0, c1 - c0, cols, rows);
    }
  };
  const size_t tasks = static_cast<size_t>(n * row_tiles * col_blocks);
  if (pool == nullptr || n * rows * cols < kSerialElems) {
    body(0, tasks);
  } else {
    pool->parallel_for(tasks, 1, body);
  }
}

}  // namespace

void nchw_to_nhwc(const float* src, float* dst, int64_t n, int64_t c, int64_t hw,
                  ThreadPool* pool) {
  transpose_batched(src, dst, n, c, hw, pool);
}

void nhwc_to_nchw(const float* src, float* dst, int64_t n, int64_t c, int64_t hw,
                  ThreadPool* pool) {
  transpose_batched(src, dst, n, hw, c, pool);
}

void copy_bytes(void* dst, const void* src, size_t bytes, ThreadPool* pool) {
  constexpr size_t kPiece = 64 << 10;
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  if (bytes == 0 || d == s) return;
  if (pool == nullptr || bytes < 2 * kPiece) {
    std::memcpy(d, s, bytes);
    return;
  }
  pool->parallel_for(bytes, kPiece, [&](size_t b, size_t e) { std::memcpy(d + b, s + b, e - b); });
}

Status LayoutConversion::bind(std::span<const Operand> in, std::span<const Operand> out,
                              ThreadPool&) {
  src_ = static_cast<const float*>(in[0].data);
  dst_ = out[0].f32();
  bytes_ = static_cast<size_t>(in[0].numel()) * dtype_size(in[0].dtype);
  const Shape& s = in[0].shape;
  if (s.rank() == 4 && in[0].dtype == DType::kF32) {
    n_ = s[0];
    c_ = s[1];
    hw_ = s[2] * s[3];
  }
  return Status();
}

Status LayoutConversion::run(ThreadPool& pool) {
  if (from_ == to_ || hw_ == 0 || c_ == 0) {
    copy_bytes(dst_, src_, bytes_, &pool);
  } else if (to_ == Layout::kNHWC) {
    nchw_to_nhwc(src_, dst_, n_, c_, hw_, &pool);
  } else {
    nhwc_to_nchw(src_, dst_, n_, c_, hw_, &pool);
  }
  return Status();
}

std::string LayoutConversion::describe() const {
  return std::string("convert ") + layout_name(from_) + "->" + layout_name(to_);
}

}  // namespace tessera::cpu
