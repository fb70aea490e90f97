// The `npu` device: slices of a model compiled into prepared subgraphs of an NPU driver
// (backends/npu/hal.h), named npu:N after the driver's N-th device.
//
// What it answers:
//   capabilities(node)  the driver's op whitelist and attribute limits (get_op_support), then
//                       the driver's exact per-node check (check_node) when it has one;
//   memory_capacity()   the driver's cap per prepared subgraph (weights + activations);
//   compile(layers)     the slice as a HAL description -> prepare(); the driver refuses what
//                       it cannot hold or run, with its message in the Status.
// A Program converts each boundary tensor from Tessera's f32 NCHW to the dtype, quantisation
// and layout the driver asks for (get_io_desc) and back; the driver converts further into its
// on-chip layout.
//
// int8 needs calibration samples: sets of *model* inputs (one tensor per graph input). For a
// slice in the middle of a model the device runs the layers before it on the reference backend
// to obtain the slice's inputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/npu/hal.h"
#include "backends/npu/npu_driver.h"
#include "backends/registry.h"

namespace tessera {

struct NpuOptions {
  std::string driver_path;    // "" -> NpuDriver::default_path()
  uint32_t precision = 0;     // TNPU_PRECISION_F16 / _INT8 / _F32; 0 -> the device default
  uint64_t memory_limit = 0;  // bytes; 0 -> the device's cap (can only lower it)
  uint32_t num_cores = 0;     // 0 -> all of the device's cores
  // Sets of model inputs for int8 calibration, each in the graph's input order.
  std::vector<std::vector<Tensor>> calibration;
  // Driver-specific device options (hal.h set_device_option), applied at open, e.g.
  // {"memory_capacity_mb", "400"} on the reference driver to emulate a bigger NPU.
  std::vector<std::pair<std::string, std::string>> driver_options;

  // Reads TESSERA_NPU_PRECISION (fp16 | int8 | fp32) into `precision`; error when malformed.
  Status apply_environment();
};

// An opened driver device, shared by the device and its programs.
struct NpuHandle;

// Timings of a program's last run (from the driver's optional perf counters, when it has them,
// plus the host-side precision conversion Tessera does).
struct NpuRunStats {
  bool driver_counters = false;
  uint64_t total_ns = 0, input_conversion_ns = 0, compute_ns = 0, output_conversion_ns = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t host_conversion_ns = 0;  // Tessera's f32 <-> driver dtype conversion, both ways
  uint64_t host_input_ns = 0;       // ... of the inputs (with the staging buffers)
  uint64_t host_output_ns = 0;      // ... of the outputs (with the output tensors)
  std::vector<uint64_t> node_ns;
};

// One run across the boundary of a subgraph: milliseconds to enter it (Tessera's f32 -> driver
// dtype conversion plus the driver's conversion into its on-chip layout) and to leave it.
struct NpuBoundaryRun {
  double in_ms = 0;
  double out_ms = 0;
};

class NpuProgram : public Program {
 public:
  // What the driver holds for this slice.
  virtual tnpu_prepared_info prepared_info() const = 0;
  virtual tnpu_io_desc io_desc(bool output, uint32_t index) const = 0;
  virtual const NpuRunStats& last_run() const = 0;
  // The driver's handle, for driver extensions found with get_proc_address (valid while the
  // program lives; node i of the prepared subgraph is the i-th layer of the slice).
  virtual tnpu_prepared prepared_handle() const = 0;
  // The driver's API table.
  virtual const tnpu_driver_api& driver_api() const = 0;
};

class NpuDevice final : public Device {
 public:
  static Result<std::unique_ptr<NpuDevice>> open(int index, NpuOptions options = {});
  ~NpuDevice() override;

  const std::string& name() const override { return name_; }
  std::string description() const override;
  Capability capabilities(const Graph& g, const Node& node) const override;
  // The driver's memory cap; concurrency 1 (the HAL device is used by one thread at a time).
  DeviceInfo info() const override;
  uint64_t memory_capacity() const override;
  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override;
  Status download(const Buffer& device, Tensor* host) override;

  // Times entering and leaving a subgraph whose input and output are f32 tensors of about
  // `f32_bytes` bytes ([1, 32, 1, W], a Relu on the device): `repeat` runs after `warmup`, read
  // from the driver's counters. This is the NPU's transfer cost (seed 000 eq. 1-2): HAL 1.x has
  // no device buffers, so what a tensor pays to move is this conversion. Unimplemented when the
  // driver reports no counters (neither execute_profiled nor get_perf_counters).
  Result<std::vector<NpuBoundaryRun>> time_boundary(uint64_t f32_bytes, int warmup, int repeat);

  const NpuDriver& driver() const;
  const tnpu_device_info& hal_info() const { return info_; }
  const std::vector<tnpu_op_support>& ops() const { return ops_; }
  uint32_t precision() const { return precision_; }

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override;

 private:
  NpuDevice() = default;
  // compile() with the slice's int8 calibration inputs given (nullptr: computed from
  // options_.calibration, which are model inputs).
  Result<std::unique_ptr<Program>> compile_slice(
      const Graph& g, std::span<const NodeId> layers,
      const std::vector<std::vector<Tensor>>* slice_calibration);
  std::string name_;
  std::shared_ptr<NpuHandle> handle_;
  tnpu_device_info info_{};
  std::vector<tnpu_op_support> ops_;
  uint32_t precision_ = 0;
  NpuOptions options_;
};

// "fp16", "int8", "fp32" for a TNPU_PRECISION_* bit.
const char* npu_precision_name(uint32_t precision);

extern const Backend kNpuBackend;

}  // namespace tessera
