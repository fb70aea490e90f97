// The kernel contract inside the `cpu` device.
//
// A CpuProgram turns every layer into one Kernel, in three phases (build -> plan -> bind -> run):
//   1. build     a KernelFactory (kernel_table.cc) looks at the node and, when an optimised
//                kernel handles this configuration, creates it: XNNPACK operators are created
//                here with the weights, which XNNPACK packs once. Otherwise the layer gets the
//                reference kernel (reference_kernel.cc).
//   2. layouts   choose_layouts() says which layout each activation input should arrive in and
//                which layout each output is produced in. Rank-4 activations live NHWC between
//                layers that like it; the program inserts a conversion only where a layer wants
//                another layout than its producer made (normally just at the slice boundary).
//   3. bind      the program has planned the arena; bind() receives the final addresses and
//                sets XNNPACK operators up once (pointers never change between runs).
//   4. run       run() executes on the device's pinned thread pool.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/thread_pool.h"
#include "core/tensor.h"
#include "graph/graph.h"
#include "ops/activation.h"

namespace tessera::cpu {

class PackCache;

// A per-tensor int8 quantisation of an activation (docs/precision.md): real = scale * (q -
// zero_point), with q in u8 [0, 255] or s8 [-128, 127]. Tessera's own calibration makes no zero
// point: u8 for a tensor calibrated to be >= 0 (e.g. after ReLU), else symmetric s8. A QDQ
// model's QuantizeLinear gives its own scale and zero point (graph/qdq.h). scale == 0: none (the
// value has no quantisation).
struct QuantParam {
  float scale = 0;
  bool is_unsigned = false;
  int32_t zero_point = 0;  // within the type's range
  bool valid() const { return scale > 0; }
  // The parameters for a calibrated range [lo, hi] with lo <= 0 <= hi: u8 when lo == 0, else
  // s8 over max(-lo, hi); a range of width 0 gets a tiny scale, so that everything is 0.
  static QuantParam from_range(float lo, float hi);
  // The same grid and clamp range with zero point 0 where there is one: s8 with zero point -128
  // is u8 with none (real = s * (q + 128) over q in [-128, 127] is s * q' over q' in [0, 255]),
  // u8 with 128 is s8 with none; other parameters are returned as they are. oneDNN's fastest int8
  // convolutions take no zero points.
  QuantParam canonical() const;
  bool operator==(const QuantParam&) const = default;
};

// The quantisation of value `v` in a program's per-value table (kernel factories of int8
// programs); invalid where v is omitted or has none.
inline QuantParam quant_of(const std::vector<QuantParam>& quant, ValueId v) {
  return v == kNoValue || v < 0 || static_cast<size_t>(v) >= quant.size()
             ? QuantParam{}
             : quant[static_cast<size_t>(v)];
}

// One input or output of a kernel as bound in memory. `shape` is the logical (ONNX, NCHW-order)
// shape; for a rank-4 tensor in Layout::kNHWC the memory holds dims (N, H, W, C). Constants are
// bound with their graph tensor (always logical order, Layout::kNCHW).
struct Operand {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  Layout layout = Layout::kNCHW;
  bool is_constant = false;
  const Tensor* constant = nullptr;  // the graph tensor when is_constant
  // Floats between consecutive pixels of a rank-4 NHWC tensor; 0 means dense (the channel
  // count). Larger only for the output of a kernel that writes_strided_output(): then the
  // operand is a channel slice of a wider NHWC tensor (a Concat's input written in place).
  int64_t pixel_stride = 0;
  // The tensor is held in bf16 (2 bytes per element; `dtype` still names the graph's f32): the
  // activations between reduced-precision kernels (Kernel::bf16_io, docs/precision.md).
  bool bf16 = false;
  // The tensor is held in int8 (1 byte per element, u8 or s8 as `quant` says; `dtype` still names
  // the graph's f32), NHWC for rank 4: the activations between int8 kernels (Kernel::int8_io).
  bool int8 = false;
  QuantParam quant;

