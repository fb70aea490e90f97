#include "backends/cpu/onednn.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/fully_connected.h"
#include "ops/conv_pool_util.h"

#ifdef TESSERA_HAVE_ONEDNN
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace tessera::cpu {

#ifndef TESSERA_HAVE_ONEDNN

bool onednn_available() {
  return false;
}
std::string onednn_note() {
  return "no oneDNN in this build (TESSERA_ONEDNN=OFF)";
}
Result<std::unique_ptr<Kernel>> make_onednn_bf16_kernel(const KernelRequest&) {
  return decline();
}

#else

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Runs `fn`, turning a oneDNN exception into a Status naming `what`.
template <typename F>
Status guarded(const std::string& what, F&& fn) {
  try {
    fn();
  } catch (const dnnl::error& e) {
    return internal_error(what + ": oneDNN: " + e.what());
  }
  return Status();
}

// Sets the OpenMP team for a oneDNN call on the pool's leader (see onednn.h): all the pool's
// cores, one pinned thread each, or one thread when the job keeps to the leader.
void prepare_openmp(ThreadPool& pool) {
  const int want = pool.pthreadpool() != nullptr ? pool.num_threads() : 1;
  // The team a leader thread pinned last (libgomp keeps a leader's team between regions).
  thread_local int pinned = 0;
  if (want > 1 && pinned != want) {
    const std::vector<int>& cores = pool.cores().cores();
#pragma omp parallel num_threads(want)
    {
      const int t = omp_get_thread_num();
      if (t < static_cast<int>(cores.size())) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cores[static_cast<size_t>(t)], &set);
        pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
      }
    }
    pinned = want;
  }
  omp_set_num_threads(want);
}

// The post-ops of a fused activation, or false when oneDNN has none for it.
bool append_activation(const Activation& a, dnnl::post_ops* ops) {
  switch (a.kind) {
    case ActivationKind::kNone:
      return true;
    case ActivationKind::kRelu:
      ops->append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      return true;
    case ActivationKind::kLeakyRelu:
      ops->append_eltwise(1.f, dnnl::algorithm::eltwise_relu, a.alpha, 0.f);
      return true;
    case ActivationKind::kClip:
      if (!(a.alpha <= a.beta)) return false;  // NaN bounds or min > max: the f32 kernels
      ops->append_eltwise(1.f, dnnl::algorithm::eltwise_clip, a.alpha, a.beta);
      return true;
    case ActivationKind::kSigmoid:
      ops->append_eltwise(1.f, dnnl::algorithm::eltwise_logistic, 0.f, 0.f);
      return true;
    case ActivationKind::kTanh:
      ops->append_eltwise(1.f, dnnl::algorithm::eltwise_tanh, 0.f, 0.f);
      return true;
    case ActivationKind::kHardSwish:
      ops->append_eltwise(1.f, dnnl::algorithm::eltwise_hardswish, 0.f, 0.f);
      return true;
    case ActivationKind::kHardSigmoid:
      return false;
  }
  return false;
}

// What every oneDNN bf16 kernel shares: the primitive, its stream, the bound memories.
class OneDnnKernel : public Kernel {
 public:
  bool bf16_io() const override { return true; }
  bool runs_on_openmp() const override { return true; }
  std::string describe() const override { return desc_; }
  uint64_t owned_bytes() const override { return owned_bytes_; }

  Status run(ThreadPool& pool) override {
    prepare_openmp(pool);
    return guarded(what_, [&] {
      prim_.execute(stream_, args_);
      stream_.wait();
    });
  }

 public:  // the factories below fill these in
  // Describes the kernel as `what` plus the implementation oneDNN chose ("brg:avx512_core_bf16").
  void name(const std::string& what, const dnnl::primitive_desc_base& pd) {
    desc_ = "onednn bf16 " + what + " (" + pd.impl_info_str() + ")";
  }

