#include "backends/cpu/onednn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "backends/cpu/conv.h"
#include "backends/cpu/fully_connected.h"
#include "backends/cpu/layout.h"
#include "backends/cpu/simd.h"
#include "ops/conv_pool_util.h"

#ifdef TESSERA_HAVE_ONEDNN
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <oneapi/dnnl/dnnl.hpp>

#if TESSERA_X86_64
#include <immintrin.h>
#endif
#endif

namespace tessera::cpu {

#ifndef TESSERA_HAVE_ONEDNN

bool onednn_available() {
  return false;
}
bool onednn_bf16_available() {
  return false;
}
std::string onednn_note() {
  return "no oneDNN in this build (TESSERA_ONEDNN=OFF)";
}
Result<std::unique_ptr<Kernel>> make_onednn_bf16_kernel(const KernelRequest&) {
  return decline();
}
Result<std::unique_ptr<Kernel>> make_onednn_int8_kernel(const KernelRequest&,
                                                        const std::vector<QuantParam>&) {
  return decline();
}
Result<std::unique_ptr<Kernel>> make_onednn_f32_conv(const KernelRequest&) {
  return decline();
}

#else

namespace {

// Whether oneDNN 2.6's int8 matmul adds an f32 bias before its output scales (as its
// convolutions do) rather than after: checked by cpu_int8_test against a scalar oracle.
constexpr bool kInt8MatmulBiasScaled = true;

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
    // No implementation for this configuration on this CPU (e.g. a bf16 pool where the effective
    // ISA is below AVX-512): the factories decline on it, and the layer keeps its f32 kernel.
    if (e.status == dnnl_unimplemented) return unimplemented(what + ": oneDNN: " + e.what());
    return internal_error(what + ": oneDNN: " + e.what());
  }
  return Status();
}

// A factory's result with oneDNN's "no implementation" turned into a decline (null).
Result<std::unique_ptr<Kernel>> or_decline(Result<std::unique_ptr<Kernel>> k) {
  if (!k.ok() && k.status().code() == StatusCode::kUnimplemented) return decline();
  return k;
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

// Attributes asking for a scratchpad the kernel owns (OneDnnKernel::own_scratchpad) rather than
// oneDNN's library-managed one: Debian's oneDNN 2.6.3 ran its gemm int8 grouped convolution
// (x64:gemm_s8u8s32) through a null library scratchpad on the pool's leader (a write at address
// 0xfc); a kernel-owned buffer also keeps a kernel's memory its own (kernel.h's thread rule).
dnnl::primitive_attr owned_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Input channels (per group) below which oneDNN 2.6's bf16 convolutions may fold the window's
// columns into the reduction (ConvPrimitiveKernel::create_primitive).
constexpr int64_t kFoldingChannels = 16;

// Whether any of n bf16 values is an infinity or a NaN (exponent all ones).
#if TESSERA_X86_64
__attribute__((target("avx512f,avx512bw"))) bool bf16_nonfinite_avx512(const uint16_t* p,
                                                                       size_t n) {
  const __m512i exp = _mm512_set1_epi16(0x7f80);
  __mmask32 any = 0;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512i v = _mm512_and_si512(_mm512_loadu_si512(p + i), exp);
    any |= _mm512_cmpeq_epi16_mask(v, exp);
  }
  if (i < n) {
    const __mmask32 m = (__mmask32(1) << (n - i)) - 1;
    const __m512i v = _mm512_and_si512(_mm512_maskz_loadu_epi16(m, p + i), exp);
    any |= _mm512_mask_cmpeq_epi16_mask(m, v, exp);
  }
  return any != 0;
}
#endif
bool bf16_nonfinite(const uint16_t* p, size_t n) {
#if TESSERA_X86_64
  if (has_avx512_bw_vl()) return bf16_nonfinite_avx512(p, n);
#endif
  for (size_t i = 0; i < n; ++i) {
    if ((p[i] & 0x7f80u) == 0x7f80u) return true;
  }
  return false;
}

// What every oneDNN bf16 kernel shares: the primitive, its stream, the bound memories.
class OneDnnKernel : public Kernel {
 public:
  bool bf16_io() const override { return !f32_; }
  bool runs_on_openmp() const override { return true; }
  std::string describe() const override { return desc_; }
  uint64_t owned_bytes() const override { return owned_bytes_; }

  Status run(ThreadPool& pool) override {
    prepare_openmp(pool);
    return guarded(what_, [&] {
      if (scratch_) args_[DNNL_ARG_SCRATCHPAD] = scratch_;
      prim_.execute(stream_, args_);
      stream_.wait();
    });
  }

 public:  // the factories below fill these in
  // Describes the kernel as `what` plus the implementation oneDNN chose ("brg:avx512_core_bf16").
  void name(const std::string& what, const dnnl::primitive_desc_base& pd) {
    desc_ =
        std::string(f32_ ? "onednn f32 " : "onednn bf16 ") + what + " (" + pd.impl_info_str() + ")";
  }

