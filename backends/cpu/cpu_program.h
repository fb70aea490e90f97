// A compiled slice on a `cpu` device: kernels in order, conversions where layouts change, every
// intermediate tensor at a fixed offset of one arena (see arena.h), XNNPACK operators set up
// once against those addresses. Residual Adds run inside the convolution that produces one of
// their inputs where the slice allows it (fuse_residual_adds). run() copies the inputs in
// (converting to NHWC where the first reader wants it), runs the steps on the device's pinned pool
// and copies the outputs out in logical order.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/kernel.h"
#include "backends/cpu/kernel_choice.h"
#include "backends/cpu/pack_cache.h"
#include "backends/device.h"
#include "core/calibration_table.h"
#include "graph/qdq.h"

namespace tessera::cpu {

class CpuProgram final : public Program {
 public:
  // `precision`: kBf16 gives each layer that has a bf16 kernel (onednn.h) that kernel, the
  // others their f32 kernel; bf16 tensors flow between consecutive bf16 layers and are converted
  // where an f32 layer or the slice boundary reads them. kInt8 does the same with the int8
  // kernels (onednn.h) and needs `calibration`, the activation ranges by value name (values
  // without a range keep their layers in f32); FailedPrecondition without it, unless the slice
  // holds a QDQ model's QuantizeLinear -> DequantizeLinear pairs: those are folded (graph/qdq.h)
  // and their scales and zero points quantise their values, over any calibrated range.
  // With measured kernel choice a layer keeps its f32 kernel where that, with the conversions
  // around it, measures faster than its reduced one (f32_kernel_if_faster, measured_f32_layers()).
  // `variant`: see build_kernel (tests and benchmarks that compare kernel variants). `choice`:
  // how each node's kernel is picked when no variant is forced (kernel_choice.h); a convolution
  // whose residual Add the measured kernel cannot fuse gets the rules' kernel where that one can
  // (an unfused Add costs about what the variants differ by).
  static Result<std::unique_ptr<CpuProgram>> compile(const Graph& g, std::span<const NodeId> layers,
                                                     std::shared_ptr<ThreadPool> pool,
                                                     const char* variant = nullptr,
                                                     KernelChoice choice = default_kernel_choice(),
                                                     Precision precision = Precision::kF32,
                                                     const CalibrationTable* calibration = nullptr);

  const std::vector<ValueId>& input_values() const override { return inputs_; }
  const std::vector<ValueId>& output_values() const override { return outputs_; }
  uint64_t peak_memory_bytes() const override { return arena_bytes_ + owned_bytes_; }
  // The kernels' own memory plus the packed weights they share, each once (the part of
  // peak_memory_bytes() that is not the arena).
  uint64_t kernel_bytes() const { return owned_bytes_; }
  // The packed weights shared between this program's kernels (pack_cache.h).
  const PackCache& packs() const { return packs_; }

  uint64_t arena_bytes() const { return arena_bytes_; }
  // One line per step: what runs and in which layouts.
  std::string describe() const override;
  int num_reference_steps() const;
  int num_conversions() const;
  // Layers that run on a bf16 kernel, and buffers held in bf16.
  int num_bf16_layers() const;
  int num_bf16_buffers() const;
  // Layers that run on an int8 kernel, and buffers held in int8.
  int num_int8_layers() const;
  int num_int8_buffers() const;
  // Layers of a bf16 or int8 program that have a reduced-precision kernel but run their f32
  // kernel because it measured faster with its conversions (f32_kernel_if_faster).
  const std::vector<NodeId>& measured_f32_layers() const { return measured_f32_; }
  // QuantizeLinear -> DequantizeLinear pairs of a QDQ model folded into int8 tensors (an int8
  // program holds their values with the pair's scale and zero point; graph/qdq.h).
  int num_qdq_pairs() const { return qdq_pairs_; }
  // Concat inputs written in place into their Concat's output (place_concat_inputs).
  int num_in_place_concat_inputs() const;

 protected:
  // Runs on all the pool's threads or on its leader alone, whichever has been faster lately
  // (ThreadChoice: a loaded machine can make the workers' fork/joins the bottleneck). Timed
  // (options.layer_ms): each layer's step (always on all the pool's threads), with the layout
  // conversions before it (not the copy-in/out). A residual Add fused into a convolution
  // (fuse_residual_adds) is timed with that convolution; its own step takes ~0 ms.
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override;

 private:
  struct Buf {
    ValueId value = kNoValue;
    Layout layout = Layout::kNCHW;
    uint64_t bytes = 0;
    int first = 0;
    int last = 0;
    uint64_t offset = 0;
    // The buffer whose storage this one shares, or -1: a reshape's input (offset 0), or the
    // Concat output this buffer is a channel slice of (see place_concat_inputs).
    int alias = -1;
    uint64_t alias_offset = 0;  // bytes into the alias's storage
    int64_t pixel_stride = 0;   // a channel slice: floats between its pixels; 0 dense
    bool bf16 = false;          // held in bf16 (slot kBf16Slot of a bf16 program)
    bool int8 = false;          // held in int8 (slot kBf16Slot of an int8 program)
    QuantParam quant;           // int8: the value's quantisation
  };
  // A residual Add fused into the convolution producing one of its inputs
  // (fuse_residual_adds), per layer of the slice.
  struct Fusion {
    ValueId residual = kNoValue;  // a convolution: the Add's other input, read as an extra input
    ValueId writes = kNoValue;    // a convolution: the Add's output, written instead of its own
    int into = -1;                // a fused Add: the layer that does its work (its step is empty)
  };
  struct Step {
    std::unique_ptr<Kernel> kernel;
    NodeId node = kNoNode;           // kNoNode for conversions
    std::vector<int> inputs;         // buffer per input; -1 omitted, -2 constant
    std::vector<Layout> in_layouts;  // as the kernel reads them
    std::vector<int> outputs;
  };