  dnnl::primitive prim_;
  dnnl::stream stream_{cpu_engine()};
  std::unordered_map<int, memory> args_;
  std::string what_;
  std::string desc_;
  uint64_t owned_bytes_ = 0;
};

memory::dims dims_of(std::initializer_list<int64_t> d) {
  return memory::dims(d.begin(), d.end());
}

// Conv: NHWC bf16 in and out, weights reordered to the implementation's format at build time.
class ConvKernel final : public OneDnnKernel {
 public:
  explicit ConvKernel(ConvSetup s) : s_(std::move(s)) {}

  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    Kernel::choose_layouts(available, wanted, produced);
    wanted[0] = Layout::kNHWC;
    produced[0] = Layout::kNHWC;
  }

  // Creates the primitive for the node's input shape (and residual when fused) and reorders
  // the weights into its format. False when oneDNN has no post-op for the activation.
  Result<bool> create(const Shape& x) {
    const ConvSetup& s = s_;
    const WindowGeometry& g = s.geo;
    dnnl::post_ops ops;
    const memory::desc dst_md(dims_of({x[0], s.cout, g.output[0], g.output[1]}), dt::bf16,
                              tag::nhwc);
    // The residual as a sum post-op (dst += conv): run() copies it into dst first. oneDNN's
    // brgemm convolutions take a sum but not a binary add, which costs 2-8x on these layers.
    if (residual_) ops.append_sum(1.f);
    if (!append_activation(s.act, &ops)) return false;
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const memory::desc src_md(dims_of({x[0], s.cin, x[2], x[3]}), dt::bf16, tag::nhwc);
    const bool grouped = s.group > 1;
    const memory::dims wdims = grouped ? dims_of({s.group, s.cout / s.group, s.cin_g, s.kh, s.kw})
                                       : dims_of({s.cout, s.cin_g, s.kh, s.kw});
    const memory::desc w_any(wdims, dt::bf16, tag::any);
    const memory::desc bias_md(dims_of({s.cout}), dt::f32, tag::x);
    const memory::dims strides = dims_of({g.strides[0], g.strides[1]});
    const memory::dims dil = dims_of({g.dilations[0] - 1, g.dilations[1] - 1});
    const memory::dims pl = dims_of({g.pads_begin[0], g.pads_begin[1]});
    const memory::dims pr = dims_of({g.pads_end[0], g.pads_end[1]});
    RETURN_IF_ERROR(guarded(what_, [&] {
      const dnnl::convolution_forward::desc d =
          s.bias != nullptr
              ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                dnnl::algorithm::convolution_direct, src_md, w_any,
                                                bias_md, dst_md, strides, dil, pl, pr)
              : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                                dnnl::algorithm::convolution_direct, src_md, w_any,
                                                dst_md, strides, dil, pl, pr);
      pd_ = dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
      prim_ = dnnl::convolution_forward(pd_);
      memory user_w(memory::desc(wdims, dt::f32, grouped ? tag::goihw : tag::oihw), cpu_engine(),
                    const_cast<float*>(s.weight->data<float>()));
      weights_ = memory(pd_.weights_desc(), cpu_engine());
      dnnl::reorder(user_w, weights_).execute(stream_, user_w, weights_);
      if (s.bias != nullptr) {
        bias_ = memory(bias_md, cpu_engine());
        std::memcpy(bias_.get_data_handle(), s.bias->raw(), s.bias->byte_size());
      }
      stream_.wait();
    }));
    owned_bytes_ = pd_.weights_desc().get_size() + (s.bias != nullptr ? bias_md.get_size() : 0);
    const bool dw = s.group > 1 && s.cin_g == 1;
    name("conv " + std::to_string(s.kh) + "x" + std::to_string(s.kw) + "/" +
             std::to_string(g.strides[0]) +
             (dw        ? " depthwise"
              : grouped ? " grouped"
                        : "") +
             activation_suffix(s.act) + (residual_ ? " +residual" : ""),
         pd_);
    return true;
  }

  bool fuse_residual(const Activation& act) override {
    ConvSetup with = s_;
    if (!with.take_residual_activation(act)) return false;
    dnnl::post_ops probe;
    if (!append_activation(with.act, &probe)) return false;
    const ConvSetup before = s_;
    s_ = with;
    residual_ = true;
    Result<bool> ok = create(shape_);
    if (!ok.ok() || !*ok) {
      s_ = before;
      residual_ = false;
      (void)create(shape_);
      return false;
    }
    return true;
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    return guarded(what_, [&] {
      args_.clear();
      args_[DNNL_ARG_SRC] = memory(pd_.src_desc(), cpu_engine(), in[0].data);
      args_[DNNL_ARG_WEIGHTS] = weights_;
      if (s_.bias != nullptr) args_[DNNL_ARG_BIAS] = bias_;
      args_[DNNL_ARG_DST] = memory(pd_.dst_desc(), cpu_engine(), out[0].data);
      residual_src_ = residual_ ? in.back().data : nullptr;
      dst_ = out[0].data;
    });
  }

  Status run(ThreadPool& pool) override {
    if (residual_src_ != nullptr) {
      std::memcpy(dst_, residual_src_, pd_.dst_desc().get_size());
    }
    return OneDnnKernel::run(pool);
  }

  ConvSetup s_;
  Shape shape_;  // the input's
  bool residual_ = false;
  const void* residual_src_ = nullptr;
  void* dst_ = nullptr;
  dnnl::convolution_forward::primitive_desc pd_;
  memory weights_, bias_;
};