  // Allocates the scratchpad the primitive of `pd` asks for (its attributes from
  // owned_scratchpad_attr()); run() passes it.
  void own_scratchpad(const dnnl::primitive_desc_base& pd) {
    const memory::desc md = pd.scratchpad_desc();
    scratch_ = md.get_size() > 0 ? memory(md, cpu_engine()) : memory();
  }

  dnnl::primitive prim_;
  memory scratch_;  // the kernel's own scratchpad, or empty
  dnnl::stream stream_{cpu_engine()};
  std::unordered_map<int, memory> args_;
  std::string what_;
  std::string desc_;
  uint64_t owned_bytes_ = 0;
  bool f32_ = false;  // activations in f32 (make_onednn_f32_conv), not bf16
};

memory::dims dims_of(std::initializer_list<int64_t> d) {
  return memory::dims(d.begin(), d.end());
}

// The weight dims of a 2-D convolution: [cout, cin/g, kh, kw], or [g, cout/g, cin/g, kh, kw]
// when grouped (goihw).
memory::dims conv_weight_dims(const ConvSetup& s) {
  return s.group > 1 ? dims_of({s.group, s.cout / s.group, s.cin_g, s.kh, s.kw})
                     : dims_of({s.cout, s.cin_g, s.kh, s.kw});
}

memory::desc conv_bias_desc(const ConvSetup& s) {
  return memory::desc(dims_of({s.cout}), memory::data_type::f32, memory::format_tag::x);
}

// The inference convolution of `s` (its geometry, an f32 bias when it has one) from `src` to
// `dst`, with weights of type `weights` in the layout the implementation picks. Shared by the
// bf16 and int8 kernels; throws dnnl::error like the constructors it calls.
dnnl::convolution_forward::desc conv_desc(const ConvSetup& s, const memory::desc& src,
                                          memory::data_type weights, const memory::desc& dst) {
  const WindowGeometry& g = s.geo;
  const memory::desc w_any(conv_weight_dims(s), weights, memory::format_tag::any);
  const memory::dims strides = dims_of({g.strides[0], g.strides[1]});
  const memory::dims dil = dims_of({g.dilations[0] - 1, g.dilations[1] - 1});
  const memory::dims pl = dims_of({g.pads_begin[0], g.pads_begin[1]});
  const memory::dims pr = dims_of({g.pads_end[0], g.pads_end[1]});
  const auto prop = dnnl::prop_kind::forward_inference;
  const auto direct = dnnl::algorithm::convolution_direct;
  return s.bias != nullptr
             ? dnnl::convolution_forward::desc(prop, direct, src, w_any, conv_bias_desc(s), dst,
                                               strides, dil, pl, pr)
             : dnnl::convolution_forward::desc(prop, direct, src, w_any, dst, strides, dil, pl, pr);
}

