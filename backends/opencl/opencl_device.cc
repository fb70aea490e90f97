#include "backends/opencl/opencl_device.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>

#include "backends/opencl/opencl_ops.h"

namespace tessera {

using opencl::cl_check;
using opencl::Execution;
using opencl::Launch;
using opencl::MemHandle;
using opencl::QueueHandle;
using opencl::RunCheck;

namespace {

// Kernels index with 32-bit ints.
constexpr uint64_t kMaxKernelTensorBytes = uint64_t{1} << 31;

std::string mib(uint64_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

class OpenCLBuffer final : public Buffer {
 public:
  OpenCLBuffer(MemHandle mem, DType dtype, Shape shape)
      : mem_(std::move(mem)), dtype_(dtype), shape_(std::move(shape)) {}
  size_t byte_size() const override {
    return static_cast<size_t>(shape_.numel()) * dtype_size(dtype_);
  }
  cl_mem mem() const { return mem_.get(); }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }

 private:
  MemHandle mem_;
  DType dtype_;
  Shape shape_;
};

// ---------------------------------------------------------------------------------------------
// The compiled program
// ---------------------------------------------------------------------------------------------

// Where one value's bytes live on the device. Aliasing values (Reshape...) share a Storage.
struct Storage {
  uint64_t bytes = 0;
  uint64_t capacity = 0;  // of the buffer it got (a reused one may be larger)
  int first = -1;         // layer index that writes it (-1: before the slice runs)
  int last = -1;          // last layer index reading it
  bool pinned = false;    // a slice input/output, weight or compile-time value: never reused
  cl_mem mem = nullptr;   // owned by OpenCLProgram::buffers_
};

class OpenCLProgram final : public Program {
 public:
  static Result<std::unique_ptr<OpenCLProgram>> create(std::shared_ptr<opencl::Runtime> rt,
                                                       const Graph& g,
                                                       std::span<const NodeId> layers);

  const std::vector<ValueId>& input_values() const override { return inputs_; }
  const std::vector<ValueId>& output_values() const override { return outputs_; }

 protected:
  // Timed (options.layer_ms): waits for each layer's kernels before timing the next (host clock
  // around clFinish).
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override;

 private:
  OpenCLProgram(std::shared_ptr<opencl::Runtime> rt, const Graph& g) : rt_(std::move(rt)), g_(g) {}
  Status plan(std::span<const NodeId> layers);
  Status allocate(size_t num_layers);
  Status lower(std::span<const NodeId> layers);
  Result<int> constant_storage(ValueId v);
  Status evaluate_at_compile_time(const Node& n, int layer);

