#include "backends/npu/npu_device.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "backends/npu/npu_graph.h"
#include "backends/registry.h"
#include "ops/activation.h"

namespace tessera {

struct NpuHandle {
  std::shared_ptr<const NpuDriver> driver;
  tnpu_device device = nullptr;
  std::mutex mu;  // a HAL device is used by one thread at a time

  ~NpuHandle() {
    if (device != nullptr) driver->api().close_device(device);
  }
  const tnpu_driver_api& api() const { return driver->api(); }
  const char* device_error() const { return api().device_last_error(device); }
};

const char* npu_precision_name(uint32_t precision) {
  switch (precision) {
    case TNPU_PRECISION_F32:
      return "fp32";
    case TNPU_PRECISION_F16:
      return "fp16";
    case TNPU_PRECISION_INT8:
      return "int8";
    default:
      return "unknown";
  }
}

Status NpuOptions::apply_environment() {
  const char* p = std::getenv("TESSERA_NPU_PRECISION");
  if (p == nullptr || *p == '\0') return Status();
  const std::string s = p;
  if (s == "fp16") {
    precision = TNPU_PRECISION_F16;
  } else if (s == "int8") {
    precision = TNPU_PRECISION_INT8;
  } else if (s == "fp32") {
    precision = TNPU_PRECISION_F32;
  } else {
    return invalid_argument("TESSERA_NPU_PRECISION=" + quote_name(s) +
                            ": expected fp16, int8 or fp32");
  }
  return Status();
}

namespace {

using Clock = std::chrono::steady_clock;
uint64_t ns_since(Clock::time_point t0) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count());
}

size_t hal_dtype_size(tnpu_dtype t) {
  switch (t) {
    case TNPU_DTYPE_F32:
    case TNPU_DTYPE_I32:
      return 4;
    case TNPU_DTYPE_F16:
      return 2;
    case TNPU_DTYPE_I8:
    case TNPU_DTYPE_U8:
      return 1;
    case TNPU_DTYPE_I64:
      return 8;
  }
  return 0;
}

// Element index in the driver's buffer of NCHW element (n, c, p) for an NHWC boundary layout.
struct IoLayout {
  bool nhwc = false;
  int64_t n = 1, c = 1, hw = 1;
};
IoLayout io_layout(const tnpu_io_desc& d) {
  IoLayout l;
  l.nhwc = d.layout == TNPU_LAYOUT_NHWC && d.rank == 4;
  if (l.nhwc) l.n = d.dims[0], l.c = d.dims[1], l.hw = d.dims[2] * d.dims[3];
  return l;
}

// f32 <-> IEEE half over arrays, round to nearest even like float_to_half: eight at a time with
// F16C where the CPU has it (the boundary conversion of every NPU stage runs through these).
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void f32_to_f16_f16c(const float* src, uint16_t* dst,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}
__attribute__((target("avx,f16c"))) void f16_to_f32_f16c(const uint16_t* src, float* dst,
                                                         int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}
bool has_f16c() {
  static const bool yes = __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  return yes;
}
#endif

