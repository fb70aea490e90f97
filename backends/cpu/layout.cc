#include "backends/cpu/layout.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backends/cpu/onednn.h"
#include "backends/cpu/simd.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

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
void transpose_block_scalar(const float* src, float* dst, int64_t rows, int64_t cols,
                            int64_t ld_src, int64_t ld_dst) {
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

#if TESSERA_X86_64
// GCC 12's AVX-512 shuffle intrinsics start from _mm512_undefined_ps(), which -Wuninitialized
// flags once inlined here.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// One 16 x 16 tile in registers: rows r < `rows` of `cols` floats are read (the rest are zero),
// and output rows j < `cols` of `rows` floats written. Four shuffle stages: 32-bit pairs
// (unpack), 64-bit quads (shuffle_ps), then 128-bit lanes twice (shuffle_f32x4); after stage
// two, u[4g + k] holds in its lane L column 4L + k of rows 4g..4g+3.
__attribute__((target("avx512f"))) void transpose_tile16(const float* src, float* dst, int64_t rows,
                                                         int64_t cols, int64_t ld_src,
                                                         int64_t ld_dst) {
  const __mmask16 col_mask = static_cast<__mmask16>((1u << cols) - 1);
  const __mmask16 row_mask = static_cast<__mmask16>((1u << rows) - 1);
  __m512 r[16], t[16];
  for (int i = 0; i < 16; ++i) {
    r[i] = i < rows ? _mm512_maskz_loadu_ps(col_mask, src + i * ld_src) : _mm512_setzero_ps();
  }
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int g = 0; g < 16; g += 4) {
    r[g + 0] = _mm512_shuffle_ps(t[g], t[g + 2], 0x44);
    r[g + 1] = _mm512_shuffle_ps(t[g], t[g + 2], 0xEE);
    r[g + 2] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0x44);
    r[g + 3] = _mm512_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 x0 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0x44);
    const __m512 x1 = _mm512_shuffle_f32x4(r[k], r[4 + k], 0xEE);
    const __m512 y0 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0x44);
    const __m512 y1 = _mm512_shuffle_f32x4(r[8 + k], r[12 + k], 0xEE);
    t[k] = _mm512_shuffle_f32x4(x0, y0, 0x88);
    t[4 + k] = _mm512_shuffle_f32x4(x0, y0, 0xDD);
    t[8 + k] = _mm512_shuffle_f32x4(x1, y1, 0x88);
    t[12 + k] = _mm512_shuffle_f32x4(x1, y1, 0xDD);
  }
  if (rows == 16) {
    for (int j = 0; j < cols; ++j) _mm512_storeu_ps(dst + j * ld_dst, t[j]);
  } else {
    for (int j = 0; j < cols; ++j) _mm512_mask_storeu_ps(dst + j * ld_dst, row_mask, t[j]);
  }
}

// Three rows (an RGB image's planes) interleaved into a contiguous [cols][3] block: per 16
// columns, three loads, two permutes per output vector (rows 0 and 1 from a two-source table,
// then row 2's lanes merged in), three stores.
__attribute__((target("avx512f"))) void interleave_rows3(const float* src, float* dst, int64_t cols,
                                                         int64_t ld_src) {
  alignas(64) int32_t ab[3][16], cc[3][16];
  __mmask16 from_c[3] = {0, 0, 0};
  for (int e = 0; e < 48; ++e) {
    const int v = e / 16, l = e % 16, row = e % 3, col = e / 3;
    ab[v][l] = row == 1 ? 16 + col : col;
    cc[v][l] = col;
    if (row == 2) from_c[v] = static_cast<__mmask16>(from_c[v] | (1u << l));
  }
  __m512i ab_idx[3], c_idx[3];
  for (int v = 0; v < 3; ++v) {
    ab_idx[v] = _mm512_load_si512(ab[v]);
    c_idx[v] = _mm512_load_si512(cc[v]);
  }
  for (int64_t j = 0; j < cols; j += 16, dst += 48) {
    const int64_t n = std::min<int64_t>(16, cols - j);
    const __mmask16 m = static_cast<__mmask16>((1u << n) - 1);
    const __m512 a = _mm512_maskz_loadu_ps(m, src + j);
    const __m512 b = _mm512_maskz_loadu_ps(m, src + ld_src + j);
    const __m512 c = _mm512_maskz_loadu_ps(m, src + 2 * ld_src + j);
    for (int v = 0; v < 3; ++v) {
      __m512 o = _mm512_permutex2var_ps(a, ab_idx[v], b);
      o = _mm512_mask_permutexvar_ps(o, from_c[v], c_idx[v], c);
      const int64_t left = 3 * n - 16 * v;
      if (left >= 16) {
        _mm512_storeu_ps(dst + 16 * v, o);
      } else if (left > 0) {
        _mm512_mask_storeu_ps(dst + 16 * v, static_cast<__mmask16>((1u << left) - 1), o);
      }
    }
  }
}