  std::shared_ptr<opencl::Runtime> rt_;
  const Graph& g_;
  QueueHandle queue_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<int> storage_of_;  // per ValueId, -1 when not on the device
  std::vector<Storage> storages_;
  std::vector<MemHandle> buffers_;  // every device buffer the program owns
  std::vector<MemHandle> aux_;      // index tables and folded parameters of the launches
  std::vector<Launch> launches_;
  std::vector<size_t> layer_launch_end_;  // per layer: launches_.size() after its launches
  std::vector<RunCheck> checks_;          // flags the launches set on bad run-time data
};

Result<std::unique_ptr<OpenCLProgram>> OpenCLProgram::create(std::shared_ptr<opencl::Runtime> rt,
                                                             const Graph& g,
                                                             std::span<const NodeId> layers) {
  std::unique_ptr<OpenCLProgram> p(new OpenCLProgram(std::move(rt), g));
  ASSIGN_OR_RETURN(p->queue_, p->rt_->create_queue());
  slice_boundary(g, layers, &p->inputs_, &p->outputs_);
  RETURN_IF_ERROR(p->plan(layers));
  RETURN_IF_ERROR(p->allocate(layers.size()));
  RETURN_IF_ERROR(p->lower(layers));
  return p;
}

Result<int> OpenCLProgram::constant_storage(ValueId v) {
  int& s = storage_of_[static_cast<size_t>(v)];
  if (s >= 0) return s;
  const Value& val = g_.value(v);
  Result<MemHandle> m = rt_->create_buffer_from(val.data.raw(), val.data.byte_size());
  if (!m.ok()) return m.status().with_context("uploading weight " + quote_name(val.name));
  storages_.push_back(Storage{val.data.byte_size(), val.data.byte_size(), -1, -1, true, m->get()});
  buffers_.push_back(std::move(*m));
  s = static_cast<int>(storages_.size()) - 1;
  return s;
}

Status OpenCLProgram::evaluate_at_compile_time(const Node& n, int layer) {
  std::vector<Tensor> ins;
  for (ValueId v : n.inputs) {
    if (v == kNoValue) {
      ins.emplace_back();
    } else if (g_.value(v).is_constant) {
      ins.push_back(g_.value(v).data);
    } else {
      // Only the shape is read (Shape); the values are placeholders.
      const TensorInfo& info = g_.value(v).info;
      ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
      ins.push_back(std::move(t));
    }
  }
  std::vector<Tensor> outs;
  for (ValueId v : n.outputs) {
    const TensorInfo& info = g_.value(v).info;
    ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
    outs.push_back(std::move(t));
  }
  NodeContext nc(n, ins);
  RETURN_IF_ERROR(run_reference(nc.ctx(), ins, outs));
  for (size_t o = 0; o < n.outputs.size(); ++o) {
    Result<MemHandle> m = rt_->create_buffer_from(outs[o].raw(), outs[o].byte_size());
    if (!m.ok()) return m.status().with_context("node " + quote_name(n.name));
    storages_.push_back(
        Storage{outs[o].byte_size(), outs[o].byte_size(), layer, layer, true, m->get()});
    buffers_.push_back(std::move(*m));
    storage_of_[static_cast<size_t>(n.outputs[o])] = static_cast<int>(storages_.size()) - 1;
  }
  return Status();
}

// Phase 1: decide which values share storage and when each storage is written and last read.
Status OpenCLProgram::plan(std::span<const NodeId> layers) {
  storage_of_.assign(static_cast<size_t>(g_.num_values()), -1);
  for (ValueId v : inputs_) {
    storages_.push_back(Storage{g_.value(v).info.byte_size(), 0, -1, -1, true, nullptr});
    storage_of_[static_cast<size_t>(v)] = static_cast<int>(storages_.size()) - 1;
  }
  for (size_t li = 0; li < layers.size(); ++li) {
    const int layer = static_cast<int>(li);
    const Node& n = g_.node(layers[li]);
    const opencl::OpenCLOp* op = opencl::find_opencl_op(n.kind);
    if (op == nullptr) return internal_error("no OpenCL entry for node " + quote_name(n.name));
    for (ValueId v : n.inputs) {
      if (v == kNoValue) continue;
      if (g_.value(v).is_constant) {
        if (op->execution == Execution::kCompileTime) continue;
        RETURN_IF_ERROR(constant_storage(v).status());
      }
      const int s = storage_of_[static_cast<size_t>(v)];
      if (s < 0) {
        return internal_error("node " + quote_name(n.name) + " reads '" + g_.value(v).name +
                              "' before it is produced");
      }
      storages_[static_cast<size_t>(s)].last =
          std::max(storages_[static_cast<size_t>(s)].last, layer);
    }
    switch (op->execution) {
      case Execution::kAlias:
        storage_of_[static_cast<size_t>(n.outputs[0])] =
            storage_of_[static_cast<size_t>(n.inputs[0])];
        break;
      case Execution::kCompileTime:
        RETURN_IF_ERROR(evaluate_at_compile_time(n, layer));
        break;
      case Execution::kKernels:
        for (ValueId v : n.outputs) {
          storages_.push_back(
              Storage{g_.value(v).info.byte_size(), 0, layer, layer, false, nullptr});
          storage_of_[static_cast<size_t>(v)] = static_cast<int>(storages_.size()) - 1;
        }
        break;
    }
  }
  for (ValueId v : outputs_) {
    const int s = storage_of_[static_cast<size_t>(v)];
    if (s < 0)
      return internal_error("slice output " + quote_name(g_.value(v).name) + " has no storage");
    storages_[static_cast<size_t>(s)].pinned = true;
  }
  return Status();
}

// Phase 2: device buffers. Intermediates take a free buffer that fits (the smallest) once their
// previous owner's last reader has run; an op's outputs are placed before its inputs are
// released, so no kernel writes a buffer it reads.
Status OpenCLProgram::allocate(size_t num_layers) {
  std::vector<std::pair<uint64_t, cl_mem>> pool;  // free buffers: capacity, handle
  auto acquire = [&](Storage& st) -> Status {
    auto best = pool.end();
    for (auto it = pool.begin(); it != pool.end(); ++it) {
      if (it->first >= st.bytes && (best == pool.end() || it->first < best->first)) best = it;
    }
    if (!st.pinned && best != pool.end()) {
      st.capacity = best->first;
      st.mem = best->second;
      pool.erase(best);
      return Status();
    }
    ASSIGN_OR_RETURN(MemHandle m, rt_->create_buffer(st.bytes));
    st.capacity = st.bytes;
    st.mem = m.get();
    buffers_.push_back(std::move(m));
    return Status();
  };
  for (Storage& st : storages_) {
    if (st.mem == nullptr && st.first < 0) RETURN_IF_ERROR(acquire(st));  // slice inputs
  }
  for (int layer = 0; layer < static_cast<int>(num_layers); ++layer) {
    for (Storage& st : storages_) {
      if (st.mem == nullptr && st.first == layer) RETURN_IF_ERROR(acquire(st));
    }
    for (Storage& st : storages_) {
      if (!st.pinned && st.mem != nullptr && st.last == layer) {
        pool.emplace_back(st.capacity, st.mem);
      }
    }
  }
  return Status();
}

// Phase 3: bind every kernel launch.
Status OpenCLProgram::lower(std::span<const NodeId> layers) {
  for (NodeId id : layers) {
    const Node& n = g_.node(id);
    const opencl::OpenCLOp* op = opencl::find_opencl_op(n.kind);
    if (op->execution != Execution::kKernels) {
      layer_launch_end_.push_back(launches_.size());
      continue;
    }
    std::vector<cl_mem> ins, outs;
    for (ValueId v : n.inputs) {
      ins.push_back(v == kNoValue ? nullptr : storages_[static_cast<size_t>(storage_of_[v])].mem);
    }
    for (ValueId v : n.outputs) outs.push_back(storages_[static_cast<size_t>(storage_of_[v])].mem);
    NodeContext nc(g_, n);
    opencl::Lowering l(*rt_, g_, n, nc.ctx(), std::move(ins), std::move(outs), &aux_, &launches_,
                       &checks_);
    RETURN_IF_ERROR(op->lower(l));
    layer_launch_end_.push_back(launches_.size());
  }
  return Status();
}

Status OpenCLProgram::execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                              const RunOptions& options) {
  // Kernels are queued at once and run asynchronously: cancellation and the deadline are checked
  // when the run starts (Program::run), not between layers.
  using Clock = std::chrono::steady_clock;
  std::vector<double>* layer_ms = options.layer_ms;
  if (layer_ms != nullptr) layer_ms->assign(layer_launch_end_.size(), 0.0);
  if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
    return invalid_argument("program takes " + std::to_string(inputs_.size()) + " inputs and " +
                            std::to_string(outputs_.size()) + " outputs, got " +
                            std::to_string(inputs.size()) + " and " +
                            std::to_string(outputs.size()));
  }
  cl_command_queue q = queue_.get();
  // Host -> device: the slice inputs.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g_.value(inputs_[i]);
    if (inputs[i].dtype() != v.info.dtype || inputs[i].shape() != v.info.shape) {
      return invalid_argument("input " + quote_name(v.name) + " expects " +
                              dtype_name(v.info.dtype) + v.info.shape.to_string() + ", got " +
                              inputs[i].describe());
    }
    if (inputs[i].byte_size() == 0) continue;
    const Storage& st = storages_[static_cast<size_t>(storage_of_[inputs_[i]])];
    RETURN_IF_ERROR(cl_check(clEnqueueWriteBuffer(q, st.mem, CL_FALSE, 0, inputs[i].byte_size(),
                                                  inputs[i].raw(), 0, nullptr, nullptr),
                             "writing input " + quote_name(v.name) + " to the device"));
  }
  // Clear the run-time check flags.
  static const cl_int kZero = 0;
  for (const RunCheck& c : checks_) {
    RETURN_IF_ERROR(cl_check(
        clEnqueueWriteBuffer(q, c.flag, CL_FALSE, 0, sizeof(kZero), &kZero, 0, nullptr, nullptr),
        c.what + ": clearing its check flag"));
  }
  // The kernels, in order; when timed, the inputs are on the device before the first layer
  // starts and each layer is finished before the next.
  if (layer_ms != nullptr) RETURN_IF_ERROR(cl_check(clFinish(q), "clFinish"));
  Clock::time_point t0 = layer_ms != nullptr ? Clock::now() : Clock::time_point();
  size_t layer = 0;
  for (size_t i = 0; i <= launches_.size(); ++i) {
    while (layer_ms != nullptr && layer < layer_launch_end_.size() &&
           layer_launch_end_[layer] == i) {
      RETURN_IF_ERROR(cl_check(clFinish(q), "clFinish"));
      const Clock::time_point t1 = Clock::now();
      (*layer_ms)[layer++] = std::chrono::duration<double, std::milli>(t1 - t0).count();
      t0 = t1;
    }
    if (i == launches_.size()) break;
    const Launch& l = launches_[i];
    const cl_int err =
        clEnqueueNDRangeKernel(q, l.kernel.get(), l.dims, nullptr, l.global,
                               l.has_local() ? l.local : nullptr, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) {
      clFinish(q);
      return cl_check(err, l.label + ": clEnqueueNDRangeKernel");
    }
  }
  // Device -> host: the slice outputs.
  for (size_t i = 0; i < outputs_.size(); ++i) {
    const TensorInfo& info = g_.value(outputs_[i]).info;
    Tensor& dst = outputs[i];
    if (dst.raw() == nullptr || dst.dtype() != info.dtype || dst.shape() != info.shape) {
      Result<Tensor> t = Tensor::create(info.dtype, info.shape);
      if (!t.ok()) {
        clFinish(q);
        return t.status();
      }
      dst = std::move(*t);
    }
    if (dst.byte_size() == 0) continue;
    const Storage& st = storages_[static_cast<size_t>(storage_of_[outputs_[i]])];
    const cl_int err = clEnqueueReadBuffer(q, st.mem, CL_FALSE, 0, dst.byte_size(), dst.raw(), 0,
                                           nullptr, nullptr);
    if (err != CL_SUCCESS) {
      clFinish(q);
      return cl_check(
          err, "reading output " + quote_name(g_.value(outputs_[i]).name) + " from the device");
    }
  }
  RETURN_IF_ERROR(cl_check(clFinish(q), "clFinish"));
  for (const RunCheck& c : checks_) {
    cl_int flag = 0;
    RETURN_IF_ERROR(cl_check(
        clEnqueueReadBuffer(q, c.flag, CL_TRUE, 0, sizeof(flag), &flag, 0, nullptr, nullptr),
        c.what + ": reading its check flag"));
    if (flag != 0) return out_of_range(c.what + " (element " + std::to_string(flag - 1) + ")");
  }
  return Status();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The device
