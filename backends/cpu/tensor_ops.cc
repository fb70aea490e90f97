// Data movement XNNPACK (this snapshot) lacks, in whichever layout the tensors live:
//   - Concat and Split along any axis (an NHWC channel concat stays NHWC, so inception and dense
//     blocks need no conversion);
//   - Slice, Pad, Transpose, Gather (constant indices) and Resize (nearest) as one gather copy:
//     ops/ computes each op's per-dimension source maps (ops/kernel_params.h) and this file turns
//     them into byte offsets for the bound layouts (an NHWC channel slice or spatial pad needs no
//     conversion), split over the pool along the outermost dimension;
//   - Resize (linear, 2-D) vectorised over the contiguous channels;
//   - the reshape family (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout), which aliases
//     its input: the program gives the output the input's arena storage (see
//     Kernel::aliases_input).
#include <cpuinfo.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/kernel_table.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/simd.h"
#include "ops/kernel_params.h"

#if TESSERA_X86_64
#include <immintrin.h>
#endif

namespace tessera::cpu {

namespace {

// "int8 " / "bf16 " / "": how a precision-neutral kernel names the precision it moves.
std::string held_name(Precision p) {
  return p == Precision::kInt8 ? "int8 " : p == Precision::kBf16 ? "bf16 " : "";
}

// Logical axis -> memory axis of a rank-4 NHWC tensor.
int physical_axis(int axis, int rank, Layout l) {
  if (rank != 4 || l != Layout::kNHWC) return axis;
  const int map[4] = {0, 3, 1, 2};
  return map[axis];
}

#if TESSERA_X86_64
#define TESSERA_VBMI target("avx512f,avx512bw,avx512vbmi")
// lut[idx] for 64 byte indices: two 128-entry lookups (vpermi2b), the top bit choosing.
__attribute__((always_inline, TESSERA_VBMI)) inline __m512i lut64(__m512i idx, __m512i t0,
                                                                  __m512i t1, __m512i t2,
                                                                  __m512i t3) {
  const __m512i lo = _mm512_permutex2var_epi8(t0, idx, t1);
  const __m512i hi = _mm512_permutex2var_epi8(t2, idx, t3);
  return _mm512_mask_blend_epi8(_mm512_movepi8_mask(idx), lo, hi);
}

// dst[i] = lut[src[i]] with AVX-512 VBMI byte permutes; the tail through masked loads and stores.
__attribute__((TESSERA_VBMI)) void lut_bytes_vbmi(const uint8_t* src, uint8_t* dst, size_t n,
                                                  const uint8_t* lut) {
  const __m512i t0 = _mm512_loadu_si512(lut), t1 = _mm512_loadu_si512(lut + 64);
  const __m512i t2 = _mm512_loadu_si512(lut + 128), t3 = _mm512_loadu_si512(lut + 192);
  size_t i = 0;
  for (; i + 64 <= n; i += 64)
    _mm512_storeu_si512(dst + i, lut64(_mm512_loadu_si512(src + i), t0, t1, t2, t3));
  if (i < n) {
    const __mmask64 k = (uint64_t{1} << (n - i)) - 1;
    _mm512_mask_storeu_epi8(dst + i, k, lut64(_mm512_maskz_loadu_epi8(k, src + i), t0, t1, t2, t3));
  }
}
#undef TESSERA_VBMI
#endif

// dst[i] = lut[src[i]] for n bytes.
void lut_bytes(const uint8_t* src, uint8_t* dst, size_t n, const uint8_t* lut) {
#if TESSERA_X86_64
  static const bool vbmi = cpuinfo_initialize() && cpuinfo_has_x86_avx512vbmi();
  if (vbmi) {
    lut_bytes_vbmi(src, dst, n, lut);
    return;
  }
#endif
  for (size_t i = 0; i < n; ++i) dst[i] = lut[src[i]];
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

  bool int8_io() const override { return int8_; }
  bool bf16_io() const override { return bf16_; }
  bool reduced_inputs_all() const override { return int8_ || bf16_; }

  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    const Operand& whole = concat_ ? out[0] : in[0];
    std::span<const Operand> parts = concat_ ? in : out;
    const int p = physical_axis(axis_, rank_, whole.layout);
    const Shape ps = whole.physical_shape();
    const size_t esize = int8_ ? 1 : bf16_ ? 2 : dtype_size(whole.dtype);
    if (bf16_) {
      bool all = whole.bf16;
      for (const Operand& part : parts) all = all && part.bf16;
      if (!all) return internal_error("bf16 concat: bound to tensors of another precision");
    }
    luts_.clear();
    if (int8_) {
      if (!whole.int8 || !(whole.quant == out_q_)) {
        return internal_error("int8 concat: bound to an output of another quantisation");
      }
      for (size_t i = 0; i < parts.size(); ++i) {
        if (!parts[i].int8 || !(parts[i].quant == in_q_[i])) {
          return internal_error("int8 concat: input " + std::to_string(i) +
                                " bound in another quantisation");
        }
        // q -> the f32 value it stands for -> the output's q, as the conversions compute it.
        std::vector<uint8_t> lut;
        if (!(in_q_[i] == out_q_)) {
          lut.resize(256);
          float x[256];
          for (int q = 0; q < 256; ++q) {
            const uint8_t b = static_cast<uint8_t>(q);
            dequantize_array(&b, &x[q], 1, in_q_[i], nullptr);
          }
          quantize_array(x, lut.data(), 256, out_q_, nullptr);
        }
        luts_.push_back(std::move(lut));
      }
    }
    outer_ = 1;
    for (int d = 0; d < p; ++d) outer_ *= ps[d];
    whole_ = static_cast<uint8_t*>(whole.data);
    row_bytes_ =
        outer_ > 0 ? static_cast<size_t>(whole.numel()) * esize / static_cast<size_t>(outer_) : 0;
    // A channel concat in NHWC has one row per pixel; the whole may itself be a channel slice of
    // a wider tensor (a Concat inside a Concat), its rows then pixel_stride apart.
    const bool channel_rows = rank_ == 4 && whole.layout == Layout::kNHWC && p == 3;
    whole_stride_ = row_bytes_;
    if (whole.pixel_stride > 0) {
      if (!concat_ || !channel_rows)
        return internal_error("concat: a strided output must be an NHWC channel concat");
      whole_stride_ = static_cast<size_t>(whole.pixel_stride) * esize;
    }
    pieces_.clear();
    copied_bytes_ = 0;
    size_t offset = 0;
    for (const Operand& part : parts) {
      const size_t bytes =
          outer_ > 0 ? static_cast<size_t>(part.numel()) * esize / static_cast<size_t>(outer_) : 0;
      // An input that its producer wrote straight into its place in the output (the program
      // made it a slice of the output, see CpuProgram::place_concat_inputs): nothing to copy.
      const bool in_place = concat_ && channel_rows && part.pixel_stride > 0 &&
                            part.data == whole_ + offset &&
                            static_cast<size_t>(part.pixel_stride) * esize == whole_stride_;
      const uint8_t* lut =
          int8_ && !luts_[pieces_.size()].empty() ? luts_[pieces_.size()].data() : nullptr;
      pieces_.push_back({static_cast<uint8_t*>(part.data), bytes, offset, in_place, lut});
      if (!in_place) copied_bytes_ += bytes;
      offset += bytes;
    }
    return Status();
  }