Result<std::unique_ptr<Kernel>> make_conv(const KernelRequest& req) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> setup, conv_setup(req));
  if (!setup) return decline();
  auto k = std::make_unique<ConvKernel>(std::move(*setup));
  k->what_ = "node '" + req.node.name + "' (Conv)";
  k->shape_ = req.ctx.input(0).shape;
  ASSIGN_OR_RETURN(bool ok, k->create(k->shape_));
  if (!ok) return decline();
  return std::unique_ptr<Kernel>(std::move(k));
}

// MaxPool, AveragePool, GlobalAveragePool: NHWC bf16 in and out.
class PoolKernel final : public OneDnnKernel {
 public:
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    Kernel::choose_layouts(available, wanted, produced);
    wanted[0] = Layout::kNHWC;
    produced[0] = Layout::kNHWC;
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    return guarded(what_, [&] {
      args_.clear();
      args_[DNNL_ARG_SRC] = memory(pd_.src_desc(), cpu_engine(), in[0].data);
      args_[DNNL_ARG_DST] = memory(pd_.dst_desc(), cpu_engine(), out[0].data);
    });
  }

  Status create(dnnl::algorithm alg, const Shape& x, const WindowGeometry& g,
                const std::vector<int64_t>& pads_end, const std::string& what) {
    const memory::desc src_md(dims_of({x[0], x[1], x[2], x[3]}), dt::bf16, tag::nhwc);
    const memory::desc dst_md(dims_of({x[0], x[1], g.output[0], g.output[1]}), dt::bf16, tag::nhwc);
    RETURN_IF_ERROR(guarded(what_, [&] {
      const dnnl::pooling_forward::desc d(
          dnnl::prop_kind::forward_inference, alg, src_md, dst_md,
          dims_of({g.strides[0], g.strides[1]}), dims_of({g.kernel[0], g.kernel[1]}),
          dims_of({g.pads_begin[0], g.pads_begin[1]}), dims_of({pads_end[0], pads_end[1]}));
      pd_ = dnnl::pooling_forward::primitive_desc(d, cpu_engine());
      prim_ = dnnl::pooling_forward(pd_);
    }));
    name(what, pd_);
    return Status();
  }

  dnnl::pooling_forward::primitive_desc pd_;
};

