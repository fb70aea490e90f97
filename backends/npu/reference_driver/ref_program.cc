// Preparing and running a subgraph on the reference NPU.
//
// Phases of prepare:
//   1. plan: an on-chip arena for the activations (each tensor gets an offset, reused once its
//      last reader has run) and the weight bytes in the target precision; refuse if weights +
//      arena exceed the memory cap;
//   2. (int8 only) calibrate: build the fp16 program, run the sample inputs through it and
//      record each tensor's range; tensors that must share quantisation (pooling, concat,
//      clamp, flatten in/out) share the union of their ranges;
//   3. build: one or more XNNPACK operators per node, set up once on fixed arena pointers.
// Execute converts each input from host NCHW into the on-chip NHWC8 layout, runs the steps and
// converts the outputs back.
#include <pthreadpool.h>
#include <xnnpack.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "backends/npu/reference_driver/ref_model.h"

namespace tnpu_ref {

namespace {

using Clock = std::chrono::steady_clock;
uint64_t ns_since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

bool xnn_ready() {
  static const bool ok = xnn_initialize(nullptr) == xnn_status_success;
  return ok;
}

struct OpDeleter {
  void operator()(xnn_operator_t op) const { xnn_delete_operator(op); }
};
using OpPtr = std::unique_ptr<xnn_operator, OpDeleter>;

// What one node runs: XNNPACK operators in order, or a custom data-movement function.
struct Step {
  std::vector<OpPtr> ops;
  std::function<void()> custom;
};

std::string mb(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MB", static_cast<double>(bytes) / 1e6);
  return buf;
}

// Activation tensors used by the model, and for each its first and last step.
struct Arena {
  std::vector<uint64_t> offset;  // per tensor; UINT64_MAX when not an activation of the model
  uint64_t bytes = 0;
};

Arena plan_arena(const Model& m, size_t esize) {
  const size_t nt = m.tensors.size();
  const int end = static_cast<int>(m.nodes.size());
  std::vector<int> def(nt, end + 1), last(nt, -1);
  for (int v : m.inputs) def[static_cast<size_t>(v)] = -1, last[static_cast<size_t>(v)] = -1;
  for (int s = 0; s < end; ++s) {
    const Node& n = m.nodes[static_cast<size_t>(s)];
    for (int v : n.inputs) last[static_cast<size_t>(v)] = std::max(last[static_cast<size_t>(v)], s);
    def[static_cast<size_t>(n.output)] = s;
    last[static_cast<size_t>(n.output)] = std::max(last[static_cast<size_t>(n.output)], s);
  }
  for (int v : m.outputs) last[static_cast<size_t>(v)] = end;
  std::vector<int> order;
  for (size_t v = 0; v < nt; ++v)
    if (def[v] <= end) order.push_back(static_cast<int>(v));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return def[static_cast<size_t>(a)] < def[static_cast<size_t>(b)];
  });
  struct Block {
    uint64_t off, size;
    int last;
  };
  std::vector<Block> live;  // sorted by offset
  Arena a;
  a.offset.assign(nt, UINT64_MAX);
  for (int v : order) {
    const int s = def[static_cast<size_t>(v)];
    live.erase(std::remove_if(live.begin(), live.end(), [&](const Block& b) { return b.last < s; }),
               live.end());
    const uint64_t size =
        (static_cast<uint64_t>(m.tensors[static_cast<size_t>(v)].onchip_numel()) * esize + 63) /
        64 * 64;
    uint64_t off = 0;
    size_t pos = 0;
    for (; pos < live.size(); ++pos) {
      if (live[pos].off >= off + size) break;
      off = std::max(off, live[pos].off + live[pos].size);
    }
    live.insert(live.begin() + static_cast<std::ptrdiff_t>(pos),
                Block{off, size, last[static_cast<size_t>(v)]});
    a.offset[static_cast<size_t>(v)] = off;
    a.bytes = std::max(a.bytes, off + size);
  }
  return a;
}

uint64_t weight_bytes_of(const Model& m, uint32_t precision) {
  const bool int8 = precision == TNPU_PRECISION_INT8;
  uint64_t total = 0;
  for (const Node& n : m.nodes) {
    uint64_t weights = 0, channels = 0;
    if (n.op == OpType::kConv || n.op == OpType::kGemm) {
      const TensorDesc& w = m.tensors[static_cast<size_t>(n.weight)];
      weights = static_cast<uint64_t>(
          std::accumulate(w.dims, w.dims + w.rank, int64_t{1}, std::multiplies<int64_t>()));
      channels = static_cast<uint64_t>(n.op == OpType::kConv || n.trans_b ? w.dims[0] : w.dims[1]);
    } else if (n.op == OpType::kAveragePool) {
      channels = static_cast<uint64_t>(m.tensors[static_cast<size_t>(n.output)].c);
      weights = channels * static_cast<uint64_t>(n.kh * n.kw);
    }
    // int8: 1-byte weights, int32 bias and a float scale per channel; fp16: 2-byte both.
    total += int8 ? weights + channels * 8 : (weights + channels) * 2;
  }
  return total;
}

int8_t quantize_bound(float x, const QParams& q, int8_t def) {
  if (!std::isfinite(x)) return def;
  return quantize(x, q);
}

class XnnProgram final : public Program {
 public:
  XnnProgram(Model m, uint32_t precision) : model_(std::move(m)), precision_(precision) {
    esize_ = precision == TNPU_PRECISION_INT8 ? 1 : 2;
  }
  ~XnnProgram() override {
    steps_.clear();
    if (pool_ != nullptr) pthreadpool_destroy(pool_);
  }

  const Model& model() const override { return model_; }
  uint32_t precision() const override { return precision_; }
  uint64_t weight_bytes() const override { return weight_bytes_; }
  uint64_t activation_bytes() const override { return arena_plan_.bytes; }
  const tnpu_perf_counters& counters() const override { return counters_; }
  const std::vector<uint64_t>& node_ns() const override { return node_ns_; }