  // Below kSerialBytes the copy stays on the calling thread; otherwise each task copies whole
  // rows (>= kTaskBytes of them) or, when there are too few rows to share (a channel concat in
  // NCHW has one per image), a kTaskBytes range of one row.
  static constexpr size_t kSerialBytes = 64 << 10, kTaskBytes = 32 << 10;

  Status run(ThreadPool& pool) override {
    const size_t rows = static_cast<size_t>(outer_), total = rows * copied_bytes_;
    if (total == 0) return Status();
    if (total < kSerialBytes) {
      for (size_t r = 0; r < rows; ++r) copy_range(r, 0, row_bytes_);
      return Status();
    }
    const size_t rows_per_task = std::max<size_t>(1, kTaskBytes / copied_bytes_);
    if (rows / rows_per_task >= 2 * static_cast<size_t>(pool.num_threads())) {
      pool.parallel_for(rows, rows_per_task, [&](size_t b, size_t e) {
        for (size_t r = b; r < e; ++r) copy_range(r, 0, row_bytes_);
      });
      return Status();
    }
    const size_t per_row = (row_bytes_ + kTaskBytes - 1) / kTaskBytes;
    pool.parallel_for(rows * per_row, 1, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const size_t lo = t % per_row * kTaskBytes;
        copy_range(t / per_row, lo, std::min(row_bytes_, lo + kTaskBytes));
      }
    });
    return Status();
  }

  // Copies bytes [lo, hi) of row `row` of the whole from or to the pieces they belong to.
  void copy_range(size_t row, size_t lo, size_t hi) const {
    for (const Piece& pc : pieces_) {
      const size_t a = std::max(lo, pc.offset), b = std::min(hi, pc.offset + pc.bytes);
      if (a >= b || pc.in_place) continue;
      uint8_t* w = whole_ + row * whole_stride_ + a;
      uint8_t* q = pc.data + row * pc.bytes + (a - pc.offset);
      if (concat_ && pc.lut != nullptr) {
        lut_bytes(q, w, b - a, pc.lut);
      } else if (concat_) {
        std::memcpy(w, q, b - a);
      } else {
        std::memcpy(q, w, b - a);
      }
    }
  }

  // A channel concat (rank 4, logical axis 1) writes its output as a strided NHWC view when the
  // program asks (the layout it is bound in is checked in bind()).
  bool writes_strided_output() const override { return concat_ && rank_ == 4 && axis_ == 1; }

  std::string describe() const override {
    if (!concat_) return "tessera split";
    if (bf16_) return "tessera bf16 concat";
    if (int8_) {
      int requantised = 0;
      for (const std::vector<uint8_t>& l : luts_) requantised += l.empty() ? 0 : 1;
      return "tessera int8 concat (" + std::to_string(requantised) + " of " +
             std::to_string(luts_.size()) + " inputs requantised)";
    }
    const size_t copied = static_cast<size_t>(
        std::count_if(pieces_.begin(), pieces_.end(), [](const Piece& p) { return !p.in_place; }));
    if (copied == pieces_.size()) return "tessera concat";
    return "tessera concat (" + std::to_string(pieces_.size() - copied) + " of " +
           std::to_string(pieces_.size()) + " in place)";
  }

  struct Piece {
    uint8_t* data;
    size_t bytes;                  // per outer row
    size_t offset;                 // within a row of the whole
    bool in_place;                 // already written into the whole by its producer
    const uint8_t* lut = nullptr;  // int8: input byte -> output byte (null: copied as is)
  };
  bool int8_ = false;  // int8 in and out (make_int8_concat)
  bool bf16_ = false;  // bf16 in and out (make_bf16_concat)
  std::vector<QuantParam> in_q_;
  QuantParam out_q_;
  std::vector<std::vector<uint8_t>> luts_;  // int8: per input, empty where copied as is
  bool concat_ = true;
  bool has_constant_ = false;
  int axis_ = 0;
  int rank_ = 0;
  int64_t outer_ = 1;
  size_t row_bytes_ = 0;
  size_t whole_stride_ = 0;  // bytes between rows of the whole
  size_t copied_bytes_ = 0;  // bytes per row the copy moves (the pieces not in place)
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

}  // namespace

