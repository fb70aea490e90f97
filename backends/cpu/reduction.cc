// Reductions XNNPACK (this snapshot) lacks, in the layout their input lives in:
//   - ReduceMean over any set of dimensions that is one contiguous block in memory (the spatial
//     mean of an NHWC tensor sums pixels into a channel vector), accumulating in double as the
//     reference does, parallel over output rows and channel blocks;
//   - LRN across the channels of an NHWC tensor: per pixel, the window sums of squares are a
//     contiguous vector loop over a zero-padded row of squares, added in the reference's order.
#include <algorithm>
#include <cmath>

#include "backends/cpu/kernel_table.h"
#include "ops/kernel_params.h"

namespace tessera::cpu {

namespace {

// Logical dimensions in memory order.
std::vector<int> dims_in_memory(int rank, Layout l) {
  std::vector<int> order(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) order[static_cast<size_t>(d)] = d;
  if (rank == 4 && l == Layout::kNHWC) order = {0, 2, 3, 1};
  return order;
}

// ReduceMean as out[o, i] = mean over r of in[o, r, i], with [outer, reduced, inner] the
// memory dims of the input merged into three blocks.
struct ReduceBlocks {
  bool ok = false;
  int64_t outer = 1, reduced = 1, inner = 1;
};

// The blocks in layout `l`, or !ok when the reduced dimensions are not contiguous in memory or
// (without keepdims) the kept ones would come out in another order than the logical one.
ReduceBlocks reduce_blocks(const Shape& s, const ReduceParams& p, Layout l, bool keepdims) {
  ReduceBlocks b;
  int phase = 0;  // 0: outer, 1: reduced, 2: inner
  std::vector<int> kept;
  for (int d : dims_in_memory(s.rank(), l)) {
    const int64_t n = s[d];
    if (n == 1) continue;  // reduced or not, a size-1 dimension changes nothing
    const bool r = p.reduced[static_cast<size_t>(d)];
    if (r && phase == 2) return b;
    if (r) phase = 1;
    if (!r && phase == 1) phase = 2;
    if (!r) kept.push_back(d);
    (phase == 0 ? b.outer : phase == 1 ? b.reduced : b.inner) *= n;
  }
  if (!keepdims && !std::is_sorted(kept.begin(), kept.end())) return b;
  b.ok = true;
  return b;
}

class ReduceMeanKernel final : public Kernel {
 public:
  ReduceMeanKernel(ReduceParams p, Shape in_shape, int out_rank)
      : p_(std::move(p)), in_shape_(std::move(in_shape)), out_rank_(out_rank) {}

  // The available layout when the reduction is contiguous in it, else the other.
  Layout layout_for(Layout available) const {
    if (in_shape_.rank() != 4) return Layout::kNCHW;
    if (reduce_blocks(in_shape_, p_, available, p_.keepdims).ok) return available;
    return available == Layout::kNHWC ? Layout::kNCHW : Layout::kNHWC;
  }

  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    std::fill(wanted.begin(), wanted.end(), Layout::kNCHW);
    const Layout l = layout_for(available[0]);
    wanted[0] = l;
    produced[0] = out_rank_ == 4 ? l : Layout::kNCHW;
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    in_layout_nhwc_ = in[0].layout == Layout::kNHWC;
    blocks_ = reduce_blocks(in_shape_, p_, in[0].layout, p_.keepdims);
    if (!blocks_.ok) return internal_error("ReduceMean bound in a layout it cannot reduce");
    x_ = static_cast<const float*>(in[0].data);
    y_ = out[0].f32();
    // The mean of nothing (a reduced dimension of size 0) is NaN, as 0 / 0.
    const int64_t count = out[0].numel() > 0 ? in[0].numel() / out[0].numel() : 0;
    scale_ = 1.0 / static_cast<double>(count);
    return Status();
  }

  Status run(ThreadPool& pool) override {
    const int64_t inner = blocks_.inner, red = blocks_.reduced;
    constexpr int64_t kBlock = 256;  // channels per task
    const int64_t blocks = (inner + kBlock - 1) / kBlock;
    pool.parallel_for(static_cast<size_t>(blocks_.outer * blocks), 1, [&](size_t b, size_t e) {
      double acc[kBlock];
      for (size_t t = b; t < e; ++t) {
        const int64_t o = static_cast<int64_t>(t) / blocks;
        const int64_t i0 = (static_cast<int64_t>(t) % blocks) * kBlock;
        const int64_t ni = std::min(kBlock, inner - i0);
        const float* x = x_ + o * red * inner + i0;
        std::fill_n(acc, ni, 0.0);
        if (inner == 1) {
          double s = 0;
          for (int64_t r = 0; r < red; ++r) s += x[r];
          acc[0] = s;
        } else {
          for (int64_t r = 0; r < red; ++r) {
            const float* row = x + r * inner;
            for (int64_t i = 0; i < ni; ++i) acc[i] += row[i];
          }
        }
        float* y = y_ + o * inner + i0;
        for (int64_t i = 0; i < ni; ++i) y[i] = static_cast<float>(acc[i] * scale_);
      }
    });
    return Status();
  }