  tnpu_io_desc io_desc(bool output, uint32_t index) const override {
    const int v = (output ? model_.outputs : model_.inputs)[index];
    const TensorDesc& t = model_.tensors[static_cast<size_t>(v)];
    tnpu_io_desc d{};
    d.struct_size = sizeof(d);
    d.dtype = esize_ == 1 ? TNPU_DTYPE_I8 : TNPU_DTYPE_F16;
    d.layout = TNPU_LAYOUT_NCHW;
    d.rank = static_cast<uint32_t>(t.rank);
    for (int k = 0; k < t.rank; ++k) d.dims[k] = t.dims[k];
    if (esize_ == 1) {
      d.scale = q_[static_cast<size_t>(v)].scale;
      d.zero_point = q_[static_cast<size_t>(v)].zero_point;
    }
    d.bytes = static_cast<uint64_t>(t.numel()) * esize_;
    return d;
  }

  bool tensor_range(uint32_t tensor, float* lo, float* hi) const override {
    if (ranges_.empty() || tensor >= ranges_.size() ||
        ranges_[tensor].first > ranges_[tensor].second)
      return false;
    *lo = ranges_[tensor].first;
    *hi = ranges_[tensor].second;
    return true;
  }

  // Plans memory and checks the cap (phase 1).
  Error plan(uint64_t cap) {
    arena_plan_ = plan_arena(model_, esize_);
    weight_bytes_ = weight_bytes_of(model_, precision_);
    const uint64_t total = weight_bytes_ + arena_plan_.bytes;
    if (cap > 0 && total > cap) {
      return fail(TNPU_ERR_OUT_OF_MEMORY,
                  "subgraph of " + std::to_string(model_.nodes.size()) + " nodes needs " +
                      mb(total) + " (weights " + mb(weight_bytes_) + " + activations " +
                      mb(arena_plan_.bytes) + " in " + (esize_ == 1 ? "int8" : "fp16") +
                      "), over the NPU memory cap of " + mb(cap));
    }
    return Error::none();
  }

  // Builds the operators (phase 3). `q` holds per-tensor quantisation for int8.
  Error build(uint32_t num_cores, std::vector<QParams> q, bool fp16_accumulator) {
    if (!xnn_ready()) return fail(TNPU_ERR_DEVICE, "XNNPACK failed to initialise");
    q_ = std::move(q);
    fp16_accumulator_ = fp16_accumulator;
    arena_.assign(arena_plan_.bytes + XNN_EXTRA_BYTES + 64, 0);
    // fp32 accumulation: the MAC ops widen their fp16 operands into these buffers (emulation
    // scratch standing for a real NPU's accumulators; not counted against the cap).
    size_t scratch_in = 0, scratch_out = 0;
    for (const Node& n : model_.nodes) {
      if (n.op != OpType::kConv && n.op != OpType::kGemm && n.op != OpType::kAveragePool &&
          n.op != OpType::kGlobalAveragePool)
        continue;
      scratch_in = std::max(scratch_in, static_cast<size_t>(T(n.inputs[0]).onchip_numel()));
      scratch_out = std::max(scratch_out, static_cast<size_t>(T(n.output).onchip_numel()));
    }
    if (esize_ == 2 && !fp16_accumulator_) {
      scratch_in_.assign(scratch_in + XNN_EXTRA_BYTES, 0.f);
      scratch_out_.assign(scratch_out + XNN_EXTRA_BYTES, 0.f);
    }
    if (num_cores > 1) {
      pool_ = pthreadpool_create(num_cores);
      if (pool_ == nullptr) return fail(TNPU_ERR_DEVICE, "cannot create the core pool");
    }
    for (const Node& n : model_.nodes) {
      Step step;
      const Error e = esize_ == 1 ? build_qs8(n, &step) : build_f16(n, &step);
      if (!e.ok()) return e;
      steps_.push_back(std::move(step));
    }
    node_ns_.assign(steps_.size(), 0);
    counters_ = tnpu_perf_counters{};
    counters_.struct_size = sizeof(counters_);
    return Error::none();
  }

  // Runs one calibration sample (f32 NCHW inputs) through an fp16 program and shows `visit`
  // every activation as dense f32 values: each model input, then each node's output in order.
  void run_sample(const float* const* inputs,
                  const std::function<void(int, const std::vector<float>&)>& visit) {
    std::vector<uint16_t> staging;
    std::vector<float> values;
    for (size_t i = 0; i < model_.inputs.size(); ++i) {
      const int v = model_.inputs[i];
      const TensorDesc& t = model_.tensors[static_cast<size_t>(v)];
      staging.resize(static_cast<size_t>(t.numel()));
      values.assign(inputs[i], inputs[i] + t.numel());
      for (size_t k = 0; k < staging.size(); ++k) staging[k] = f32_to_f16(values[k]);
      visit(v, values);
      nchw_to_nhwc8(staging.data(), t, static_cast<uint16_t*>(at(v)));
    }
    for (size_t s = 0; s < steps_.size(); ++s) {
      run_step(s);
      const int v = model_.nodes[s].output;
      read_f32(v, &values);
      visit(v, values);
    }
  }

  // Tensor v as dense f32 values in on-chip order (pixels x channels, padding dropped).
  void read_f32(int v, std::vector<float>* values) {
    const TensorDesc& t = T(v);
    const int64_t pixels = t.n * t.h * t.w, cp = t.cpad();
    values->resize(static_cast<size_t>(pixels * t.c));
    float* dst = values->data();
    if (esize_ == 1) {
      const int8_t* p = static_cast<const int8_t*>(at(v));
      const QParams& q = q_[static_cast<size_t>(v)];
      for (int64_t px = 0; px < pixels; ++px)
        for (int64_t c = 0; c < t.c; ++c)
          *dst++ = q.scale * static_cast<float>(p[px * cp + c] - q.zero_point);
    } else {
      const uint16_t* p = static_cast<const uint16_t*>(at(v));
      for (int64_t px = 0; px < pixels; ++px)
        for (int64_t c = 0; c < t.c; ++c) *dst++ = f16_to_f32(p[px * cp + c]);
    }
  }

