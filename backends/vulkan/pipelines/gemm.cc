// Gemm (fully-connected layers) and MatMul.
//   Gemm with B stored N x K (transB = 1, the usual FC layout) and M <= 8: f32_gemv_rows, one
//   workgroup per output column reading the weight row once.
//   everything else: f32_gemm_tiled (shared-memory tiles picked per shape, batched for MatMul).
// A constant N x K weight larger than one storage buffer (VGG16's first FC layer is 392 MiB,
// lavapipe binds 128 MiB) is uploaded in chunks of whole rows, one gemv dispatch per chunk.
#include "backends/vulkan/pipelines/kernel.h"

namespace tessera {

namespace {

struct GemmPlan {
  uint32_t m = 0, n = 0, k = 0;
  bool trans_a = false, trans_b = false;
  float alpha = 1.f, beta = 1.f;
  bool has_bias = false;
  uint32_t bias_sm = 0, bias_sn = 0;
  uint32_t batch = 1, batch_a = 0, batch_b = 0;
  Activation act;
};

Result<GemmPlan> parse_gemm(const Graph& g, const Node& node) {
  GemmPlan p;
  const Shape& a = g.value(node.inputs[0]).info.shape;
  const Shape& bs = g.value(node.inputs[1]).info.shape;
  ASSIGN_OR_RETURN(p.act, parse_fused_activation(node.attrs));
  if (node.kind == OpKind::kGemm) {
    ASSIGN_OR_RETURN(int64_t ta, node.attrs.int_or("transA", 0));
    ASSIGN_OR_RETURN(int64_t tb, node.attrs.int_or("transB", 0));
    ASSIGN_OR_RETURN(p.alpha, node.attrs.float_or("alpha", 1.f));
    ASSIGN_OR_RETURN(p.beta, node.attrs.float_or("beta", 1.f));
    p.trans_a = ta != 0;
    p.trans_b = tb != 0;
    p.m = static_cast<uint32_t>(p.trans_a ? a[1] : a[0]);
    p.k = static_cast<uint32_t>(p.trans_a ? a[0] : a[1]);
    p.n = static_cast<uint32_t>(p.trans_b ? bs[0] : bs[1]);
    if (node.inputs.size() > 2 && node.inputs[2] != kNoValue) {
      p.has_bias = true;
      const Shape& c = g.value(node.inputs[2]).info.shape;
      const int64_t cm = c.rank() == 2 ? c[0] : 1;
      const int64_t cn = c.rank() >= 1 ? c[c.rank() - 1] : 1;
      p.bias_sm = cm == 1 ? 0 : static_cast<uint32_t>(cn);
      p.bias_sn = cn == 1 ? 0 : 1;
    }
    return p;
  }
  // MatMul: [..., M, K] x [..., K, N] with the batch dims equal, or one side without them.
  if (a.rank() < 2 || bs.rank() < 2) {
    return unimplemented("node " + quote_name(node.name) +
                         " (MatMul): 1-D operands are not supported");
  }
  p.m = static_cast<uint32_t>(a[a.rank() - 2]);
  p.k = static_cast<uint32_t>(a[a.rank() - 1]);
  p.n = static_cast<uint32_t>(bs[bs.rank() - 1]);
  const int64_t batch_a = a.numel() / (int64_t{p.m} * p.k == 0 ? 1 : int64_t{p.m} * p.k);
  const int64_t batch_b = bs.numel() / (int64_t{p.k} * p.n == 0 ? 1 : int64_t{p.k} * p.n);
  const bool same =
      a.rank() == bs.rank() && std::equal(a.dims().begin(), a.dims().end() - 2, bs.dims().begin());
  if (!(same || bs.rank() == 2 || a.rank() == 2)) {
    return unimplemented("node " + quote_name(node.name) +
                         " (MatMul): batch dims that broadcast partially are not supported");
  }
  p.batch = static_cast<uint32_t>(std::max(batch_a, batch_b));
  p.batch_a = batch_a > 1 ? p.m * p.k : 0;
  p.batch_b = batch_b > 1 ? p.k * p.n : 0;
  return p;
}

bool uses_gemv(const Node& node, const GemmPlan& p) {
  return node.kind == OpKind::kGemm && p.trans_b && p.m <= 8;
}

Capability supports_gemm(const Graph& g, const Node& node, const VulkanGpu& gpu) {
  Result<GemmPlan> p = parse_gemm(g, node);
  if (!p.ok()) return Capability::no(p.status().message());
  if (p->batch > 65535) return Capability::no("more than 65535 batches");
  if (node.kind == OpKind::kGemm) {
    const Value& w = g.value(node.inputs[1]);
    const uint64_t limit = gpu.max_buffer_bytes();
    if (w.info.byte_size() > limit) {
      const std::string why = "tensor " + quote_name(w.name) + " (" +
                              std::to_string(w.info.byte_size()) +
                              " bytes) exceeds the largest buffer this device can bind (" +
                              std::to_string(limit) + " bytes: maxStorageBufferRange)";
      if (!uses_gemv(node, *p) || !w.is_constant) {
        return Capability::no(why +
                              "; only a constant weight with transB = 1 at batch <= 8 is "
                              "split into row chunks");
      }
      if (uint64_t{p->k} * 4 > limit) return Capability::no(why + "; one row does not fit");
    }
  }
  return Capability::yes();
}

Status plan_gemm(KernelBuilder& b) {
  ASSIGN_OR_RETURN(GemmPlan p, parse_gemm(b.graph(), b.node()));
  if (uint64_t{p.m} * p.n * p.batch == 0) return Status();  // empty output
  ASSIGN_OR_RETURN(BufferRef a, b.input(0));
  const uint64_t limit = b.gpu().max_buffer_bytes();
  const uint64_t row_bytes = uint64_t{p.k} * 4;
  const Tensor* wc = b.constant(1);
  if (uses_gemv(b.node(), p)) {
    // Rows per chunk: everything when the weight fits one buffer.
    const uint64_t rows = row_bytes * p.n <= limit || wc == nullptr
                              ? p.n
                              : std::max<uint64_t>(1, limit / std::max<uint64_t>(row_bytes, 1));
    BufferRef bias{};
    for (uint64_t n0 = 0; n0 < p.n; n0 += rows) {
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(rows, p.n - n0));
      BufferRef w;
      if (rows == p.n) {
        ASSIGN_OR_RETURN(w, b.input(1));
      } else {
        ASSIGN_OR_RETURN(w, b.upload(wc->data<float>() + n0 * p.k, n * row_bytes));
      }
      if (n0 == 0) bias = w;
      if (p.has_bias && n0 == 0) {
        ASSIGN_OR_RETURN(bias, b.input(2));
      }
      Dispatch d;
      d.bindings = {a, w, bias, b.output(0)};
      d.writes = {3};
      d.shader = "f32_gemv_rows";
      d.spec = {p.trans_a ? 1u : 0u, p.has_bias ? 1u : 0u};
      append_activation_spec(p.act, &d.spec);
      d.spec.push_back(p.m);
      d.push = {p.m,
                n,
                p.k,
                float_bits(p.alpha),
                float_bits(p.beta),
                p.bias_sm,
                p.bias_sn,
                static_cast<uint32_t>(n0),
                p.n};
      set_linear_groups(n, 1, &d);
      b.dispatch(std::move(d));
    }
    return Status();
  }
  ASSIGN_OR_RETURN(BufferRef w, b.input(1));
  BufferRef bias = w;
  if (p.has_bias) {
    ASSIGN_OR_RETURN(bias, b.input(2));
  }
  Dispatch d;
  d.bindings = {a, w, bias, b.output(0)};
  d.writes = {3};
  {
    d.shader = "f32_gemm_tiled";
    d.spec = {p.trans_a ? 1u : 0u, p.trans_b ? 1u : 0u, p.has_bias ? 1u : 0u};
    append_activation_spec(p.act, &d.spec);
    const GemmTile tile = pick_gemm_tile(p.m, p.n, p.batch);
    append_tile_spec(tile, &d.spec);
    d.push = {p.m,
              p.n,
              p.k,
              p.batch_a,
              p.batch_b,
              p.m * p.n,
              float_bits(p.alpha),
              float_bits(p.beta),
              p.bias_sm,
              p.bias_sn};
    d.groups[0] = ceil_div(p.n, tile.tile_n());
    d.groups[1] = ceil_div(p.m, tile.tile_m());
    d.groups[2] = p.batch;
    if (d.groups[0] > 65535 || d.groups[1] > 65535) return b.error("matrix too large");
  }
  b.dispatch(std::move(d));
  return Status();
}

}  // namespace

extern const VulkanKernel kVulkanGemmKernel = {OpKind::kGemm, false, 1, supports_gemm, plan_gemm};
extern const VulkanKernel kVulkanMatMulKernel = {OpKind::kMatMul, false, -1, supports_gemm,
                                                 plan_gemm};

}  // namespace tessera
