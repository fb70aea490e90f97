// The optimised kernels of the cpu device, as data: one table per op family (conv.cc,
// fully_connected.cc, pool.cc, elementwise.cc, tensor_ops.cc, reduction.cc, deconv.cc), each entry
// naming the op it implements, the kernel variant and its factory. Dispatch, capabilities, the
// differential tests and the benchmarks all walk the same tables. For a node, the entries of its op
// are tried in table order; the first factory that accepts the configuration builds the kernel, and
// a node no entry accepts runs on the reference kernel.
//
// Each entry states the instruction set its own code needs (KernelEntry::isa, as XNNPACK's
// microkernel lists state theirs). An entry whose ISA this build or this CPU lacks is never
// offered a node: dispatch and measured kernel choice (kernel_choice.h) pass over it, and asking
// for it by name is an Unimplemented error naming the ISA (isa_unavailable). Variants on a
// library (XNNPACK, OpenBLAS) and Tessera's portable C++ need Isa::kPortable: the library picks
// its own kernels for the CPU it runs on. Thread rule: the tables and the ISA probes are
// immutable after first use; any thread may read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/device.h"

namespace tessera::cpu {

// The instruction sets of the cpu device's own kernels.
enum class Isa : uint8_t {
  kPortable,  // plain C++ or a library call: every architecture
  kAvx512f,   // x86-64 AVX-512F + FMA (compiled only into x86-64 builds)
};
// "portable", "avx512f".
const char* isa_name(Isa isa);
// Whether this build contains code of `isa` and this CPU runs it.
bool isa_available(Isa isa);
// The architecture this build targets ("x86_64", "aarch64", ...).
const char* build_arch();
// The Unimplemented error of a variant whose ISA is unavailable: which ISA, and whether the
// build (another architecture) or the CPU lacks it.
Status isa_unavailable(Isa isa, std::string_view variant = {});

struct KernelEntry {
  OpKind op;
  const char* variant;  // e.g. "xnnpack_conv2d_nhwc_f32"
  KernelFactory make;
  // The instruction set the variant's own code needs; make_entry_kernel and build_kernel never
  // call the factory where isa_available(isa) is false.
  Isa isa = Isa::kPortable;
  // Whether measured kernel choice (kernel_choice.h) may pick this variant for configurations
  // the rules give to another: false for a variant that is fast but less accurate (Winograd
  // F(4x4)), which runs only where its own factory's rules take a node or when asked for.
  bool measured_candidate = true;
};

extern const KernelEntry kConvKernels[];
extern const size_t kNumConvKernels;
extern const KernelEntry kFullyConnectedKernels[];
extern const size_t kNumFullyConnectedKernels;
extern const KernelEntry kPoolKernels[];
extern const size_t kNumPoolKernels;
extern const KernelEntry kElementwiseKernels[];
extern const size_t kNumElementwiseKernels;
extern const KernelEntry kTensorKernels[];
extern const size_t kNumTensorKernels;
extern const KernelEntry kReductionKernels[];
extern const size_t kNumReductionKernels;
extern const KernelEntry kDeconvKernels[];
extern const size_t kNumDeconvKernels;

// Every entry of every family, in dispatch order (built once).
const std::vector<KernelEntry>& all_kernel_entries();
// True when some entry exists for the op (it may still decline particular configurations).
bool has_optimised_kernel(OpKind op);

// The entry of `op` named `variant`, or null.
const KernelEntry* find_kernel_entry(OpKind op, std::string_view variant);
// Whether `entry` can run on this build and CPU (isa_available(entry.isa)).
bool entry_available(const KernelEntry& entry);

// `entry`'s kernel for the node with KernelRequest::any_config set as given; null when its ISA
// is unavailable here (entry_available), when it declines, or rejects the configuration as
// unimplemented / invalid (dispatch treats both the same way: another entry or the reference kernel
// runs it). Other errors are real errors.
Result<std::unique_ptr<Kernel>> make_entry_kernel(const KernelEntry& entry,
                                                  const KernelRequest& req, bool any_config);

// Builds the kernel for a node: the first accepting entry, else the reference kernel.
// With `variant` (an entry's name, for tests and benchmarks that compare variants), a node of
// that entry's op gets exactly that variant, built with any_config; it is an Unimplemented error
// when the variant cannot run the node, or (isa_unavailable) cannot run on this build or CPU. Nodes
// of other ops are dispatched as usual.
Result<std::unique_ptr<Kernel>> build_kernel(const KernelRequest& req,
                                             const char* variant = nullptr);

// Whether int8 programs run on XNNPACK's int8 operators rather than oneDNN's: where this build
// has no oneDNN (aarch64), or TESSERA_CPU_INT8_KERNELS=xnnpack (=onednn asks for oneDNN: an
// Unimplemented error where the build has none; another value is an InvalidArgument error).
// Such a program holds every int8 tensor signed (u8 grids become s8 with the zero point 128
// lower, the same values): XNNPACK's operators take s8 only.
Result<bool> use_xnnpack_int8();

// The window of a MaxPool (average: an AveragePool) as XNNPACK's NHWC pooling operators take it
// (pool.cc): paddings (a ceil-mode end padding extended so that XNNPACK's floor rounding gives the
// same size), window, strides, dilations, channels. nullopt for what they cannot run (1x1
// windows, MaxPool's Indices output, an average counting padding...).
struct XnnPoolWindow {
  uint32_t top = 0, right = 0, bottom = 0, left = 0, kh = 0, kw = 0, sh = 0, sw = 0, dh = 1, dw = 1;
  size_t channels = 0;
};
Result<std::optional<XnnPoolWindow>> xnn_pool_window(const KernelRequest& req, bool average);

// The XNNPACK int8 kernel of a node (xnn_int8.cc), or null: Conv (dense, grouped, depthwise;
// per-output-channel s8 weights, int32 bias; a fused ReLU or Clip as the output clamp), Add of two
// int8 tensors of one shape, MaxPool (the output in the input's quantisation), GlobalAveragePool.
// Every activation it reads or writes must be s8 in `quant` (by ValueId); scales whose ratio
// XNNPACK cannot requantise decline (f32 runs it).
Result<std::unique_ptr<Kernel>> make_xnn_int8_kernel(const KernelRequest& req,
                                                     const std::vector<QuantParam>& quant);

// Tessera's own kernels of an int8 program (oneDNN's are in onednn.h): Concat, BatchNormalization
// and a Mul by a per-channel gate, below; null for other nodes and where a value has no
// quantisation.
Result<std::unique_ptr<Kernel>> make_int8_kernel(const KernelRequest& req,
                                                 const std::vector<QuantParam>& quant);

// BatchNormalization of an int8 program (elementwise.cc): int8 NHWC (or [N, C]) in and out,
// per channel
// q_y = clamp(round(q_x * A[c] + B[c]) + zp_y) (the scale-shift and both quantisations in one
// multiply-add, AVX-512 where the CPU has it), a fused ReLU or Clip as the clamp's bounds; other
// fused activations decline. Within one step of the f32 round trip.
Result<std::unique_ptr<Kernel>> make_int8_batch_norm(const KernelRequest& req,
                                                     const std::vector<QuantParam>& quant);

// A Mul of an int8 program by a per-channel gate (elementwise.cc): x int8 NHWC [N, C, H, W] (input
// 0 or 1) times an f32 gate [N or 1, C, 1, 1] computed at run time (squeeze-and-excitation), the
// output int8; q_y = clamp(round(q_x * A[n, c] + B[n, c]) + zp_y) with A and B made from the gate
// each run. Within one step of the f32 round trip. Null for other Muls.
Result<std::unique_ptr<Kernel>> make_int8_channel_gate(const KernelRequest& req,
                                                       const std::vector<QuantParam>& quant);

// The Concat of an int8 program (tensor_ops.cc): its inputs and output held in int8, each input
// requantised into the output's quantisation through a 256-entry table (the same arithmetic as
// converting it to f32 and back, bit for bit; a plain copy where the quantisations are equal), so
// that a Concat between int8 layers costs no conversions. Null when an input or the output has no
// quantisation in `quant` (by ValueId) or an input is a constant.
Result<std::unique_ptr<Kernel>> make_int8_concat(const KernelRequest& req,
                                                 const std::vector<QuantParam>& quant);
// MaxPool of a bf16 program (pool.cc): NHWC bf16 in and out, 32 channels per AVX-512 step, NaN
// propagating; null for windows XNNPACK's geometry cannot describe (xnn_pool_window), a fused
// activation, the Indices output.
Result<std::unique_ptr<Kernel>> make_bf16_max_pool(const KernelRequest& req);

// Gemm / MatMul of a bf16 program at batch 1 with a constant weight matrix (fully_connected.cc):
// Tessera's bf16 GEMV (gemv.h), x and y in bf16, a fused ReLU or Clip; null without AVX512_BF16,
// at other batches (oneDNN's bf16 matmul takes them) and for other activations.
Result<std::unique_ptr<Kernel>> make_bf16_gemv(const KernelRequest& req);
// Gemm / MatMul of an int8 program at batch 1 with a constant weight matrix (fully_connected.cc):
// Tessera's int8 GEMV (gemv.h), x in int8 with its quantisation in `quant`, y in f32, a fused ReLU
// or Clip; null without AVX512_VNNI, at other batches, for K > PackedGemvInt8::kMaxK, for other
// activations and where x has no quantisation.
Result<std::unique_ptr<Kernel>> make_int8_gemv(const KernelRequest& req,
                                               const std::vector<QuantParam>& quant);

// BatchNormalization of a bf16 program (elementwise.cc): bf16 NHWC (or [N, C]) in and out,
// y = x * scale[c] + shift[c] in f32 registers, a fused ReLU or Clip; other activations decline.
Result<std::unique_ptr<Kernel>> make_bf16_batch_norm(const KernelRequest& req);
// A Mul of a bf16 program by a per-channel f32 gate (as make_int8_channel_gate): x bf16 NHWC in,
// the output bf16.
Result<std::unique_ptr<Kernel>> make_bf16_channel_gate(const KernelRequest& req);

// The Concat of a bf16 program: bf16 in and out, a copy (null when an input is a constant or a
// value is not f32).
Result<std::unique_ptr<Kernel>> make_bf16_concat(const KernelRequest& req);

// Element-moving kernels of a reduced-precision program (tensor_ops.cc): Slice, Transpose, Gather
// (constant indices) and the reshape family on the bf16 or int8 bytes as held (rank 4 NHWC), so
// that ShuffleNet's channel splits need no conversions. Precision-neutral (Kernel::
// precision_neutral). Null for other nodes, a view that would reorder NHWC bytes (a Flatten of a
// feature map wider than 1x1), and in int8 where input and output are not on one quantisation
// (CpuProgram gives such views their input's, as it does pools).
Result<std::unique_ptr<Kernel>> make_reduced_movement_kernel(const KernelRequest& req, Precision io,
                                                             const std::vector<QuantParam>& quant);

// Replaces the kernels of each ShuffleNet channel shuffle in `layers` (Reshape [N, C, H, W] ->
// [N, g, C / g, H, W], Transpose (0, 2, 1, 3, 4), Reshape back to [N, C, H, W], the two inner
// tensors read only by the next of them) by two aliasing views and one NHWC shuffle, so that the
// shuffle costs one copy and no layout conversion (tensor_ops.cc). `kernels[i]` is layer i's.
// With `io` bf16 or int8 (a reduced program, before its f32 kernels are built), the shuffle moves
// the bytes of that precision and takes only layers with no kernel or a precision-neutral one; in
// int8, only where the four tensors share one quantisation in `quant`. In f32, shuffles already
// kept reduced are left alone.
void fuse_channel_shuffles(const Graph& g, std::span<const NodeId> layers,
                           std::span<const ValueId> slice_outputs,
                           std::vector<std::unique_ptr<Kernel>>* kernels,
                           Precision io = Precision::kF32,
                           const std::vector<QuantParam>& quant = {});

// Replaces each SiLU / swish in `layers`, Mul(x, Sigmoid(x)) with the sigmoid read only by the
// Mul (EfficientNet's activation), by an aliasing view for the Sigmoid and one kernel for the
// Mul that computes x * sigmoid(x) block by block (make_fused_silu): x is read once and the
// result written once, instead of three tensors read and two written (tensor_ops.cc).
void fuse_silu(const Graph& g, std::span<const NodeId> layers,
               std::span<const ValueId> slice_outputs,
               std::vector<std::unique_ptr<Kernel>>* kernels);
// The Mul of a fused SiLU: y = x * sigmoid(x), x being the Mul's input `x_input` (elementwise.cc).
std::unique_ptr<Kernel> make_fused_silu(int x_input, const std::string& mul_name);

}  // namespace tessera::cpu
