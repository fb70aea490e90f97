// The reference NPU driver's internals: a vendor-style library that speaks only hal.h.
//
// It behaves like a typical mobile NPU:
//   - an op whitelist (Conv incl. depthwise, Gemm, MaxPool/AveragePool/GlobalAveragePool, Add,
//     Relu/Clip standalone or fused, Concat, Flatten/Reshape to 2-D); anything else is refused;
//   - a memory cap per prepared subgraph (weights + peak activations, default 100 MB);
//   - reduced precision only: fp16, or int8 with per-channel weight scales and per-tensor
//     activation ranges calibrated on sample inputs (computed with XNNPACK's f16/qc8/qs8
//     operators);
//   - a blocked on-chip layout, NHWC with channels padded to a block of 8 ("NHWC8"), converted
//     from and to the host's NCHW on every input and output;
//   - a configurable number of cores (a pthreadpool of that many threads).
//
// Phases: parse (ref_model.cc: description -> Model, every limit checked) -> plan
// (ref_program.cc: memory arena, weights, cap check) -> build XNNPACK operators bound to the
// arena -> execute (convert inputs, run steps, convert outputs). Nothing here links Tessera.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/npu/hal.h"
#include "backends/npu/reference_driver/ref_calibration.h"

namespace tnpu_ref {

// Channel block of the on-chip layout.
constexpr int64_t kChannelBlock = 8;
inline int64_t round_up_block(int64_t c) {
  return (c + kChannelBlock - 1) / kChannelBlock * kChannelBlock;
}

// A failure: the HAL status and a message naming what is at fault ("" when OK).
struct Error {
  tnpu_status status = TNPU_OK;
  std::string message;
  bool ok() const { return status == TNPU_OK; }
  static Error none() { return {}; }
};
inline Error fail(tnpu_status s, std::string msg) {
  return Error{s, std::move(msg)};
}

enum class OpType {
  kConv,
  kGemm,
  kMaxPool,
  kAveragePool,
  kGlobalAveragePool,
  kAdd,
  kRelu,
  kClip,
  kConcat,
  kFlatten,
  kReshape
};

// One tensor of the subgraph. Activations are viewed as N x C x H x W (a 2-D [M, K] tensor is
// M x K x 1 x 1) and stored on chip as N x H x W x round_up(C, 8).
struct TensorDesc {
  std::string name;
  int rank = 0;
  int64_t dims[TNPU_MAX_RANK] = {};
  bool constant = false;
  // f32 constant values: the caller's memory, valid only during prepare() (weights are converted
  // to the device precision while preparing and never read again).
  const float* values = nullptr;
  std::vector<int64_t> ints;  // i64/i32 constants (Reshape shapes), copied
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t cpad() const { return round_up_block(c); }
  int64_t numel() const { return n * c * h * w; }
  int64_t onchip_numel() const { return n * h * w * cpad(); }
};

struct Node {
  std::string name;
  std::string op_name;
  OpType op = OpType::kConv;
  std::vector<int> inputs;  // activation tensor indices (weights excluded)
  int output = -1;
  int weight = -1, bias = -1;  // constant tensor indices (Conv, Gemm), -1 when absent
  // Window ops.
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;  // pads (pb/pr include the ceil-mode extension)
  int64_t groups = 1;
  bool count_include_pad = false;
  // Gemm.
  bool trans_b = false;
  float alpha = 1, beta = 1;
  // Output clamp from a fused activation or a standalone Relu/Clip.
  float out_min = -INFINITY, out_max = INFINITY;
  std::string describe() const { return "node '" + name + "' (" + op_name + ")"; }
};

struct Model {
  std::vector<TensorDesc> tensors;
  std::vector<Node> nodes;
  std::vector<int> inputs, outputs;
};

// The op types the device runs and their limits (also what get_op_support reports).
const std::vector<tnpu_op_support>& op_support_table();

// Parses and checks a description. With `only_node` >= 0 only that node (and the tensors it
// uses) is checked, for check_node().
Error parse_model(const tnpu_graph* g, Model* out, int only_node = -1);

// IEEE half conversions, round to nearest even.
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

// Layout conversions between the host's dense NCHW and the on-chip NHWC8 (pad channels zeroed).
// T is uint16_t (fp16) or int8_t.
template <typename T>
void nchw_to_nhwc8(const T* src, const TensorDesc& t, T* dst);
template <typename T>
void nhwc8_to_nchw(const T* src, const TensorDesc& t, T* dst);

// Quantisation of one tensor: real = scale * (q - zero_point).
struct QParams {
  float scale = 1;
  int32_t zero_point = 0;
};
QParams qparams_for_range(float lo, float hi);
inline int8_t quantize(float x, const QParams& q) {
  float v = x / q.scale + static_cast<float>(q.zero_point);
  v = v < -128.f ? -128.f : (v > 127.f ? 127.f : v);
  return static_cast<int8_t>(__builtin_lrintf(v));
}

struct Options {
  uint32_t precision = TNPU_PRECISION_F16;
  uint64_t memory_cap = 0;
  uint32_t num_cores = 1;
  const tnpu_calibration* calibration = nullptr;
  // fp16 convolutions, fully connected layers and (global) average pooling: accumulate in fp32
  // (as NPU MAC arrays and pooling units do) or round the accumulator to fp16 after every step
  // (XNNPACK's f16 kernels on x86).
  bool fp16_accumulator = false;
  // int8: how activation ranges are chosen from the calibration histograms.
  CalibrationMethod calibration_method = CalibrationMethod::kMse;
  // int8: after building, run the calibration inputs through the fp16 and int8 programs side by
  // side and record each node's error (Program::node_error).
  bool layer_report = false;
};

// int8 error of one node's output against the fp16 program, over the calibration inputs:
// `total` is ||dequant(int8) - fp16|| / ||fp16|| of the int8 program's output (everything before
// it included), `own` the same for quantising the fp16 output alone (this tensor's rounding and
// clipping).
struct NodeError {
  double total = 0, own = 0;
};

// A prepared subgraph: operators bound to an on-chip arena.
class Program {
 public:
  virtual ~Program() = default;
  virtual const Model& model() const = 0;
  virtual uint32_t precision() const = 0;
  virtual uint64_t weight_bytes() const = 0;
  virtual uint64_t activation_bytes() const = 0;
  virtual tnpu_io_desc io_desc(bool output, uint32_t index) const = 0;
  virtual Error execute(const tnpu_buffer* inputs, uint32_t num_inputs, const tnpu_buffer* outputs,
                        uint32_t num_outputs) = 0;
  virtual const tnpu_perf_counters& counters() const = 0;
  virtual const std::vector<uint64_t>& node_ns() const = 0;
  // The [lo, hi] tensor i is quantised to (int8 programs), for the extension lookup.
  virtual bool tensor_range(uint32_t tensor, float* lo, float* hi) const = 0;
  // Per-node int8 error (int8 programs prepared with Options::layer_report), else false.
  virtual bool node_error(uint32_t node, NodeError* out) const = 0;
};

Error prepare_program(Model model, const Options& options, std::unique_ptr<Program>* out);

// Whether XNNPACK can run fp16 on this CPU (probed once).
bool fp16_available();

}  // namespace tnpu_ref
