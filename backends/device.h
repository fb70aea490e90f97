// The backend contract, version 2: a Device is one compute resource with one memory space.
//
// A device answers separate questions about work the scheduler proposes:
//   info()               what it is: kind, memory, how many programs can truly overlap;
//   capabilities(node)   can it run this node (op, dtypes, attributes)? If not, why not;
//   memory_capacity()    how many bytes of weights and activations it can hold;
//   compile(layers)      prepare kernels and upload weights for a set of layers -> Program;
//   extension(name)      optional capabilities, looked up by name (ggml's get_proc_address):
//                        the contract stays small and a device adds what only it has.
// What a layer *costs* on a device is measured by the profiler (scheduler/), not guessed here.
//
// A Program runs on host tensors: it uploads its inputs, runs its layers and downloads its
// outputs, all on its device. `upload`/`download` expose the raw transfers so that their cost
// can be measured per byte (seed 000 eq. 1-2).
//
// Thread rule. A Device may be used from several threads: info(), capabilities(),
// memory_capacity(), compile(), upload(), download() and extension() are safe to call
// concurrently. A Program is run by one thread at a time (callers serialise the runs of one
// Program); Programs of one Device may run from different threads at once, the device
// serialising whatever its hardware cannot overlap (DeviceInfo::concurrency says how many runs
// truly overlap). A Program must not outlive its Device.
//
// Device names follow one scheme (backends/registry.h): reference, cpu, cpu:0-1, opencl:0,
// vulkan:0, npu:0, remote:HOST:PORT; a precision level is a virtual device, cpu:0-1#bf16.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/calibration_table.h"
#include "core/status.h"
#include "core/tensor.h"
#include "graph/graph.h"

namespace tessera {

// The version of this contract. 2: DeviceInfo, CompileOptions, RunOptions (deadline,
// cancellation and per-layer timing in one run call), extension(), the thread rule above.
inline constexpr int kDeviceApiVersion = 2;

// What kind of resource a device is (planners and the pricer treat kinds alike; the kind is
// for people, traces and policies such as "remote stages pack their hops").
enum class DeviceKind { kCpu, kGpu, kNpu, kRemote, kSplit };
const char* device_kind_name(DeviceKind kind);

struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  // Bytes of weights and activations the device can hold (memory_capacity()).
  uint64_t memory_bytes = 0;
  // Whether the host reads and writes the device's memory directly (CPU devices, integrated
  // GPUs mapping host memory): a hop from such a device costs no copy over a bus.
  bool host_visible_memory = false;
  // How many Programs of this device truly run at once (1: runs from several threads take
  // turns; 0: no limit, each run computes on its caller's thread). A cpu device on a core set
  // is 1: its pinned pool runs one program at a time.
  int concurrency = 1;
};

// The arithmetic a program computes in (docs/precision.md). kF32 is exact with respect to the
// model; the others trade accuracy for speed where the hardware has them: kBf16 keeps f32's
// range with an 8-bit mantissa (activations and weights in bf16, accumulation in f32); kInt8 is
// static quantisation (per-channel weight scales, calibrated activation ranges). A backend that
// has no kernel of the precision for a layer runs that layer in f32, converting at its edges.
enum class Precision { kF32, kBf16, kInt8 };
inline constexpr Precision kAllPrecisions[] = {Precision::kF32, Precision::kBf16, Precision::kInt8};
// "f32", "bf16", "int8".
const char* precision_name(Precision p);
// Parses a precision name; the error lists the names accepted.
Result<Precision> parse_precision(std::string_view name);

// Options fixed when a set of layers is compiled.
struct CompileOptions {
  std::string model_hash;  // the model's hash (lets a device cache or check what it compiled)
  int mhz = 0;             // DVFS level the program will run at; 0: the current level
  std::string packing;     // packing policy of a remote hop ("" for none)
  // Arithmetic of the program. A device opened as a precision level (`cpu#bf16`,
  // backends/registry.h) compiles at that level whatever this says; a device that lacks the
  // precision fails compile() with Unimplemented.
  Precision precision = Precision::kF32;
  // Bytes compile() may commit (0: the default of core/budget.h, the machine's memory or
  // TESSERA_MEMORY_BUDGET). compile() checks the estimate of compile_memory_estimate() against
  // it before the backend packs a weight or plans an activation.
  uint64_t memory_budget = 0;
  // Activation ranges for kInt8 (core/calibration_table.h; `tessera calibrate`); a device
  // compiling int8 without them fails with FailedPrecondition. Shared, read-only.
  std::shared_ptr<const CalibrationTable> calibration;
  // Keep every reduced-precision kernel a layer has, even where the device's measured kernel
  // choice would run the layer in f32 (the cpu device times a reduced layer against its f32
  // kernel plus the conversions around it, and a layer compiled alone often loses): what the
  // profiler's error measurement compiles, so that a layer's error is the error it brings
  // wherever it runs reduced (a conservative bound). Devices without such a choice ignore it.
  bool keep_reduced = false;
};