Result<std::unique_ptr<Kernel>> make_bf16_concat(const KernelRequest& req) {
  // f32 values only (bf16 stands in for f32; an i64 shape Concat stays as it is).
  if (req.node.outputs.empty() || req.graph.value(req.node.outputs[0]).info.dtype != DType::kF32)
    return decline();
  for (ValueId v : req.node.inputs) {
    if (v == kNoValue || req.graph.value(v).is_constant ||
        req.graph.value(v).info.dtype != DType::kF32)
      return decline();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, make_concat(req));
  if (k == nullptr) return decline();
  static_cast<JoinSplitKernel&>(*k).bf16_ = true;
  return k;
}

Result<std::unique_ptr<Kernel>> make_int8_concat(const KernelRequest& req,
                                                 const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  auto q = [&](ValueId v) { return quant_of(quant, v); };
  if (n.kind != OpKind::kConcat || n.outputs.empty() || !q(n.outputs[0]).valid()) return decline();
  for (ValueId v : n.inputs) {
    if (v == kNoValue || req.graph.value(v).is_constant || !q(v).valid()) return decline();
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> k, make_concat(req));
  if (k == nullptr) return decline();
  auto& c = static_cast<JoinSplitKernel&>(*k);
  c.int8_ = true;
  c.out_q_ = q(n.outputs[0]);
  for (ValueId v : n.inputs) c.in_q_.push_back(q(v));
  return k;
}

namespace {

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

// Reshape and friends: the bytes in logical order do not change, so the output aliases the input
// (the program binds both to one buffer). If the program could not alias (it always can for a
// single-output view), the kernel copies.
class AliasKernel final : public Kernel {
 public:
  enum class Input {
    kLogical,  // a real reshape reads logical order
    kKeep,     // Identity / Dropout keep an NHWC tensor NHWC
    kNhwc,     // the first view of a fused channel shuffle: the NHWC bytes, reinterpreted
  };
  AliasKernel(Input input, std::string what, Precision io = Precision::kF32)
      : input_(input), what_(std::move(what)), io_(io) {}
  bool bf16_io() const override { return io_ == Precision::kBf16; }
  bool int8_io() const override { return io_ == Precision::kInt8; }
  bool precision_neutral() const override { return true; }
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    std::fill(wanted.begin(), wanted.end(), Layout::kNCHW);
    std::fill(produced.begin(), produced.end(), Layout::kNCHW);
    wanted[0] = input_ == Input::kKeep   ? available[0]
                : input_ == Input::kNhwc ? Layout::kNHWC
                                         : Layout::kNCHW;
    if (input_ == Input::kKeep) produced[0] = available[0];
  }
  bool aliases_input() const override { return true; }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    src_ = static_cast<const uint8_t*>(in[0].data);
    dst_ = static_cast<uint8_t*>(out[0].data);
    bytes_ = static_cast<size_t>(out[0].numel()) * out[0].element_bytes();
    return Status();
  }
  Status run(ThreadPool& pool) override {
    copy_bytes(dst_, src_, bytes_, &pool);
    return Status();
  }
  std::string describe() const override {
    return "tessera " + held_name(io_) + what_ + (src_ == dst_ ? " (alias, no copy)" : " (copy)");
  }

 private:
  Input input_;
  std::string what_;
  Precision io_;
  const uint8_t* src_ = nullptr;
  uint8_t* dst_ = nullptr;
  size_t bytes_ = 0;
};

Result<std::unique_ptr<Kernel>> make_alias(const KernelRequest& req) {
  if (req.ctx.constant(0) != nullptr || req.node.outputs.empty()) return decline();
  if (req.node.kind == OpKind::kDropout && req.node.outputs.size() > 1 &&
      req.node.outputs[1] != kNoValue) {
    return decline();  // the mask output
  }
  const TensorInfo& out = req.graph.value(req.node.outputs[0]).info;
  const TensorInfo& in = req.ctx.input(0);
  if (out.dtype != in.dtype || out.shape.numel() != in.shape.numel()) return decline();
  const bool keep = out.shape == in.shape && in.dtype == DType::kF32;
  return std::unique_ptr<Kernel>(
      new AliasKernel(keep ? AliasKernel::Input::kKeep : AliasKernel::Input::kLogical, "reshape"));
}