  // Runs one sample through this int8 program and `f16` step by step, accumulating each node's
  // squared errors into `acc` (per node: total error, own quantisation error, reference energy).
  void compare_with(XnnProgram& f16, const float* const* inputs,
                    std::vector<std::array<double, 3>>* acc) {
    std::vector<uint16_t> half;
    std::vector<int8_t> q8;
    for (size_t i = 0; i < model_.inputs.size(); ++i) {
      const int v = model_.inputs[i];
      const TensorDesc& t = T(v);
      half.resize(static_cast<size_t>(t.numel()));
      q8.resize(half.size());
      for (size_t k = 0; k < half.size(); ++k) {
        half[k] = f32_to_f16(inputs[i][k]);
        q8[k] = quantize(inputs[i][k], q_[static_cast<size_t>(v)]);
      }
      nchw_to_nhwc8(half.data(), t, static_cast<uint16_t*>(f16.at(v)));
      nchw_to_nhwc8(q8.data(), t, static_cast<int8_t*>(at(v)));
    }
    std::vector<float> want, got;
    for (size_t s = 0; s < steps_.size(); ++s) {
      f16.run_step(s);
      run_step(s);
      const int v = model_.nodes[s].output;
      f16.read_f32(v, &want);
      read_f32(v, &got);
      const QParams& q = q_[static_cast<size_t>(v)];
      auto& a = (*acc)[s];
      for (size_t k = 0; k < want.size(); ++k) {
        const float own = q.scale * static_cast<float>(quantize(want[k], q) - q.zero_point);
        a[0] += static_cast<double>(got[k] - want[k]) * (got[k] - want[k]);
        a[1] += static_cast<double>(own - want[k]) * (own - want[k]);
        a[2] += static_cast<double>(want[k]) * want[k];
      }
    }
  }

  void set_node_errors(std::vector<NodeError> e) { node_errors_ = std::move(e); }
  bool node_error(uint32_t node, NodeError* out) const override {
    if (node >= node_errors_.size()) return false;
    *out = node_errors_[node];
    return true;
  }

  void set_ranges(std::vector<std::pair<float, float>> r) { ranges_ = std::move(r); }

  Error execute(const tnpu_buffer* inputs, uint32_t num_inputs, const tnpu_buffer* outputs,
                uint32_t num_outputs) override {
    if (num_inputs != model_.inputs.size() || num_outputs != model_.outputs.size())
      return fail(TNPU_ERR_INVALID_ARGUMENT,
                  "execute takes " + std::to_string(model_.inputs.size()) + " inputs and " +
                      std::to_string(model_.outputs.size()) + " outputs, got " +
                      std::to_string(num_inputs) + " and " + std::to_string(num_outputs));
    if ((num_inputs > 0 && inputs == nullptr) || (num_outputs > 0 && outputs == nullptr))
      return fail(TNPU_ERR_INVALID_ARGUMENT, "null buffer array");
    for (uint32_t k = 0; k < num_inputs + num_outputs; ++k) {
      const bool out = k >= num_inputs;
      const uint32_t i = out ? k - num_inputs : k;
      const tnpu_buffer& b = out ? outputs[i] : inputs[i];
      const tnpu_io_desc d = io_desc(out, i);
      if (b.data == nullptr || b.bytes != d.bytes) {
        const int v = (out ? model_.outputs : model_.inputs)[i];
        return fail(TNPU_ERR_INVALID_ARGUMENT,
                    std::string(out ? "output " : "input ") + std::to_string(i) + " ('" +
                        model_.tensors[static_cast<size_t>(v)].name + "'): buffer of " +
                        std::to_string(b.bytes) + " bytes" + (b.data ? "" : " at null") +
                        ", expected " + std::to_string(d.bytes));
      }
    }
    const auto t0 = Clock::now();
    counters_.bytes_in = counters_.bytes_out = 0;
    for (uint32_t i = 0; i < num_inputs; ++i) {
      const int v = model_.inputs[i];
      convert_in(inputs[i].data, v);
      counters_.bytes_in += inputs[i].bytes;
    }
    counters_.input_conversion_ns = ns_since(t0);
    const auto t1 = Clock::now();
    for (size_t s = 0; s < steps_.size(); ++s) {
      const auto ts = Clock::now();
      if (!run_step(s))
        return fail(TNPU_ERR_DEVICE, model_.nodes[s].describe() + ": the operator failed to run");
      node_ns_[s] = ns_since(ts);
    }
    counters_.compute_ns = ns_since(t1);
    const auto t2 = Clock::now();
    for (uint32_t i = 0; i < num_outputs; ++i) {
      const int v = model_.outputs[i];
      const TensorDesc& t = model_.tensors[static_cast<size_t>(v)];
      if (esize_ == 1)
        nhwc8_to_nchw(static_cast<const int8_t*>(at(v)), t, static_cast<int8_t*>(outputs[i].data));
      else
        nhwc8_to_nchw(static_cast<const uint16_t*>(at(v)), t,
                      static_cast<uint16_t*>(outputs[i].data));
      counters_.bytes_out += outputs[i].bytes;
    }
    counters_.output_conversion_ns = ns_since(t2);
    counters_.total_ns = ns_since(t0);
    return Error::none();
  }

 private:
  void* at(int v) { return arena_.data() + arena_plan_.offset[static_cast<size_t>(v)]; }
  const TensorDesc& T(int v) const { return model_.tensors[static_cast<size_t>(v)]; }

  void convert_in(const void* src, int v) {
    const TensorDesc& t = T(v);
    if (esize_ == 1)
      nchw_to_nhwc8(static_cast<const int8_t*>(src), t, static_cast<int8_t*>(at(v)));
    else
      nchw_to_nhwc8(static_cast<const uint16_t*>(src), t, static_cast<uint16_t*>(at(v)));
  }

  bool run_step(size_t s) {
    Step& step = steps_[s];
    if (step.custom) step.custom();
    for (OpPtr& op : step.ops) {
      if (xnn_run_operator(op.get(), pool_) != xnn_status_success) return false;
    }
    return true;
  }

  Error xnn_fail(const Node& n, const char* what, xnn_status st) const {
    return fail(st == xnn_status_unsupported_hardware ? TNPU_ERR_UNSUPPORTED : TNPU_ERR_DEVICE,
                n.describe() + ": XNNPACK " + what + " failed (status " +
                    std::to_string(static_cast<int>(st)) + ")");
  }

#define XNN_TRY(n, what, expr)                                    \
  do {                                                            \
    const xnn_status st_ = (expr);                                \
    if (st_ != xnn_status_success) return xnn_fail(n, what, st_); \
  } while (0)

