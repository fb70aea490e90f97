// DepthToSpace and SpaceToDepth (opsets 11-13), NCHW, any dtype (pure data movement).
// DepthToSpace moves blocks of channels into blocksize x blocksize spatial blocks:
// X [N, C, H, W] -> Y [N, C / b^2, H * b, W * b] with, for block offset (i, j),
//   mode DCR (default): Y[n, c, h*b + i, w*b + j] = X[n, (i*b + j) * C/b^2 + c, h, w]
//   mode CRD:           Y[n, c, h*b + i, w*b + j] = X[n, c * b^2 + i*b + j, h, w]
// (CRD is PyTorch's PixelShuffle.) SpaceToDepth is the inverse of DCR:
//   Y[n, (i*b + j) * C + c, h, w] = X[n, c, h*b + i, w*b + j],  Y [N, C * b^2, H / b, W / b].
#include <cstring>

#include "ops/attr_util.h"
#include "ops/registry.h"

namespace tessera {

namespace {

struct BlockParams {
  int64_t b = 1;
  bool crd = false;
};

Result<BlockParams> block_params(const OpContext& ctx, bool to_space) {
  BlockParams p;
  const Shape& x = ctx.input(0).shape;
  if (x.rank() != 4) return ctx.error("input 0 must be 4-D NCHW, has shape " + x.to_string());
  Result<int64_t> b = ctx.attrs().get_int("blocksize");
  if (!b.ok()) return ctx.wrap(b.status());
  if (*b < 1 || *b > 4096) {
    return ctx.error("blocksize = " + std::to_string(*b) + " must be in [1, 4096]");
  }
  p.b = *b;
  if (to_space) {
    ASSIGN_OR_RETURN(std::string mode, string_attr(ctx, "mode", "DCR"));
    if (mode != "DCR" && mode != "CRD") {
      return ctx.error("mode " + quote_name(mode) + " must be DCR or CRD");
    }
    p.crd = mode == "CRD";
    if (x[1] % (p.b * p.b) != 0) {
      return ctx.error("the " + std::to_string(x[1]) +
                       " channels are not divisible by blocksize^2 = " + std::to_string(p.b * p.b));
    }
  } else if (x[2] % p.b != 0 || x[3] % p.b != 0) {
    return ctx.error("height " + std::to_string(x[2]) + " and width " + std::to_string(x[3]) +
                     " must be divisible by blocksize " + std::to_string(p.b));
  }
  return p;
}

Status infer_depth_to_space(const OpContext& ctx, int, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(BlockParams p, block_params(ctx, true));
  const Shape& x = ctx.input(0).shape;
  outputs->push_back(
      TensorInfo{ctx.input(0).dtype, Shape{x[0], x[1] / (p.b * p.b), x[2] * p.b, x[3] * p.b}});
  return Status();
}

Status infer_space_to_depth(const OpContext& ctx, int, std::vector<TensorInfo>* outputs) {
  ASSIGN_OR_RETURN(BlockParams p, block_params(ctx, false));
  const Shape& x = ctx.input(0).shape;
  outputs->push_back(
      TensorInfo{ctx.input(0).dtype, Shape{x[0], x[1] * p.b * p.b, x[2] / p.b, x[3] / p.b}});
  return Status();
}

// Walks the space side [N, C, H*b, W*b] of the pair and copies each element between it and the
// depth side [N, C*b^2, H, W]; `to_space` says which way.
void move_blocks(const Tensor& in, Tensor* out, const BlockParams& p, bool to_space) {
  const Tensor& space = to_space ? *out : in;
  const Shape& s = space.shape();
  const int64_t n = s[0], c = s[1], hs = s[2], ws = s[3];
  const int64_t b = p.b, h = hs / b, w = ws / b, cd = c * b * b;
  const size_t e = dtype_size(in.dtype());
  const auto* src = static_cast<const uint8_t*>(in.raw());
  auto* dst = static_cast<uint8_t*>(out->raw());
  for (int64_t bn = 0; bn < n; ++bn) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t y = 0; y < hs; ++y) {
        for (int64_t x = 0; x < ws; ++x) {
          const int64_t i = y % b, j = x % b;
          const int64_t dch = p.crd ? ch * b * b + i * b + j : (i * b + j) * c + ch;
          const int64_t s_at = ((bn * c + ch) * hs + y) * ws + x;
          const int64_t d_at = ((bn * cd + dch) * h + y / b) * w + x / b;
          const int64_t from = to_space ? d_at : s_at, to = to_space ? s_at : d_at;
          std::memcpy(dst + static_cast<size_t>(to) * e, src + static_cast<size_t>(from) * e, e);
        }
      }
    }
  }
}

Status reference_depth_to_space(const OpContext& ctx, std::span<const Tensor> inputs,
                                std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(BlockParams p, block_params(ctx, true));
  move_blocks(inputs[0], &outputs[0], p, true);
  return Status();
}

Status reference_space_to_depth(const OpContext& ctx, std::span<const Tensor> inputs,
                                std::span<Tensor> outputs) {
  ASSIGN_OR_RETURN(BlockParams p, block_params(ctx, false));
  move_blocks(inputs[0], &outputs[0], p, false);
  return Status();
}

}  // namespace

const OpSchema kDepthToSpaceSchema = {
    .kind = OpKind::kDepthToSpace,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_depth_to_space,
    .cost = nullptr,
    .reference = reference_depth_to_space,
};

const OpSchema kSpaceToDepthSchema = {
    .kind = OpKind::kSpaceToDepth,
    .min_inputs = 1,
    .max_inputs = 1,
    .min_outputs = 1,
    .max_outputs = 1,
    .accepts_fused_activation = false,
    .infer = infer_space_to_depth,
    .cost = nullptr,
    .reference = reference_space_to_depth,
};

}  // namespace tessera