// A 1x1 window with stride 1 and no padding (torchvision's adaptive average pool on a feature map
// already at the target size): the output is the input, so it aliases it in whichever layout.
Result<std::unique_ptr<Kernel>> make_identity_pool(const KernelRequest& req) {
  const Node& n = req.node;
  if (req.ctx.constant(0) != nullptr || n.outputs.size() != 1 || n.attrs.has("activation"))
    return decline();
  const TensorInfo& in = req.ctx.input(0);
  if (req.graph.value(n.outputs[0]).info.shape != in.shape) return decline();
  const size_t spatial = static_cast<size_t>(std::max(in.shape.rank() - 2, 0));
  auto all = [&](const char* name, int64_t want, bool required) -> Result<bool> {
    if (!n.attrs.has(name)) return !required;
    ASSIGN_OR_RETURN(std::vector<int64_t> v, n.attrs.get_ints(name));
    if (v.size() != (std::string(name) == "pads" ? 2 * spatial : spatial)) return false;
    return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == want; });
  };
  ASSIGN_OR_RETURN(bool k1, all("kernel_shape", 1, true));
  ASSIGN_OR_RETURN(bool s1, all("strides", 1, false));
  ASSIGN_OR_RETURN(bool p0, all("pads", 0, false));
  ASSIGN_OR_RETURN(std::string auto_pad, n.attrs.string_or("auto_pad", "NOTSET"));
  if (!k1 || !s1 || !p0 || (auto_pad != "NOTSET" && auto_pad != "VALID")) return decline();
  return std::unique_ptr<Kernel>(new AliasKernel(AliasKernel::Input::kKeep, "1x1 pool"));
}

// Memory position of each logical dimension, and the logical dimensions in memory order.
std::vector<int> memory_position(int rank, Layout l) {
  std::vector<int> pos(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d) pos[static_cast<size_t>(d)] = d;
  if (rank == 4 && l == Layout::kNHWC) pos = {0, 3, 1, 2};
  return pos;
}
std::vector<int> memory_order(int rank, Layout l) {
  std::vector<int> order(static_cast<size_t>(rank));
  const std::vector<int> pos = memory_position(rank, l);
  for (int d = 0; d < rank; ++d) order[static_cast<size_t>(pos[static_cast<size_t>(d)])] = d;
  return order;
}

// Byte strides of an operand's logical dimensions in its memory.
std::vector<int64_t> logical_byte_strides(const Operand& o) {
  const int rank = o.shape.rank();
  const Shape ps = o.physical_shape();
  std::vector<int64_t> mem(static_cast<size_t>(rank));
  int64_t st = static_cast<int64_t>(o.element_bytes());
  for (int k = rank - 1; k >= 0; --k) {
    mem[static_cast<size_t>(k)] = st;
    st *= ps[k];
  }
  const std::vector<int> pos = memory_position(rank, o.layout);
  std::vector<int64_t> s(static_cast<size_t>(rank));
  for (int d = 0; d < rank; ++d)
    s[static_cast<size_t>(d)] = mem[static_cast<size_t>(pos[static_cast<size_t>(d)])];
  return s;
}