  // Conv weights [M, C/g, kH, kW] -> XNNPACK's [M, kH, kW, C/g], scaled by `scale`.
  std::vector<float> conv_weights_ohwi(const Node& n) const {
    const TensorDesc& w = T(n.weight);
    const int64_t oc = w.dims[0], icg = w.dims[1], kh = w.dims[2], kw = w.dims[3];
    std::vector<float> k(static_cast<size_t>(oc * icg * kh * kw));
    for (int64_t o = 0; o < oc; ++o)
      for (int64_t i = 0; i < icg; ++i)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x)
            k[static_cast<size_t>(((o * kh + y) * kw + x) * icg + i)] =
                w.values[((o * icg + i) * kh + y) * kw + x];
    return k;
  }
  // Gemm B -> [N, K] times alpha, and bias beta * C (broadcast).
  void gemm_weights(const Node& n, std::vector<float>* k, std::vector<float>* b) const {
    const TensorDesc& w = T(n.weight);
    const int64_t rows = w.dims[0], cols = w.dims[1];
    const int64_t outc = n.trans_b ? rows : cols, kk = n.trans_b ? cols : rows;
    k->resize(static_cast<size_t>(outc * kk));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float v = n.alpha * w.values[r * cols + c];
        (*k)[static_cast<size_t>(n.trans_b ? r * cols + c : c * rows + r)] = v;
      }
    b->assign(static_cast<size_t>(outc), 0.f);
    if (n.bias >= 0) {
      const TensorDesc& bt = T(n.bias);
      const int64_t cn =
          std::accumulate(bt.dims, bt.dims + bt.rank, int64_t{1}, std::multiplies<int64_t>());
      for (int64_t o = 0; o < outc; ++o)
        (*b)[static_cast<size_t>(o)] = n.beta * bt.values[cn == 1 ? 0 : o];
    }
  }
  std::vector<float> conv_bias(const Node& n, int64_t oc) const {
    std::vector<float> b(static_cast<size_t>(oc), 0.f);
    if (n.bias >= 0)
      for (int64_t o = 0; o < oc; ++o) b[static_cast<size_t>(o)] = T(n.bias).values[o];
    return b;
  }

  template <typename E>
  std::function<void()> flatten_fn(const Node& n) {
    const TensorDesc& x = T(n.inputs[0]);
    const TensorDesc& y = T(n.output);
    const E* src = static_cast<const E*>(at(n.inputs[0]));
    E* dst = static_cast<E*>(at(n.output));
    const int64_t hw = x.h * x.w, c = x.c, cp = x.cpad(), ycp = y.cpad(), batch = x.n;
    // NCHW flatten order: element (c, p) goes to c * HW + p of the row.
    return [=]() {
      for (int64_t b = 0; b < batch; ++b) {
        const E* s = src + b * hw * cp;
        E* d = dst + b * ycp;
        for (int64_t p = 0; p < hw; ++p)
          for (int64_t k = 0; k < c; ++k) d[k * hw + p] = s[p * cp + k];
      }
    };
  }

  // fp16 -> f32 of a whole NHWC8 tensor into scratch_in_, and f32 scratch_out_ -> fp16.
  Error widen_input(const Node& n, Step* step) {
    const TensorDesc& x = T(n.inputs[0]);
    xnn_operator_t op = nullptr;
    XNN_TRY(
        n, "f16->f32 convert create",
        xnn_create_convert_nc_f16_f32(static_cast<size_t>(x.cpad()), static_cast<size_t>(x.cpad()),
                                      static_cast<size_t>(x.cpad()), 0, &op));
    step->ops.emplace_back(op);
    XNN_TRY(n, "f16->f32 convert setup",
            xnn_setup_convert_nc_f16_f32(op, static_cast<size_t>(x.n * x.h * x.w), at(n.inputs[0]),
                                         scratch_in_.data(), pool_));
    return Error::none();
  }
  Error narrow_output(const Node& n, Step* step) {
    const TensorDesc& y = T(n.output);
    xnn_operator_t op = nullptr;
    XNN_TRY(
        n, "f32->f16 convert create",
        xnn_create_convert_nc_f32_f16(static_cast<size_t>(y.cpad()), static_cast<size_t>(y.cpad()),
                                      static_cast<size_t>(y.cpad()), 0, &op));
    step->ops.emplace_back(op);
    XNN_TRY(n, "f32->f16 convert setup",
            xnn_setup_convert_nc_f32_f16(op, static_cast<size_t>(y.n * y.h * y.w),
                                         scratch_out_.data(), at(n.output), pool_));
    return Error::none();
  }
  static void round_to_f16(std::vector<float>* v) {
    for (float& x : *v) x = f16_to_f32(f32_to_f16(x));
  }

  Error build_f16(const Node& n, Step* step) {
    xnn_operator_t op = nullptr;
    const TensorDesc& y = T(n.output);
    void* out = at(n.output);
    auto own = [&]() { step->ops.emplace_back(op); };
    switch (n.op) {
      case OpType::kConv:
      case OpType::kAveragePool: {
        const TensorDesc& x = T(n.inputs[0]);
        std::vector<float> wf, bf;
        int64_t groups, icg, ocg;
        if (n.op == OpType::kConv) {
          wf = conv_weights_ohwi(n);
          groups = n.groups, icg = x.c / groups, ocg = y.c / groups;
          bf = conv_bias(n, y.c);
        } else {  // a depthwise convolution with 1/(kH*kW) weights
          groups = x.c, icg = 1, ocg = 1;
          wf.assign(static_cast<size_t>(x.c * n.kh * n.kw), 1.f / static_cast<float>(n.kh * n.kw));
          bf.assign(static_cast<size_t>(x.c), 0.f);
        }
        if (!fp16_accumulator_) {
          round_to_f16(&wf);
          round_to_f16(&bf);
          if (Error e = widen_input(n, step); !e.ok()) return e;
          XNN_TRY(
              n, "convolution create",
              xnn_create_convolution2d_nhwc_f32(
                  static_cast<uint32_t>(n.pt), static_cast<uint32_t>(n.pr),
                  static_cast<uint32_t>(n.pb), static_cast<uint32_t>(n.pl),
                  static_cast<uint32_t>(n.kh), static_cast<uint32_t>(n.kw),
                  static_cast<uint32_t>(n.sh), static_cast<uint32_t>(n.sw),
                  static_cast<uint32_t>(n.dh), static_cast<uint32_t>(n.dw),
                  static_cast<uint32_t>(groups), static_cast<size_t>(icg), static_cast<size_t>(ocg),
                  static_cast<size_t>(x.cpad()), static_cast<size_t>(y.cpad()), wf.data(),
                  bf.data(), n.out_min, n.out_max, 0, &op));
          own();
          XNN_TRY(n, "convolution setup",
                  xnn_setup_convolution2d_nhwc_f32(
                      op, static_cast<size_t>(x.n), static_cast<size_t>(x.h),
                      static_cast<size_t>(x.w), scratch_in_.data(), scratch_out_.data(), pool_));
          return narrow_output(n, step);
        }
        std::vector<uint16_t> w(wf.size()), b(bf.size());
        for (size_t i = 0; i < wf.size(); ++i) w[i] = f32_to_f16(wf[i]);
        for (size_t i = 0; i < bf.size(); ++i) b[i] = f32_to_f16(bf[i]);
        XNN_TRY(
            n, "convolution create",
            xnn_create_convolution2d_nhwc_f16(
                static_cast<uint32_t>(n.pt), static_cast<uint32_t>(n.pr),
                static_cast<uint32_t>(n.pb), static_cast<uint32_t>(n.pl),
                static_cast<uint32_t>(n.kh), static_cast<uint32_t>(n.kw),
                static_cast<uint32_t>(n.sh), static_cast<uint32_t>(n.sw),
                static_cast<uint32_t>(n.dh), static_cast<uint32_t>(n.dw),
                static_cast<uint32_t>(groups), static_cast<size_t>(icg), static_cast<size_t>(ocg),
                static_cast<size_t>(x.cpad()), static_cast<size_t>(y.cpad()), w.data(), b.data(),
                n.out_min, n.out_max, 0, &op));
        own();
        XNN_TRY(n, "convolution setup",
                xnn_setup_convolution2d_nhwc_f16(op, static_cast<size_t>(x.n),
                                                 static_cast<size_t>(x.h), static_cast<size_t>(x.w),
                                                 at(n.inputs[0]), out, pool_));
        return Error::none();
      }
      case OpType::kGemm: {
        const TensorDesc& x = T(n.inputs[0]);
        std::vector<float> wf, bf;
        gemm_weights(n, &wf, &bf);
        if (!fp16_accumulator_) {
          round_to_f16(&wf);
          round_to_f16(&bf);
          if (Error e = widen_input(n, step); !e.ok()) return e;
          XNN_TRY(n, "fully-connected create",
                  xnn_create_fully_connected_nc_f32(
                      static_cast<size_t>(x.c), static_cast<size_t>(y.c),
                      static_cast<size_t>(x.cpad()), static_cast<size_t>(y.cpad()), wf.data(),
                      bf.data(), n.out_min, n.out_max, 0, &op));
          own();
          XNN_TRY(n, "fully-connected setup",
                  xnn_setup_fully_connected_nc_f32(op, static_cast<size_t>(x.n), scratch_in_.data(),
                                                   scratch_out_.data(), pool_));
          return narrow_output(n, step);
        }
        std::vector<uint16_t> w(wf.size()), b(bf.size());
        for (size_t i = 0; i < wf.size(); ++i) w[i] = f32_to_f16(wf[i]);
        for (size_t i = 0; i < bf.size(); ++i) b[i] = f32_to_f16(bf[i]);
        XNN_TRY(
            n, "fully-connected create",
            xnn_create_fully_connected_nc_f16(
                static_cast<size_t>(x.c), static_cast<size_t>(y.c), static_cast<size_t>(x.cpad()),
                static_cast<size_t>(y.cpad()), w.data(), b.data(), n.out_min, n.out_max, 0, &op));
        own();
        XNN_TRY(n, "fully-connected setup",
                xnn_setup_fully_connected_nc_f16(op, static_cast<size_t>(x.n), at(n.inputs[0]), out,
                                                 pool_));
        return Error::none();
      }
      case OpType::kMaxPool: {
        const TensorDesc& x = T(n.inputs[0]);
        XNN_TRY(n, "max-pooling create",
                xnn_create_max_pooling2d_nhwc_f16(
                    static_cast<uint32_t>(n.pt), static_cast<uint32_t>(n.pr),
                    static_cast<uint32_t>(n.pb), static_cast<uint32_t>(n.pl),
                    static_cast<uint32_t>(n.kh), static_cast<uint32_t>(n.kw),
                    static_cast<uint32_t>(n.sh), static_cast<uint32_t>(n.sw),
                    static_cast<uint32_t>(n.dh), static_cast<uint32_t>(n.dw),
                    static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                    static_cast<size_t>(y.cpad()), -INFINITY, INFINITY, 0, &op));
        own();
        XNN_TRY(n, "max-pooling setup",
                xnn_setup_max_pooling2d_nhwc_f16(op, static_cast<size_t>(x.n),
                                                 static_cast<size_t>(x.h), static_cast<size_t>(x.w),
                                                 at(n.inputs[0]), out, pool_));
        return Error::none();
      }
      case OpType::kGlobalAveragePool: {
        const TensorDesc& x = T(n.inputs[0]);
        if (!fp16_accumulator_) {
          // The sum of H*W values in the fp32 accumulator. XNNPACK's f16 kernel rounds the
          // running sum to fp16 after every add: over 7x7 (13x13 in SqueezeNet) positive
          // features that alone doubles the error of the pooled features.
          if (Error e = widen_input(n, step); !e.ok()) return e;
          XNN_TRY(n, "global-average-pooling create",
                  xnn_create_global_average_pooling_nwc_f32(
                      static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                      static_cast<size_t>(y.cpad()), -INFINITY, INFINITY, 0, &op));
          own();
          XNN_TRY(n, "global-average-pooling setup",
                  xnn_setup_global_average_pooling_nwc_f32(
                      op, static_cast<size_t>(x.n), static_cast<size_t>(x.h * x.w),
                      scratch_in_.data(), scratch_out_.data(), pool_));
          return narrow_output(n, step);
        }
        XNN_TRY(n, "global-average-pooling create",
                xnn_create_global_average_pooling_nwc_f16(
                    static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                    static_cast<size_t>(y.cpad()), -INFINITY, INFINITY, 0, &op));
        own();
        XNN_TRY(n, "global-average-pooling setup",
                xnn_setup_global_average_pooling_nwc_f16(op, static_cast<size_t>(x.n),
                                                         static_cast<size_t>(x.h * x.w),
                                                         at(n.inputs[0]), out, pool_));
        return Error::none();
      }
      case OpType::kAdd: {
        const size_t shape[1] = {static_cast<size_t>(y.onchip_numel())};
        XNN_TRY(n, "add create", xnn_create_add_nd_f16(n.out_min, n.out_max, 0, &op));
        own();
        XNN_TRY(n, "add setup",
                xnn_setup_add_nd_f16(op, 1, shape, 1, shape, at(n.inputs[0]), at(n.inputs[1]), out,
                                     pool_));
        return Error::none();
      }
      case OpType::kRelu:
      case OpType::kClip: {
        const TensorDesc& x = T(n.inputs[0]);
        XNN_TRY(
            n, "clamp create",
            xnn_create_clamp_nc_f16(static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                                    static_cast<size_t>(y.cpad()), n.out_min, n.out_max, 0, &op));
        own();
        XNN_TRY(n, "clamp setup",
                xnn_setup_clamp_nc_f16(op, static_cast<size_t>(x.n * x.h * x.w), at(n.inputs[0]),
                                       out, pool_));
        return Error::none();
      }
      case OpType::kConcat: {
        int64_t c0 = 0;
        for (int v : n.inputs) {
          const TensorDesc& x = T(v);
          XNN_TRY(n, "copy create",
                  xnn_create_copy_nc_x16(static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                                         static_cast<size_t>(y.cpad()), 0, &op));
          own();
          XNN_TRY(n, "copy setup",
                  xnn_setup_copy_nc_x16(op, static_cast<size_t>(x.n * x.h * x.w), at(v),
                                        static_cast<uint16_t*>(out) + c0, pool_));
          c0 += x.c;
        }
        return Error::none();
      }
      case OpType::kFlatten:
      case OpType::kReshape:
        step->custom = flatten_fn<uint16_t>(n);
        return Error::none();
    }
    return fail(TNPU_ERR_INTERNAL, n.describe() + ": no fp16 kernel");
  }

  Error build_qs8(const Node& n, Step* step) {
    xnn_operator_t op = nullptr;
    const TensorDesc& y = T(n.output);
    const QParams& qy = q_[static_cast<size_t>(n.output)];
    const int8_t qmin = quantize_bound(n.out_min, qy, -128);
    const int8_t qmax = quantize_bound(n.out_max, qy, 127);
    int8_t* out = static_cast<int8_t*>(at(n.output));
    auto own = [&]() { step->ops.emplace_back(op); };
    auto in = [&](size_t i) { return static_cast<const int8_t*>(at(n.inputs[i])); };
    auto qin = [&](size_t i) { return q_[static_cast<size_t>(n.inputs[i])]; };
    switch (n.op) {
      case OpType::kConv:
      case OpType::kAveragePool:
      case OpType::kGemm: {
        const TensorDesc& x = T(n.inputs[0]);
        const QParams qx = qin(0);
        // Weights as [M, kH, kW, C/g] floats, then per-output-channel symmetric int8.
        std::vector<float> wf, bf;
        int64_t groups = 1, icg = x.c, ocg = y.c, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
        int64_t pt = 0, pl = 0, pb = 0, pr = 0, bh = 1, bw = 1;
        if (n.op == OpType::kGemm) {
          gemm_weights(n, &wf, &bf);
        } else {
          kh = n.kh, kw = n.kw, sh = n.sh, sw = n.sw, dh = n.dh, dw = n.dw;
          pt = n.pt, pl = n.pl, pb = n.pb, pr = n.pr, bh = x.h, bw = x.w;
          if (n.op == OpType::kConv) {
            wf = conv_weights_ohwi(n);
            bf = conv_bias(n, y.c);
            groups = n.groups, icg = x.c / groups, ocg = y.c / groups;
          } else {
            groups = x.c, icg = 1, ocg = 1;
            wf.assign(static_cast<size_t>(x.c * kh * kw), 1.f / static_cast<float>(kh * kw));
            bf.assign(static_cast<size_t>(x.c), 0.f);
          }
        }
        const int64_t oc = y.c;
        const size_t per = wf.size() / static_cast<size_t>(oc);
        std::vector<float> scale(static_cast<size_t>(oc));
        std::vector<int8_t> w(wf.size());
        std::vector<int32_t> b(static_cast<size_t>(oc));
        for (int64_t o = 0; o < oc; ++o) {
          const float* row = wf.data() + static_cast<size_t>(o) * per;
          float amax = 0;
          for (size_t k = 0; k < per; ++k) amax = std::max(amax, std::fabs(row[k]));
          const float s = amax > 0 ? amax / 127.f : 1.f;
          scale[static_cast<size_t>(o)] = s;
          for (size_t k = 0; k < per; ++k)
            w[static_cast<size_t>(o) * per + k] =
                static_cast<int8_t>(std::clamp(std::lrint(row[k] / s), -127L, 127L));
          const double bq = std::round(static_cast<double>(bf[static_cast<size_t>(o)]) /
                                       (static_cast<double>(qx.scale) * s));
          b[static_cast<size_t>(o)] =
              static_cast<int32_t>(std::clamp(bq, -2147483647.0, 2147483647.0));
        }
        XNN_TRY(n, "qc8 convolution create",
                xnn_create_convolution2d_nhwc_qc8(
                    static_cast<uint32_t>(pt), static_cast<uint32_t>(pr), static_cast<uint32_t>(pb),
                    static_cast<uint32_t>(pl), static_cast<uint32_t>(kh), static_cast<uint32_t>(kw),
                    static_cast<uint32_t>(sh), static_cast<uint32_t>(sw), static_cast<uint32_t>(dh),
                    static_cast<uint32_t>(dw), static_cast<uint32_t>(groups),
                    static_cast<size_t>(icg), static_cast<size_t>(ocg),
                    static_cast<size_t>(x.cpad()), static_cast<size_t>(y.cpad()),
                    static_cast<int8_t>(qx.zero_point), qx.scale, scale.data(), w.data(), b.data(),
                    static_cast<int8_t>(qy.zero_point), qy.scale, qmin, qmax, 0, &op));
        own();
        XNN_TRY(
            n, "qc8 convolution setup",
            xnn_setup_convolution2d_nhwc_qc8(op, static_cast<size_t>(x.n), static_cast<size_t>(bh),
                                             static_cast<size_t>(bw), in(0), out, pool_));
        return Error::none();
      }
      case OpType::kMaxPool: {
        const TensorDesc& x = T(n.inputs[0]);
        XNN_TRY(
            n, "s8 max-pooling create",
            xnn_create_max_pooling2d_nhwc_s8(
                static_cast<uint32_t>(n.pt), static_cast<uint32_t>(n.pr),
                static_cast<uint32_t>(n.pb), static_cast<uint32_t>(n.pl),
                static_cast<uint32_t>(n.kh), static_cast<uint32_t>(n.kw),
                static_cast<uint32_t>(n.sh), static_cast<uint32_t>(n.sw),
                static_cast<uint32_t>(n.dh), static_cast<uint32_t>(n.dw), static_cast<size_t>(x.c),
                static_cast<size_t>(x.cpad()), static_cast<size_t>(y.cpad()), -128, 127, 0, &op));
        own();
        XNN_TRY(
            n, "s8 max-pooling setup",
            xnn_setup_max_pooling2d_nhwc_s8(op, static_cast<size_t>(x.n), static_cast<size_t>(x.h),
                                            static_cast<size_t>(x.w), in(0), out, pool_));
        return Error::none();
      }
      case OpType::kGlobalAveragePool: {
        const TensorDesc& x = T(n.inputs[0]);
        const QParams qx = qin(0);
        XNN_TRY(n, "qs8 global-average-pooling create",
                xnn_create_global_average_pooling_nwc_qs8(
                    static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                    static_cast<size_t>(y.cpad()), static_cast<int8_t>(qx.zero_point), qx.scale,
                    static_cast<int8_t>(qy.zero_point), qy.scale, -128, 127, 0, &op));
        own();
        XNN_TRY(
            n, "qs8 global-average-pooling setup",
            xnn_setup_global_average_pooling_nwc_qs8(
                op, static_cast<size_t>(x.n), static_cast<size_t>(x.h * x.w), in(0), out, pool_));
        return Error::none();
      }
      case OpType::kAdd: {
        const size_t shape[1] = {static_cast<size_t>(y.onchip_numel())};
        const QParams qa = qin(0), qb = qin(1);
        XNN_TRY(n, "qs8 add create",
                xnn_create_add_nd_qs8(static_cast<int8_t>(qa.zero_point), qa.scale,
                                      static_cast<int8_t>(qb.zero_point), qb.scale,
                                      static_cast<int8_t>(qy.zero_point), qy.scale, qmin, qmax, 0,
                                      &op));
        own();
        XNN_TRY(n, "qs8 add setup",
                xnn_setup_add_nd_qs8(op, 1, shape, 1, shape, in(0), in(1), out, pool_));
        return Error::none();
      }
      case OpType::kRelu:
      case OpType::kClip: {
        const TensorDesc& x = T(n.inputs[0]);
        XNN_TRY(n, "s8 clamp create",
                xnn_create_clamp_nc_s8(static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                                       static_cast<size_t>(y.cpad()), qmin, qmax, 0, &op));
        own();
        XNN_TRY(n, "s8 clamp setup",
                xnn_setup_clamp_nc_s8(op, static_cast<size_t>(x.n * x.h * x.w), in(0), out, pool_));
        return Error::none();
      }
      case OpType::kConcat: {
        int64_t c0 = 0;
        for (int v : n.inputs) {
          const TensorDesc& x = T(v);
          XNN_TRY(n, "copy create",
                  xnn_create_copy_nc_x8(static_cast<size_t>(x.c), static_cast<size_t>(x.cpad()),
                                        static_cast<size_t>(y.cpad()), 0, &op));
          own();
          XNN_TRY(n, "copy setup",
                  xnn_setup_copy_nc_x8(op, static_cast<size_t>(x.n * x.h * x.w), at(v), out + c0,
                                       pool_));
          c0 += x.c;
        }
        return Error::none();
      }
      case OpType::kFlatten:
      case OpType::kReshape:
        step->custom = flatten_fn<int8_t>(n);
        return Error::none();
    }
    return fail(TNPU_ERR_INTERNAL, n.describe() + ": no int8 kernel");
  }