// ---------------------------------------------------------------------------------------------

OpenCLDevice::OpenCLDevice(std::shared_ptr<opencl::Runtime> rt)
    : rt_(std::move(rt)), name_("opencl:" + std::to_string(rt_->index())) {}

Result<std::unique_ptr<OpenCLDevice>> OpenCLDevice::open(int index) {
  ASSIGN_OR_RETURN(std::shared_ptr<opencl::Runtime> rt, opencl::Runtime::open(index));
  return std::unique_ptr<OpenCLDevice>(new OpenCLDevice(std::move(rt)));
}

std::string OpenCLDevice::description() const {
  const opencl::DeviceInfo& i = rt_->info();
  return "OpenCL " + i.type_name() + " " + quote_name(i.name) + " (" + i.platform_name +
         ", driver " + i.driver_version + "), " + mib(i.global_mem_bytes) +
         " memory, max allocation " + mib(i.max_alloc_bytes) + ", " +
         std::to_string(i.compute_units) + " compute units";
}

uint64_t OpenCLDevice::memory_capacity() const {
  return rt_->info().global_mem_bytes;
}
uint64_t OpenCLDevice::max_allocation() const {
  return rt_->info().max_alloc_bytes;
}

Capability OpenCLDevice::capabilities(const Graph& g, const Node& node) const {
  const opencl::OpenCLOp* op = opencl::find_opencl_op(node.kind);
  if (op == nullptr) {
    return Capability::no(std::string("no OpenCL kernel for ") + op_name(node.kind));
  }
  // Every tensor must fit one allocation and 32-bit indexing.
  const uint64_t limit = std::min(max_allocation(), kMaxKernelTensorBytes);
  auto too_big = [&](ValueId v, const char* what, size_t i) -> std::optional<Capability> {
    if (v == kNoValue || (!g.value(v).has_info && !g.value(v).is_constant)) return std::nullopt;
    const uint64_t bytes =
        g.value(v).is_constant ? g.value(v).data.byte_size() : g.value(v).info.byte_size();
    if (bytes <= limit) return std::nullopt;
    return Capability::no(std::string(what) + " " + std::to_string(i) + " ('" + g.value(v).name +
                          "') has " + std::to_string(bytes) + " bytes, more than the " +
                          std::to_string(limit) + " one OpenCL buffer may hold on this device");
  };
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    if (auto c = too_big(node.inputs[i], "input", i)) return *c;
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (auto c = too_big(node.outputs[i], "output", i)) return *c;
  }
  if (op->execution == Execution::kAlias) {
    if (node.inputs.empty() || node.inputs[0] == kNoValue || node.outputs.size() != 1) {
      return Capability::no("runs only with input 0 and a single output");
    }
    const TensorInfo& in = g.value(node.inputs[0]).info;
    const TensorInfo& out = g.value(node.outputs[0]).info;
    if (in.byte_size() != out.byte_size()) {
      return Capability::no("output and input 0 differ in size");
    }
  }
  if (op->check != nullptr) {
    NodeContext nc(g, node);
    return op->check(nc.ctx());
  }
  return Capability::yes();
}