Result<std::unique_ptr<Kernel>> make_pool(const KernelRequest& req) {
  const OpContext& ctx = req.ctx;
  const Node& n = req.node;
  if (ctx.input(0).dtype != DType::kF32 || ctx.input(0).shape.rank() != 4) return decline();
  if (n.outputs.size() > 1 && n.outputs[1] != kNoValue) return decline();  // MaxPool Indices
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  if (act.kind != ActivationKind::kNone) return decline();
  const Shape& xs = ctx.input(0).shape;
  auto k = std::make_unique<PoolKernel>();
  k->what_ = "node '" + n.name + "' (" + op_name(n.kind) + ")";
  if (n.kind == OpKind::kGlobalAveragePool) {
    WindowGeometry g;
    g.rank = 2;
    g.input = {xs[2], xs[3]};
    g.kernel = {xs[2], xs[3]};
    g.strides = {1, 1};
    g.dilations = {1, 1};
    g.pads_begin = {0, 0};
    g.pads_end = {0, 0};
    g.output = {1, 1};
    RETURN_IF_ERROR(k->create(dnnl::algorithm::pooling_avg_exclude_padding, xs, g, g.pads_end,
                              "global avgpool"));
    return std::unique_ptr<Kernel>(std::move(k));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> kernel, read_pool_kernel(ctx, 2));
  ForwardWindowOptions opt;
  ASSIGN_OR_RETURN(opt.ceil_mode, read_flag(ctx, "ceil_mode"));
  opt.pads_below_kernel = true;
  const int64_t in[2] = {xs[2], xs[3]};
  ASSIGN_OR_RETURN(WindowGeometry g, forward_window(ctx, in, kernel, opt));
  if (g.dilations[0] != 1 || g.dilations[1] != 1) return decline();
  if (g.kernel[0] * g.kernel[1] <= 1) return decline();  // an identity pool aliases (f32 kernels)
  bool include_pad = false;
  if (n.kind == OpKind::kAveragePool) {
    ASSIGN_OR_RETURN(include_pad, read_flag(ctx, "count_include_pad"));
    if (include_pad && opt.ceil_mode) return decline();
  }
  // Ceil mode: extend the end padding so that floor rounding gives the same output size (the
  // extra cells are never counted: max ignores them, the average excludes padding).
  std::vector<int64_t> pe(2);
  for (int i = 0; i < 2; ++i) {
    pe[i] = opt.ceil_mode
                ? std::max<int64_t>(0, (g.output[i] - 1) * g.strides[i] + g.effective_kernel(i) -
                                           g.input[i] - g.pads_begin[i])
                : g.pads_end[i];
    const int64_t out = (g.input[i] + g.pads_begin[i] + pe[i] - g.kernel[i]) / g.strides[i] + 1;
    if (out != g.output[i]) return decline();
  }
  const dnnl::algorithm alg = n.kind == OpKind::kMaxPool ? dnnl::algorithm::pooling_max
                              : include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                            : dnnl::algorithm::pooling_avg_exclude_padding;
  RETURN_IF_ERROR(k->create(alg, xs, g, pe,
                            std::string(n.kind == OpKind::kMaxPool ? "maxpool " : "avgpool ") +
                                std::to_string(g.kernel[0]) + "x" + std::to_string(g.kernel[1]) +
                                "/" + std::to_string(g.strides[0])));
  return std::unique_ptr<Kernel>(std::move(k));
}

// Gemm / MatMul with a constant weight matrix: X[batch, k] (bf16, logical order) * W.
class MatMulKernel final : public OneDnnKernel {
 public:
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    return guarded(what_, [&] {
      args_.clear();
      args_[DNNL_ARG_SRC] = memory(pd_.src_desc(), cpu_engine(), in[0].data);
      args_[DNNL_ARG_WEIGHTS] = weights_;
      if (bias_) args_[DNNL_ARG_BIAS] = bias_;
      args_[DNNL_ARG_DST] = memory(pd_.dst_desc(), cpu_engine(), out[0].data);
    });
  }

  dnnl::matmul::primitive_desc pd_;
  memory weights_, bias_;
};