#undef XNN_TRY

  Model model_;
  uint32_t precision_;
  size_t esize_;
  Arena arena_plan_;
  uint64_t weight_bytes_ = 0;
  std::vector<uint8_t> arena_;
  std::vector<Step> steps_;
  std::vector<QParams> q_;
  std::vector<std::pair<float, float>> ranges_;
  std::vector<NodeError> node_errors_;
  pthreadpool_t pool_ = nullptr;
  bool fp16_accumulator_ = false;
  std::vector<float> scratch_in_, scratch_out_;
  tnpu_perf_counters counters_{};
  std::vector<uint64_t> node_ns_;
};

// Union-find over tensors that must share quantisation parameters: the two sides of max
// pooling, clamps, flatten/reshape and every input and output of a concat (these ops move int8
// values without requantising).
std::vector<int> quantisation_groups(const Model& m) {
  std::vector<int> parent(m.tensors.size());
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int v) {
    while (parent[static_cast<size_t>(v)] != v)
      v = parent[static_cast<size_t>(v)] =
          parent[static_cast<size_t>(parent[static_cast<size_t>(v)])];
    return v;
  };
  for (const Node& n : m.nodes) {
    const bool shares = n.op == OpType::kMaxPool || n.op == OpType::kRelu ||
                        n.op == OpType::kClip || n.op == OpType::kConcat ||
                        n.op == OpType::kFlatten || n.op == OpType::kReshape;
    if (!shares) continue;
    for (int v : n.inputs) parent[static_cast<size_t>(find(v))] = find(n.output);
  }
  for (size_t v = 0; v < parent.size(); ++v) parent[v] = find(static_cast<int>(v));
  return parent;
}

}  // namespace