// Slice, Pad, Transpose, Gather, Resize (nearest): a gather copy over per-dimension maps.
class GatherKernel final : public Kernel {
 public:
  // Spatial ops (Slice, Pad, Resize) want rank-4 inputs NHWC, as the convolutions around them
  // do; Transpose and Gather read whatever layout their input is in.
  GatherKernel(IndexMaps maps, std::string name, int in_rank, int out_rank, DType dtype,
               bool prefer_nhwc, Precision io = Precision::kF32)
      : maps_(std::move(maps)),
        name_(std::move(name)),
        in_rank_(in_rank),
        out_rank_(out_rank),
        dtype_(dtype),
        prefer_nhwc_(prefer_nhwc),
        io_(io) {}
  bool bf16_io() const override { return io_ == Precision::kBf16; }
  bool int8_io() const override { return io_ == Precision::kInt8; }
  bool precision_neutral() const override { return true; }

  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    std::fill(wanted.begin(), wanted.end(), Layout::kNCHW);
    std::fill(produced.begin(), produced.end(), Layout::kNCHW);
    if (dtype_ != DType::kF32) return;
    const Layout in = in_rank_ != 4 ? Layout::kNCHW : prefer_nhwc_ ? Layout::kNHWC : available[0];
    wanted[0] = in;
    if (out_rank_ != 4) return;
    // The output layout whose innermost memory dimension is the input's innermost one (so rows
    // are copied as runs); the input's layout when neither or both are.
    const int in_inner = memory_order(in_rank_, in).back();
    auto runs = [&](Layout l) {
      return maps_.source_dim[static_cast<size_t>(memory_order(4, l).back())] == in_inner;
    };
    const Layout other = in == Layout::kNHWC ? Layout::kNCHW : Layout::kNHWC;
    produced[0] = !runs(in) && runs(other) ? other : in;
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out,
              ThreadPool& pool) override {
    const size_t elem = in[0].element_bytes();
    if (elem != out[0].element_bytes() || elem > sizeof(zero_))
      return internal_error(name_ + ": element too large");
    int64_t base = 0;
    const GatherCopyPlan plan = gather_plan(maps_, logical_byte_strides(in[0]),
                                            memory_order(out_rank_, out[0].layout), elem, &base);
    src_ = static_cast<const uint8_t*>(in[0].data) + (out[0].numel() > 0 ? base : 0);
    dst_ = static_cast<uint8_t*>(out[0].data);
    // Pad's constant_value (input 2) when present, else zeros.
    const bool has_fill = name_ == "pad" && in.size() > 2 && in[2].data != nullptr &&
                          in[2].numel() == 1 && in[2].dtype == in[0].dtype;
    fill_ = has_fill ? in[2].data : zero_;
    // Split along the first dimension longer than 1 into a few chunks per thread.
    chunks_.clear();
    offsets_.clear();
    const size_t bytes = static_cast<size_t>(out[0].numel()) * elem;
    size_t k = 0;
    while (k < plan.offsets.size() && plan.offsets[k].size() == 1) ++k;
    size_t pieces = 1;
    if (k < plan.offsets.size() && bytes >= (64u << 10)) {
      pieces = std::min(plan.offsets[k].size(), static_cast<size_t>(4 * pool.num_threads()));
    }
    if (pieces <= 1 || out[0].numel() == 0) {
      chunks_.push_back(plan);
      offsets_.push_back(0);
      return Status();
    }
    const size_t len = plan.offsets[k].size();
    const size_t row_bytes = bytes / len;
    for (size_t p = 0; p < pieces; ++p) {
      const size_t b = len * p / pieces, e = len * (p + 1) / pieces;
      GatherCopyPlan c = plan;
      c.offsets[k].assign(plan.offsets[k].begin() + static_cast<std::ptrdiff_t>(b),
                          plan.offsets[k].begin() + static_cast<std::ptrdiff_t>(e));
      chunks_.push_back(std::move(c));
      offsets_.push_back(b * row_bytes);
    }
    return Status();
  }

  Status run(ThreadPool& pool) override {
    if (chunks_.size() == 1) {
      gather_copy(chunks_[0], src_, dst_, fill_);
      return Status();
    }
    pool.parallel_for(chunks_.size(), 1, [&](size_t b, size_t e) {
      for (size_t c = b; c < e; ++c) gather_copy(chunks_[c], src_, dst_ + offsets_[c], fill_);
    });
    return Status();
  }

  std::string describe() const override {
    return "tessera " + held_name(io_) + name_ + " (gather copy)";
  }

 private:
  IndexMaps maps_;
  std::string name_;
  int in_rank_, out_rank_;
  DType dtype_;
  bool prefer_nhwc_;
  Precision io_;
  const uint8_t* src_ = nullptr;
  uint8_t* dst_ = nullptr;
  const void* fill_ = nullptr;
  uint8_t zero_[8] = {};
  std::vector<GatherCopyPlan> chunks_;
  std::vector<size_t> offsets_;
};

Result<std::unique_ptr<Kernel>> gather_kernel(const KernelRequest& req, Result<IndexMaps> maps,
                                              const char* name, bool prefer_nhwc,
                                              Precision io = Precision::kF32) {
  if (!maps.ok()) return maps.status();
  if (req.ctx.constant(0) != nullptr || req.node.outputs.empty()) return decline();
  const TensorInfo& out = req.graph.value(req.node.outputs[0]).info;
  return std::unique_ptr<Kernel>(new GatherKernel(std::move(*maps), name,
                                                  req.ctx.input(0).shape.rank(), out.shape.rank(),
                                                  req.ctx.input(0).dtype, prefer_nhwc, io));
}

Result<std::unique_ptr<Kernel>> make_slice(const KernelRequest& req) {
  return gather_kernel(req, slice_index_maps(req.ctx), "slice", true);
}
Result<std::unique_ptr<Kernel>> make_pad(const KernelRequest& req) {
  return gather_kernel(req, pad_index_maps(req.ctx), "pad", true);
}
Result<std::unique_ptr<Kernel>> make_transpose(const KernelRequest& req) {
  return gather_kernel(req, transpose_index_maps(req.ctx), "transpose", false);
}
Result<std::unique_ptr<Kernel>> make_gather(const KernelRequest& req) {
  if (req.ctx.constant(1) == nullptr || req.ctx.input(1).shape.rank() > 1) return decline();
  return gather_kernel(req, gather_index_maps(req.ctx), "gather", false);
}

}  // namespace

Result<std::unique_ptr<Kernel>> make_reduced_movement_kernel(const KernelRequest& req, Precision io,
                                                             const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  if (io == Precision::kF32 || n.inputs.empty() || n.outputs.empty() || n.inputs[0] == kNoValue ||
      n.outputs[0] == kNoValue || req.ctx.constant(0) != nullptr)
    return decline();
  const ValueId x = n.inputs[0], y = n.outputs[0];
  const TensorInfo& in = req.ctx.input(0);
  const TensorInfo& out = req.graph.value(y).info;
  if (in.dtype != DType::kF32 || out.dtype != DType::kF32) return decline();
  if (io == Precision::kInt8) {
    const QuantParam qx = quant_of(quant, x);
    if (!qx.valid() || !(qx == quant_of(quant, y))) return decline();
  }
  switch (n.kind) {
    case OpKind::kSlice:
      return gather_kernel(req, slice_index_maps(req.ctx), "slice", true, io);
    case OpKind::kTranspose:
      return gather_kernel(req, transpose_index_maps(req.ctx), "transpose", false, io);
    case OpKind::kGather:
      if (req.ctx.constant(1) == nullptr || req.ctx.input(1).shape.rank() > 1) return decline();
      return gather_kernel(req, gather_index_maps(req.ctx), "gather", false, io);
    case OpKind::kReshape:
    case OpKind::kFlatten:
    case OpKind::kSqueeze:
    case OpKind::kUnsqueeze:
    case OpKind::kIdentity:
    case OpKind::kDropout: {
      if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return decline();  // Dropout's mask
      if (out.shape.numel() != in.shape.numel()) return decline();
      // Reduced tensors of rank 4 are held NHWC: a view may reinterpret them only where that is
      // the logical order too (or nothing changes).
      const bool same = out.shape == in.shape;
      const auto logical = [](const Shape& s) { return s.rank() != 4 || layout_trivial(s); };
      if (!same && !(logical(in.shape) && logical(out.shape))) return decline();
      return std::unique_ptr<Kernel>(new AliasKernel(
          same ? AliasKernel::Input::kKeep : AliasKernel::Input::kLogical, "reshape", io));
    }
    default:
      return decline();
  }
}