DeviceInfo OpenCLDevice::info() const {
  return DeviceInfo{DeviceKind::kGpu, memory_capacity(), false, 1};
}

Result<std::unique_ptr<Program>> OpenCLDevice::compile_program(const Graph& g,
                                                               std::span<const NodeId> layers,
                                                               const CompileOptions& /*options*/) {
  RETURN_IF_ERROR(check_capabilities(*this, g, layers));
  Result<std::unique_ptr<OpenCLProgram>> p = OpenCLProgram::create(rt_, g, layers);
  if (!p.ok()) return p.status().with_context("compiling for " + name_);
  return std::unique_ptr<Program>(std::move(*p));
}

Result<std::unique_ptr<Buffer>> OpenCLDevice::upload(const Tensor& host) {
  ASSIGN_OR_RETURN(MemHandle m, rt_->create_buffer(host.byte_size()));
  if (host.byte_size() > 0) {
    RETURN_IF_ERROR(
        cl_check(clEnqueueWriteBuffer(rt_->transfer_queue(), m.get(), CL_TRUE, 0, host.byte_size(),
                                      host.raw(), 0, nullptr, nullptr),
                 name_ + ": upload of " + host.describe()));
  }
  return std::unique_ptr<Buffer>(new OpenCLBuffer(std::move(m), host.dtype(), host.shape()));
}

