// Data movement XNNPACK (this snapshot) lacks: Concat and Split along any axis in either layout
// (an NHWC channel concat stays NHWC, so inception and dense blocks need no conversion), and the
// reshape family (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout) as a parallel copy in
// logical order. Slice, Pad, Transpose, Gather, Resize run on their reference kernels, which are
// already memcpy-based gather copies (ops/data_movement.h).
#include <cstring>

#include "backends/cpu/kernel_table.h"

namespace tessera::cpu {

namespace {

// Logical axis -> memory axis of a rank-4 NHWC tensor.
int physical_axis(int axis, int rank, Layout l) {
  if (rank != 4 || l != Layout::kNHWC) return axis;
  const int map[4] = {0, 3, 1, 2};
  return map[axis];
}

// Concat (many inputs, one output) and Split (one input, many outputs) are the same copy: each
// of `outer` rows of the joined tensor is the pieces' rows side by side.
class JoinSplitKernel final : public Kernel {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    bool nhwc = false;
    for (size_t i = 0; i < available.size(); ++i) nhwc = nhwc || available[i] == Layout::kNHWC;
    const Layout l = nhwc && rank_ == 4 && !has_constant_ ? Layout::kNHWC : Layout::kNCHW;
    std::fill(wanted.begin(), wanted.end(), l);
    std::fill(produced.begin(), produced.end(), l);
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    const Operand& whole = concat_ ? out[0] : in[0];
    std::span<const Operand> parts = concat_ ? in : out;
    const int p = physical_axis(axis_, rank_, whole.layout);
    const Shape ps = whole.physical_shape();
    const size_t esize = dtype_size(whole.dtype);
    outer_ = 1;
    for (int d = 0; d < p; ++d) outer_ *= ps[d];
    whole_ = static_cast<uint8_t*>(whole.data);
    row_bytes_ =
        outer_ > 0 ? static_cast<size_t>(whole.numel()) * esize / static_cast<size_t>(outer_) : 0;
    pieces_.clear();
    size_t offset = 0;
    for (const Operand& part : parts) {
      const size_t bytes =
          outer_ > 0 ? static_cast<size_t>(part.numel()) * esize / static_cast<size_t>(outer_) : 0;
      pieces_.push_back({static_cast<uint8_t*>(part.data), bytes, offset});
      offset += bytes;
    }
    return Status();
  }

  Status run(ThreadPool& pool) override {
    const size_t np = pieces_.size();
    pool.parallel_for(static_cast<size_t>(outer_) * np, 1, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const size_t row = t / np;
        const Piece& pc = pieces_[t % np];
        if (pc.bytes == 0) continue;
        uint8_t* w = whole_ + row * row_bytes_ + pc.offset;
        uint8_t* q = pc.data + row * pc.bytes;
        if (concat_) {
          std::memcpy(w, q, pc.bytes);
        } else {
          std::memcpy(q, w, pc.bytes);
        }
      }
    });
    return Status();
  }

  std::string describe() const override { return concat_ ? "tessera concat" : "tessera split"; }

  struct Piece {
    uint8_t* data;
    size_t bytes;   // per outer row
    size_t offset;  // within a row of the whole
  };
  bool concat_ = true;
  bool has_constant_ = false;
  int axis_ = 0;
  int rank_ = 0;
  int64_t outer_ = 1;
  size_t row_bytes_ = 0;
  uint8_t* whole_ = nullptr;
  std::vector<Piece> pieces_;
};

Result<std::unique_ptr<Kernel>> make_concat(const KernelRequest& req) {
  const Node& n = req.node;
  const int rank = req.graph.value(n.outputs[0]).info.shape.rank();
  if (rank < 1) return decline();
  ASSIGN_OR_RETURN(int64_t axis, n.attrs.get_int("axis"));
  if (axis < -rank || axis >= rank) return decline();
  auto k = std::make_unique<JoinSplitKernel>();
  k->concat_ = true;
  k->axis_ = static_cast<int>(axis < 0 ? axis + rank : axis);
  k->rank_ = rank;
  for (int i = 0; i < req.ctx.num_inputs(); ++i) {
    if (!req.ctx.has_input(i)) return decline();
    k->has_constant_ = k->has_constant_ || req.ctx.constant(i) != nullptr;
  }
  return std::unique_ptr<Kernel>(std::move(k));
}

Result<std::unique_ptr<Kernel>> make_split(const KernelRequest& req) {
  const Node& n = req.node;
  const int rank = req.ctx.input(0).shape.rank();
  if (rank < 1 || req.ctx.constant(0) != nullptr) return decline();
  for (ValueId v : n.outputs) {
    if (v == kNoValue) return decline();
  }
  ASSIGN_OR_RETURN(int64_t axis, n.attrs.int_or("axis", 0));
  if (axis < -rank || axis >= rank) return decline();
  auto k = std::make_unique<JoinSplitKernel>();
  k->concat_ = false;
  k->axis_ = static_cast<int>(axis < 0 ? axis + rank : axis);
  k->rank_ = rank;
  return std::unique_ptr<Kernel>(std::move(k));
}

// Reshape and friends: the bytes in logical order do not change.
class CopyKernel final : public Kernel {
 public:
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    src_ = static_cast<const uint8_t*>(in[0].data);
    dst_ = static_cast<uint8_t*>(out[0].data);
    bytes_ = static_cast<size_t>(out[0].numel()) * dtype_size(out[0].dtype);
    return Status();
  }
  Status run(ThreadPool& pool) override {
    if (src_ == dst_) return Status();
    pool.parallel_for(bytes_, 1 << 16,
                      [&](size_t b, size_t e) { std::memcpy(dst_ + b, src_ + b, e - b); });
    return Status();
  }
  std::string describe() const override { return "tessera copy (reshape)"; }

 private:
  const uint8_t* src_ = nullptr;
  uint8_t* dst_ = nullptr;
  size_t bytes_ = 0;
};

Result<std::unique_ptr<Kernel>> make_copy(const KernelRequest& req) {
  if (req.ctx.constant(0) != nullptr || req.node.outputs.empty()) return decline();
  if (req.node.kind == OpKind::kDropout && req.node.outputs.size() > 1 &&
      req.node.outputs[1] != kNoValue) {
    return decline();  // the mask output
  }
  const TensorInfo& out = req.graph.value(req.node.outputs[0]).info;
  if (out.dtype != req.ctx.input(0).dtype || out.shape.numel() != req.ctx.input(0).shape.numel())
    return decline();
  return std::unique_ptr<Kernel>(new CopyKernel());
}

}  // namespace

const KernelEntry kTensorKernels[] = {
    {OpKind::kConcat, "tessera_concat", make_concat},
    {OpKind::kSplit, "tessera_split", make_split},
    {OpKind::kReshape, "tessera_copy", make_copy},
    {OpKind::kFlatten, "tessera_copy", make_copy},
    {OpKind::kSqueeze, "tessera_copy", make_copy},
    {OpKind::kUnsqueeze, "tessera_copy", make_copy},
    {OpKind::kIdentity, "tessera_copy", make_copy},
    {OpKind::kDropout, "tessera_copy", make_copy},
};
const size_t kNumTensorKernels = sizeof(kTensorKernels) / sizeof(kTensorKernels[0]);

}  // namespace tessera::cpu