Result<std::unique_ptr<Kernel>> make_matmul(const KernelRequest& req) {
  const Node& n = req.node;
  std::optional<FcParams> p;
  if (n.kind == OpKind::kGemm) {
    ASSIGN_OR_RETURN(p, gemm_params(req));
  } else {
    p = matmul_params(req);
  }
  if (!p) return decline();
  // The program holds rank-4 bf16 values in NHWC (cpu_program.cc), and this kernel reads and
  // writes logical order: a MatMul on rank-4 tensors ([N, C, H, K] x [K, M]) stays in f32 unless
  // both layouts have the same bytes.
  const Shape& xs = req.ctx.input(0).shape;
  const Shape& ys = req.graph.value(n.outputs[0]).info.shape;
  if ((xs.rank() == 4 && !layout_trivial(xs)) || (ys.rank() == 4 && !layout_trivial(ys))) {
    return decline();
  }
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  dnnl::post_ops ops;
  if (!append_activation(act, &ops)) return decline();
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  auto k = std::make_unique<MatMulKernel>();
  k->what_ = "node '" + n.name + "' (" + op_name(n.kind) + ")";
  const auto m = static_cast<int64_t>(p->batch), kk = static_cast<int64_t>(p->k),
             nn = static_cast<int64_t>(p->n);
  RETURN_IF_ERROR(guarded(k->what_, [&] {
    const memory::desc src_md(dims_of({m, kk}), dt::bf16, tag::ab);
    const memory::desc w_any(dims_of({kk, nn}), dt::bf16, tag::any);
    const memory::desc bias_md(dims_of({1, nn}), dt::f32, tag::ab);
    const memory::desc dst_md(dims_of({m, nn}), dt::bf16, tag::ab);
    const dnnl::matmul::desc d = p->bias.empty()
                                     ? dnnl::matmul::desc(src_md, w_any, dst_md)
                                     : dnnl::matmul::desc(src_md, w_any, bias_md, dst_md);
    k->pd_ = dnnl::matmul::primitive_desc(d, attr, cpu_engine());
    k->prim_ = dnnl::matmul(k->pd_);
    memory user_w(memory::desc(dims_of({kk, nn}), dt::f32, p->w_is_k_by_n ? tag::ab : tag::ba),
                  cpu_engine(), const_cast<float*>(p->w));
    k->weights_ = memory(k->pd_.weights_desc(), cpu_engine());
    dnnl::reorder(user_w, k->weights_).execute(k->stream_, user_w, k->weights_);
    if (!p->bias.empty()) {
      k->bias_ = memory(bias_md, cpu_engine());
      std::memcpy(k->bias_.get_data_handle(), p->bias.data(), p->bias.size() * sizeof(float));
    }
    k->stream_.wait();
  }));
  k->owned_bytes_ = k->pd_.weights_desc().get_size() + p->bias.size() * sizeof(float);
  k->name("matmul " + std::to_string(kk) + "->" + std::to_string(nn) + activation_suffix(act),
          k->pd_);
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

bool onednn_available() {
  return true;
}

std::string onednn_note() {
  const dnnl_version_t* v = dnnl_version();
  std::string isa;
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      isa = "AMX";
      break;
    case dnnl::cpu_isa::avx512_core_bf16:
      isa = "avx512_bf16";
      break;
    case dnnl::cpu_isa::avx512_core_vnni:
      isa = "avx512 VNNI, bf16 emulated";
      break;
    default:
      isa = "no native bf16";
      break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (" + isa + ")";
}

Result<std::unique_ptr<Kernel>> make_onednn_bf16_kernel(const KernelRequest& req) {
  switch (req.node.kind) {
    case OpKind::kConv:
      return make_conv(req);
    case OpKind::kGemm:
    case OpKind::kMatMul:
      return make_matmul(req);
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
    case OpKind::kGlobalAveragePool:
      return make_pool(req);
    default:
      return decline();
  }
}

#endif  // TESSERA_HAVE_ONEDNN

}  // namespace tessera::cpu