// What the bf16 and int8 convolutions share: NHWC in and out, the primitive created for the
// node's input shape with weights reordered into the implementation's format, a fused residual
// copied into the output before a sum post-op, and the label of the kernel.
class ConvPrimitiveKernel : public OneDnnKernel {
 public:
  explicit ConvPrimitiveKernel(ConvSetup s) : s_(std::move(s)) {}

  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    Kernel::choose_layouts(available, wanted, produced);
    wanted[0] = Layout::kNHWC;
    produced[0] = Layout::kNHWC;
  }

  Status run(ThreadPool& pool) override {
    if (residual_src_ != nullptr) {
      std::memcpy(dst_, residual_src_, pd_.dst_desc().get_size());
    }
    if (safe_ && bf16_nonfinite(src_, src_count_)) return run_f32(pool);
    return OneDnnKernel::run(pool);
  }

  // The f32 convolution of a bf16 input holding an infinity or a NaN (create_primitive): the
  // input and a fused residual widened, the output rounded back. Buffers made on first use.
  Status run_f32(ThreadPool& pool) {
    const size_t out = pd_.dst_desc().get_size() / 2;
    src32_.resize(src_count_);
    dst32_.resize(out);
    bf16_to_f32_array(src_, src32_.data(), static_cast<int64_t>(src_count_), nullptr);
    // dst_ holds the residual already (copied in by run()): the sum post-op adds it.
    if (residual_src_ != nullptr) {
      bf16_to_f32_array(static_cast<const uint16_t*>(dst_), dst32_.data(),
                        static_cast<int64_t>(out), nullptr);
    }
    prepare_openmp(pool);
    RETURN_IF_ERROR(guarded(what_, [&] {
      std::unordered_map<int, memory> args;
      args[DNNL_ARG_SRC] = memory(safe_pd_.src_desc(), cpu_engine(), src32_.data());
      args[DNNL_ARG_WEIGHTS] = safe_weights_;
      if (s_.bias != nullptr) args[DNNL_ARG_BIAS] = bias_;
      args[DNNL_ARG_DST] = memory(safe_pd_.dst_desc(), cpu_engine(), dst32_.data());
      if (safe_scratch_) args[DNNL_ARG_SCRATCHPAD] = safe_scratch_;
      safe_prim_.execute(stream_, args);
      stream_.wait();
    }));
    f32_to_bf16_array(dst32_.data(), static_cast<uint16_t*>(dst_), static_cast<int64_t>(out),
                      nullptr);
    return Status();
  }

  // (Re)creates the primitive for input shape x from the kernel's state; false when oneDNN has
  // no post-op for the activation.
  virtual Result<bool> create(const Shape& x) = 0;

 protected:
  // Creates the convolution from src (elements `src_type`) to dst (`dst_type`) with weights
  // of `weight_type` and `attr`; reorders `user_weights` (oihw / goihw of `user_weight_type`)
  // into the chosen format; stores the bias as fill_bias writes it (given s_.cout floats).
  Status create_primitive(const Shape& x, dt src_type, dt dst_type, dt weight_type,
                          dt user_weight_type, const void* user_weights,
                          const dnnl::primitive_attr& attr,
                          const std::function<void(float*)>& fill_bias) {
    const ConvSetup& s = s_;
    const WindowGeometry& g = s.geo;
    const memory::desc src_md(dims_of({x[0], s.cin, x[2], x[3]}), src_type, tag::nhwc);
    const memory::desc dst_md(dims_of({x[0], s.cout, g.output[0], g.output[1]}), dst_type,
                              tag::nhwc);
    const memory::desc bias_md = conv_bias_desc(s);
    RETURN_IF_ERROR(guarded(what_, [&] {
      const dnnl::convolution_forward::desc d = conv_desc(s, src_md, weight_type, dst_md);
      pd_ = dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
      prim_ = dnnl::convolution_forward(pd_);
      own_scratchpad(pd_);
      memory user_w(
          memory::desc(conv_weight_dims(s), user_weight_type, s.group > 1 ? tag::goihw : tag::oihw),
          cpu_engine(), const_cast<void*>(user_weights));
      weights_ = memory(pd_.weights_desc(), cpu_engine());
      dnnl::reorder(user_w, weights_).execute(stream_, user_w, weights_);
      // oneDNN 2.6's bf16 convolutions for few input channels (jit:avx512_core_amx_bf16,
      // brgconv:avx512_core_bf16) fold the window's columns into the reduction, multiplying
      // input pixels outside a window by zero weights: one infinity or NaN in the input turns
      // outputs up to three columns away into NaN (an infinity at (h, w) of a 3x3 convolution
      // of 4 channels: outputs (h - 1..h, w - 3..w - 2)). They are also the fast ones for RGB
      // stems (ResNet-18's 7x7/2: 0.63 ms; the next implementation 3.4 ms on one core of the
      // AMX host), so they stay, and an f32 convolution runs the inputs that hold an infinity
      // or a NaN (run() looks: a scan of the input, ~2% of a stem's time).
      // (Depthwise convolutions have no reduction over channels to fold: they run as they are.)
      safe_ = false;
      const bool depthwise = s.group > 1 && s.cin_g == 1;
      if (src_type == dt::bf16 && s.cin_g < kFoldingChannels && !depthwise) {
        const memory::desc src32(dims_of({x[0], s.cin, x[2], x[3]}), dt::f32, tag::nhwc);
        const memory::desc dst32(dims_of({x[0], s.cout, g.output[0], g.output[1]}), dt::f32,
                                 tag::nhwc);
        safe_pd_ = dnnl::convolution_forward::primitive_desc(conv_desc(s, src32, dt::f32, dst32),
                                                             attr, cpu_engine());
        safe_prim_ = dnnl::convolution_forward(safe_pd_);
        const memory::desc sd = safe_pd_.scratchpad_desc();
        safe_scratch_ = sd.get_size() > 0 ? memory(sd, cpu_engine()) : memory();
        safe_weights_ = memory(safe_pd_.weights_desc(), cpu_engine());
        dnnl::reorder(user_w, safe_weights_).execute(stream_, user_w, safe_weights_);
        safe_ = true;
      }
      if (s.bias != nullptr) {
        bias_ = memory(bias_md, cpu_engine());
        fill_bias(static_cast<float*>(bias_.get_data_handle()));
      }
      stream_.wait();
    }));
    owned_bytes_ = pd_.weights_desc().get_size() + (s.bias != nullptr ? bias_md.get_size() : 0) +
                   (safe_ ? safe_pd_.weights_desc().get_size() : 0);
    return Status();
  }

  // "conv 3x3/2 depthwise +relu +residual".
  std::string label() const {
    const ConvSetup& s = s_;
    const bool dw = s.group > 1 && s.cin_g == 1;
    return "conv " + std::to_string(s.kh) + "x" + std::to_string(s.kw) + "/" +
           std::to_string(s.geo.strides[0]) +
           (dw            ? " depthwise"
            : s.group > 1 ? " grouped"
                          : "") +
           activation_suffix(s.act) + (silu_ ? " +silu" : "") + (residual_ ? " +residual" : "");
  }

  // fuse_silu for the bf16 and int8 convolutions: a swish post-op after the activation, with the
  // kernel's own state changed by `apply` (recreate_or_undo).
  bool fuse_silu_with(const std::function<void()>& apply, const std::function<void()>& undo) {
    if (s_.act.kind != ActivationKind::kNone || residual_ || silu_) return false;
    return recreate_or_undo(
        [&] {
          silu_ = true;
          apply();
        },
        [&] {
          silu_ = false;
          undo();
        });
  }

  // Changes the kernel's state (`apply`) and re-creates the primitive; where oneDNN refuses,
  // `undo` restores the state and the old primitive is rebuilt. Whether the change stands.
  bool recreate_or_undo(const std::function<void()>& apply, const std::function<void()>& undo) {
    apply();
    Result<bool> ok = create(shape_);
    if (ok.ok() && *ok) return true;
    undo();
    (void)create(shape_);
    return false;
  }

  // Fuses a residual add followed by `act`: re-creates the primitive with a sum post-op after
  // `apply` changed the kernel's own state; when that fails, `undo` restores it and the old
  // primitive is rebuilt. False when the activation cannot follow the sum.
  bool fuse_residual_with(const Activation& act, const std::function<void()>& apply,
                          const std::function<void()>& undo) {
    ConvSetup with = s_;
    if (silu_ || !with.take_residual_activation(act)) return false;
    dnnl::post_ops probe;
    if (!append_activation(with.act, &probe)) return false;
    const ConvSetup before = s_;
    return recreate_or_undo(
        [&] {
          s_ = with;
          residual_ = true;
          apply();
        },
        [&] {
          s_ = before;
          residual_ = false;
          undo();
        });
  }

  // Binds source, weights, bias and destination, and a fused residual (the last input). Outputs
  // are dense: given a strided NHWC destination (a Concat's slice), oneDNN 2.6 falls back to its
  // reference implementation (ref:any), so its kernels leave the Concat its copy.
  Status bind_conv(std::span<const Operand> in, std::span<const Operand> out) {
    return guarded(what_, [&] {
      args_.clear();
      args_[DNNL_ARG_SRC] = memory(pd_.src_desc(), cpu_engine(), in[0].data);
      args_[DNNL_ARG_WEIGHTS] = weights_;
      if (s_.bias != nullptr) args_[DNNL_ARG_BIAS] = bias_;
      args_[DNNL_ARG_DST] = memory(pd_.dst_desc(), cpu_engine(), out[0].data);
      residual_src_ = residual_ ? in.back().data : nullptr;
      dst_ = out[0].data;
      src_ = static_cast<const uint16_t*>(in[0].data);
      src_count_ = static_cast<size_t>(in[0].numel());
    });
  }

 public:  // the factories fill these in
  ConvSetup s_;
  Shape shape_;  // the input's
  bool residual_ = false;
  bool silu_ = false;  // a fused SiLU after the activation (fuse_silu)

 protected:
  const void* residual_src_ = nullptr;
  void* dst_ = nullptr;
  dnnl::convolution_forward::primitive_desc pd_;
  memory weights_, bias_;
  // The f32 convolution for bf16 inputs with an infinity or a NaN (create_primitive).
  bool safe_ = false;
  std::vector<float> src32_, dst32_;
  dnnl::convolution_forward::primitive_desc safe_pd_;
  dnnl::primitive safe_prim_;
  memory safe_weights_, safe_scratch_;
  const uint16_t* src_ = nullptr;  // bf16 source elements (read when safe_)
  size_t src_count_ = 0;
};

