// Sliding-window geometry shared by Conv, ConvTranspose, MaxPool and AveragePool: reading and
// validating kernel_shape / strides / dilations / pads / auto_pad, the output-size arithmetic,
// and the index ranges the kernels loop over. Written once so that every window op agrees.
//
// Conventions (ONNX):
//   - X is [N, C, D1, ..., Dk]; k = 1..3 spatial dims are supported.
//   - pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...].
//   - effective kernel ek = (kernel - 1) * dilation + 1.
//   - Output position o, kernel tap t reads input coordinate o * stride + t * dilation - pad_begin
//     (forward ops); out-of-range coordinates are padding (zero for Conv and AveragePool, -inf
//     for MaxPool).
//
// Forward output size (Conv, pools):
//   NOTSET: out = floor((in + pb + pe - ek) / s) + 1, with ceil instead of floor in ceil_mode.
//           In ceil_mode a last window that would start inside the end padding is dropped
//           (PyTorch's rule, also ONNX's since the pooling spec fix): if
//           (out - 1) * s >= in + pb then out -= 1. Every window then starts inside the input or
//           the begin padding.
//   VALID:  pads are 0, then as NOTSET.
//   SAME_UPPER / SAME_LOWER: out = ceil(in / s); total pad = max(0, (out - 1) * s + ek - in),
//           split evenly with the odd unit at the end (UPPER) or at the beginning (LOWER).
//           ceil_mode cannot change this size. The effective (dilated) kernel is used, as the
//           spec says; ONNX Runtime's MaxPool uses the undilated kernel here and disagrees.
//   If `pads` is given together with an auto_pad other than NOTSET it must be all zeros
//   (exporters write both); non-zero pads with auto_pad are rejected as contradictory.
//
// Transposed output size (ConvTranspose), with full = s * (in - 1) + output_padding + ek:
//   explicit pads: out = full - pb - pe.
//   output_shape given: total = full - out; SAME_UPPER puts total/2 first, anything else puts the
//           odd unit first (pb = total - total/2), as the ONNX spec's equations say (ONNX
//           Runtime agrees). A negative total, an output larger than the full result, means no
//           padding and the extra output at the end, holding just the bias (as ONNX Runtime
//           computes).
//   SAME_UPPER / SAME_LOWER without output_shape: out = in * s with pads split as above; when
//           that exceeds the full result (kernel + output_padding < stride) the total padding
//           clamps at 0 and out = full, as ONNX Runtime computes.
//   VALID: pads 0, out = full.
//
// All attribute values are bounded by kMaxDim before any arithmetic, so no expression here can
// overflow int64; absurd values produce errors naming the attribute.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "ops/op.h"

namespace tessera {

inline constexpr int kMaxSpatialRank = 3;

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

// The geometry of one window op over k spatial dims (vectors of length `rank`).
struct WindowGeometry {
  int rank = 0;
  std::vector<int64_t> input;
  std::vector<int64_t> kernel;
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;
  std::vector<int64_t> pads_begin;
  std::vector<int64_t> pads_end;
  std::vector<int64_t> output;