  CpuProgram(const Graph& g, std::shared_ptr<ThreadPool> pool) : g_(g), pool_(std::move(pool)) {}
  // The kernel that fuses act(conv + R) for convolution `conv`: `k` itself, or, when `k` declines
  // and it was a measured choice, a fresh kernel by the rules if that one accepts (else null).
  // `residual` and `writes`: the Add's other input and its output (int8 kernels need their
  // quantisation).
  std::unique_ptr<Kernel> fusing_kernel(NodeId conv, std::unique_ptr<Kernel> k,
                                        const Activation& act, ValueId residual, ValueId writes,
                                        bool* fused);
  // quant_: the QuantParam of every value with a calibrated range in `table` (may be null), a
  // QDQ pair's quantisation anywhere in the graph (`graph_qdq`, qdq_quantisation) or a pair
  // folded in this slice (`qdq`, may be null; these win), the outputs of pools and of element
  // moves (views, Slice, Transpose, Gather) without their own taking their input's; with
  // `all_signed` (XNNPACK's int8 kernels) every u8 grid as s8.
  void assign_quantisation(std::span<const NodeId> layers, const CalibrationTable* table,
                           const std::vector<std::pair<ValueId, QdqQuantisation>>& graph_qdq,
                           const std::vector<std::pair<ValueId, QdqQuantisation>>* qdq,
                           bool all_signed);
  // Decides layouts, conversions and buffers for the given slice-input layouts (steps_ get no
  // kernels yet); records the layout each slice input's first reader wants.
  void plan(std::span<const NodeId> layers, const std::vector<std::unique_ptr<Kernel>>& kernels,
            const std::vector<Layout>& input_layouts, std::vector<Layout>* first_wanted);
  // Makes each channel Concat input that a strided-output kernel of this program produces, and
  // that nothing else reads, a channel slice of the Concat's output: the producer writes it in
  // place and the Concat copies only the other inputs.
  void place_concat_inputs();
  // Fuses each residual Add whose convolution accepts it (Kernel::fuse_residual) into fusions_;
  // `kernels[i]` is layer i's.
  void fuse_residual_adds(std::span<const NodeId> layers,
                          std::vector<std::unique_ptr<Kernel>>* kernels);
  // A bf16 or int8 program: fuses each SiLU that follows a reduced-precision convolution (its
  // output read only by a Sigmoid and by a Mul of it and that Sigmoid) into the convolution
  // (Kernel::fuse_silu), which then writes the Mul's output (fusions_[conv].writes; the Sigmoid
  // and the Mul get FusedAwayKernels). The measured precision choice leaves these convolutions
  // reduced. `readers`: the graph's consumers; `position`: each layer's index in `layers`.
  void fuse_reduced_silu(std::span<const NodeId> layers,
                         const std::vector<std::vector<NodeId>>& readers,
                         const std::unordered_map<NodeId, size_t>& position,
                         std::vector<std::unique_ptr<Kernel>>* kernels);
  // A bf16 or int8 program, after the precision choice: precision-neutral kernels built reduced
  // (Kernel::precision_neutral: views, slices, shuffles) stay reduced where a chain of them links
  // a reduced kernel that computes (its producer writes reduced, or a reader reads reduced); a
  // chain that links none (f32 on both sides: reduced, it would only add conversions) gets its
  // kernels cleared, for f32 ones. Same arguments as fuse_reduced_silu.
  void drop_unlinked_reduced_moves(std::span<const NodeId> layers,
                                   const std::vector<std::vector<NodeId>>& readers,
                                   const std::unordered_map<NodeId, size_t>& position,
                                   std::vector<std::unique_ptr<Kernel>>* kernels) const;

  Status allocate_and_bind();
  Status run_steps(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                   const RunOptions& options);
  Status check_and_allocate(std::span<const Tensor> inputs, std::span<Tensor> outputs);
  void* address(int buf) const { return arena_.get() + bufs_[static_cast<size_t>(buf)].offset; }

  const Graph& g_;
  std::shared_ptr<ThreadPool> pool_;
  bool measured_ = false;             // kernels chosen by measurement (KernelChoice::kMeasured)
  bool int8_ = false;                 // an int8 program: the reduced slot holds int8
  std::vector<QuantParam> quant_;     // int8: per value (invalid: no range, stays f32)
  std::vector<NodeId> measured_f32_;  // see measured_f32_layers()
  int qdq_pairs_ = 0;                 // see num_qdq_pairs()
  std::vector<bool> qdq_value_;       // int8: per value, quantised by a folded QDQ pair
  // The graph without a QDQ model's folded pairs (graph/qdq.h), which g_ then refers to.
  std::unique_ptr<Graph> owned_graph_;
  std::vector<ValueId> inputs_, outputs_;
  std::vector<Buf> bufs_;
  std::vector<Step> steps_;
  std::vector<Fusion> fusions_;  // per layer
  std::vector<int> input_bufs_, output_bufs_;
  size_t num_layers_ = 0;
  std::shared_ptr<uint8_t> arena_;
  uint64_t arena_bytes_ = 0;
  // Kernels' own memory plus the packed weights they share (packs_, each counted once).
  uint64_t owned_bytes_ = 0;
  // Packed weights shared between this program's kernels (built on the creating thread only).
  PackCache packs_;
  ThreadChoice choice_;  // used inside pool jobs only
};

}  // namespace tessera::cpu
