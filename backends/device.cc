#include "backends/device.h"

#include <algorithm>

#include "core/budget.h"

namespace tessera {

const char* device_kind_name(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::kCpu:
      return "cpu";
    case DeviceKind::kGpu:
      return "gpu";
    case DeviceKind::kNpu:
      return "npu";
    case DeviceKind::kRemote:
      return "remote";
    case DeviceKind::kSplit:
      return "split";
  }
  return "unknown";
}

Status RunOptions::check(std::string_view where) const {
  if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
    return cancelled(std::string(where) + ": cancelled");
  }
  if (deadline != Clock::time_point::max() && Clock::now() >= deadline) {
    return deadline_exceeded(std::string(where) + ": deadline exceeded");
  }
  return Status();
}

void slice_boundary(const Graph& g, std::span<const NodeId> layers, std::vector<ValueId>* inputs,
                    std::vector<ValueId>* outputs) {
  std::vector<bool> in_slice(static_cast<size_t>(g.num_nodes()), false);
  for (NodeId n : layers) in_slice[static_cast<size_t>(n)] = true;
  std::vector<bool> produced_inside(static_cast<size_t>(g.num_values()), false);
  for (NodeId n : layers) {
    for (ValueId v : g.node(n).outputs) produced_inside[static_cast<size_t>(v)] = true;
  }
  inputs->clear();
  outputs->clear();
  for (NodeId n : layers) {
    for (ValueId v : g.node(n).inputs) {
      if (v == kNoValue || g.value(v).is_constant || produced_inside[static_cast<size_t>(v)])
        continue;
      if (std::find(inputs->begin(), inputs->end(), v) == inputs->end()) inputs->push_back(v);
    }
  }
  std::vector<bool> read_outside(static_cast<size_t>(g.num_values()), false);
  for (int n = 0; n < g.num_nodes(); ++n) {
    if (in_slice[static_cast<size_t>(n)]) continue;
    for (ValueId v : g.node(n).inputs) {
      if (v != kNoValue) read_outside[static_cast<size_t>(v)] = true;
    }
  }
  for (ValueId v : g.outputs()) read_outside[static_cast<size_t>(v)] = true;
  for (NodeId n : layers) {
    for (ValueId v : g.node(n).outputs) {
      if (read_outside[static_cast<size_t>(v)]) outputs->push_back(v);
    }
  }
}

CompileMemory compile_memory_estimate(const Graph& g, std::span<const NodeId> layers) {
  CompileMemory m;
  const size_t nv = static_cast<size_t>(g.num_values());
  // Last reader of each value inside the set (position in `layers`); outputs of the set stay.
  std::vector<int> last(nv, -1);
  std::vector<bool> counted(nv, false);
  for (size_t i = 0; i < layers.size(); ++i) {
    for (ValueId v : g.node(layers[i]).inputs) {
      if (v == kNoValue) continue;
      if (g.value(v).is_constant) {
        if (!counted[static_cast<size_t>(v)]) m.weight_bytes += g.value(v).info.byte_size();
        counted[static_cast<size_t>(v)] = true;
      } else {
        last[static_cast<size_t>(v)] = static_cast<int>(i);
      }
    }
  }
  std::vector<ValueId> ins, outs;
  slice_boundary(g, layers, &ins, &outs);
  const int end = static_cast<int>(layers.size());
  for (ValueId v : outs) last[static_cast<size_t>(v)] = end;
  uint64_t live = 0;
  for (ValueId v : ins) live += g.value(v).info.byte_size();
  m.activation_bytes = live;
  std::vector<uint64_t> freed_after(layers.size() + 1, 0);
  for (ValueId v : ins) {
    const int l = last[static_cast<size_t>(v)];
    freed_after[static_cast<size_t>(l < 0 ? 0 : l)] += g.value(v).info.byte_size();
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    for (ValueId v : g.node(layers[i]).outputs) {
      const uint64_t b = g.value(v).info.byte_size();
      live += b;
      const int l = last[static_cast<size_t>(v)];
      freed_after[static_cast<size_t>(l < static_cast<int>(i) ? static_cast<int>(i) : l)] += b;
    }
    m.activation_bytes = std::max(m.activation_bytes, live);
    live -= std::min(live, freed_after[i]);
  }
  return m;
}

Status check_compile_memory(const Graph& g, std::span<const NodeId> layers, uint64_t budget,
                            const std::string& what) {
  const CompileMemory m = compile_memory_estimate(g, layers);
  const uint64_t b = resolve_memory_budget(budget);
  if (m.total() <= b) return Status();
  return check_memory_budget(m.total(), b,
                             what + " needs about " + format_bytes(m.total()) + " (weights " +
                                 format_bytes(m.weight_bytes) + ", activations at peak " +
                                 format_bytes(m.activation_bytes) + ")");
}

Result<std::unique_ptr<Program>> Device::compile(const Graph& g, std::span<const NodeId> layers,
                                                 const CompileOptions& options) {
  if (!has_precision(options.precision)) {
    return unimplemented("device " + quote_name(name()) + " has no " +
                         precision_name(options.precision) + " kernels");
  }
  Status budget =
      check_compile_memory(g, layers, options.memory_budget,
                           "compiling " + std::to_string(layers.size()) + " layer(s) on " + name());
  if (!budget.ok()) {
    // A layer the device cannot run at all is the more useful refusal (the planner places it
    // elsewhere); only the failure path pays for this second capability check.
    Status caps = check_capabilities(*this, g, layers);
    return caps.ok() ? budget : caps;
  }
  return compile_program(g, layers, options);
}

std::string with_node_prefix(const Node& node, const std::string& message) {
  const std::string prefix = "node " + quote_name(node.name) + " (" + op_name(node.kind) + "): ";
  if (message.compare(0, prefix.size(), prefix) == 0) return message;
  return prefix + message;
}

Status check_capabilities(const Device& device, const Graph& g, std::span<const NodeId> layers) {
  for (NodeId n : layers) {
    if (n < 0 || n >= g.num_nodes()) {
      return invalid_argument("device " + quote_name(device.name()) + ": layer id " +
                              std::to_string(n) + " out of range (the graph has " +
                              std::to_string(g.num_nodes()) + " nodes)");
    }
  }
  std::string missing;
  int count = 0;
  for (NodeId n : layers) {
    const Node& node = g.node(n);
    Capability c = device.capabilities(g, node);
    if (c.supported) continue;
    if (count++ < 20) {
      missing += (missing.empty() ? "" : "; ") + with_node_prefix(node, c.reason);
    }
  }
  if (count == 0) return Status();
  return unimplemented("device " + quote_name(device.name()) + " cannot run " +
                       std::to_string(count) + " layer(s): " + missing);
}

}  // namespace tessera
