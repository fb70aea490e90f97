// Split rules: how one layer is cut into pieces that run on several devices (seed 004 Sect. IV,
// wave2-spec.md Sect. 4 with its printed typos corrected).
//
// A split rule answers, for one node and one method with per-piece ratios:
//   - which region of each input every piece reads (activations: the scatter; constants: how the
//     weights and biases are sliced),
//   - the attributes of the piece node (explicit pads for spatial pieces, a smaller group...),
//   - how the pieces' outputs merge: concatenated along an axis, or summed, with the activation
//     applied once after the sum (the bias goes into the first piece only, so it is added once).
//
// Methods (the `split` string of a Placement, scheduler/plan.h):
//   fc-out        Gemm / MatMul: a range of output features (columns of B'); merge concat.
//   fc-in         Gemm / MatMul: a range of input features (columns of A', rows of B'); partial
//                 sums, merge sum then the activation.
//   conv-channel  Conv: a range of filters (of groups when group > 1, reading their input
//                 channels); merge concat along C. Also per-channel ops that follow a split
//                 layer: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool,
//                 BatchNormalization, unary activations and same-shape element-wise binaries.
//   conv-spatial  Conv, MaxPool, AveragePool and same-shape element-wise ops: a range of output
//                 rows (the first spatial dim), reading the exact input rows those rows' windows
//                 touch for any kernel, stride, dilation and padding (the halo); pieces get
//                 explicit pads where a window reaches into the layer's own padding. Merge concat
//                 along H. (1-D row strips, which suit unequal ratios.)
//   conv-filter   Conv with group 1: a range of input channels across all filters; partial sums,
//                 merge sum then the activation.
//   conv-grid     The ops of conv-spatial with 2 spatial dims: the paper's grid. n pieces form
//                 rows x cols cells (rows the largest divisor of n <= sqrt(n): 4 -> 2x2, 9 -> 3x3,
//                 6 -> 2x3, a prime n one row); each cell is a band of output rows times a band of
//                 output columns, reading its exact halo along both axes (and the corners). Bands
//                 take the summed ratios of their row / column of cells. Merge concat along H, W.
// Ops and methods without a rule cannot be split; the error names the node and the rule missing.
//
// Bytes moved per inference (split_traffic): the scatter is every piece's input regions of the
// non-constant inputs, the gather every piece's output. For the Table I/II cases these are:
//   fc-out n*d_i + d_o, fc-in d_i + n*d_o, conv-channel (n*C_i + k)*H_i*W_i,
//   conv-filter (C_i + n*k)*H_i*W_i, conv-spatial the strips with their exact halos + k*H_o*W_o;
//   conv-grid d x d with same padding, stride 1 and f x f kernels:
//   C_i*(H_i + 2*floor(f/2)*(d-1))*(W_i + 2*floor(f/2)*(d-1)) + k*H_o*W_o.
//
// Everything here is pure geometry on shapes and host tensors; thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "ops/activation.h"
#include "ops/attributes.h"
#include "ops/op.h"

namespace tessera {

enum class SplitMethod : uint8_t {
  kFcOut,
  kFcIn,
  kConvChannel,
  kConvSpatial,
  kConvFilter,
  kConvGrid
};
inline constexpr SplitMethod kAllSplitMethods[] = {
    SplitMethod::kFcOut,       SplitMethod::kFcIn,       SplitMethod::kConvChannel,
    SplitMethod::kConvSpatial, SplitMethod::kConvFilter, SplitMethod::kConvGrid};

// "fc-out", "fc-in", "conv-channel", "conv-spatial", "conv-filter", "conv-grid".
const char* split_method_name(SplitMethod m);
// Parses a method name; the error lists the names accepted.
Result<SplitMethod> parse_split_method(std::string_view name);

enum class SplitMerge : uint8_t { kConcat, kSum };

// A box of a tensor: [begin[d], end[d]) in every dim.
struct Region {
  std::vector<int64_t> begin;
  std::vector<int64_t> end;

  static Region whole(const Shape& s);
  Shape shape() const;
  int64_t numel() const;
  bool covers(const Shape& s) const;  // the region is the whole tensor
  bool operator==(const Region&) const = default;
};

struct SplitPiece {
  // One entry per node input: the region of that input the piece reads (constants are sliced to
  // it). present[i] false drops the input (the bias of all but the first partial-sum piece, and
  // inputs the node omits).
  std::vector<Region> inputs;
  std::vector<bool> present;
  Attributes attrs;  // the piece node's attributes
  Region output;     // where its output lands in the layer's output (the whole output for kSum)
};

struct SplitRule {
  SplitMethod method = SplitMethod::kConvChannel;
  SplitMerge merge = SplitMerge::kConcat;
  int axis = 1;           // kConcat: the axis the pieces' outputs are concatenated along
  Activation activation;  // kSum: applied after the sum (the pieces compute without it)
  TensorInfo output;      // the layer's output
  std::vector<SplitPiece> pieces;
};

// Integer shares of `total` units by `ratios` (largest remainder; ties to the earlier piece),
// each at least 1. Fails when there are more pieces than units or a ratio is not positive.
Result<std::vector<int64_t>> apportion(int64_t total, std::span<const double> ratios);

// The number of units `method` divides for this node (filters or groups, output rows, input
// channels, output or input features); fails naming the node when the method has no rule for it.
Result<int64_t> split_extent(const OpContext& ctx, SplitMethod method);

// The rule for splitting the node in ctx (all input shapes known, constants present) into
// ratios.size() pieces of about those shares of split_extent().
Result<SplitRule> split_node(const OpContext& ctx, SplitMethod method,
                             std::span<const double> ratios);

struct SplitTraffic {
  uint64_t scatter_bytes = 0;  // non-constant input regions, summed over pieces
  uint64_t gather_bytes = 0;   // piece outputs, summed
  uint64_t weight_bytes = 0;   // constant regions, summed (sent once, not per inference)
  std::vector<uint64_t> piece_scatter_bytes;  // by piece
  std::vector<uint64_t> piece_gather_bytes;   // by piece
};
SplitTraffic split_traffic(const OpContext& ctx, const SplitRule& rule);

// FLOPs and bytes of piece `piece` (the op's cost function on the piece's input regions and
// attributes), for the cost model's per-op regression.
OpCost split_piece_cost(const OpContext& ctx, const SplitRule& rule, size_t piece);
// Bytes the host touches to merge: the output once (concat), or every partial sum (sum).
uint64_t split_merge_bytes(const SplitRule& rule);

// Host helpers the composite device uses. slice_region: region r of t, sharing t's storage when
// the region is one contiguous run of it (a whole tensor, a range of the outermost non-unit dim),
// else a copy.
Result<Tensor> slice_region(const Tensor& t, const Region& r);
// Region r of t as a view sharing t's storage, when it is one contiguous run of t; nullopt
// otherwise (or when r does not fit t).
std::optional<Tensor> region_view(const Tensor& t, const Region& r);
// Copies `piece` (of r's shape) into region r of *out (which holds the whole output). Pieces
// pasting disjoint regions may run concurrently.
void paste_region(const Tensor& piece, const Region& r, Tensor* out);
// Merges the pieces' outputs into *out (allocated when undefined or of another shape): copies
// each into its region (kConcat), or sums them in piece order and applies the activation (kSum).
Status merge_split(const SplitRule& rule, std::span<const Tensor> piece_outputs, Tensor* out);

}  // namespace tessera
