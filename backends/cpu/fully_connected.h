// The GEMM-shaped layers of the cpu device as its kernels see them (fully_connected.cc, and the
// reduced-precision kernels of onednn.cc): a product with a constant weight matrix.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "backends/cpu/kernel.h"

namespace tessera::cpu {

// A product with a constant weight matrix: X[batch, k] * W -> [batch, n], W given as [k, n]
// (w_is_k_by_n) or [n, k], alpha already folded into `w`, bias = beta * C (empty: none).
struct FcParams {
  size_t batch = 0, k = 0, n = 0;
  const float* w = nullptr;
  bool w_is_k_by_n = true;
  std::vector<float> bias;
  std::vector<float> scaled;  // alpha * B when alpha != 1 (w points here)
  // The constant W comes from, and what else the packed bytes depend on (alpha, the bias and
  // beta), so that nodes with the same product share one packing (pack_cache.h).
  ValueId w_value = kNoValue;
  std::string packing;
};

// The product of a Gemm node whose B is a constant (f32, rank-2 A, transA = 0); nullopt: not
// this kind of node. Errors are attribute errors.
Result<std::optional<FcParams>> gemm_params(const KernelRequest& req);
// The product of a MatMul node whose B is a constant matrix (A's leading dims are the batch);
// nullopt: not this kind of node.
std::optional<FcParams> matmul_params(const KernelRequest& req);
// gemm_params or matmul_params by the node's kind; nullopt for other nodes.
Result<std::optional<FcParams>> fc_params(const KernelRequest& req);

}  // namespace tessera::cpu