// Conv: NHWC bf16 (or, for the f32 kernel table, f32) in and out, weights reordered to the
// implementation's format at build time.
class ConvKernel final : public ConvPrimitiveKernel {
 public:
  using ConvPrimitiveKernel::ConvPrimitiveKernel;

  // Creates the primitive for the node's input shape (and residual when fused) and reorders
  // the weights into its format. False when oneDNN has no post-op for the activation.
  Result<bool> create(const Shape& x) override {
    dnnl::post_ops ops;
    // The residual as a sum post-op (dst += conv): run() copies it into dst first. oneDNN's
    // brgemm convolutions take a sum but not a binary add, which costs 2-8x on these layers.
    if (residual_) ops.append_sum(1.f);
    if (!append_activation(s_.act, &ops)) return false;
    if (silu_) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
    dnnl::primitive_attr attr = owned_scratchpad_attr();
    attr.set_post_ops(ops);
    const dt act = f32_ ? dt::f32 : dt::bf16;
    RETURN_IF_ERROR(
        create_primitive(x, act, act, act, dt::f32, s_.weight->data<float>(), attr,
                         [&](float* b) { std::memcpy(b, s_.bias->raw(), s_.bias->byte_size()); }));
    name(label(), pd_);
    if (safe_) desc_ += " [non-finite inputs: f32 " + std::string(safe_pd_.impl_info_str()) + "]";
    return true;
  }

