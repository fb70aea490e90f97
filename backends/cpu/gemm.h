// Tessera's own f32 GEMM for the cpu device's convolutions (AVX-512):
//
//   C[M x N] = A[M x K] * B[K x N]  (+ bias[N], then an optional clamp: relu / clip),
//
// all row-major. B is the constant operand (a layer's weights) and is packed ONCE, when the
// kernel is built, into a PackedB: K is cut into blocks of `kc` rows sized for the L1 cache, and
// each block into column panels kGemmNR = 32 floats wide ([kc][32], zero-padded past N), so the
// microkernel streams one panel with two aligned vector loads per k. A is the activation operand:
// its rows are either read in place (a row-major matrix with any row stride: the NHWC input of a
// 1x1 convolution, Winograd's transformed tiles) or gathered per thread, block by block, by a
// caller-supplied `gather` (the im2col rows of a convolution, written straight into the block
// that the microkernel reads, never materialised as a whole).
//
// The microkernel computes a 14 x 32 tile of C (kGemmMR = 14: 28 zmm accumulators, two B loads
// and 14 broadcasts of A per k; the full tile's k loop is inline assembly), adds the previous
// partial sum when K has several blocks (on the first block: an optional residual, a fused Add),
// and on the last block applies the bias and the clamp before the tile is stored. Edge tiles (fewer
// than 14 rows, fewer than 32 columns) use smaller unrolled variants and masked loads/stores, so
// any M, N, K works.
//
// Loop order of one work item (rows [m0, m0 + mc) x columns [n0, n0 + nc) of C): for each chunk
// of rows whose A block fits the L2 cache, for each K block (A block gathered here if A is
// gathered), for each B panel (stays in L1), for each 14 rows: microkernel.
//
// Threading (Gemm::run on the device ThreadPool): work items are blocks of whole 14-row tiles
// (4 per thread) when M has at least 16 tiles per thread. Below that (13x13, 14x14 and 7x7
// feature maps) row blocks alone balance badly and each streams all of B, so bind() chooses
// row blocks x column panel ranges (often all rows per item: B is read once in total) by a small
// cost model: the shortest makespan of the items handed out in order, each costing its
// multiply-adds plus the A and B floats it reads, among the splits with >= 4 items per thread.
// Items are handed out one at a time (parallel_items), each thread with its own gather scratch.
//
// The kernel variants on it need AVX-512F (kernel_table.h: Isa::kAvx512f; gemm_available()):
// elsewhere they decline and the other convolution variants remain. PackedB and gemm_block
// themselves run everywhere: without the AVX-512 microkernel (other architectures, older x86
// CPUs) on a portable C++ tile of the same shape, which the tests check on every machine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "backends/cpu/pack_cache.h"
#include "backends/cpu/thread_pool.h"

namespace tessera::cpu {

// Microkernel tile: rows of A per call and the packed panel width.
constexpr int64_t kGemmMR = 14;
constexpr int64_t kGemmNR = 32;

// True when this CPU runs the AVX-512 GEMM.
bool gemm_available();

// The cache-derived block sizes (cpuinfo; constants when it reports nothing).
struct GemmBlocking {
  int64_t kc = 256;   // K rows per packed block (a B panel of kc x 32 floats stays in L1)
  int64_t mc = 1024;  // A rows per chunk (an mc x kc A block stays in L2)
};
const GemmBlocking& gemm_blocking();

// B (K x N) packed into K blocks of column panels, 64-byte aligned.
class PackedB {
 public:
  PackedB() = default;
  // Packs b(k, n) = src[k * ld + n]. `kc` 0: gemm_blocking().kc, balanced over the blocks.
  static PackedB pack(const float* src, int64_t k, int64_t n, int64_t ld, int64_t kc = 0);