namespace {

// Resize in linear mode over H and W of a rank-4 f32 tensor. Per output pixel and channel, the
// same arithmetic as the reference's two separable passes (H first, then W, except that W goes
// first when it shrinks and H grows; a pass that is an identity is skipped, as there), so
// results match it exactly; channels of an NHWC image are the contiguous, vectorised inner loop.
class ResizeLinearKernel final : public NhwcIo<> {
 public:
  explicit ResizeLinearKernel(std::vector<LinearTaps> taps) : taps_(std::move(taps)) {}
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    x_ = static_cast<const float*>(in[0].data);
    y_ = out[0].f32();
    const Shape& is = in[0].shape;
    const Shape& os = out[0].shape;
    // A layout-trivial input has the same bytes either way: the output's layout decides.
    nhwc_ = (layout_trivial(is) ? out[0].layout : in[0].layout) == Layout::kNHWC;
    // An image is H x W pixels of `pixel` contiguous floats: one per batch entry in NHWC, one
    // per (batch, channel) in NCHW (layout-trivial tensors may arrive either way).
    pixel_ = nhwc_ ? is[1] : 1;
    images_ = nhwc_ ? is[0] : is[0] * is[1];
    ih_ = is[2];
    iw_ = is[3];
    oh_ = os[2];
    ow_ = os[3];
    w_first_ = ow_ <= iw_ && oh_ > ih_;
    return Status();
  }
  Status run(ThreadPool& pool) override {
    const LinearTaps& th = taps_[2];
    const LinearTaps& tw = taps_[3];
    const int64_t c = pixel_;
    pool.parallel_for(static_cast<size_t>(images_ * oh_), 1, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        const int64_t img = static_cast<int64_t>(t) / oh_, oy = static_cast<int64_t>(t) % oh_;
        const float* x = x_ + img * ih_ * iw_ * c;
        float* y = y_ + (img * oh_ + oy) * ow_ * c;
        const size_t uy = static_cast<size_t>(oy);
        const float* r0 = x + th.i0[uy] * iw_ * c;
        const float* r1 = x + th.i1[uy] * iw_ * c;
        const float wy0 = th.w0[uy], wy1 = th.w1[uy];
        for (int64_t ox = 0; ox < ow_; ++ox) {
          const size_t ux = static_cast<size_t>(ox);
          const int64_t x0 = (tw.identity ? ox : tw.i0[ux]) * c;
          const int64_t x1 = (tw.identity ? ox : tw.i1[ux]) * c;
          const float wx0 = tw.w0[ux], wx1 = tw.w1[ux];
          float* yp = y + ox * c;
          if (th.identity) {
            const float* a = x + oy * iw_ * c;
            for (int64_t k = 0; k < c; ++k) yp[k] = wx0 * a[x0 + k] + wx1 * a[x1 + k];
          } else if (tw.identity) {
            for (int64_t k = 0; k < c; ++k) yp[k] = wy0 * r0[x0 + k] + wy1 * r1[x0 + k];
          } else if (w_first_) {
            for (int64_t k = 0; k < c; ++k) {
              const float v0 = wx0 * r0[x0 + k] + wx1 * r0[x1 + k];
              const float v1 = wx0 * r1[x0 + k] + wx1 * r1[x1 + k];
              yp[k] = wy0 * v0 + wy1 * v1;
            }
          } else {
            for (int64_t k = 0; k < c; ++k) {
              const float v0 = wy0 * r0[x0 + k] + wy1 * r1[x0 + k];
              const float v1 = wy0 * r0[x1 + k] + wy1 * r1[x1 + k];
              yp[k] = wx0 * v0 + wx1 * v1;
            }
          }
        }
      }
    });
    return Status();
  }
  std::string describe() const override {
    return std::string("tessera resize linear ") + (nhwc_ ? "nhwc" : "nchw");
  }

 private:
  std::vector<LinearTaps> taps_;
  const float* x_ = nullptr;
  float* y_ = nullptr;
  bool nhwc_ = true;
  bool w_first_ = false;  // the reference's pass order: W before H when W shrinks and H grows
  int64_t pixel_ = 1, images_ = 0, ih_ = 0, iw_ = 0, oh_ = 0, ow_ = 0;
};

