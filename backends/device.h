// The backend contract: a Device is one compute resource with one memory space.
//
// A device answers three separate questions about work the scheduler proposes:
//   capabilities(node)   can it run this node (op, dtypes, attributes)? If not, why not.
//   memory_capacity()    how many bytes of weights and activations it can hold.
//   compile(layers)      prepare kernels and upload weights for a set of layers -> Program.
// What a layer *costs* on a device is measured by the profiler (scheduler/), not guessed here.
//
// A Program runs on host tensors: it uploads its inputs, runs its layers and downloads its
// outputs, all on its device. `upload`/`download` expose the raw transfers so that their cost
// can be measured per byte (seed 000 eq. 1-2).
//
// Device names follow one scheme (backends/registry.h): reference, cpu, cpu:0-1, opencl:0,
// vulkan:0, npu:0, remote:HOST:PORT.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace tessera {

// Whether a device can run a node, and if not, why (shown to users and planners).
struct Capability {
  bool supported = false;
  std::string reason;  // empty when supported

  static Capability yes() { return Capability{true, {}}; }
  static Capability no(std::string why) { return Capability{false, std::move(why)}; }
};

// Device memory holding one tensor's bytes.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual size_t byte_size() const = 0;
};

// A compiled set of layers on one device.
class Program {
 public:
  virtual ~Program() = default;
  // Values the program reads from outside (in the order run() takes them) and produces for
  // outside (in the order run() fills them).
  virtual const std::vector<ValueId>& input_values() const = 0;
  virtual const std::vector<ValueId>& output_values() const = 0;
  // Runs the layers. `outputs` are allocated by the program when undefined, or written in place
  // when they already have the right dtype and shape.
  virtual Status run(std::span<const Tensor> inputs, std::span<Tensor> outputs) = 0;
  // (optional) Runs like run() and sets (*layer_ms)[i] to the wall-clock milliseconds of the
  // i-th layer of the program (compile order), timed inside the chained run: with the caches as
  // the previous layers left them, and with the allocation and any layout conversion a layer
  // needs charged to it. Copying the program's inputs in and outputs out is the slice boundary
  // and charged to no layer. The profiler times layers this way so that their costs add up to
  // the time of a slice; it times each layer alone where a backend returns Unimplemented.
  virtual Status run_timed(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                           std::vector<double>* layer_ms) {
    (void)inputs;
    (void)outputs;
    (void)layer_ms;
    return unimplemented("this backend does not time layers inside a run");
  }
  // (optional) One line per step naming the kernel that runs it, for diagnostics and tests.
  virtual std::string describe() const { return {}; }
  // Bytes the program holds while it runs: its activation memory (the arena, for backends that
  // plan one) plus weights it packed for its kernels. 0 when the backend does not know.
  virtual uint64_t peak_memory_bytes() const { return 0; }
};

class Device {
 public:
  virtual ~Device() = default;

  // The name users type, e.g. "reference", "cpu:0-1".
  virtual const std::string& name() const = 0;
  // One line for `tessera devices`: what it is (library, core set, memory).
  virtual std::string description() const = 0;

  virtual Capability capabilities(const Graph& g, const Node& node) const = 0;
  virtual uint64_t memory_capacity() const = 0;

  // Compiles `layers` (node ids of `g`, in topological order). `g` must outlive the Program.
  virtual Result<std::unique_ptr<Program>> compile(const Graph& g,
                                                   std::span<const NodeId> layers) = 0;

  virtual Result<std::unique_ptr<Buffer>> upload(const Tensor& host) = 0;
  virtual Status download(const Buffer& device, Tensor* host) = 0;
};

// The values a set of layers reads from outside the set (non-constant) and produces for outside
// it (read by a later node not in the set, or a graph output), each in first-seen order. Shared
// by every backend's compile().
void slice_boundary(const Graph& g, std::span<const NodeId> layers, std::vector<ValueId>* inputs,
                    std::vector<ValueId>* outputs);

// Checks that every layer id is in range, then every layer against device.capabilities(); the
// error lists all unsupported layers. Every backend's compile() starts with it.
Status check_capabilities(const Device& device, const Graph& g, std::span<const NodeId> layers);

}  // namespace tessera