// Phase 2 of an int8 prepare: the range each tensor is quantised to. The calibration inputs run
// through the fp16 program once, filling one histogram per group of tensors that share
// quantisation; the method picks each group's range from it. Model outputs keep their full
// observed range: clipping there would saturate exactly the largest logits, the ones a top-1
// decision is made of.
static std::vector<std::pair<float, float>> calibrate_ranges(const Model& model, XnnProgram* f16,
                                                             const tnpu_calibration& cal,
                                                             CalibrationMethod method) {
  const size_t nt = model.tensors.size();
  const std::vector<int> group = quantisation_groups(model);
  std::vector<Histogram> hist(nt);
  for (uint32_t s = 0; s < cal.num_samples; ++s) {
    f16->run_sample(cal.inputs + static_cast<size_t>(s) * model.inputs.size(),
                    [&](int v, const std::vector<float>& x) {
                      hist[static_cast<size_t>(group[static_cast<size_t>(v)])].add(x.data(),
                                                                                   x.size());
                    });
  }
  std::vector<bool> is_output(nt, false);
  for (int v : model.outputs) is_output[static_cast<size_t>(group[static_cast<size_t>(v)])] = true;
  std::vector<std::pair<float, float>> ranges(nt, {INFINITY, -INFINITY});
  for (size_t v = 0; v < nt; ++v) {
    const size_t g = static_cast<size_t>(group[v]);
    if (hist[g].empty()) continue;
    ranges[v] = choose_range(hist[g], is_output[g] ? CalibrationMethod::kMinMax : method);
  }
  return ranges;
}