void f32_to_f16(const float* src, uint16_t* dst, int64_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return f32_to_f16_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

void f16_to_f32(const uint16_t* src, float* dst, int64_t n) {
#if defined(__x86_64__)
  if (has_f16c()) return f16_to_f32_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

// Host f32 NCHW -> the driver's boundary format.
void to_driver(const float* src, int64_t numel, const tnpu_io_desc& d, uint8_t* dst) {
  const IoLayout l = io_layout(d);
  if (!l.nhwc && d.dtype == TNPU_DTYPE_F16) {
    f32_to_f16(src, reinterpret_cast<uint16_t*>(dst), numel);
    return;
  }
  auto store = [&](int64_t i, float x) {
    switch (d.dtype) {
      case TNPU_DTYPE_F32:
        reinterpret_cast<float*>(dst)[i] = x;
        break;
      case TNPU_DTYPE_F16:
        reinterpret_cast<uint16_t*>(dst)[i] = float_to_half(x);
        break;
      case TNPU_DTYPE_I8: {
        const float q = std::nearbyint(x / d.scale) + static_cast<float>(d.zero_point);
        reinterpret_cast<int8_t*>(dst)[i] = static_cast<int8_t>(std::clamp(q, -128.f, 127.f));
        break;
      }
      case TNPU_DTYPE_U8: {
        const float q = std::nearbyint(x / d.scale) + static_cast<float>(d.zero_point);
        dst[i] = static_cast<uint8_t>(std::clamp(q, 0.f, 255.f));
        break;
      }
      default:
        break;
    }
  };
  if (!l.nhwc) {
    for (int64_t i = 0; i < numel; ++i) store(i, src[i]);
    return;
  }
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t c = 0; c < l.c; ++c)
      for (int64_t p = 0; p < l.hw; ++p)
        store((n * l.hw + p) * l.c + c, src[(n * l.c + c) * l.hw + p]);
}

void from_driver(const uint8_t* src, int64_t numel, const tnpu_io_desc& d, float* dst) {
  const IoLayout l = io_layout(d);
  if (!l.nhwc && d.dtype == TNPU_DTYPE_F16) {
    f16_to_f32(reinterpret_cast<const uint16_t*>(src), dst, numel);
    return;
  }
  auto load = [&](int64_t i) -> float {
    switch (d.dtype) {
      case TNPU_DTYPE_F32:
        return reinterpret_cast<const float*>(src)[i];
      case TNPU_DTYPE_F16:
        return half_to_float(reinterpret_cast<const uint16_t*>(src)[i]);
      case TNPU_DTYPE_I8:
        return d.scale * static_cast<float>(reinterpret_cast<const int8_t*>(src)[i] - d.zero_point);
      case TNPU_DTYPE_U8:
        return d.scale * static_cast<float>(static_cast<int32_t>(src[i]) - d.zero_point);
      default:
        return 0.f;
    }
  };
  if (!l.nhwc) {
    for (int64_t i = 0; i < numel; ++i) dst[i] = load(i);
    return;
  }
  for (int64_t n = 0; n < l.n; ++n)
    for (int64_t c = 0; c < l.c; ++c)
      for (int64_t p = 0; p < l.hw; ++p)
        dst[(n * l.c + c) * l.hw + p] = load((n * l.hw + p) * l.c + c);
}

class NpuProgramImpl final : public NpuProgram {
 public:
  NpuProgramImpl(std::shared_ptr<NpuHandle> h, tnpu_prepared p, std::string device,
                 std::vector<ValueId> ins, std::vector<ValueId> outs)
      : h_(std::move(h)),
        p_(p),
        device_(std::move(device)),
        inputs_(std::move(ins)),
        outputs_(std::move(outs)) {}
  ~NpuProgramImpl() override { h_->api().release(p_); }

  // Reads and checks the driver's boundary formats against the slice's values.
  Status init(const Graph& g) {
    info_ = tnpu_prepared_info{};
    info_.struct_size = sizeof(info_);
    tnpu_status st = h_->api().get_prepared_info(p_, &info_);
    if (st != TNPU_OK) return npu_status(st, where("get_prepared_info"), err());
    for (int out = 0; out < 2; ++out) {
      const auto& values = out ? outputs_ : inputs_;
      auto& descs = out ? out_desc_ : in_desc_;
      for (size_t i = 0; i < values.size(); ++i) {
        tnpu_io_desc d{};
        d.struct_size = sizeof(d);
        st = h_->api().get_io_desc(p_, static_cast<uint32_t>(out), static_cast<uint32_t>(i), &d);
        if (st != TNPU_OK) return npu_status(st, where("get_io_desc"), err());
        const Value& v = g.value(values[i]);
        bool same = d.rank == static_cast<uint32_t>(v.info.shape.rank());
        for (int k = 0; same && k < v.info.shape.rank(); ++k) same = d.dims[k] == v.info.shape[k];
        const size_t es = hal_dtype_size(d.dtype);
        const bool known_dtype = d.dtype == TNPU_DTYPE_F32 || d.dtype == TNPU_DTYPE_F16 ||
                                 d.dtype == TNPU_DTYPE_I8 || d.dtype == TNPU_DTYPE_U8;
        if (!same || !known_dtype || d.bytes != static_cast<uint64_t>(v.info.shape.numel()) * es ||
            ((d.dtype == TNPU_DTYPE_I8 || d.dtype == TNPU_DTYPE_U8) &&
             !(d.scale > 0 && std::isfinite(d.scale)))) {
          return internal_error(where("get_io_desc") + ": the driver describes " +
                                (out ? "output " : "input ") + quote_name(v.name) +
                                " inconsistently with its shape " + v.info.shape.to_string());
        }
        descs.push_back(d);
      }
    }
    staging_in_.resize(in_desc_.size());
    staging_out_.resize(out_desc_.size());
    return Status();
  }

  const std::vector<ValueId>& input_values() const override { return inputs_; }
  const std::vector<ValueId>& output_values() const override { return outputs_; }
  tnpu_prepared_info prepared_info() const override { return info_; }
  tnpu_io_desc io_desc(bool output, uint32_t index) const override {
    return (output ? out_desc_ : in_desc_)[index];
  }
  const NpuRunStats& last_run() const override { return stats_; }
  tnpu_prepared prepared_handle() const override { return p_; }
  const tnpu_driver_api& driver_api() const override { return h_->api(); }

 protected:
  // The subgraph runs as one driver call: cancellation and the deadline are checked when the
  // run starts (Program::run). Timed (options.layer_ms): layer i is node i of the prepared
  // subgraph, timed by the driver inside the run (HAL 1.1 execute_profiled). The conversions in
  // and out are the slice boundary, charged to no layer.
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override {
    std::vector<double>* layer_ms = options.layer_ms;
    if (layer_ms == nullptr) return run_impl(inputs, outputs, nullptr);
    if (!TNPU_HAS_SLOT(&h_->api(), execute_profiled)) {
      return unimplemented(where("timed run") + ": driver " + quote_name(h_->driver->info().name) +
                           " (HAL " + std::to_string(TNPU_VERSION_MAJOR(h_->api().api_version)) +
                           "." + std::to_string(TNPU_VERSION_MINOR(h_->api().api_version)) +
                           ") has no execute_profiled, so layers cannot be timed inside a run");
    }
    return run_impl(inputs, outputs, layer_ms);
  }

 private:
  // Plain and timed runs: converts the inputs, executes (profiled when `layer_ms`), converts
  // the outputs back.
  Status run_impl(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                  std::vector<double>* layer_ms) {
    if (inputs.size() != in_desc_.size() || outputs.size() != out_desc_.size()) {
      return invalid_argument(
          "program on " + quote_name(device_) + " takes " + std::to_string(in_desc_.size()) +
          " inputs and " + std::to_string(out_desc_.size()) + " outputs, got " +
          std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
    }
    const auto t0 = Clock::now();
    std::vector<tnpu_buffer> in_bufs(inputs.size()), out_bufs(outputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      const tnpu_io_desc& d = in_desc_[i];
      const Tensor& t = inputs[i];
      bool same = t.dtype() == DType::kF32 && t.rank() == static_cast<int>(d.rank);
      for (int k = 0; same && k < t.rank(); ++k) same = t.dim(k) == d.dims[k];
      if (!same || t.raw() == nullptr) {
        return invalid_argument("program on " + quote_name(device_) + ": input " +
                                std::to_string(i) + " is " + t.describe() +
                                ", expected f32 with the dims the slice "
                                "was compiled for");
      }
      staging_in_[i].resize(d.bytes);
      to_driver(t.data<float>(), t.numel(), d, staging_in_[i].data());
      in_bufs[i] = tnpu_buffer{staging_in_[i].data(), d.bytes};
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
      staging_out_[i].resize(out_desc_[i].bytes);
      out_bufs[i] = tnpu_buffer{staging_out_[i].data(), out_desc_[i].bytes};
    }
    stats_.host_input_ns = ns_since(t0);
    {
      std::lock_guard<std::mutex> lock(h_->mu);
      if (layer_ms != nullptr) {
        RETURN_IF_ERROR(execute_profiled(in_bufs, out_bufs, layer_ms));
      } else {
        const tnpu_status st =
            h_->api().execute(p_, in_bufs.data(), static_cast<uint32_t>(in_bufs.size()),
                              out_bufs.data(), static_cast<uint32_t>(out_bufs.size()));
        if (st != TNPU_OK) return npu_status(st, where("execute"), err());
        read_counters();
      }
    }
    const auto t1 = Clock::now();
    for (size_t i = 0; i < outputs.size(); ++i) {
      const tnpu_io_desc& d = out_desc_[i];
      const Shape shape(std::vector<int64_t>(d.dims, d.dims + d.rank));
      Tensor& dst = outputs[i];
      if (!(dst.raw() != nullptr && dst.dtype() == DType::kF32 && dst.shape() == shape)) {
        ASSIGN_OR_RETURN(dst, Tensor::create(DType::kF32, shape));
      }
      from_driver(staging_out_[i].data(), dst.numel(), d, dst.data<float>());
    }
    stats_.host_output_ns = ns_since(t1);
    stats_.host_conversion_ns = stats_.host_input_ns + stats_.host_output_ns;
    return Status();
  }

  // execute_profiled into stats_ and `layer_ms`; a driver that times another number of nodes
  // than the subgraph has is an error, not a short or padded vector.
  Status execute_profiled(const std::vector<tnpu_buffer>& in_bufs,
                          const std::vector<tnpu_buffer>& out_bufs, std::vector<double>* layer_ms) {
    tnpu_execute_profile prof{};
    prof.struct_size = sizeof(prof);
    stats_.node_ns.assign(num_nodes, 0);
    prof.node_ns = stats_.node_ns.data();
    prof.node_capacity = static_cast<uint32_t>(num_nodes);
    stats_.driver_counters = false;
    const tnpu_status st =
        h_->api().execute_profiled(p_, in_bufs.data(), static_cast<uint32_t>(in_bufs.size()),
                                   out_bufs.data(), static_cast<uint32_t>(out_bufs.size()), &prof);
    if (st != TNPU_OK) return npu_status(st, where("execute_profiled"), err());
    if (prof.num_nodes != num_nodes) {
      return internal_error(where("execute_profiled") + ": driver '" + h_->driver->info().name +
                            "' timed " + std::to_string(prof.num_nodes) +
                            " nodes of a subgraph of " + std::to_string(num_nodes));
    }
    stats_.driver_counters = true;
    stats_.total_ns = prof.total_ns;
    stats_.input_conversion_ns = prof.input_conversion_ns;
    stats_.compute_ns = prof.compute_ns;
    stats_.output_conversion_ns = prof.output_conversion_ns;
    stats_.bytes_in = stats_.bytes_out = 0;
    for (const tnpu_buffer& b : in_bufs) stats_.bytes_in += b.bytes;
    for (const tnpu_buffer& b : out_bufs) stats_.bytes_out += b.bytes;
    layer_ms->resize(num_nodes);
    for (size_t i = 0; i < num_nodes; ++i)
      (*layer_ms)[i] = static_cast<double>(stats_.node_ns[i]) / 1e6;
    return Status();
  }

  std::string where(const char* call) const {
    return "device " + quote_name(device_) + ": " + call;
  }
  const char* err() const { return h_->api().prepared_last_error(p_); }

  void read_counters() {
    const tnpu_driver_api& api = h_->api();
    stats_.driver_counters = false;
    if (!TNPU_HAS_SLOT(&api, get_perf_counters)) return;
    tnpu_perf_counters c{};
    c.struct_size = sizeof(c);
    stats_.node_ns.assign(info_num_nodes_hint(), 0);
    c.node_ns = stats_.node_ns.data();
    c.num_node_ns = static_cast<uint32_t>(stats_.node_ns.size());
    if (api.get_perf_counters(p_, &c) != TNPU_OK) return;
    stats_.driver_counters = true;
    stats_.total_ns = c.total_ns;
    stats_.input_conversion_ns = c.input_conversion_ns;
    stats_.compute_ns = c.compute_ns;
    stats_.output_conversion_ns = c.output_conversion_ns;
    stats_.bytes_in = c.bytes_in;
    stats_.bytes_out = c.bytes_out;
  }

 public:
  size_t num_nodes = 0;

 private:
  size_t info_num_nodes_hint() const { return num_nodes; }

  std::shared_ptr<NpuHandle> h_;
  tnpu_prepared p_;
  std::string device_;
  std::vector<ValueId> inputs_, outputs_;
  tnpu_prepared_info info_{};
  std::vector<tnpu_io_desc> in_desc_, out_desc_;
  std::vector<std::vector<uint8_t>> staging_in_, staging_out_;
  NpuRunStats stats_;
};

// Device memory as seen through HAL 1.0: a host copy in the device's precision (the HAL has no
// persistent device buffers; what upload/download measure is the boundary conversion).
class NpuBuffer final : public Buffer {
 public:
  NpuBuffer(Shape shape, tnpu_io_desc d, std::vector<uint8_t> bytes)
      : shape_(std::move(shape)), desc_(d), bytes_(std::move(bytes)) {}
  size_t byte_size() const override { return bytes_.size(); }
  const Shape& shape() const { return shape_; }
  const tnpu_io_desc& desc() const { return desc_; }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  Shape shape_;
  tnpu_io_desc desc_;
  std::vector<uint8_t> bytes_;
};

// The slice inputs of each calibration sample (a set of model inputs): graph inputs are taken
// as given; inputs produced by earlier layers come from running those layers on the reference
// backend.
Result<std::vector<std::vector<Tensor>>> calibration_inputs(
    const Graph& g, const std::vector<ValueId>& slice_inputs,
    const std::vector<std::vector<Tensor>>& samples, const std::string& device) {
  if (samples.empty()) {
    return invalid_argument("device '" + device +
                            "' runs int8 and needs calibration samples (NpuOptions::calibration: "
                            "sets of model inputs)");
  }
  for (size_t s = 0; s < samples.size(); ++s) {
    if (samples[s].size() != g.inputs().size())
      return invalid_argument("calibration sample " + std::to_string(s) + " has " +
                              std::to_string(samples[s].size()) + " tensors, the model takes " +
                              std::to_string(g.inputs().size()));
    for (size_t i = 0; i < samples[s].size(); ++i) {
      const Value& v = g.value(g.inputs()[i]);
      if (samples[s][i].dtype() != DType::kF32 || samples[s][i].shape() != v.info.shape)
        return invalid_argument("calibration sample " + std::to_string(s) + " input " +
                                quote_name(v.name) + " is " + samples[s][i].describe() +
                                ", expected f32" + v.info.shape.to_string());
    }
  }
  // The layers the slice inputs depend on.
  std::vector<bool> needed(static_cast<size_t>(g.num_nodes()), false);
  std::vector<ValueId> stack(slice_inputs.begin(), slice_inputs.end());
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    const NodeId p = g.value(v).producer;
    if (p == kNoNode || needed[static_cast<size_t>(p)]) continue;
    needed[static_cast<size_t>(p)] = true;
    for (ValueId in : g.node(p).inputs) {
      if (in != kNoValue && !g.value(in).is_constant) stack.push_back(in);
    }
  }
  std::vector<NodeId> prefix;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (needed[static_cast<size_t>(n)]) prefix.push_back(n);
  }
  std::unique_ptr<Device> ref;  // outlives `pre`
  std::unique_ptr<Program> pre;
  if (!prefix.empty()) {
    // Through the registry: a backend never includes another backend.
    auto opened = open_device("reference");
    if (!opened.ok()) return opened.status().with_context("computing calibration inputs");
    ref = std::move(opened).value();
    auto compiled = ref->compile(g, prefix);
    if (!compiled.ok())
      return compiled.status().with_context("computing calibration inputs on the reference device");
    pre = std::move(compiled).value();
  }
  auto graph_input_pos = [&](ValueId v) -> int {
    for (size_t i = 0; i < g.inputs().size(); ++i)
      if (g.inputs()[i] == v) return static_cast<int>(i);
    return -1;
  };
  std::vector<std::vector<Tensor>> out;
  for (const std::vector<Tensor>& sample : samples) {
    std::vector<Tensor> pre_out;
    if (pre) {
      std::vector<Tensor> pre_in;
      for (ValueId v : pre->input_values()) {
        const int pos = graph_input_pos(v);
        if (pos < 0) return internal_error("calibration prefix reads a non-input value");
        pre_in.push_back(sample[static_cast<size_t>(pos)]);
      }
      pre_out.resize(pre->output_values().size());
      RETURN_IF_ERROR(pre->run(pre_in, pre_out));
    }
    std::vector<Tensor> ins;
    for (ValueId v : slice_inputs) {
      const int pos = graph_input_pos(v);
      if (pos >= 0) {
        ins.push_back(sample[static_cast<size_t>(pos)]);
        continue;
      }
      const auto& pv = pre->output_values();
      const auto it = std::find(pv.begin(), pv.end(), v);
      if (it == pv.end())
        return internal_error("calibration prefix does not produce a slice input");
      ins.push_back(pre_out[static_cast<size_t>(it - pv.begin())]);
    }
    out.push_back(std::move(ins));
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<NpuDevice>> NpuDevice::open(int index, NpuOptions options) {
  const std::string path =
      options.driver_path.empty() ? NpuDriver::default_path() : options.driver_path;
  ASSIGN_OR_RETURN(std::shared_ptr<const NpuDriver> driver, NpuDriver::load(path));
  const std::string name = "npu:" + std::to_string(index);
  if (index < 0 || static_cast<uint32_t>(index) >= driver->info().device_count) {
    return not_found("device " + quote_name(name) + " does not exist: driver '" +
                     driver->info().name + "' (" + path + ") has " +
                     std::to_string(driver->info().device_count) + " device(s)");
  }
  auto handle = std::make_shared<NpuHandle>();
  handle->driver = driver;
  const tnpu_driver_api& api = driver->api();
  tnpu_status st = api.open_device(static_cast<uint32_t>(index), &handle->device);
  if (st != TNPU_OK || handle->device == nullptr) {
    handle->device = nullptr;
    return npu_status(st == TNPU_OK ? TNPU_ERR_INTERNAL : st,
                      "device " + quote_name(name) + ": open_device failed",
                      api.driver_last_error());
  }
  std::unique_ptr<NpuDevice> d(new NpuDevice());
  d->name_ = name;
  d->handle_ = handle;
  d->info_.struct_size = sizeof(d->info_);
  st = api.get_device_info(handle->device, &d->info_);
  if (st != TNPU_OK)
    return npu_status(st, "device " + quote_name(name) + ": get_device_info",
                      handle->device_error());
  d->info_.name[sizeof(d->info_.name) - 1] = '\0';
  const uint32_t nops = api.get_op_count(handle->device);
  for (uint32_t i = 0; i < nops && i < 4096; ++i) {
    tnpu_op_support s{};
    s.struct_size = sizeof(s);
    st = api.get_op_support(handle->device, i, &s);
    if (st != TNPU_OK)
      return npu_status(
          st, "device " + quote_name(name) + ": get_op_support(" + std::to_string(i) + ")",
          handle->device_error());
    s.op_type[sizeof(s.op_type) - 1] = '\0';
    d->ops_.push_back(s);
  }
  if (!options.driver_options.empty()) {
    if (!TNPU_HAS_SLOT(&api, set_device_option))
      return unimplemented("device " + quote_name(name) + ": driver '" + driver->info().name +
                           "' takes no device options");
    for (const auto& [key, value] : options.driver_options) {
      st = api.set_device_option(handle->device, key.c_str(), value.c_str());
      if (st != TNPU_OK)
        return npu_status(st, "device " + quote_name(name) + ": option " + key + "=" + value,
                          handle->device_error());
    }
    st = api.get_device_info(handle->device, &d->info_);
    if (st != TNPU_OK)
      return npu_status(st, "device " + quote_name(name) + ": get_device_info",
                        handle->device_error());
  }
  if (options.num_cores != 0 && TNPU_HAS_SLOT(&api, set_device_option)) {
    // Cores are also a prepare option; setting the device keeps get_device_info truthful.
    const std::string cores = std::to_string(options.num_cores);
    st = api.set_device_option(handle->device, "num_cores", cores.c_str());
    if (st == TNPU_OK) {
      st = api.get_device_info(handle->device, &d->info_);
      if (st != TNPU_OK)
        return npu_status(st, "device " + quote_name(name) + ": get_device_info",
                          handle->device_error());
    }
  }
  d->precision_ = options.precision != 0 ? options.precision : d->info_.default_precision;
  if ((d->precision_ & d->info_.precisions) == 0 || (d->precision_ & (d->precision_ - 1)) != 0) {
    return unimplemented("device " + quote_name(name) + " does not compute in " +
                         npu_precision_name(d->precision_) + " (driver '" + driver->info().name +
                         "')");
  }
  d->options_ = std::move(options);
  return d;
}

NpuDevice::~NpuDevice() = default;

const NpuDriver& NpuDevice::driver() const {
  return *handle_->driver;
}

std::string NpuDevice::description() const {
  return std::string(info_.name) + ", " + npu_precision_name(precision_) + ", " +
         std::to_string(memory_capacity() / 1000000) + " MB per subgraph (driver " +
         handle_->driver->info().name + ", " + handle_->driver->path() + ")";
}

uint64_t NpuDevice::memory_capacity() const {
  if (options_.memory_limit != 0 && options_.memory_limit < info_.memory_capacity)
    return options_.memory_limit;
  return info_.memory_capacity;
}

Capability NpuDevice::capabilities(const Graph& g, const Node& node) const {
  const char* op = op_name(node.kind);
  const tnpu_op_support* s = nullptr;
  for (const tnpu_op_support& o : ops_) {
    if (std::strcmp(o.op_type, op) == 0) s = &o;
  }
  if (s == nullptr) {
    std::string list;
    for (const tnpu_op_support& o : ops_)
      list += (list.empty() ? "" : ", ") + std::string(o.op_type);
    return Capability::no(std::string("the NPU does not run ") + op + " (it runs " + list + ")");
  }
  if ((s->precisions & precision_) == 0)
    return Capability::no(std::string(op) + " does not run in " + npu_precision_name(precision_));
  if (s->max_inputs != 0 && node.inputs.size() > s->max_inputs)
    return Capability::no(std::to_string(node.inputs.size()) + " inputs exceed the NPU's " +
                          std::to_string(s->max_inputs));
  // Static attribute limits.
  auto over = [&](const char* attr, uint32_t limit) -> std::string {
    if (limit == 0) return "";
    auto v = node.attrs.ints_or(attr, {});
    if (!v.ok()) return std::string("attribute '") + attr + "' is malformed";
    for (int64_t x : *v) {
      if (x > static_cast<int64_t>(limit))
        return std::string("attribute '") + attr + "' value " + std::to_string(x) +
               " exceeds the NPU's limit " + std::to_string(limit);
    }
    return "";
  };
  for (const auto& [attr, limit] : {std::pair<const char*, uint32_t>{"kernel_shape", s->max_kernel},
                                    {"strides", s->max_stride},
                                    {"dilations", s->max_dilation}}) {
    const std::string why = over(attr, limit);
    if (!why.empty()) return Capability::no(why);
  }
  auto act = parse_fused_activation(node.attrs);
  if (!act.ok()) return Capability::no(act.status().message());
  if (act->kind != ActivationKind::kNone) {
    uint32_t bit = 0;
    switch (act->kind) {
      case ActivationKind::kRelu:
        bit = TNPU_ACTIVATION_RELU;
        break;
      case ActivationKind::kClip:
        bit = TNPU_ACTIVATION_CLIP;
        break;
      case ActivationKind::kLeakyRelu:
        bit = TNPU_ACTIVATION_LEAKY_RELU;
        break;
      case ActivationKind::kSigmoid:
        bit = TNPU_ACTIVATION_SIGMOID;
        break;
      case ActivationKind::kHardSigmoid:
        bit = TNPU_ACTIVATION_HARD_SIGMOID;
        break;
      case ActivationKind::kHardSwish:
        bit = TNPU_ACTIVATION_HARD_SWISH;
        break;
      case ActivationKind::kTanh:
        bit = TNPU_ACTIVATION_TANH;
        break;
      case ActivationKind::kNone:
        break;
    }
    if ((s->fused_activations & bit) == 0)
      return Capability::no(std::string("fused activation ") + activation_name(act->kind) +
                            " is not supported on " + op);
  }
  // The driver's exact check, on a one-node description.
  const tnpu_driver_api& api = handle_->api();
  if (!TNPU_HAS_SLOT(&api, check_node)) return Capability::yes();
  const Node* first = g.nodes().data();
  if (&node < first || &node >= first + g.num_nodes()) return Capability::yes();
  const NodeId id = static_cast<NodeId>(&node - first);
  // The node's boundary: its non-constant inputs, once each, and all its outputs. Computed from
  // the node alone (slice_boundary scans the whole graph for readers of the outputs, which made
  // checking every node of a model quadratic in its size).
  const NodeId layers[1] = {id};
  std::vector<ValueId> ins;
  for (ValueId v : node.inputs) {
    if (v == kNoValue || g.value(v).is_constant) continue;
    if (std::find(ins.begin(), ins.end(), v) == ins.end()) ins.push_back(v);
  }
  const std::vector<ValueId> outs = node.outputs;
  auto desc = HalSubgraph::build(g, layers, ins, outs);
  if (!desc.ok()) return Capability::no(desc.status().message());
  std::lock_guard<std::mutex> lock(handle_->mu);
  if (api.check_node(handle_->device, &(*desc)->graph(), 0) != TNPU_OK)
    return Capability::no(driver_text(handle_->device_error()));
  return Capability::yes();
}

DeviceInfo NpuDevice::info() const {
  return DeviceInfo{DeviceKind::kNpu, memory_capacity(), false, 1};
}

Result<std::unique_ptr<Program>> NpuDevice::compile_program(const Graph& g,
                                                            std::span<const NodeId> layers,
                                                            const CompileOptions& /*options*/) {
  return compile_slice(g, layers, nullptr);
}

Result<std::unique_ptr<Program>> NpuDevice::compile_slice(
    const Graph& g, std::span<const NodeId> layers,
    const std::vector<std::vector<Tensor>>* slice_calibration) {
  if (layers.empty())
    return invalid_argument("device " + quote_name(name_) + ": nothing to compile");
  RETURN_IF_ERROR(check_capabilities(*this, g, layers));
  std::vector<ValueId> ins, outs;
  slice_boundary(g, layers, &ins, &outs);
  ASSIGN_OR_RETURN(std::unique_ptr<HalSubgraph> desc, HalSubgraph::build(g, layers, ins, outs));

  // int8: the slice's inputs for each calibration sample, as f32 buffers.
  std::vector<std::vector<Tensor>> cal_tensors;
  std::vector<const float*> cal_ptrs;
  tnpu_calibration cal{};
  if (precision_ == TNPU_PRECISION_INT8) {
    if (slice_calibration != nullptr) {
      cal_tensors = *slice_calibration;
    } else {
      ASSIGN_OR_RETURN(cal_tensors, calibration_inputs(g, ins, options_.calibration, name_));
    }
    for (const auto& sample : cal_tensors)
      for (const Tensor& t : sample) cal_ptrs.push_back(t.data<float>());
    cal.num_samples = static_cast<uint32_t>(cal_tensors.size());
    cal.inputs = cal_ptrs.data();
  }
  tnpu_prepare_options opt{};
  opt.struct_size = sizeof(opt);
  opt.precision = precision_;
  opt.memory_limit = options_.memory_limit;
  opt.num_cores = options_.num_cores;
  opt.calibration = precision_ == TNPU_PRECISION_INT8 ? &cal : nullptr;

  tnpu_prepared prepared = nullptr;
  {
    std::lock_guard<std::mutex> lock(handle_->mu);
    const tnpu_status st = handle_->api().prepare(handle_->device, &desc->graph(), &opt, &prepared);
    if (st != TNPU_OK || prepared == nullptr) {
      const std::string slice =
          "" + quote_name(g.node(layers.front()).name) +
          (layers.size() > 1 ? " .. " + quote_name(g.node(layers.back()).name) : "");
      return npu_status(st == TNPU_OK ? TNPU_ERR_INTERNAL : st,
                        "device " + quote_name(name_) + " refuses the slice of " +
                            std::to_string(layers.size()) + " layer(s) " + slice,
                        handle_->device_error());
    }
  }
  auto program =
      std::make_unique<NpuProgramImpl>(handle_, prepared, name_, std::move(ins), std::move(outs));
  program->num_nodes = layers.size();
  RETURN_IF_ERROR(program->init(g));
  return std::unique_ptr<Program>(std::move(program));
}

Result<std::vector<NpuBoundaryRun>> NpuDevice::time_boundary(uint64_t f32_bytes, int warmup,
                                                             int repeat) {
  if (repeat < 1 || warmup < 0)
    return invalid_argument("time_boundary: repeat must be >= 1 and warmup >= 0");
  // A Relu over [1, 32, 1, W]: 32 channels fill whole blocks of the NHWC8 layouts NPUs use.
  const int64_t width = std::max<int64_t>(1, static_cast<int64_t>(f32_bytes / (4 * 32)));
  const Shape shape{1, 32, 1, width};
  Graph g;
  const ValueId x = g.add_value("boundary_in", TensorInfo{DType::kF32, shape});
  const ValueId y = g.add_value("boundary_out", TensorInfo{DType::kF32, shape});
  g.inputs() = {x};
  g.outputs() = {y};
  const NodeId node = g.add_node(Node{"boundary_relu", OpKind::kRelu, {}, {x}, {y}});
  ASSIGN_OR_RETURN(Tensor input, Tensor::create(DType::kF32, shape));
  float* in = input.data<float>();
  for (int64_t i = 0; i < input.numel(); ++i) in[i] = static_cast<float>(i % 17) / 8.f - 1.f;
  const std::vector<std::vector<Tensor>> calibration = {{input}};
  ASSIGN_OR_RETURN(std::unique_ptr<Program> compiled,
                   compile_slice(g, std::span<const NodeId>(&node, 1), &calibration));
  auto* program = static_cast<NpuProgram*>(compiled.get());
  std::vector<Tensor> outputs(1);
  std::vector<double> layer_ms;
  const bool profiled = TNPU_HAS_SLOT(&handle_->api(), execute_profiled);
  std::vector<NpuBoundaryRun> runs;
  for (int r = 0; r < warmup + repeat; ++r) {
    RETURN_IF_ERROR(profiled ? program->run(std::span<const Tensor>(&input, 1), outputs,
                                            RunOptions::timed(&layer_ms))
                             : program->run(std::span<const Tensor>(&input, 1), outputs));
    const NpuRunStats& st = program->last_run();
    if (!st.driver_counters) {
      return unimplemented("device " + quote_name(name_) + ": driver '" +
                           handle_->driver->info().name +
                           "' reports no timings, so the boundary conversion cannot be timed");
    }
    if (r < warmup) continue;
    runs.push_back(
        NpuBoundaryRun{static_cast<double>(st.host_input_ns + st.input_conversion_ns) / 1e6,
                       static_cast<double>(st.output_conversion_ns + st.host_output_ns) / 1e6});
  }
  return runs;
}

Result<std::unique_ptr<Buffer>> NpuDevice::upload(const Tensor& host) {
  if (host.dtype() != DType::kF32)
    return unimplemented("device " + quote_name(name_) + " uploads f32 tensors, got " +
                         host.describe());
  tnpu_io_desc d{};
  d.struct_size = sizeof(d);
  d.layout = TNPU_LAYOUT_NCHW;
  d.rank = static_cast<uint32_t>(host.rank());
  for (int k = 0; k < host.rank() && k < TNPU_MAX_RANK; ++k) d.dims[k] = host.dim(k);
  // Stored in the device's activation precision; int8 without a prepared slice has no
  // calibrated range, so it travels as fp16.
  d.dtype = precision_ == TNPU_PRECISION_F32 ? TNPU_DTYPE_F32 : TNPU_DTYPE_F16;
  d.bytes = static_cast<uint64_t>(host.numel()) * hal_dtype_size(d.dtype);
  std::vector<uint8_t> bytes(d.bytes);
  to_driver(host.data<float>(), host.numel(), d, bytes.data());
  return std::unique_ptr<Buffer>(new NpuBuffer(host.shape(), d, std::move(bytes)));
}

Status NpuDevice::download(const Buffer& device, Tensor* host) {
  const auto* b = dynamic_cast<const NpuBuffer*>(&device);
  if (b == nullptr)
    return invalid_argument("buffer does not belong to device " + quote_name(name_));
  ASSIGN_OR_RETURN(*host, Tensor::create(DType::kF32, b->shape()));
  from_driver(b->bytes().data(), host->numel(), b->desc(), host->data<float>());
  return Status();
}

namespace {

void list_npu(std::vector<DeviceListing>* out) {
  auto driver = NpuDriver::load(NpuDriver::default_path());
  if (!driver.ok()) return;
  for (uint32_t i = 0; i < (*driver)->info().device_count && i < 64; ++i) {
    auto d = NpuDevice::open(static_cast<int>(i));
    if (d.ok()) out->push_back({(*d)->name(), (*d)->description()});
  }
}

Result<std::unique_ptr<Device>> open_npu(const DeviceName& name) {
  if (name.mhz != 0) {
    return unimplemented("device " + quote_name(name.to_string()) +
                         ": the NPU HAL exposes no DVFS levels");
  }
  NpuOptions options;
  RETURN_IF_ERROR(options.apply_environment());
  const int index = name.spec.empty() ? 0 : std::stoi(name.spec);
  ASSIGN_OR_RETURN(std::unique_ptr<NpuDevice> d, NpuDevice::open(index, std::move(options)));
  return std::unique_ptr<Device>(std::move(d));
}

}  // namespace

const Backend kNpuBackend = {"npu", list_npu, open_npu};

}  // namespace tessera