Result<std::unique_ptr<Kernel>> make_resize(const KernelRequest& req) {
  ASSIGN_OR_RETURN(ResizeKernelParams p, resize_kernel_params(req.ctx));
  if (!p.linear) return gather_kernel(req, std::move(p.maps), "resize nearest", true);
  // Linear: rank 4 with N and C unchanged, H and W both resized or identity.
  if (req.ctx.input(0).shape.rank() != 4 || req.ctx.constant(0) != nullptr) return decline();
  if (!p.taps[0].identity || !p.taps[1].identity) return decline();
  if (p.taps[2].identity && p.taps[3].identity) return decline();  // a copy, or empty
  return std::unique_ptr<Kernel>(new ResizeLinearKernel(std::move(p.taps)));
}

// The last layer of a fused channel shuffle: reads the NHWC bytes of the shuffle's input (through
// the two aliasing views before it) and writes out[p][j * groups + i] = in[p][i * cpg + j], one
// small transpose per pixel, in NHWC.
class ChannelShuffleKernel final : public Kernel {
 public:
  explicit ChannelShuffleKernel(int64_t groups, Precision io = Precision::kF32)
      : groups_(groups), io_(io) {}
  bool bf16_io() const override { return io_ == Precision::kBf16; }
  bool int8_io() const override { return io_ == Precision::kInt8; }
  bool precision_neutral() const override { return true; }
  void choose_layouts(std::span<const Layout>, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    std::fill(wanted.begin(), wanted.end(), Layout::kNCHW);  // the rank-5 view
    produced[0] = Layout::kNHWC;
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    x_ = in[0].data;
    y_ = out[0].data;
    elem_ = out[0].element_bytes();
    if (elem_ != in[0].element_bytes())
      return internal_error("channel shuffle: input and output held in different precisions");
    const Shape& s = out[0].shape;
    channels_ = s[1];
    pixels_ = s[0] * s[2] * s[3];
    return Status();
  }
  Status run(ThreadPool& pool) override {
    switch (elem_) {
      case 1:
        return shuffle<uint8_t>(pool);
      case 2:
        return shuffle<uint16_t>(pool);
      case 4:
        return shuffle<uint32_t>(pool);
      default:
        return internal_error("channel shuffle: " + std::to_string(elem_) + "-byte elements");
    }
  }
  std::string describe() const override {
    return "tessera " + held_name(io_) + "channel shuffle nhwc, " + std::to_string(groups_) +
           " groups";
  }

 private:
  template <typename T>
  Status shuffle(ThreadPool& pool) {
    const int64_t c = channels_, g = groups_, cpg = c / g;
    const T* x0 = static_cast<const T*>(x_);
    T* y0 = static_cast<T*>(y_);
    pool.parallel_for(static_cast<size_t>(pixels_), 64, [&](size_t b, size_t e) {
      for (size_t p = b; p < e; ++p) {
        const T* x = x0 + static_cast<int64_t>(p) * c;
        T* y = y0 + static_cast<int64_t>(p) * c;
        for (int64_t j = 0; j < cpg; ++j) {
          for (int64_t i = 0; i < g; ++i) y[j * g + i] = x[i * cpg + j];
        }
      }
    });
    return Status();
  }

  int64_t groups_;
  Precision io_;
  const void* x_ = nullptr;
  void* y_ = nullptr;
  size_t elem_ = 4;
  int64_t channels_ = 0, pixels_ = 0;
};

}  // namespace

namespace {

// Who reads what inside a slice, for the fusions below.
class SliceReaders {
 public:
  SliceReaders(const Graph& g, std::span<const NodeId> layers,
               std::span<const ValueId> slice_outputs)
      : layers_(layers), outputs_(slice_outputs), consumers_(g.consumers()) {}
  // The position of the one layer of this slice reading `v`, or -1 (several readers, or `v`
  // leaves the slice).
  int only_reader(ValueId v) const {
    const auto& c = consumers_[static_cast<size_t>(v)];
    if (c.size() != 1) return -1;
    for (ValueId o : outputs_) {
      if (o == v) return -1;
    }
    for (size_t i = 0; i < layers_.size(); ++i) {
      if (layers_[i] == c[0]) return static_cast<int>(i);
    }
    return -1;
  }

 private:
  std::span<const NodeId> layers_;
  std::span<const ValueId> outputs_;
  std::vector<std::vector<NodeId>> consumers_;
};

bool has_fused_activation(const Node& n) {
  const Result<Activation> a = parse_fused_activation(n.attrs);
  return !a.ok() || a->kind != ActivationKind::kNone;
}

}  // namespace

void fuse_silu(const Graph& g, std::span<const NodeId> layers,
               std::span<const ValueId> slice_outputs,
               std::vector<std::unique_ptr<Kernel>>* kernels) {
  const SliceReaders readers(g, layers, slice_outputs);
  for (size_t a = 0; a < layers.size(); ++a) {
    const Node& sig = g.node(layers[a]);
    if (sig.kind != OpKind::kSigmoid || sig.inputs.size() != 1 || sig.outputs.size() != 1 ||
        has_fused_activation(sig))
      continue;
    const ValueId x = sig.inputs[0], s = sig.outputs[0];
    const Value& xv = g.value(x);
    if (xv.is_constant || xv.info.dtype != DType::kF32) continue;
    const int m = readers.only_reader(s);
    if (m < 0) continue;
    const Node& mul = g.node(layers[static_cast<size_t>(m)]);
    // A SiLU a reduced-precision convolution computes already (CpuProgram::fuse_reduced_silu).
    if ((*kernels)[a]->fused_away() || (*kernels)[static_cast<size_t>(m)]->fused_away()) continue;
    if (mul.kind != OpKind::kMul || mul.inputs.size() != 2 || mul.outputs.size() != 1 ||
        has_fused_activation(mul) || g.value(mul.outputs[0]).info.shape != xv.info.shape)
      continue;
    const int x_input = mul.inputs[0] == x && mul.inputs[1] == s   ? 0
                        : mul.inputs[1] == x && mul.inputs[0] == s ? 1
                                                                   : -1;
    if (x_input < 0) continue;
    (*kernels)[a] = std::make_unique<AliasKernel>(AliasKernel::Input::kKeep,
                                                  "sigmoid, fused into " + quote_name(mul.name));
    (*kernels)[static_cast<size_t>(m)] = make_fused_silu(x_input, mul.name);
  }
}