  bool fuse_residual(const Activation& act) override {
    return fuse_residual_with(
        act, [] {}, [] {});
  }
  bool fuse_silu(QuantParam) override {
    return !f32_ && fuse_silu_with([] {}, [] {});
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    return bind_conv(in, out);
  }
};

Result<std::unique_ptr<Kernel>> make_conv(const KernelRequest& req, bool f32 = false) {
  ASSIGN_OR_RETURN(std::optional<ConvSetup> setup, conv_setup(req));
  if (!setup) return decline();
  auto k = std::make_unique<ConvKernel>(std::move(*setup));
  k->f32_ = f32;
  k->what_ = "node " + quote_name(req.node.name) + " (Conv)";
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
      pd_ = dnnl::pooling_forward::primitive_desc(d, owned_scratchpad_attr(), cpu_engine());
      prim_ = dnnl::pooling_forward(pd_);
      own_scratchpad(pd_);
    }));
    alg_ = alg;
    strides_ = dims_of({g.strides[0], g.strides[1]});
    kernel_ = dims_of({g.kernel[0], g.kernel[1]});
    pl_ = dims_of({g.pads_begin[0], g.pads_begin[1]});
    pr_ = dims_of({pads_end[0], pads_end[1]});
    label_ = what;
    name(what, pd_);
    return Status();
  }

  dnnl::pooling_forward::primitive_desc pd_;
  // The geometry, for the int8 pool built from this one (make_int8_pool).
  dnnl::algorithm alg_{};
  memory::dims strides_, kernel_, pl_, pr_;
  std::string label_;
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
  k->what_ = "node " + quote_name(n.name) + " (" + op_name(n.kind) + ")";
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
  ASSIGN_OR_RETURN(std::optional<FcParams> p, fc_params(req));
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
  dnnl::primitive_attr attr = owned_scratchpad_attr();
  attr.set_post_ops(ops);
  auto k = std::make_unique<MatMulKernel>();
  k->what_ = "node " + quote_name(n.name) + " (" + op_name(n.kind) + ")";
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
    k->own_scratchpad(k->pd_);
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

// ---- int8 (static quantisation, docs/precision.md) ----
//
// Activations are u8 or s8 with one scale and zero point per tensor (QuantParam; Tessera's own
// calibration makes zero points 0, a QDQ model's may not: oneDNN's source and destination zero
// points and the sum post-op's zero point take them, so padding is a real 0), weights s8
// with one scale per output channel (max |w| / 127), accumulation s32. oneDNN's output scales
// requantise the accumulators straight into the next layer's int8: with a fused activation that
// commutes with a positive scale (none, relu, leaky relu, clip with its bounds scaled) the scale
// is s_x * s_w[oc] / s_y and the activation runs on the requantised values; any other activation
// runs on the real values (scale s_x * s_w[oc]) followed by a linear post-op 1 / s_y. A bias is
// added to the accumulators before the scale (oneDNN's order), so it is stored divided by
// s_x * s_w[oc]. A fused residual R (int8, scale s_r) is copied into the output first and
// accumulated by a sum post-op with scale s_r / s_y (s_r on the real-value path).

dt int8_type(QuantParam q) {
  return q.is_unsigned ? dt::u8 : dt::s8;
}

// "u8", or "u8 zp 128" with a zero point.
std::string int8_label(QuantParam q) {
  return std::string(q.is_unsigned ? "u8" : "s8") +
         (q.zero_point != 0 ? " zp " + std::to_string(q.zero_point) : "");
}

// The source (and destination) zero points of `attr`, where not 0.
void set_zero_points(dnnl::primitive_attr& attr, QuantParam src, const QuantParam* dst) {
  if (src.zero_point != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {src.zero_point});
  if (dst != nullptr && dst->zero_point != 0)
    attr.set_zero_points(DNNL_ARG_DST, 0, {dst->zero_point});
}

// Whether an activation commutes with a positive scale once its bounds are scaled.
bool scale_invariant(const Activation& a) {
  return a.kind == ActivationKind::kNone || a.kind == ActivationKind::kRelu ||
         a.kind == ActivationKind::kLeakyRelu || a.kind == ActivationKind::kClip;
}

// The int8 convolution: NHWC int8 in and out.
class Int8ConvKernel final : public ConvPrimitiveKernel {
 public:
  Int8ConvKernel(ConvSetup s, QuantParam in, QuantParam out)
      : ConvPrimitiveKernel(std::move(s)), in_(in), out_(out) {}

  bool bf16_io() const override { return false; }
  bool int8_io() const override { return true; }