// The same block in 16 x 16 register tiles (edge tiles masked).
__attribute__((target("avx512f"))) void transpose_block_avx512(const float* src, float* dst,
                                                               int64_t rows, int64_t cols,
                                                               int64_t ld_src, int64_t ld_dst) {
  if (rows == 3 && ld_dst == 3) return interleave_rows3(src, dst, cols, ld_src);
  for (int64_t i = 0; i < rows; i += 16) {
    const int64_t nr = std::min<int64_t>(16, rows - i);
    for (int64_t j = 0; j < cols; j += 16) {
      transpose_tile16(src + i * ld_src + j, dst + j * ld_dst + i, nr,
                       std::min<int64_t>(16, cols - j), ld_src, ld_dst);
    }
  }
}

#pragma GCC diagnostic pop
#endif  // TESSERA_X86_64

void transpose_block(const float* src, float* dst, int64_t rows, int64_t cols, int64_t ld_src,
                     int64_t ld_dst) {
#if TESSERA_X86_64
  static const bool avx512 = has_avx512();
  if (avx512) return transpose_block_avx512(src, dst, rows, cols, ld_src, ld_dst);
#endif
  transpose_block_scalar(src, dst, rows, cols, ld_src, ld_dst);
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

namespace {

constexpr int64_t kConvertPiece = 16384;

// Calls fn(begin, end) over [0, count) in pieces, on the pool from 4 pieces on.
template <typename F>
void for_pieces(int64_t count, ThreadPool* pool, F&& fn) {
  if (pool == nullptr || count < 4 * kConvertPiece) {
    fn(0, count);
    return;
  }
  pool->parallel_for(static_cast<size_t>(count), kConvertPiece, [&](size_t b, size_t e) {
    fn(static_cast<int64_t>(b), static_cast<int64_t>(e));
  });
}

}  // namespace

void f32_to_bf16_array(const float* src, uint16_t* dst, int64_t count, ThreadPool* pool) {
  for_pieces(count, pool, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = f32_to_bf16(src[i]);
  });
}

void bf16_to_f32_array(const uint16_t* src, float* dst, int64_t count, ThreadPool* pool) {
  for_pieces(count, pool, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = bf16_to_f32(src[i]);
  });
}

void nchw_f32_to_nhwc_bf16(const float* src, uint16_t* dst, int64_t n, int64_t c, int64_t hw,
                           ThreadPool* pool) {
  // Pixels of all images as one range; each pixel gathers its c channels.
  for_pieces(n * hw, pool, [&](int64_t b, int64_t e) {
    for (int64_t q = b; q < e; ++q) {
      const int64_t img = q / hw, p = q % hw;
      const float* s = src + img * c * hw + p;
      uint16_t* d = dst + q * c;
      for (int64_t ch = 0; ch < c; ++ch) d[ch] = f32_to_bf16(s[ch * hw]);
    }
  });
}

void nhwc_bf16_to_nchw_f32(const uint16_t* src, float* dst, int64_t n, int64_t c, int64_t hw,
                           ThreadPool* pool) {
  // Channels of all images as one range; each channel plane gathers its hw pixels.
  for_pieces(n * c, pool, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t img = r / c, ch = r % c;
      const uint16_t* s = src + img * hw * c + ch;
      float* d = dst + r * hw;
      for (int64_t p = 0; p < hw; ++p) d[p] = bf16_to_f32(s[p * c]);
    }
  });
}

