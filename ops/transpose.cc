// Transpose: output dimension i is input dimension perm[i]; perm defaults to the reverse order.
// Any dtype (elements are moved as bytes). Dimensions that stay adjacent are merged first; if
// the innermost output dimension is then contiguous in the source the copy moves whole runs (a
// gather_copy, e.g. a channel shuffle copies H*W runs), otherwise a cache-blocked 2-D transpose
// runs over the plane of the innermost dimension and the source-contiguous one (NCHW <-> NHWC).
#include <algorithm>

#include "ops/data_movement.h"
#include "ops/kernel_params.h"
#include "ops/registry.h"

namespace tessera {

namespace {

Result<std::vector<int>> parse_perm(const OpContext& ctx) {
  const int rank = ctx.input(0).shape.rank();
  std::vector<int64_t> reverse(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) reverse[static_cast<size_t>(i)] = rank - 1 - i;
  Result<std::vector<int64_t>> perm = ctx.attrs().ints_or("perm", reverse);
  if (!perm.ok()) return ctx.wrap(perm.status());
  const std::string what = "perm " + ints_to_string(*perm);
  if (static_cast<int>(perm->size()) != rank) {
    return ctx.error(what + " does not have one entry per dimension of " +
                     ctx.input(0).shape.to_string());
  }
  std::vector<int> out;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t p : *perm) {
    if (p < 0 || p >= rank || seen[static_cast<size_t>(p)]) {
      return ctx.error(what + " is not a permutation of 0.." + std::to_string(rank - 1));
    }
    seen[static_cast<size_t>(p)] = true;
    out.push_back(static_cast<int>(p));
  }
  return out;
}

Status infer_transpose(const OpContext& ctx, int /*num_outputs*/,
                       std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(std::vector<int> perm, parse_perm(ctx));
  TensorInfo out = ctx.input(0);
  for (size_t i = 0; i < perm.size(); ++i) {
    out.shape[static_cast<int>(i)] = ctx.input(0).shape[perm[i]];
  }
  outputs->push_back(std::move(out));
  return Status();
}

// Output dimensions with their source strides (elements), after dropping size-1 dimensions and
// merging neighbours that stay adjacent in the source.
struct StridedDims {
  std::vector<int64_t> size, stride;
};

StridedDims collapse(const Tensor& in, const std::vector<int>& perm) {
  const std::vector<int64_t> strides = contiguous_strides(in.shape());
  StridedDims s;
  for (int p : perm) {
    const int64_t n = in.dim(p), st = strides[static_cast<size_t>(p)];
    if (n == 1) continue;
    if (!s.size.empty() && s.stride.back() == st * n) {
      s.size.back() *= n;
      s.stride.back() = st;
    } else {
      s.size.push_back(n);
      s.stride.push_back(st);
    }
  }
  return s;
}

// dst[a * dst_row + b] = src[a + b * src_col] for a < rows, b < cols, in cache-sized tiles so
// both the strided reads and the contiguous writes stay in L1.
template <typename T>
void transpose_2d(const T* src, T* dst, int64_t rows, int64_t cols, int64_t dst_row,
                  int64_t src_col) {
  constexpr int64_t kTile = 32;
  for (int64_t a0 = 0; a0 < rows; a0 += kTile) {
    const int64_t a1 = std::min(a0 + kTile, rows);
    for (int64_t b0 = 0; b0 < cols; b0 += kTile) {
      const int64_t b1 = std::min(b0 + kTile, cols);
      for (int64_t a = a0; a < a1; ++a) {
        for (int64_t b = b0; b < b1; ++b) dst[a * dst_row + b] = src[a + b * src_col];
      }
    }
  }
}

// Transposes whose innermost output dimension is strided in the source: walk every dimension
// but two (the innermost, and the one contiguous in the source) and tile the 2-D plane of those
// two. Returns false if the shape does not have that form.
template <typename T>
bool transpose_tiled(const Tensor& in, Tensor& out, const StridedDims& s) {
  const int rank = static_cast<int>(s.size.size());
  if (rank < 2 || s.stride.back() == 1) return false;
  int j = -1;  // the output dimension that is contiguous in the source
  for (int d = 0; d < rank - 1; ++d) {
    if (s.stride[static_cast<size_t>(d)] == 1) j = d;
  }
  if (j < 0) return false;
  std::vector<int64_t> dst_stride(static_cast<size_t>(rank));
  int64_t st = 1;
  for (int d = rank - 1; d >= 0; --d) {
    dst_stride[static_cast<size_t>(d)] = st;
    st *= s.size[static_cast<size_t>(d)];
  }
  // The other dimensions, walked like an odometer.
  std::vector<int> outer;
  for (int d = 0; d < rank - 1; ++d) {
    if (d != j) outer.push_back(d);
  }
  std::vector<int64_t> counter(outer.size(), 0);
  const int64_t planes = out.numel() / (s.size[static_cast<size_t>(j)] * s.size.back());
  const T* src = in.data<T>();
  T* dst = out.data<T>();
  int64_t src_off = 0, dst_off = 0;
  for (int64_t p = 0; p < planes; ++p) {
    transpose_2d(src + src_off, dst + dst_off, s.size[static_cast<size_t>(j)], s.size.back(),
                 dst_stride[static_cast<size_t>(j)], s.stride.back());
    for (int k = static_cast<int>(outer.size()) - 1; k >= 0; --k) {
      const size_t d = static_cast<size_t>(outer[static_cast<size_t>(k)]);
      int64_t& c = counter[static_cast<size_t>(k)];
      if (++c < s.size[d]) {
        src_off += s.stride[d];
        dst_off += dst_stride[d];
        break;
      }
      src_off -= s.stride[d] * (c - 1);
      dst_off -= dst_stride[d] * (c - 1);
      c = 0;
    }
  }
  return true;
}

Status reference_transpose(const OpContext& ctx, std::span<const Tensor> inputs,
                           std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(std::vector<int> perm, parse_perm(ctx));
  const Tensor& in = inputs[0];
  Tensor& out = outputs[0];
  if (out.numel() == 0) return Status();
  const StridedDims s = collapse(in, perm);
  switch (dtype_size(in.dtype())) {
    case 1:
      if (transpose_tiled<uint8_t>(in, out, s)) return Status();
      break;
    case 2:
      if (transpose_tiled<uint16_t>(in, out, s)) return Status();
      break;
    case 4:
      if (transpose_tiled<uint32_t>(in, out, s)) return Status();
      break;
    case 8:
      if (transpose_tiled<uint64_t>(in, out, s)) return Status();
      break;
  }
  // Everything else (inner dimension contiguous in the source: block copies) is a gather copy.
  const int64_t elem = static_cast<int64_t>(dtype_size(in.dtype()));
  GatherCopyPlan plan;
  plan.elem_bytes = static_cast<size_t>(elem);
  for (size_t d = 0; d < s.size.size(); ++d) {
    std::vector<int64_t> off(static_cast<size_t>(s.size[d]));
    for (size_t o = 0; o < off.size(); ++o) off[o] = static_cast<int64_t>(o) * s.stride[d] * elem;
    plan.offsets.push_back(std::move(off));
  }
  gather_copy(plan, in.raw(), out.raw(), nullptr);
  return Status();
}

}  // namespace

Result<IndexMaps> transpose_index_maps(const OpContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int> perm, parse_perm(ctx));
  const Shape& in = ctx.input(0).shape;
  IndexMaps maps;
  maps.fixed.assign(perm.size(), 0);
  // An empty output needs no maps; sized by its other dimensions they could be 2^31 long each.
  const bool empty = in.numel() == 0;
  for (int p : perm) {
    std::vector<int64_t> idx(empty ? 0 : static_cast<size_t>(in[p]));
    for (size_t o = 0; o < idx.size(); ++o) idx[o] = static_cast<int64_t>(o);
    maps.source_dim.push_back(p);
    maps.index.push_back(std::move(idx));
  }
  return maps;
}

const OpSchema kTransposeSchema = {
    .kind = OpKind::kTranspose,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_transpose,
    .cost = nullptr,
    .reference = reference_transpose,
};

}  // namespace tessera