  // Quantises the weights (once) and creates the primitive. False when oneDNN has no post-op
  // for the activation.
  Result<bool> create(const Shape& x) override {
    const ConvSetup& s = s_;
    if (wq_.empty()) {
      quantize_weights_per_channel(s.weight->data<float>(), s.cout, s.cin_g * s.kh * s.kw, &wq_,
                                   &wscale_);
    }
    const bool fold = scale_invariant(s.act) && !silu_;
    std::vector<float> scales(static_cast<size_t>(s.cout));
    for (size_t oc = 0; oc < scales.size(); ++oc) {
      const float real = in_.scale * wscale_[oc];
      scales[oc] = fold ? real / out_.scale : real;
    }
    dnnl::post_ops ops;
    if (residual_) {
      // dst := rs * (R - zp_r) + ...: the residual's own zero point comes off first.
      const float rs = fold ? res_.scale / out_.scale : res_.scale;
      if (res_.zero_point != 0) {
        ops.append_sum(rs, res_.zero_point, int8_type(res_));
      } else if (res_.is_unsigned == out_.is_unsigned) {
        ops.append_sum(rs);
      } else {
        ops.append_sum(rs, int8_type(res_));
      }
    }
    Activation act = s.act;
    if (fold && act.kind == ActivationKind::kClip) {
      act.alpha /= out_.scale;
      act.beta /= out_.scale;
    }
    if (!append_activation(act, &ops)) return false;
    if (silu_) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f);
    if (!fold) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f / out_.scale, 0.f);
    dnnl::primitive_attr attr = owned_scratchpad_attr();
    attr.set_output_scales(1 << 1, scales);
    attr.set_post_ops(ops);
    // oneDNN adds the destination's zero point after the post-ops (after the activation).
    set_zero_points(attr, in_, &out_);
    RETURN_IF_ERROR(create_primitive(
        x, int8_type(in_), int8_type(out_), dt::s8, dt::s8, wq_.data(), attr, [&](float* b) {
          const float* src = s.bias->data<float>();
          for (int64_t oc = 0; oc < s.cout; ++oc) {
            b[oc] = src[oc] / (in_.scale * wscale_[static_cast<size_t>(oc)]);
          }
        }));
    desc_ = "onednn int8 " + label() + " " + int8_label(in_) + "->" + int8_label(out_) + " (" +
            pd_.impl_info_str() + ")";
    return true;
  }

  bool fuse_silu(QuantParam out) override {
    const QuantParam out_before = out_;
    return out.valid() && fuse_silu_with([&] { out_ = out; }, [&] { out_ = out_before; });
  }

  bool fuse_residual_int8(const Activation& act, QuantParam residual, QuantParam out) override {
    const QuantParam out_before = out_;
    return fuse_residual_with(
        act,
        [&] {
          res_ = residual;
          out_ = out;
        },
        [&] { out_ = out_before; });
  }

  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    if (!in[0].int8 || !out[0].int8 || !(in[0].quant == in_) || !(out[0].quant == out_) ||
        (residual_ && !(in.back().int8 && in.back().quant == res_))) {
      return internal_error(what_ + ": bound to tensors of another quantisation");
    }
    return bind_conv(in, out);
  }

  QuantParam in_, out_, res_;
  std::vector<int8_t> wq_;
  std::vector<float> wscale_;
};

Result<std::unique_ptr<Kernel>> make_int8_conv(const KernelRequest& req,
                                               const std::vector<QuantParam>& quant) {
  const QuantParam in = quant_of(quant, req.node.inputs[0]);
  const QuantParam out = quant_of(quant, req.node.outputs[0]);
  if (!in.valid() || !out.valid()) return decline();
  ASSIGN_OR_RETURN(std::optional<ConvSetup> setup, conv_setup(req));
  if (!setup) return decline();
  auto k = std::make_unique<Int8ConvKernel>(std::move(*setup), in, out);
  k->what_ = "node " + quote_name(req.node.name) + " (Conv)";
  k->shape_ = req.ctx.input(0).shape;
  ASSIGN_OR_RETURN(bool ok, k->create(k->shape_));
  if (!ok) return decline();
  return std::unique_ptr<Kernel>(std::move(k));
}

// MaxPool, AveragePool, GlobalAveragePool on int8: the output keeps the input's quantisation
// (CpuProgram gives a pool's output its input's QuantParam).
class Int8PoolKernel final : public OneDnnKernel {
 public:
  explicit Int8PoolKernel(QuantParam q) : q_(q) {}
  bool bf16_io() const override { return false; }
  bool int8_io() const override { return true; }
  void choose_layouts(std::span<const Layout> available, std::span<Layout> wanted,
                      std::span<Layout> produced) const override {
    Kernel::choose_layouts(available, wanted, produced);
    wanted[0] = Layout::kNHWC;
    produced[0] = Layout::kNHWC;
  }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    if (!in[0].int8 || !out[0].int8 || !(in[0].quant == q_) || !(out[0].quant == q_)) {
      return internal_error(what_ + ": bound to tensors of another quantisation");
    }
    return guarded(what_, [&] {
      args_.clear();
      args_[DNNL_ARG_SRC] = memory(pd_.src_desc(), cpu_engine(), in[0].data);
      args_[DNNL_ARG_DST] = memory(pd_.dst_desc(), cpu_engine(), out[0].data);
    });
  }
  dnnl::pooling_forward::primitive_desc pd_;
  QuantParam q_;
};