void fuse_channel_shuffles(const Graph& g, std::span<const NodeId> layers,
                           std::span<const ValueId> slice_outputs,
                           std::vector<std::unique_ptr<Kernel>>* kernels, Precision io,
                           const std::vector<QuantParam>& quant) {
  const SliceReaders readers(g, layers, slice_outputs);
  // In f32, a shuffle whose layers a reduced program keeps reduced stays as it is; a reduced
  // shuffle replaces only element-moving kernels (or none), and in int8 moves one quantisation.
  const auto takes = [&](size_t i) {
    const Kernel* k = (*kernels)[i].get();
    if (io == Precision::kF32) return k == nullptr || !(k->bf16_io() || k->int8_io());
    return k == nullptr || k->precision_neutral();
  };
  auto only_reader = [&](ValueId v) { return readers.only_reader(v); };
  for (size_t a = 0; a < layers.size(); ++a) {
    const Node& r1 = g.node(layers[a]);
    if (r1.kind != OpKind::kReshape || r1.outputs.empty() || r1.inputs.empty()) continue;
    const Value& x = g.value(r1.inputs[0]);
    const TensorInfo& v1 = g.value(r1.outputs[0]).info;
    if (x.is_constant || x.info.dtype != DType::kF32 || x.info.shape.rank() != 4 ||
        v1.shape.rank() != 5)
      continue;
    const Shape& xs = x.info.shape;
    const Shape& s1 = v1.shape;
    const int64_t groups = s1[1];
    if (groups < 2 || s1[0] != xs[0] || s1[1] * s1[2] != xs[1] || s1[3] != xs[2] || s1[4] != xs[3])
      continue;
    const int b = only_reader(r1.outputs[0]);
    if (b < 0) continue;
    const Node& t = g.node(layers[static_cast<size_t>(b)]);
    const Result<std::vector<int64_t>> perm = t.attrs.get_ints("perm");
    if (t.kind != OpKind::kTranspose || !perm.ok() ||
        *perm != std::vector<int64_t>{0, 2, 1, 3, 4} || t.outputs.empty())
      continue;
    const int c = only_reader(t.outputs[0]);
    if (c < 0) continue;
    const Node& r2 = g.node(layers[static_cast<size_t>(c)]);
    if (r2.kind != OpKind::kReshape || r2.outputs.empty() ||
        g.value(r2.outputs[0]).info.shape != xs)
      continue;
    const size_t bi = static_cast<size_t>(b), ci = static_cast<size_t>(c);
    if (!takes(a) || !takes(bi) || !takes(ci)) continue;
    if (io == Precision::kInt8) {
      const QuantParam q = quant_of(quant, r1.inputs[0]);
      if (!q.valid() || !(quant_of(quant, r1.outputs[0]) == q) ||
          !(quant_of(quant, t.outputs[0]) == q) || !(quant_of(quant, r2.outputs[0]) == q))
        continue;
    }
    (*kernels)[a] =
        std::make_unique<AliasKernel>(AliasKernel::Input::kNhwc, "channel shuffle view", io);
    (*kernels)[bi] =
        std::make_unique<AliasKernel>(AliasKernel::Input::kLogical, "channel shuffle view", io);
    (*kernels)[ci] = std::make_unique<ChannelShuffleKernel>(groups, io);
  }
}

const KernelEntry kTensorKernels[] = {
    {OpKind::kConcat, "tessera_concat", make_concat},
    {OpKind::kSplit, "tessera_split", make_split},
    {OpKind::kSlice, "tessera_slice_gather", make_slice},
    {OpKind::kPad, "tessera_pad_gather", make_pad},
    {OpKind::kTranspose, "tessera_transpose_gather", make_transpose},
    {OpKind::kGather, "tessera_gather_gather", make_gather},
    {OpKind::kResize, "tessera_resize", make_resize},
    {OpKind::kAveragePool, "tessera_alias_identity_pool", make_identity_pool},
    {OpKind::kMaxPool, "tessera_alias_identity_pool", make_identity_pool},
    {OpKind::kReshape, "tessera_alias", make_alias},
    {OpKind::kFlatten, "tessera_alias", make_alias},
    {OpKind::kSqueeze, "tessera_alias", make_alias},
    {OpKind::kUnsqueeze, "tessera_alias", make_alias},
    {OpKind::kIdentity, "tessera_alias", make_alias},
    {OpKind::kDropout, "tessera_alias", make_alias},
};
const size_t kNumTensorKernels = sizeof(kTensorKernels) / sizeof(kTensorKernels[0]);

}  // namespace tessera::cpu