Status PrecisionConversion::bind(std::span<const Operand> in, std::span<const Operand> out,
                                 ThreadPool&) {
  const bool int8 = reduced_ == Reduced::kInt8;
  const Operand& reduced = to_reduced_ ? out[0] : in[0];
  const Operand& full = to_reduced_ ? in[0] : out[0];
  if (in[0].dtype != DType::kF32 || full.bf16 || full.int8 || reduced.bf16 == int8 ||
      reduced.int8 != int8) {
    return internal_error(std::string(int8 ? "int8" : "bf16") +
                          " conversion bound to operands of the wrong precision");
  }
  q_ = reduced.quant;
  if (int8 && !q_.valid())
    return internal_error("int8 conversion of a tensor without quantisation");
  src_ = in[0].data;
  dst_ = out[0].data;
  count_ = in[0].numel();
  const Shape& s = in[0].shape;
  n_ = c_ = hw_ = 0;
  if (s.rank() == 4 && from_ != to_ && !layout_trivial(s)) {
    n_ = s[0];
    c_ = s[1];
    hw_ = s[2] * s[3];
  }
  return Status();
}

Status PrecisionConversion::run(ThreadPool& pool) {
  const bool int8 = reduced_ == Reduced::kInt8;
  if (hw_ > 0 && to_ != (to_reduced_ ? Layout::kNHWC : Layout::kNCHW)) {
    return internal_error(std::string("conversion ") + (to_reduced_ ? "to " : "from ") +
                          (int8 ? "int8" : "bf16") + " NCHW is not supported");
  }
  if (to_reduced_) {
    const auto* s = static_cast<const float*>(src_);
    if (int8) {
      hw_ > 0 ? nchw_f32_to_nhwc_int8(s, dst_, n_, c_, hw_, q_, &pool)
              : quantize_array(s, dst_, count_, q_, &pool);
    } else {
      auto* d = static_cast<uint16_t*>(dst_);
      hw_ > 0 ? nchw_f32_to_nhwc_bf16(s, d, n_, c_, hw_, &pool)
              : f32_to_bf16_array(s, d, count_, &pool);
    }
  } else {
    auto* d = static_cast<float*>(dst_);
    if (int8) {
      hw_ > 0 ? nhwc_int8_to_nchw_f32(src_, d, n_, c_, hw_, q_, &pool)
              : dequantize_array(src_, d, count_, q_, &pool);
    } else {
      const auto* s = static_cast<const uint16_t*>(src_);
      hw_ > 0 ? nhwc_bf16_to_nchw_f32(s, d, n_, c_, hw_, &pool)
              : bf16_to_f32_array(s, d, count_, &pool);
    }
  }
  return Status();
}

std::string PrecisionConversion::describe() const {
  const std::string r = reduced_ == Reduced::kBf16 ? " bf16" : q_.is_unsigned ? " u8" : " s8";
  return std::string("convert ") + layout_name(from_) + (to_reduced_ ? " f32" : r) + "->" +
         layout_name(to_) + (to_reduced_ ? r : " f32");
}

QuantParam QuantParam::from_range(float lo, float hi) {
  QuantParam q;
  q.is_unsigned = !(lo < 0);
  const float span = q.is_unsigned ? hi : std::max(-lo, hi);
  q.scale = q.is_unsigned ? span / 255.f : span / 127.f;
  if (!(q.scale > 1e-30f)) q.scale = 1e-30f;
  return q;
}

QuantParam QuantParam::canonical() const {
  if (!is_unsigned && zero_point == -128) return QuantParam{scale, true, 0};
  if (is_unsigned && zero_point == 128) return QuantParam{scale, false, 0};
  return *this;
}

