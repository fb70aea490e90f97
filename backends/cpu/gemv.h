// Tessera's f32 matrix-vector product for fully connected layers at batch 1 (AVX-512):
//
//   y[N] = clamp(x[K] * W[K x N] + bias[N], lo, hi)
//
// At batch 1 a fully connected layer does two flops per weight it reads, so it runs at the speed
// memory delivers the weights (AlexNet's fc6 reads 151 MB per inference, fc7 67 MB): the kernel
// exists to stream W exactly once, in address order, on every thread of the pool at once.
//
// W is packed ONCE, when the kernel is built, into column panels kGemvNR = 64 floats wide, each
// stored [K][64] (the last one narrower: its width rounded up to 16, zero-padded), one after the
// other, on 2 MB pages when large (one page walk per 2 MB streamed instead of per 4 KB). A panel
// is one contiguous run of memory, and the work split is a split of the panels into contiguous
// ranges: each item of the pool's work streams its own contiguous slab of the packed weights.
//
// Per panel, x[k] is broadcast and multiplied into the four 16-float column vectors of row k.
// The panel is read as 8 streams at once (its 8 consecutive parts of K / 8 rows, each into its
// own accumulators, summed at the end): one core needs several streams in flight to get near
// the memory bandwidth (the hardware prefetchers run ahead of each separately; software
// prefetching measured no better). The epilogue adds the bias and clamps in registers before the
// panel's outputs are stored.
//
// Only for CPUs with AVX-512F: callers check gemm_available() and otherwise decline.
// PackedGemv itself (the packing) is portable.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cpu/pack_cache.h"
#include "backends/cpu/thread_pool.h"

namespace tessera::cpu {

// Columns per packed panel.
constexpr int64_t kGemvNR = 64;

class PackedGemv {
 public:
  PackedGemv() = default;
  // Packs w(k, n) = scale * (w_is_k_by_n ? src[k * n_total + n] : src[n * k_total + k]), and
  // bias[n] (null: none).
  static PackedGemv pack(const float* src, int64_t k, int64_t n, bool w_is_k_by_n, float scale,
                         const float* bias);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t panels() const { return (n_ + kGemvNR - 1) / kGemvNR; }
  // Floats per row of panel j: kGemvNR, or the last panel's width rounded up to 16.
  int64_t width(int64_t j) const;
  const float* panel(int64_t j) const { return data_.get() + j * k_ * kGemvNR; }
  const float* bias() const { return bias_.empty() ? nullptr : bias_.data(); }
  uint64_t bytes() const {
    return static_cast<uint64_t>(size_ + static_cast<int64_t>(bias_.size())) * sizeof(float);
  }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], Free> data_;
  int64_t size_ = 0;
  int64_t k_ = 0, n_ = 0;
  std::vector<float> bias_;
};

// One thread: y[j] for the columns of panels [j0, j1), y indexed globally (y[0] is column 0).
void gemv_panels(const PackedGemv& w, const float* x, int64_t j0, int64_t j1, float* y, float lo,
                 float hi);

// Cuts `panels` equally wide panels into `items_per_thread` contiguous ranges per thread (fewer
// when there are fewer panels): item i is panels [bounds[i], bounds[i + 1]).
std::vector<int64_t> split_panels(int64_t panels, int threads, int items_per_thread);

// The multi-threaded product over a fixed W: bind() cuts the panels into contiguous ranges for
// the pool, run() executes them inside ThreadPool::run.
class Gemv {
 public:
  explicit Gemv(PackedGemv w) : w_{std::make_shared<const PackedGemv>(std::move(w)), false} {}
  // W shared with other kernels through the program's PackCache (or the kernel's own).
  explicit Gemv(SharedPacking<PackedGemv> w) : w_(std::move(w)) {}
  const PackedGemv& w() const { return *w_.packed; }
  // W's bytes unless it is shared through the program's PackCache.
  uint64_t owned_bytes() const { return w_.owned_bytes(); }

  // Cuts the panels into `items_per_thread` contiguous ranges per thread (fewer when there are
  // fewer panels), of equal bytes give or take a panel. The items are handed out one at a time,
  // so with several per thread a thread slowed by the rest of the machine is made up for by the
  // others (each item is still a long contiguous slab: fc6's 151 MB in 8 items of 19 MB).
  void bind(int threads, int items_per_thread = 4);
  // y = clamp(x * W + bias, lo, hi).
  void run(ThreadPool& pool, const float* x, float* y, float lo, float hi) const;

 private:
  SharedPacking<PackedGemv> w_;
  std::vector<int64_t> bounds_;  // item i: panels [bounds_[i], bounds_[i + 1])
};

// The bf16 form, for bf16 programs (docs/precision.md): W rounded to bf16 (nearest even) in the
// same column panels, with each pair of rows interleaved: pair-row q of a panel holds, per
// column c, the 32-bit pair (w[2q][c], w[2q + 1][c]) (a zero second half for an odd K's last
// row), so that one AVX-512 BF16 dot product (vdpbf16ps) multiplies a pair of x's values into 16
// columns, summing in f32. Half the bytes of the f32 form (AlexNet's fc6: 75 MB), streamed the
// same way (8 streams per panel, panels split over the pool). oneDNN 2.6's bf16 matmul ran fc6
// at batch 1 1.4x slower than the f32 GEMV on the AMX host, half the bytes notwithstanding.
class PackedGemvBf16 {
 public:
  PackedGemvBf16() = default;
  // As PackedGemv::pack with scale 1; the bias stays f32.
  static PackedGemvBf16 pack(const float* src, int64_t k, int64_t n, bool w_is_k_by_n,
                             const float* bias);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t pairs() const { return (k_ + 1) / 2; }
  int64_t panels() const { return (n_ + kGemvNR - 1) / kGemvNR; }
  // 32-bit pairs per pair-row of panel j: kGemvNR, or the last panel's width rounded up to 16.
  int64_t width(int64_t j) const;
  const uint32_t* panel(int64_t j) const { return data_.get() + j * pairs() * kGemvNR; }
  const float* bias() const { return bias_.empty() ? nullptr : bias_.data(); }
  uint64_t bytes() const {
    return static_cast<uint64_t>(size_) * sizeof(uint32_t) + bias_.size() * sizeof(float);
  }