Result<std::unique_ptr<Kernel>> make_int8_pool(const KernelRequest& req,
                                               const std::vector<QuantParam>& quant) {
  const QuantParam in = quant_of(quant, req.node.inputs[0]);
  if (!in.valid() || !(quant_of(quant, req.node.outputs[0]) == in)) return decline();
  // The bf16 pool's geometry, rebuilt on int8 memory descriptors.
  ASSIGN_OR_RETURN(std::unique_ptr<Kernel> bf16, make_pool(req));
  if (bf16 == nullptr) return decline();
  const auto& b = static_cast<const PoolKernel&>(*bf16);
  // Max and an average over real elements commute with q = x / s + zp; an average that counts
  // padding as q = 0 does not when zp != 0 (padding must be the real 0, q = zp).
  if (in.zero_point != 0 && b.alg_ == dnnl::algorithm::pooling_avg_include_padding) {
    const bool padded = std::any_of(b.pl_.begin(), b.pl_.end(), [](auto v) { return v != 0; }) ||
                        std::any_of(b.pr_.begin(), b.pr_.end(), [](auto v) { return v != 0; });
    if (padded) return decline();
  }
  auto k = std::make_unique<Int8PoolKernel>(in);
  k->what_ = b.what_;
  const memory::desc src_md = memory::desc(b.pd_.src_desc().dims(), int8_type(in), tag::nhwc);
  const memory::desc dst_md = memory::desc(b.pd_.dst_desc().dims(), int8_type(in), tag::nhwc);
  RETURN_IF_ERROR(guarded(k->what_, [&] {
    const dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference, b.alg_, src_md, dst_md,
                                        b.strides_, b.kernel_, b.pl_, b.pr_);
    k->pd_ = dnnl::pooling_forward::primitive_desc(d, owned_scratchpad_attr(), cpu_engine());
    k->prim_ = dnnl::pooling_forward(k->pd_);
    k->own_scratchpad(k->pd_);
  }));
  k->desc_ = "onednn int8 " + b.label_ + " " + int8_label(in) + " (" + k->pd_.impl_info_str() + ")";
  return std::unique_ptr<Kernel>(std::move(k));
}

// Gemm / MatMul with a constant weight matrix on an int8 X: weights s8 per output column,
// output in f32 (logits and other graph outputs keep f32's resolution).
class Int8MatMulKernel final : public OneDnnKernel {
 public:
  explicit Int8MatMulKernel(QuantParam q) : q_(q) {}
  bool bf16_io() const override { return false; }
  bool int8_io() const override { return true; }
  bool int8_output() const override { return false; }
  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    if (!in[0].int8 || !(in[0].quant == q_) || out[0].int8 || out[0].bf16) {
      return internal_error(what_ + ": bound to tensors of another precision");
    }
    return guarded(what_, [&] {
      args_.clear();
      args_[DNNL_ARG_SRC] = memory(pd_.src_desc(), cpu_engine(), in[0].data);
      args_[DNNL_ARG_WEIGHTS] = weights_;
      if (bias_) args_[DNNL_ARG_BIAS] = bias_;
      args_[DNNL_ARG_DST] = memory(pd_.dst_desc(), cpu_engine(), out[0].data);
    });
  }
  QuantParam q_;
  dnnl::matmul::primitive_desc pd_;
  memory weights_, bias_;
};