Status OpenCLDevice::download(const Buffer& device, Tensor* host) {
  const auto* b = dynamic_cast<const OpenCLBuffer*>(&device);
  if (b == nullptr) return invalid_argument("buffer does not belong to device " + name_);
  ASSIGN_OR_RETURN(Tensor t, Tensor::create(b->dtype(), b->shape()));
  if (t.byte_size() > 0) {
    RETURN_IF_ERROR(cl_check(clEnqueueReadBuffer(rt_->transfer_queue(), b->mem(), CL_TRUE, 0,
                                                 t.byte_size(), t.raw(), 0, nullptr, nullptr),
                             name_ + ": download of " + t.describe()));
  }
  *host = std::move(t);
  return Status();
}

// ---------------------------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------------------------

namespace {

void list_opencl(std::vector<DeviceListing>* out) {
  Result<std::vector<opencl::DeviceEntry>> devices = opencl::enumerate_devices();
  if (!devices.ok()) return;
  for (int i = 0; i < static_cast<int>(devices->size()); ++i) {
    Result<std::unique_ptr<OpenCLDevice>> d = OpenCLDevice::open(i);
    if (d.ok()) out->push_back({(*d)->name(), (*d)->description()});
  }
}

Result<std::unique_ptr<Device>> open_opencl(const DeviceName& name) {
  if (name.mhz != 0) {
    return unimplemented("device '" + name.to_string() +
                         "': OpenCL devices have no DVFS levels in Tessera");
  }
  const int index = name.spec.empty() ? 0 : std::stoi(name.spec);
  Result<std::unique_ptr<OpenCLDevice>> d = OpenCLDevice::open(index);
  if (!d.ok()) {
    const Status& s = d.status();
    return Status(s.code(), "device " + quote_name(name.to_string()) + ": " + s.message());
  }
  return std::unique_ptr<Device>(std::move(*d));
}

}  // namespace

const Backend kOpenCLBackend = {"opencl", list_opencl, open_opencl};

}  // namespace tessera