namespace {

// One element as ONNX's QuantizeLinear: round(x / scale) to nearest even, plus the zero point,
// saturated; NaN -> the zero point (a real 0).
template <typename T>
inline T quantize_one(float x, float scale, float zp, float lo, float hi) {
  float r = std::nearbyint(x / scale) + zp;
  r = r == r ? std::min(std::max(r, lo), hi) : zp;
  return static_cast<T>(r);
}

#if TESSERA_X86_64
// GCC 12 flags the _mm512_undefined_ps() placeholders inside the intrinsics once inlined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// quantize_one on 16 floats at a time (the first `count` of them at `src`; a tail is masked):
// the same division, rounding (the current mode, to nearest even), zero point, NaN and
// saturation, bit for bit. Stores through the saturating narrowing stores of AVX-512F.
template <bool kUnsigned>
TESSERA_AVX512 void quantize16(const float* src, void* dst, int64_t count, __m512 scale, __m512 zp,
                               __m512 lo, __m512 hi) {
  const __mmask16 k = count >= 16 ? __mmask16(0xffff) : __mmask16((1u << count) - 1);
  __m512 v = _mm512_div_ps(_mm512_maskz_loadu_ps(k, src), scale);
  v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_CUR_DIRECTION), zp);
  const __mmask16 number = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
  v = _mm512_mask_blend_ps(number, zp, _mm512_min_ps(_mm512_max_ps(v, lo), hi));
  const __m512i r = _mm512_cvtps_epi32(v);
  if (kUnsigned) {
    _mm512_mask_cvtusepi32_storeu_epi8(dst, k, r);
  } else {
    _mm512_mask_cvtsepi32_storeu_epi8(dst, k, r);
  }
}

template <typename T>
TESSERA_AVX512 void quantize_avx512(const float* src, T* dst, int64_t count, float scale,
                                    float zp) {
  constexpr bool kUnsigned = std::is_unsigned_v<T>;
  const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zp);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(std::numeric_limits<T>::min()));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(std::numeric_limits<T>::max()));
  for (int64_t i = 0; i < count; i += 16) {
    quantize16<kUnsigned>(src + i, dst + i, count - i, vs, vz, lo, hi);
  }
}

// Pixels [p0, p0 + len) (len <= 16) of one NCHW image with `c` channels of `hw` pixels, into
// NHWC int8: each channel's run of pixels quantised as one vector, then interleaved.
template <typename T>
TESSERA_AVX512 void nchw_to_nhwc_q_avx512(const float* img, T* dst, int64_t c, int64_t hw,
                                          int64_t p0, int64_t len, float scale, float zp) {
  constexpr bool kUnsigned = std::is_unsigned_v<T>;
  const __m512 vs = _mm512_set1_ps(scale), vz = _mm512_set1_ps(zp);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(std::numeric_limits<T>::min()));
  const __m512 hi = _mm512_set1_ps(static_cast<float>(std::numeric_limits<T>::max()));
  T run[16];
  for (int64_t ch = 0; ch < c; ++ch) {
    quantize16<kUnsigned>(img + ch * hw + p0, run, len, vs, vz, lo, hi);
    for (int64_t i = 0; i < len; ++i) dst[i * c + ch] = run[i];
  }
}
#pragma GCC diagnostic pop
#endif  // TESSERA_X86_64

template <typename T>
void quantize_t(const float* src, T* dst, int64_t count, QuantParam q, ThreadPool* pool) {
  const float lo = static_cast<float>(std::numeric_limits<T>::min());
  const float hi = static_cast<float>(std::numeric_limits<T>::max());
  const float scale = q.scale, zp = static_cast<float>(q.zero_point);
#if TESSERA_X86_64
  static const bool avx512 = has_avx512();
  if (avx512) {
    for_pieces(count, pool,
               [&](int64_t b, int64_t e) { quantize_avx512(src + b, dst + b, e - b, scale, zp); });
    return;
  }
#endif
  for_pieces(count, pool, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) dst[i] = quantize_one<T>(src[i], scale, zp, lo, hi);
  });
}

template <typename T>
void dequantize_t(const T* src, float* dst, int64_t count, QuantParam q, ThreadPool* pool) {
  const int32_t zp = q.zero_point;
  const float scale = q.scale;
  for_pieces(count, pool, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      dst[i] = scale * static_cast<float>(static_cast<int32_t>(src[i]) - zp);
  });
}