bool fp16_available() {
  static const bool ok = [] {
    if (!xnn_ready()) return false;
    const uint16_t w[8] = {}, b[8] = {};
    xnn_operator_t op = nullptr;
    const xnn_status st =
        xnn_create_fully_connected_nc_f16(8, 8, 8, 8, w, b, -INFINITY, INFINITY, 0, &op);
    if (op != nullptr) xnn_delete_operator(op);
    return st == xnn_status_success;
  }();
  return ok;
}

Error prepare_program(Model model, const Options& options, std::unique_ptr<Program>* out) {
  if (!fp16_available())
    return fail(TNPU_ERR_UNSUPPORTED,
                "this CPU cannot emulate the NPU: XNNPACK has no fp16 kernels for it");
  const uint32_t precision = options.precision;
  if (precision != TNPU_PRECISION_F16 && precision != TNPU_PRECISION_INT8)
    return fail(TNPU_ERR_UNSUPPORTED, "precision " + std::to_string(precision) +
                                          " is not supported (the NPU computes in fp16 or int8)");
  std::vector<QParams> q;
  std::vector<std::pair<float, float>> ranges;
  const tnpu_calibration* cal = options.calibration;
  const size_t num_inputs = model.inputs.size();
  std::unique_ptr<XnnProgram> f16;  // int8: the fp16 program the calibration inputs run through
  if (precision == TNPU_PRECISION_INT8) {
    if (cal == nullptr || cal->num_samples == 0 || cal->inputs == nullptr)
      return fail(TNPU_ERR_INVALID_ARGUMENT,
                  "int8 needs calibration samples (tnpu_prepare_options.calibration)");
    for (size_t i = 0; i < static_cast<size_t>(cal->num_samples) * model.inputs.size(); ++i)
      if (cal->inputs[i] == nullptr)
        return fail(TNPU_ERR_INVALID_ARGUMENT,
                    "calibration input " + std::to_string(i) + " is null");
    // Refuse over-cap subgraphs before the (slow) calibration.
    {
      XnnProgram probe(model, TNPU_PRECISION_INT8);
      const Error e = probe.plan(options.memory_cap);
      if (!e.ok()) return e;
    }
    f16 = std::make_unique<XnnProgram>(model, TNPU_PRECISION_F16);
    Error e = f16->plan(0);
    if (e.ok()) e = f16->build(options.num_cores, {}, options.fp16_accumulator);
    if (!e.ok()) return e;
    ranges = calibrate_ranges(model, f16.get(), *cal, options.calibration_method);
    q.resize(model.tensors.size());
    for (size_t v = 0; v < q.size(); ++v)
      q[v] = ranges[v].first <= ranges[v].second
                 ? qparams_for_range(ranges[v].first, ranges[v].second)
                 : QParams{};
  }
  const size_t num_nodes = model.nodes.size();
  auto p = std::make_unique<XnnProgram>(std::move(model), precision);
  Error e = p->plan(options.memory_cap);
  if (e.ok()) e = p->build(options.num_cores, std::move(q), options.fp16_accumulator);
  if (!e.ok()) return e;
  if (f16 != nullptr && options.layer_report) {
    // The int8 program itself runs the calibration inputs beside the fp16 one.
    std::vector<std::array<double, 3>> acc(num_nodes, {0, 0, 0});
    for (uint32_t s = 0; s < cal->num_samples; ++s)
      p->compare_with(*f16, cal->inputs + static_cast<size_t>(s) * num_inputs, &acc);
    std::vector<NodeError> errors;
    for (const auto& a : acc)
      errors.push_back(NodeError{std::sqrt(a[0] / std::max(a[2], 1e-30)),
                                 std::sqrt(a[1] / std::max(a[2], 1e-30))});
    p->set_node_errors(std::move(errors));
  }
  p->set_ranges(std::move(ranges));
  *out = std::move(p);
  return Error::none();
}

}  // namespace tnpu_ref
