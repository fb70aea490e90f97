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

// Transposes n matrices rows x cols -> cols x rows, split over the pool by row tiles.
void transpose_batched(const float* src, float* dst, int64_t n, int64_t rows, int64_t cols,
                       ThreadPool* pool) {
  const int64_t row_tiles = (rows + kTile - 1) / kTile;
  auto body = [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      const int64_t img = static_cast<int64_t>(t) / row_tiles;
      const int64_t r0 = (static_cast<int64_t>(t) % row_tiles) * kTile;
      const int64_t r1 = std::min(rows, r0 + kTile);
      transpose_block(src + img * rows * cols + r0 * cols, dst + img * rows * cols + r0, r1 - r0,
                      cols, cols, rows);
    }
  };
  const size_t tasks = static_cast<size_t>(n * row_tiles);
  if (pool == nullptr) {
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
    if (src_ != dst_ && bytes_ > 0) std::memcpy(dst_, src_, bytes_);
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