  int64_t k() const { return k_; }
  int64_t n() const { return n_; }
  int64_t kc() const { return kc_; }  // rows of every K block but possibly the last
  int64_t k_blocks() const { return k_ == 0 ? 0 : (k_ + kc_ - 1) / kc_; }
  int64_t panels() const { return (n_ + kGemmNR - 1) / kGemmNR; }
  // Panel j of K block kb: [rows of the block][kGemmNR].
  const float* panel(int64_t kb, int64_t j) const {
    return data_.get() + kb * kc_ * panels() * kGemmNR + j * block_rows(kb) * kGemmNR;
  }
  int64_t block_rows(int64_t kb) const { return std::min(kc_, k_ - kb * kc_); }
  uint64_t bytes() const { return static_cast<uint64_t>(size_) * sizeof(float); }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  std::unique_ptr<float[], Free> data_;
  int64_t size_ = 0;
  int64_t k_ = 0, n_ = 0, kc_ = 1;
};

// Where the rows of A come from.
struct GemmA {
  // In place: A[i][p] = data[i * ld + p].
  const float* data = nullptr;
  int64_t ld = 0;
  // Otherwise (data null): writes A[m0 + i][k0 + p] to dst[i * ldd + p] for i < mc, p < kc.
  std::function<void(int64_t m0, int64_t mc, int64_t k0, int64_t kc, float* dst, int64_t ldd)>
      gather;
};

// What happens to C after the last K block, in registers.
struct GemmEpilogue {
  const float* bias = nullptr;  // bias[j] for column j of C (null: none)
  bool clamp = false;           // last: C = min(max(C, lo), hi)
  float lo = 0.f, hi = 0.f;
  // Before the clamp: + residual[i * ldr + j] for row i, column j of C (indexed globally like
  // A's rows and the bias; null: none), a residual Add fused into a convolution. It is added
  // with the first K block (where later blocks add the partial sum), so that a GEMM without a
  // residual keeps the epilogue it had.
  const float* residual = nullptr;
  int64_t ldr = 0;
};

// Floats of scratch one thread needs to gather A blocks for `b`.
int64_t gemm_scratch_floats(const PackedB& b);

// One thread: rows [m0, m0 + mc) and columns [n0, n0 + nc) of C (n0 a multiple of kGemmNR),
// C[m0 + i][n0 + j] at c[i * ldc + j]; A rows and bias entries are indexed globally.
// `scratch`: gemm_scratch_floats(b) floats when A is gathered, else unused.
void gemm_block(const PackedB& b, const GemmA& a, int64_t m0, int64_t mc, int64_t n0, int64_t nc,
                float* c, int64_t ldc, const GemmEpilogue& ep, float* scratch);

// The work split of the blocked GEMM runners (Gemm, im2col + OpenBLAS, Winograd): calls
// item(scratch, block, split) for every one of `blocks` row blocks times `splits` column ranges,
// handed out over the pool, `scratch` being the running worker's own buffer.
template <typename Item>
void run_blocks(ThreadPool& pool, int64_t blocks, int64_t splits,
                std::vector<std::vector<float>>& scratch, const Item& item) {
  pool.parallel_items(static_cast<size_t>(blocks * splits), [&](int worker, size_t i) {
    item(scratch[static_cast<size_t>(worker)].data(), static_cast<int64_t>(i) / splits,
         static_cast<int64_t>(i) % splits);
  });
}

// Bytes of such per-thread scratch buffers.
inline uint64_t scratch_bytes(const std::vector<std::vector<float>>& scratch) {
  uint64_t bytes = 0;
  for (const std::vector<float>& s : scratch) bytes += s.size() * sizeof(float);
  return bytes;
}

// The multi-threaded GEMM over a fixed B: bind() plans the split for M rows once (when the
// program binds its buffers), run() executes it inside ThreadPool::run.
class Gemm {
 public:
  explicit Gemm(PackedB b) : b_{std::make_shared<const PackedB>(std::move(b)), false} {}
  // B shared with other kernels through the program's PackCache (or the kernel's own).
  explicit Gemm(SharedPacking<PackedB> b) : b_(std::move(b)) {}
  const PackedB& b() const { return *b_.packed; }

  // Plans M rows on `threads` threads and sizes the per-thread scratch (gathered A only).
  void bind(int64_t m, int threads, bool gathered);
  // C = A * B + epilogue. `after(m0, mc, n0, nc)`, when set, runs on each finished item (a
  // fused activation the clamp cannot express), while its rows are in cache.
  void run(ThreadPool& pool, const GemmA& a, float* c, int64_t ldc, const GemmEpilogue& ep,
           const std::function<void(int64_t, int64_t, int64_t, int64_t)>& after = {});

  // Scratch, and B unless it is shared through the program's PackCache.
  uint64_t owned_bytes() const;

 private:
  SharedPacking<PackedB> b_;
  int64_t m_ = 0, mb_ = 0, blocks_ = 0, splits_ = 1, np_ = 0;  // np_: panels per split
  std::vector<std::vector<float>> scratch_;
};

}  // namespace tessera::cpu