  int64_t effective_kernel(int i) const { return (kernel[i] - 1) * dilations[i] + 1; }
  int64_t input_volume() const;
  int64_t output_volume() const;
  int64_t kernel_volume() const;
};

struct ForwardWindowOptions {
  bool ceil_mode = false;
  // Pools: require every pad to be smaller than the effective kernel, so that no window lies
  // entirely in the padding.
  bool pads_below_kernel = false;
};

// Reads a 0/1 int attribute (ceil_mode, count_include_pad, storage_order), 0 when absent.
Result<bool> read_flag(const OpContext& ctx, const char* name);

// Reads auto_pad ("NOTSET" when absent).
Result<AutoPad> read_auto_pad(const OpContext& ctx);

// Reads an ints attribute with one value per spatial dim, each in [min_value, kMaxDim], or
// `rank` copies of `def` when absent.
Result<std::vector<int64_t>> read_spatial_ints(const OpContext& ctx, const char* name, int rank,
                                               int64_t def, int64_t min_value);

// Checks that a [N, C, spatial...] input has 1..kMaxSpatialRank spatial dims.
Status check_spatial_input(const OpContext& ctx, const Shape& x, const char* what);

// GlobalAveragePool / GlobalMaxPool: X [N, C, D1..Dk] (k >= 1, no empty extent) -> Y [N, C, 1..1].
Status infer_global_pool(const OpContext& ctx, int num_outputs, std::vector<TensorInfo>* outputs);
// One FLOP (add or comparison) per input element.
OpCost cost_global_pool(const OpContext& ctx, std::span<const TensorInfo> outputs);
// MaxPool / AveragePool: one FLOP per output element per kernel tap.
OpCost cost_windowed_pool(const OpContext& ctx, std::span<const TensorInfo> outputs);

// Reads the required kernel_shape attribute of a pool (one positive value per spatial dim).
Result<std::vector<int64_t>> read_pool_kernel(const OpContext& ctx, int rank);

// The geometry of Conv / MaxPool / AveragePool: `input` and `kernel` are the spatial extents;
// reads strides, dilations, pads and auto_pad from the node's attributes.
Result<WindowGeometry> forward_window(const OpContext& ctx, std::span<const int64_t> input,
                                      std::span<const int64_t> kernel,
                                      const ForwardWindowOptions& options);

// The geometry of ConvTranspose; additionally reads output_padding and output_shape. `output`
// is the result's spatial extent and `pads_begin` the offset of output coordinate 0 in the full
// (unpadded) result: input i, tap t lands on output i * s + t * d - pads_begin. pads_end may be
// negative (see the header comment); kernels use only pads_begin and output.
Result<WindowGeometry> transpose_window(const OpContext& ctx, std::span<const int64_t> input,
                                        std::span<const int64_t> kernel);

// The same geometry in fixed 3-D form for kernels: missing leading dims have extent 1,
// kernel 1, stride 1, dilation 1, no padding. Index 2 is the innermost (contiguous) dim.
struct Window3 {
  int64_t in[3];
  int64_t out[3];
  int64_t k[3];
  int64_t s[3];
  int64_t d[3];
  int64_t pb[3];
  int64_t pe[3];
};
Window3 to_window3(const WindowGeometry& g);

// Half-open range [begin, end) of positions.
struct IndexRange {
  int64_t begin;
  int64_t end;
  int64_t size() const { return end > begin ? end - begin : 0; }
};

// The output positions o in [0, out) for which o * stride + offset lies in [0, in): where one
// kernel tap (offset = t * dilation - pad_begin) reads real input rather than padding.
inline IndexRange tap_output_range(int64_t in, int64_t out, int64_t stride, int64_t offset) {
  // o >= ceil(-offset / stride) and o * stride + offset <= in - 1.
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = in - offset <= 0 ? 0 : (in - offset - 1) / stride + 1;
  if (hi > out) hi = out;
  if (lo > hi) lo = hi;
  return {lo, hi};
}

// The kernel taps t in [0, k) for which start + t * dilation lies in [lo, hi): the taps of the
// window starting at input coordinate `start` that fall inside an interval (the input, or the
// padded input).
inline IndexRange window_tap_range(int64_t start, int64_t k, int64_t dilation, int64_t lo,
                                   int64_t hi) {
  int64_t first = start >= lo ? 0 : (lo - start + dilation - 1) / dilation;
  int64_t last = hi - start <= 0 ? 0 : (hi - start - 1) / dilation + 1;
  if (last > k) last = k;
  if (first > last) first = last;
  return {first, last};
}

// Walks `count` consecutive positions of a row-major 3-D extent starting at flat index `begin`,
// one innermost-dim run at a time: f(z, y, x_begin, x_end, local) where `local` is the position
// of (z, y, x_begin) relative to `begin`.
template <typename F>
void for_each_row_segment(const int64_t ext[3], int64_t begin, int64_t count, F&& f) {
  if (count <= 0) return;
  int64_t x = begin % ext[2];
  int64_t y = (begin / ext[2]) % ext[1];
  int64_t z = begin / (ext[2] * ext[1]);
  int64_t local = 0;
  while (local < count) {
    const int64_t run = std::min(ext[2] - x, count - local);
    f(z, y, x, x + run, local);
    local += run;
    x = 0;
    if (++y == ext[1]) {
      y = 0;
      ++z;
    }
  }
}

}  // namespace tessera