// What compiling `layers` commits at most, before any backend-specific saving: a packed copy of
// every distinct constant the layers read, and the activations live at once (inputs from outside
// the set, node outputs from their producer to their last reader in the set, outputs of the set
// to the end), walking the layers in order.
struct CompileMemory {
  uint64_t weight_bytes = 0;
  uint64_t activation_bytes = 0;  // at the peak
  uint64_t total() const { return weight_bytes + activation_bytes; }
};
CompileMemory compile_memory_estimate(const Graph& g, std::span<const NodeId> layers);

// ResourceExhausted naming `what`, the estimate's parts and the budget when the estimate of
// compiling `layers` is over `budget` (0: the default budget).
Status check_compile_memory(const Graph& g, std::span<const NodeId> layers, uint64_t budget,
                            const std::string& what);

// Options of one run of a Program.
struct RunOptions {
  using Clock = std::chrono::steady_clock;
  // The run fails with DeadlineExceeded once this time has passed (checked between layers).
  Clock::time_point deadline = Clock::time_point::max();
  // The run fails with Cancelled once this flag is set (checked between layers); may be null.
  const std::atomic<bool>* cancel = nullptr;
  // When set, the program sets (*layer_ms)[i] to the wall-clock milliseconds of its i-th layer
  // (compile order), timed inside the chained run: with the caches as the previous layers left
  // them, and with the allocation and any layout conversion a layer needs charged to it. Copying
  // the program's inputs in and outputs out is the slice boundary and charged to no layer. A
  // backend that cannot time layers inside a run returns Unimplemented.
  std::vector<double>* layer_ms = nullptr;
  // When set, a program that spans several devices (the composite split device,
  // backends/split/split_device.h) sets (*member_ms)[i] to the wall-clock milliseconds member
  // device i spent on its part of this run (its piece: scatter, execution and gather), in member
  // order; a program on one device does not touch it. What tells a slow member of a split apart
  // (scheduler/adapt/queue_monitor.h).
  std::vector<double>* member_ms = nullptr;

  static RunOptions timed(std::vector<double>* layer_ms) {
    RunOptions o;
    o.layer_ms = layer_ms;
    return o;
  }
  // Whether the run must stop now (cancelled, or past its deadline). Cheap: one atomic load
  // and, when a deadline is set, one clock read; kernels' loops call it between layers.
  bool stop_requested() const {
    return (cancel != nullptr && cancel->load(std::memory_order_relaxed)) ||
           (deadline != Clock::time_point::max() && Clock::now() >= deadline);
  }
  // OK, or Cancelled / DeadlineExceeded naming `where`.
  Status check(std::string_view where) const;
};

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

// A compiled set of layers on one device. Run by one thread at a time (see the thread rule).
class Program {
 public:
  virtual ~Program() = default;
  // Values the program reads from outside (in the order run() takes them) and produces for
  // outside (in the order run() fills them).
  virtual const std::vector<ValueId>& input_values() const = 0;
  virtual const std::vector<ValueId>& output_values() const = 0;
  // Runs the layers. `outputs` are allocated by the program when undefined, or written in place
  // when they already have the right dtype and shape. Fails with Cancelled or DeadlineExceeded
  // as `options` say (checked before the run and between layers), and times layers when
  // options.layer_ms is set.
  Status run(std::span<const Tensor> inputs, std::span<Tensor> outputs,
             const RunOptions& options = {}) {
    if (options.stop_requested()) return options.check("program");
    return execute(inputs, outputs, options);
  }
  // (optional) Overlapped frames, for a program whose run is mostly a wait on another machine
  // (a remote server): start() does this side's part of a frame (packs and sends its inputs) and
  // returns; finish() waits for the oldest started frame and writes its outputs (as run()
  // does). Frames finish in the order they started; a frame's failure is its own. A program that
  // offers this returns max_in_flight() > 1, the frames that may be started and not finished;
  // the executor's streaming driver then starts frames on the stage's actor and finishes them on
  // a thread of their own, so that packing, the link and the server work on different frames at
  // once (executor.h). Thread rule: start() and finish() may run at the same time on two threads
  // (one each); run() is not called while frames are in flight.
  virtual int max_in_flight() const { return 1; }
  Status start(std::span<const Tensor> inputs, const RunOptions& options = {}) {
    if (options.stop_requested()) return options.check("program");
    return start_frame(inputs, options);
  }
  Status finish(std::span<Tensor> outputs, const RunOptions& options = {}) {
    return finish_frame(outputs, options);
  }
  // (optional) One line per step naming the kernel that runs it, for diagnostics and tests.
  virtual std::string describe() const { return {}; }
  // Bytes the program holds while it runs: its activation memory (the arena, for backends that
  // plan one) plus weights it packed for its kernels. 0 when the backend does not know.
  virtual uint64_t peak_memory_bytes() const { return 0; }