  float* f32() const { return static_cast<float*>(data); }
  int64_t numel() const { return shape.numel(); }
  // Bytes per element as held: 1 in int8, 2 in bf16, else the dtype's size.
  size_t element_bytes() const { return int8 ? 1 : bf16 ? 2 : dtype_size(dtype); }
  // The dims in memory order.
  Shape physical_shape() const;
  // pixel_stride, or the channel count when it is 0 (rank 4 only).
  int64_t pixel_stride_or_dense() const { return pixel_stride > 0 ? pixel_stride : shape[1]; }
};

// A constant input as kernels are bound to it: the graph tensor itself, logical order.
inline Operand constant_operand(const Tensor& t) {
  Operand o;
  o.data = const_cast<void*>(t.raw());
  o.dtype = t.dtype();
  o.shape = t.shape();
  o.is_constant = true;
  o.constant = &t;
  return o;
}

// Whether a tensor of this shape has the same bytes in NCHW and NHWC (rank 4 with C == 1 or
// H * W == 1), so that no conversion is needed between the two.
bool layout_trivial(const Shape& s);

class Kernel {
 public:
  virtual ~Kernel() = default;

  // Phase 2. `available[i]` is the layout input i is produced in (kNCHW for constants and
  // tensors that are not rank 4). Fill `wanted[i]` for every input (ignored for constants) and
  // `produced[o]` for every output. The default: everything in logical (NCHW) order.
  virtual void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                              std::span<Layout> produced) const;
  // True when output 0 holds exactly the bytes of input 0 (Reshape and friends): the program
  // then binds both to the same storage, and run() finds nothing to copy.
  virtual bool aliases_input() const { return false; }
  // True when output 0, produced in NHWC, may be bound with a pixel stride larger than its
  // channel count (Operand::pixel_stride): the program then lets the kernel write straight into
  // its channels of a Concat's output (see CpuProgram::place_concat_inputs). Kernels that return
  // false always get dense outputs.
  virtual bool writes_strided_output() const { return false; }
  // A residual Add fused into this kernel (CpuProgram's residual-add pass, before phase 2):
  // output 0 becomes act(output 0 + R), where R is bound as one extra input after the node's
  // inputs, with the shape of output 0 and in the layout output 0 is produced in, and `act` is
  // the Add's fused activation. R is read before the kernel writes its output rows (they are
  // distinct buffers). Returns false and changes nothing when the kernel cannot: the default,
  // and always for a kernel with its own fused activation (act(x) + R is not act(x + R)).
  virtual bool fuse_residual(const Activation& act) {
    (void)act;
    return false;
  }
  // True for a reduced-precision kernel: activation input 0, output 0 and a fused residual are
  // bound in bf16 (Operand::bf16), in the layouts choose_layouts() asks for. The program keeps
  // such tensors in bf16 between consecutive bf16 kernels and converts only where an f32 kernel
  // (or the slice boundary) reads them.
  virtual bool bf16_io() const { return false; }
  // True for an int8 kernel: activation input 0 and a fused residual are bound in int8
  // (Operand::int8, with the quantisation of their values), and so is output 0 when
  // int8_output() (else output 0 is f32, e.g. a classifier's logits). Like bf16, int8 tensors
  // pass between consecutive int8 kernels and are converted only where an f32 reader needs them.
  virtual bool int8_io() const { return false; }
  virtual bool int8_output() const { return true; }
  // With bf16_io() or int8_io(): every activation input is bound in the reduced precision, not
  // only input 0 (a bf16 or int8 Concat).
  virtual bool reduced_inputs_all() const { return false; }
  // With bf16_io() or int8_io(): which input is the activation bound in the reduced precision
  // (and "input 0" above means this one). 0, except for a kernel whose activation may come
  // second (an int8 Mul by a per-channel gate written gate * x).
  virtual size_t reduced_input() const { return 0; }
  // True for a kernel that only moves elements (Reshape and friends, Slice, Transpose, a channel
  // shuffle): it has no arithmetic, so in a reduced-precision program it runs on whichever
  // precision it was built for, and the program keeps it reduced only where it links reduced
  // kernels (CpuProgram::compile), without timing it against f32.
  virtual bool precision_neutral() const { return false; }
  // fuse_residual for an int8 kernel: R arrives in int8 with quantisation `residual`, and the
  // output is written in int8 with quantisation `out` (the Add's output value's).
  virtual bool fuse_residual_int8(const Activation& act, QuantParam residual, QuantParam out) {
    (void)act;
    (void)residual;
    (void)out;
    return false;
  }
  // Appends SiLU, y * sigmoid(y), to what the kernel writes (a reduced-precision convolution
  // followed by a Sigmoid and a Mul: the program then runs the three as this kernel). An int8
  // kernel writes into `out`, the Mul output's quantisation. False, changing nothing, where the
  // kernel cannot (an activation or a residual of its own, no such post-op).
  virtual bool fuse_silu(QuantParam out) {
    (void)out;
    return false;
  }
  // True for the step of a node another kernel does the work of (a fused residual Add, the
  // Sigmoid and Mul of a fused SiLU): it reads and writes nothing.
  virtual bool fused_away() const { return false; }
  // True for a kernel that computes on its own OpenMP threads (oneDNN) rather than the pool's
  // pthreadpool workers: the program parks the workers before it, so that they do not spin on
  // the cores it uses.
  virtual bool runs_on_openmp() const { return false; }
  // Phase 3: the bound operands (inputs in node order, omitted ones with data == nullptr). May be
  // called again before run() with other operands of the same shapes (measured kernel choice
  // times a kernel bound to scratch tensors, then the program binds it to its arena): the last
  // binding is the one that runs.
  virtual Status bind(std::span<const Operand> inputs, std::span<const Operand> outputs,
                      ThreadPool& pool) = 0;
  // Phase 4, inside ThreadPool::run.
  virtual Status run(ThreadPool& pool) = 0;