 private:
  struct Free {
    void operator()(uint32_t* p) const;
  };
  std::unique_ptr<uint32_t[], Free> data_;
  int64_t size_ = 0;
  int64_t k_ = 0, n_ = 0;
  std::vector<float> bias_;
};

// y = bf16(clamp(x * W + bias, lo, hi)) over x and y in bf16 (nearest even), on the pool: as Gemv.
// Only on CPUs where has_avx512_bf16() (callers check; run() fails otherwise).
class GemvBf16 {
 public:
  explicit GemvBf16(SharedPacking<PackedGemvBf16> w) : w_(std::move(w)) {}
  const PackedGemvBf16& w() const { return *w_.packed; }
  uint64_t owned_bytes() const { return w_.owned_bytes(); }
  void bind(int threads, int items_per_thread = 4);
  Status run(ThreadPool& pool, const uint16_t* x, uint16_t* y, float lo, float hi) const;

 private:
  SharedPacking<PackedGemvBf16> w_;
  std::vector<int64_t> bounds_;
};

// The int8 form, for int8 programs (docs/precision.md): W quantised to s8 with one scale per
// output column (max |w| / 127, as oneDNN's int8 matmul takes it), in the same column panels,
// each run of four rows interleaved: quad-row q of a panel holds, per column c, the 32-bit word
// of the four bytes w[4q..4q + 3][c] (zero bytes past K), so that one AVX-512 VNNI dot product
// (vpdpbusd) multiplies four of x's bytes into 16 columns, summing in int32. A quarter of the
// bytes of the f32 form (AlexNet's fc6: 38 MB), streamed the same way. The column sums of the
// quantised weights are kept to take x's zero point (and the offset that makes an s8 x unsigned
// for vpdpbusd) out of the sums: sum_k (u_k - c) w_kj = acc_j - c * colsum_j.
class PackedGemvInt8 {
 public:
  // The longest K whose int32 sums cannot overflow (|acc| <= K * 255 * 128).
  static constexpr int64_t kMaxK = 65536;

  PackedGemvInt8() = default;
  // W as PackedGemv::pack takes it (scale 1); the bias stays f32. K <= kMaxK.
  static PackedGemvInt8 pack(const float* src, int64_t k, int64_t n, bool w_is_k_by_n,
                             const float* bias);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t quads() const { return (k_ + 3) / 4; }
  int64_t panels() const { return (n_ + kGemvNR - 1) / kGemvNR; }
  // 32-bit words per quad-row of panel j: kGemvNR, or the last panel's width rounded up to 16.
  int64_t width(int64_t j) const;
  const uint32_t* panel(int64_t j) const { return data_.get() + j * quads() * kGemvNR; }
  // Per column: the weight scale and the sum of the quantised weights.
  const std::vector<float>& scales() const { return scales_; }
  const std::vector<int32_t>& column_sums() const { return column_sums_; }
  const float* bias() const { return bias_.empty() ? nullptr : bias_.data(); }
  uint64_t bytes() const {
    return static_cast<uint64_t>(size_) * sizeof(uint32_t) +
           (bias_.size() + scales_.size()) * sizeof(float) + column_sums_.size() * sizeof(int32_t);
  }

 private:
  struct Free {
    void operator()(uint32_t* p) const;
  };
  std::unique_ptr<uint32_t[], Free> data_;
  int64_t size_ = 0;
  int64_t k_ = 0, n_ = 0;
  std::vector<float> scales_, bias_;
  std::vector<int32_t> column_sums_;
};

// y = clamp(s_x * s_w[j] * sum_k (q_x[k] - zp_x) * q_w[k][j] + bias[j], lo, hi) in f32, over x
// held in int8 (u8 or s8 with scale s_x and zero point zp_x: real = s_x * (q - zp)), on the pool
// as Gemv. The int32 sums are exact; the f32 epilogue rounds once per column. Only on CPUs where
// has_avx512_vnni() (callers check; run() fails otherwise). Thread rule: bind() before run();
// run() from one thread at a time (it splits the work over the pool itself).
class GemvInt8 {
 public:
  GemvInt8(SharedPacking<PackedGemvInt8> w, float x_scale, int32_t x_zero_point, bool x_unsigned);
  const PackedGemvInt8& w() const { return *w_.packed; }
  uint64_t owned_bytes() const {
    return w_.owned_bytes() + (scale_.size() + correction_.size()) * sizeof(float);
  }
  void bind(int threads, int items_per_thread = 4);
  Status run(ThreadPool& pool, const uint8_t* x, float* y, float lo, float hi) const;

 private:
  SharedPacking<PackedGemvInt8> w_;
  uint32_t flip_ = 0;                // 0x80808080 for an s8 x: u = q + 128 as vpdpbusd reads it
  std::vector<float> scale_;         // s_x * s_w[j]
  std::vector<int32_t> correction_;  // (zp_x + offset) * colsum[j], modulo 2^32
  std::vector<int64_t> bounds_;
};

}  // namespace tessera::cpu