Result<std::unique_ptr<Kernel>> make_int8_matmul(const KernelRequest& req,
                                                 const std::vector<QuantParam>& quant) {
  const Node& n = req.node;
  const QuantParam in = quant_of(quant, n.inputs[0]);
  if (!in.valid()) return decline();
  ASSIGN_OR_RETURN(std::optional<FcParams> p, fc_params(req));
  if (!p) return decline();
  // The program holds rank-4 int8 values in NHWC, as it does bf16 ones (make_matmul), and this
  // kernel reads logical order: a MatMul on a rank-4 input stays in f32 unless both layouts have
  // the same bytes.
  const Shape& xs = req.ctx.input(0).shape;
  if (xs.rank() == 4 && !layout_trivial(xs)) return decline();
  ASSIGN_OR_RETURN(Activation act, parse_fused_activation(n.attrs));
  dnnl::post_ops ops;
  if (!append_activation(act, &ops)) return decline();
  const auto m = static_cast<int64_t>(p->batch), kk = static_cast<int64_t>(p->k),
             nn = static_cast<int64_t>(p->n);
  // Weights as [n][k] rows (one per output column) for the per-column scales.
  std::vector<float> rows(static_cast<size_t>(nn * kk));
  for (int64_t j = 0; j < nn; ++j) {
    for (int64_t i = 0; i < kk; ++i) {
      rows[static_cast<size_t>(j * kk + i)] = p->w_is_k_by_n ? p->w[i * nn + j] : p->w[j * kk + i];
    }
  }
  std::vector<int8_t> wq;
  std::vector<float> ws;
  quantize_weights_per_channel(rows.data(), nn, kk, &wq, &ws);
  std::vector<float> scales(static_cast<size_t>(nn));
  for (size_t j = 0; j < scales.size(); ++j) scales[j] = in.scale * ws[j];
  dnnl::primitive_attr attr = owned_scratchpad_attr();
  attr.set_output_scales(1 << 1, scales);
  attr.set_post_ops(ops);
  set_zero_points(attr, in, nullptr);
  auto k = std::make_unique<Int8MatMulKernel>(in);
  k->what_ = "node " + quote_name(n.name) + " (" + op_name(n.kind) + ")";
  RETURN_IF_ERROR(guarded(k->what_, [&] {
    const memory::desc src_md(dims_of({m, kk}), int8_type(in), tag::ab);
    const memory::desc w_any(dims_of({kk, nn}), dt::s8, tag::any);
    const memory::desc bias_md(dims_of({1, nn}), dt::f32, tag::ab);
    const memory::desc dst_md(dims_of({m, nn}), dt::f32, tag::ab);
    const dnnl::matmul::desc d = p->bias.empty()
                                     ? dnnl::matmul::desc(src_md, w_any, dst_md)
                                     : dnnl::matmul::desc(src_md, w_any, bias_md, dst_md);
    k->pd_ = dnnl::matmul::primitive_desc(d, attr, cpu_engine());
    k->prim_ = dnnl::matmul(k->pd_);
    k->own_scratchpad(k->pd_);
    // wq is [n][k] row-major: the [k, n] matrix in "ba" order.
    memory user_w(memory::desc(dims_of({kk, nn}), dt::s8, tag::ba), cpu_engine(), wq.data());
    k->weights_ = memory(k->pd_.weights_desc(), cpu_engine());
    dnnl::reorder(user_w, k->weights_).execute(k->stream_, user_w, k->weights_);
    if (!p->bias.empty()) {
      k->bias_ = memory(bias_md, cpu_engine());
      auto* b = static_cast<float*>(k->bias_.get_data_handle());
      for (int64_t j = 0; j < nn; ++j) {
        b[j] = kInt8MatmulBiasScaled
                   ? p->bias[static_cast<size_t>(j)] / scales[static_cast<size_t>(j)]
                   : p->bias[static_cast<size_t>(j)];
      }
    }
    k->stream_.wait();
  }));
  k->owned_bytes_ = k->pd_.weights_desc().get_size() + p->bias.size() * sizeof(float);
  k->desc_ = "onednn int8 matmul " + std::to_string(kk) + "->" + std::to_string(nn) +
             activation_suffix(act) + " " + int8_label(in) + "->f32 (" + k->pd_.impl_info_str() +
             ")";
  return std::unique_ptr<Kernel>(std::move(k));
}

}  // namespace

bool onednn_available() {
  return true;
}

bool onednn_bf16_available() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
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
    case dnnl::cpu_isa::avx512_core:
      isa = "avx512, bf16 emulated, int8 without VNNI";
      break;
    default:
      isa = "below AVX-512: no bf16";
      break;
  }
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + " (" + isa + ")";
}

Result<std::unique_ptr<Kernel>> make_onednn_bf16_kernel(const KernelRequest& req) {
  switch (req.node.kind) {
    case OpKind::kConv:
      return or_decline(make_conv(req));
    case OpKind::kGemm:
    case OpKind::kMatMul:
      return or_decline(make_matmul(req));
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
    case OpKind::kGlobalAveragePool:
      return or_decline(make_pool(req));
    default:
      return decline();
  }
}

Result<std::unique_ptr<Kernel>> make_onednn_f32_conv(const KernelRequest& req) {
  // Not the rules' choice for any configuration: measured kernel choice offers it every node.
  if (!req.any_config || req.node.kind != OpKind::kConv) return decline();
  return or_decline(make_conv(req, /*f32=*/true));
}

Result<std::unique_ptr<Kernel>> make_onednn_int8_kernel(const KernelRequest& req,
                                                        const std::vector<QuantParam>& quant) {
  if (req.node.inputs.empty() || req.node.outputs.empty()) return decline();
  switch (req.node.kind) {
    case OpKind::kConv:
      return or_decline(make_int8_conv(req, quant));
    case OpKind::kGemm:
    case OpKind::kMatMul:
      return or_decline(make_int8_matmul(req, quant));
    case OpKind::kMaxPool:
    case OpKind::kAveragePool:
    case OpKind::kGlobalAveragePool:
      return or_decline(make_int8_pool(req, quant));
    default:
      return decline();
  }
}

#endif  // TESSERA_HAVE_ONEDNN

}  // namespace tessera::cpu