template <typename T>
void nchw_to_nhwc_q(const float* src, T* dst, int64_t n, int64_t c, int64_t hw, QuantParam q,
                    ThreadPool* pool) {
  const float lo = static_cast<float>(std::numeric_limits<T>::min());
  const float hi = static_cast<float>(std::numeric_limits<T>::max());
  const float scale = q.scale, zp = static_cast<float>(q.zero_point);
#if TESSERA_X86_64
  static const bool avx512 = has_avx512();
  if (avx512) {
    for_pieces(n * hw, pool, [&](int64_t b, int64_t e) {
      for (int64_t px = b; px < e;) {
        const int64_t img = px / hw, p = px % hw;
        const int64_t len = std::min<int64_t>({16, e - px, hw - p});
        nchw_to_nhwc_q_avx512(src + img * c * hw, dst + px * c, c, hw, p, len, scale, zp);
        px += len;
      }
    });
    return;
  }
#endif
  for_pieces(n * hw, pool, [&](int64_t b, int64_t e) {
    for (int64_t px = b; px < e; ++px) {
      const int64_t img = px / hw, p = px % hw;
      const float* s = src + img * c * hw + p;
      T* d = dst + px * c;
      for (int64_t ch = 0; ch < c; ++ch) d[ch] = quantize_one<T>(s[ch * hw], scale, zp, lo, hi);
    }
  });
}

template <typename T>
void nhwc_q_to_nchw(const T* src, float* dst, int64_t n, int64_t c, int64_t hw, QuantParam q,
                    ThreadPool* pool) {
  const int32_t zp = q.zero_point;
  const float scale = q.scale;
  for_pieces(n * c, pool, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      const int64_t img = r / c, ch = r % c;
      const T* s = src + img * hw * c + ch;
      float* d = dst + r * hw;
      for (int64_t p = 0; p < hw; ++p)
        d[p] = scale * static_cast<float>(static_cast<int32_t>(s[p * c]) - zp);
    }
  });
}

}  // namespace

void quantize_array(const float* src, void* dst, int64_t count, QuantParam q, ThreadPool* pool) {
  if (q.is_unsigned) {
    quantize_t(src, static_cast<uint8_t*>(dst), count, q, pool);
  } else {
    quantize_t(src, static_cast<int8_t*>(dst), count, q, pool);
  }
}

void dequantize_array(const void* src, float* dst, int64_t count, QuantParam q, ThreadPool* pool) {
  if (q.is_unsigned) {
    dequantize_t(static_cast<const uint8_t*>(src), dst, count, q, pool);
  } else {
    dequantize_t(static_cast<const int8_t*>(src), dst, count, q, pool);
  }
}

void nchw_f32_to_nhwc_int8(const float* src, void* dst, int64_t n, int64_t c, int64_t hw,
                           QuantParam q, ThreadPool* pool) {
  if (q.is_unsigned) {
    nchw_to_nhwc_q(src, static_cast<uint8_t*>(dst), n, c, hw, q, pool);
  } else {
    nchw_to_nhwc_q(src, static_cast<int8_t*>(dst), n, c, hw, q, pool);
  }
}

void nhwc_int8_to_nchw_f32(const void* src, float* dst, int64_t n, int64_t c, int64_t hw,
                           QuantParam q, ThreadPool* pool) {
  if (q.is_unsigned) {
    nhwc_q_to_nchw(static_cast<const uint8_t*>(src), dst, n, c, hw, q, pool);
  } else {
    nhwc_q_to_nchw(static_cast<const int8_t*>(src), dst, n, c, hw, q, pool);
  }
}

void quantize_weights_per_channel(const float* w, int64_t rows, int64_t cols,
                                  std::vector<int8_t>* wq, std::vector<float>* scales) {
  wq->resize(static_cast<size_t>(rows * cols));
  scales->resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = w + r * cols;
    float m = 0;
    for (int64_t i = 0; i < cols; ++i) m = std::max(m, std::fabs(row[i]));
    const float sc = m > 0 && std::isfinite(m) ? m / 127.f : 1.f;
    (*scales)[static_cast<size_t>(r)] = sc;
    for (int64_t i = 0; i < cols; ++i) {
      const float q = std::nearbyint(row[i] / sc);
      (*wq)[static_cast<size_t>(r * cols + i)] =
          static_cast<int8_t>(q == q ? std::clamp(q, -127.f, 127.f) : 0.f);
    }
  }
}

}  // namespace tessera::cpu
