#include "backends/reference/reference_device.h"

#include "core/allocator.h"
#include "core/denormals.h"

#include <chrono>
#include <cstring>

namespace tessera {

namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(Tensor t) : tensor_(std::move(t)) {}
  size_t byte_size() const override { return tensor_.byte_size(); }
  const Tensor& tensor() const { return tensor_; }

 private:
  Tensor tensor_;
};

// Runs its layers in order with the reference kernels. Intermediate tensors live in a table
// indexed by ValueId and are released after their last use in the slice.
class ReferenceProgram final : public Program {
 public:
  ReferenceProgram(const Graph& g, std::vector<NodeId> layers) : g_(g), layers_(std::move(layers)) {
    slice_boundary(g_, layers_, &inputs_, &outputs_);
    last_use_.assign(static_cast<size_t>(g_.num_values()), -1);
    for (size_t i = 0; i < layers_.size(); ++i) {
      for (ValueId v : g_.node(layers_[i]).inputs) {
        if (v != kNoValue) last_use_[static_cast<size_t>(v)] = static_cast<int>(i);
      }
    }
    for (ValueId v : outputs_) last_use_[static_cast<size_t>(v)] = static_cast<int>(layers_.size());
  }

  const std::vector<ValueId>& input_values() const override { return inputs_; }
  const std::vector<ValueId>& output_values() const override { return outputs_; }

 private:
  using Clock = std::chrono::steady_clock;

  // Runs the layers; with options.layer_ms, times each (its output allocation included).
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override {
    const ScopedFlushDenormals flush;  // core/denormals.h
    std::vector<double>* layer_ms = options.layer_ms;
    if (layer_ms != nullptr) layer_ms->assign(layers_.size(), 0.0);
    if (inputs.size() != inputs_.size() || outputs.size() != outputs_.size()) {
      return invalid_argument("program takes " + std::to_string(inputs_.size()) + " inputs and " +
                              std::to_string(outputs_.size()) + " outputs, got " +
                              std::to_string(inputs.size()) + " and " +
                              std::to_string(outputs.size()));
    }
    std::vector<Tensor> table(static_cast<size_t>(g_.num_values()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      const Value& v = g_.value(inputs_[i]);
      if (inputs[i].dtype() != v.info.dtype || inputs[i].shape() != v.info.shape) {
        return invalid_argument("input " + quote_name(v.name) + " expects " +
                                dtype_name(v.info.dtype) + v.info.shape.to_string() + ", got " +
                                inputs[i].describe());
      }
      table[static_cast<size_t>(inputs_[i])] = inputs[i];
    }
    std::vector<Tensor> ins, outs;
    for (size_t li = 0; li < layers_.size(); ++li) {
      const Clock::time_point t0 = layer_ms != nullptr ? Clock::now() : Clock::time_point();
      const Node& n = g_.node(layers_[li]);
      if (li > 0 && options.stop_requested()) return options.check("node " + quote_name(n.name));
      ins.clear();
      outs.clear();
      for (ValueId v : n.inputs) {
        if (v == kNoValue) {
          ins.emplace_back();
        } else {
          ins.push_back(g_.value(v).is_constant ? g_.value(v).data : table[static_cast<size_t>(v)]);
        }
      }
      for (ValueId v : n.outputs) {
        const TensorInfo& info = g_.value(v).info;
        ASSIGN_OR_RETURN(Tensor t, Tensor::create(info.dtype, info.shape));
        outs.push_back(std::move(t));
      }
      NodeContext nc(n, ins);
      RETURN_IF_ERROR(run_reference(nc.ctx(), ins, outs));
      for (size_t o = 0; o < n.outputs.size(); ++o) {
        table[static_cast<size_t>(n.outputs[o])] = std::move(outs[o]);
      }
      // Release tensors whose last reader in this slice has run.
      for (ValueId v : n.inputs) {
        if (v != kNoValue && last_use_[static_cast<size_t>(v)] == static_cast<int>(li)) {
          table[static_cast<size_t>(v)] = Tensor();
        }
      }
      if (layer_ms != nullptr) {
        (*layer_ms)[li] = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      }
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const ValueId v = outputs_[i];
      Tensor& dst = outputs[i];
      const Tensor& src = table[static_cast<size_t>(v)];
      if (dst.raw() != nullptr && dst.dtype() == src.dtype() && dst.shape() == src.shape()) {
        std::memcpy(dst.raw(), src.raw(), src.byte_size());
      } else {
        dst = src;
      }
    }
    return Status();
  }

  const Graph& g_;
  std::vector<NodeId> layers_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::vector<int> last_use_;
};

}  // namespace

ReferenceDevice::ReferenceDevice() = default;

std::string ReferenceDevice::description() const {
  return "portable reference kernels (the oracle), host memory";
}

Capability ReferenceDevice::capabilities(const Graph& /*g*/, const Node& node) const {
  if (!op_is_registered(node.kind)) {
    return Capability::no(std::string("operator ") + op_name(node.kind) +
                          " has no reference kernel");
  }
  return Capability::yes();
}

uint64_t ReferenceDevice::memory_capacity() const {
  return host_memory_bytes();
}

DeviceInfo ReferenceDevice::info() const {
  // The reference kernels run on the calling thread: runs from several threads overlap.
  return DeviceInfo{DeviceKind::kCpu, memory_capacity(), true, 0};
}

Result<std::unique_ptr<Program>> ReferenceDevice::compile_program(
    const Graph& g, std::span<const NodeId> layers, const CompileOptions& /*options*/) {
  RETURN_IF_ERROR(check_capabilities(*this, g, layers));
  return std::unique_ptr<Program>(
      new ReferenceProgram(g, std::vector<NodeId>(layers.begin(), layers.end())));
}

Result<std::unique_ptr<Buffer>> ReferenceDevice::upload(const Tensor& host) {
  ASSIGN_OR_RETURN(Tensor copy, host.clone());
  return std::unique_ptr<Buffer>(new HostBuffer(std::move(copy)));
}

Status ReferenceDevice::download(const Buffer& device, Tensor* host) {
  const auto* hb = dynamic_cast<const HostBuffer*>(&device);
  if (hb == nullptr) return invalid_argument("buffer does not belong to the reference device");
  ASSIGN_OR_RETURN(*host, hb->tensor().clone());
  return Status();
}

namespace {

void list_reference(std::vector<DeviceListing>* out) {
  ReferenceDevice ref;
  out->push_back({ref.name(), ref.description()});
}

Result<std::unique_ptr<Device>> open_reference(const DeviceName& name) {
  if (name.mhz != 0) {
    return unimplemented("device '" + name.to_string() +
                         "': the reference device has no DVFS levels");
  }
  return std::unique_ptr<Device>(new ReferenceDevice());
}

}  // namespace

const Backend kReferenceBackend = {"reference", list_reference, open_reference};

}  // namespace tessera