  // What runs, e.g. "xnnpack conv 3x3/2 dw", "reference Resize"; shown by describe().
  virtual std::string describe() const = 0;
  // True for the reference fallback (capabilities report it).
  virtual bool is_reference() const { return false; }
  // Bytes of packed weights and other memory the kernel owns; a packing shared through the
  // program's PackCache is not the kernel's (the program counts it once).
  virtual uint64_t owned_bytes() const { return 0; }
};

// A kernel that takes activation input 0 and produces output 0 in NHWC (other inputs in
// logical order): convolutions, pools, LRN, linear Resize. `Base` is Kernel or one of its
// helper bases (XnnOperatorKernel).
template <typename Base = Kernel>
class NhwcIo : public Base {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    Kernel::choose_layouts(available, wanted, produced);
    wanted[0] = Layout::kNHWC;
    produced[0] = Layout::kNHWC;
  }
};

// What a factory sees of one node.
struct KernelRequest {
  const Graph& graph;
  const Node& node;
  const OpContext& ctx;  // constants and input infos of the node
  ThreadPool& pool;
  // False in normal dispatch: a factory accepts only the configurations where its variant is
  // the one chosen (measured fastest). True for tests and benchmarks that compare variants: it
  // accepts every configuration it can run correctly.
  bool any_config = false;
  // The program's cache of packed weights (pack_cache.h): kernels that pack a constant take
  // their packing from it, so that nodes reading the same constant share one packed copy. Null
  // (tests, benchmarks): every kernel packs its own.
  PackCache* packs = nullptr;
  // The node's output 0 goes only to a Concat of the same program, which takes it in place
  // (a slice of the Concat's output) from a kernel that writes_strided_output(), and copies it
  // from any other. Measured kernel choice charges that copy to the kernels that cannot.
  bool output_to_concat = false;
};

// Creates the optimised kernel for the node, or returns null when this configuration has none
// (then the reference kernel runs it). Errors are real errors (bad attributes, XNNPACK failure).
using KernelFactory = Result<std::unique_ptr<Kernel>> (*)(const KernelRequest& req);
// What a factory returns to decline a configuration.
inline Result<std::unique_ptr<Kernel>> decline() {
  return std::unique_ptr<Kernel>();
}

// The reference kernel for any registered op (reference_kernel.cc).
std::unique_ptr<Kernel> make_reference_kernel(const Node& node);

}  // namespace tessera::cpu