 protected:
  // The backend's run (see run()): the cancellation and deadline are already checked once.
  virtual Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                         const RunOptions& options) = 0;
  // The backend's start() and finish() (see max_in_flight()); only called when it is > 1.
  virtual Status start_frame(std::span<const Tensor> /*inputs*/, const RunOptions& /*options*/) {
    return unimplemented("this program does not run frames overlapped");
  }
  virtual Status finish_frame(std::span<Tensor> /*outputs*/, const RunOptions& /*options*/) {
    return unimplemented("this program does not run frames overlapped");
  }
};

class Device {
 public:
  virtual ~Device() = default;

  // The name users type, e.g. "reference", "cpu:0-1".
  virtual const std::string& name() const = 0;
  // One line for `tessera devices`: what it is (library, core set, memory).
  virtual std::string description() const = 0;

  virtual DeviceInfo info() const = 0;
  virtual Capability capabilities(const Graph& g, const Node& node) const = 0;
  virtual uint64_t memory_capacity() const = 0;

  // Compiles `layers` (node ids of `g`, in topological order). `g` must outlive the Program.
  // Fails with Unimplemented when the device lacks options.precision.
  // Checks the precision, then the compile memory estimate against options.memory_budget (a
  // layer the device cannot run is refused as such even then), then compiles.
  Result<std::unique_ptr<Program>> compile(const Graph& g, std::span<const NodeId> layers,
                                           const CompileOptions& options = {});
  // Whether compile() can run programs at precision `p` (every device has f32).
  virtual bool has_precision(Precision p) const { return p == Precision::kF32; }

  virtual Result<std::unique_ptr<Buffer>> upload(const Tensor& host) = 0;
  virtual Status download(const Buffer& device, Tensor* host) = 0;

  // (optional) An optional capability by name (extension names are listed below), or null
  // when this device does not have it. The pointer stays valid while the device lives.
  virtual void* extension(std::string_view /*name*/) { return nullptr; }

 protected:
  virtual Result<std::unique_ptr<Program>> compile_program(const Graph& g,
                                                           std::span<const NodeId> layers,
                                                           const CompileOptions& options) = 0;
};

// Extension names for Device::extension(). Each names the interface the returned pointer has.
//   kExtensionDvfs: DvfsControl* — set the device's frequency level before a stage runs.
inline constexpr std::string_view kExtensionDvfs = "tessera.dvfs";

// The DVFS governor hook of a device that can change its own frequency.
class DvfsControl {
 public:
  virtual ~DvfsControl() = default;
  // The levels (MHz) the device offers, ascending.
  virtual std::vector<int> levels() const = 0;
  // Sets the level; fails when the level is not offered or the device refuses.
  virtual Status set_mhz(int mhz) = 0;
};

// The values a set of layers reads from outside the set (non-constant) and produces for outside
// it (read by a later node not in the set, or a graph output), each in first-seen order. Shared
// by every backend's compile().
void slice_boundary(const Graph& g, std::span<const NodeId> layers, std::vector<ValueId>* inputs,
                    std::vector<ValueId>* outputs);

// "node 'conv1' (Conv): <message>", or `message` unchanged when it already starts with that
// prefix (errors from ops/ and from drivers name the node themselves).
std::string with_node_prefix(const Node& node, const std::string& message);

// Checks that every layer id is in range, then every layer against device.capabilities(); the
// error lists all unsupported layers. Every backend's compile() starts with it.
Status check_capabilities(const Device& device, const Graph& g, std::span<const NodeId> layers);

}  // namespace tessera