  std::string describe() const override {
    return std::string("tessera reducemean ") + (in_layout_nhwc_ ? "nhwc" : "nchw");
  }

 private:
  ReduceParams p_;
  Shape in_shape_;
  int out_rank_;
  bool in_layout_nhwc_ = false;
  ReduceBlocks blocks_;
  const float* x_ = nullptr;
  float* y_ = nullptr;
  double scale_ = 0;
};

Result<std::unique_ptr<Kernel>> make_reduce_mean(const KernelRequest& req) {
  ASSIGN_OR_RETURN(ReduceParams p, reduce_mean_params(req.ctx));
  const TensorInfo& in = req.ctx.input(0);
  if (p.noop || in.dtype != DType::kF32 || req.ctx.constant(0) != nullptr) return decline();
  if (!reduce_blocks(in.shape, p, Layout::kNCHW, p.keepdims).ok &&
      !(in.shape.rank() == 4 && reduce_blocks(in.shape, p, Layout::kNHWC, p.keepdims).ok)) {
    return decline();
  }
  const int out_rank = req.graph.value(req.node.outputs[0]).info.shape.rank();
  return std::unique_ptr<Kernel>(new ReduceMeanKernel(std::move(p), in.shape, out_rank));
}

class LrnKernel final : public NhwcIo<> {
 public:
  explicit LrnKernel(LrnParams p) : p_(p) {}
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    // Rank 4 in NHWC, or layout-trivial (the same bytes): pixels of `channels_` floats.
    x_ = static_cast<const float*>(in[0].data);
    y_ = out[0].f32();
    channels_ = in[0].shape[1];
    pixels_ = channels_ > 0 ? in[0].numel() / channels_ : 0;
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const int64_t c = channels_, size = p_.size;
    const int64_t before = (size - 1) / 2;
    const float scale = p_.alpha / static_cast<float>(size);
    pool.parallel_for(static_cast<size_t>(pixels_), 16, [&](size_t b, size_t e) {
      // Squares of one pixel with `before` zeros in front and size - 1 - before behind, and the
      // window sums: sum[c] = sq[c] + ... + sq[c + size - 1], added in channel order.
      std::vector<float> sq(static_cast<size_t>(c + size - 1), 0.f), sum(static_cast<size_t>(c));
      for (size_t px = b; px < e; ++px) {
        const float* x = x_ + static_cast<int64_t>(px) * c;
        float* y = y_ + static_cast<int64_t>(px) * c;
        float* s = sq.data() + before;
        for (int64_t k = 0; k < c; ++k) s[k] = x[k] * x[k];
        std::fill(sum.begin(), sum.end(), 0.f);
        for (int64_t t = 0; t < size; ++t) {
          const float* w = sq.data() + t;
          for (int64_t k = 0; k < c; ++k) sum[static_cast<size_t>(k)] += w[k];
        }
        if (p_.beta == 0.75f) {
          // The common beta (AlexNet, GoogLeNet): b^0.75 = sqrt(b) * sqrt(sqrt(b)) vectorises,
          // where pow does not; it differs from pow by a few ulp.
          for (int64_t k = 0; k < c; ++k) {
            const float base = p_.bias + scale * sum[static_cast<size_t>(k)];
            const float root = std::sqrt(base);
            y[k] = x[k] / (root * std::sqrt(root));
          }
        } else {
          for (int64_t k = 0; k < c; ++k) {
            y[k] = x[k] / std::pow(p_.bias + scale * sum[static_cast<size_t>(k)], p_.beta);
          }
        }
      }
    });
    return Status();
  }
  std::string describe() const override { return "tessera lrn nhwc"; }

 private:
  LrnParams p_;
  const float* x_ = nullptr;
  float* y_ = nullptr;
  int64_t channels_ = 0, pixels_ = 0;
};

Result<std::unique_ptr<Kernel>> make_lrn(const KernelRequest& req) {
  ASSIGN_OR_RETURN(LrnParams p, lrn_params(req.ctx));
  const TensorInfo& in = req.ctx.input(0);
  if (in.dtype != DType::kF32 || in.shape.rank() != 4 || req.ctx.constant(0) != nullptr)
    return decline();
  return std::unique_ptr<Kernel>(new LrnKernel(p));
}

}  // namespace

const KernelEntry kReductionKernels[] = {
    {OpKind::kReduceMean, "tessera_reducemean_f32", make_reduce_mean},
    {OpKind::kLRN, "tessera_lrn_nhwc_f32", make_lrn},
};
const size_t kNumReductionKernels = sizeof(kReductionKernels) / sizeof(kReductionKernels[0]);

}  // namespace tessera::cpu
