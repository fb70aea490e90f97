// The opencl device: one OpenCL device (a GPU, an accelerator, or a CPU through PoCL) running
// Tessera's OpenCL C kernels.
//
//   capabilities(node)  an entry in the op tables (opencl_ops.h) whose checks pass, and every
//                       tensor of the node within CL_DEVICE_MAX_MEM_ALLOC_SIZE (and 2 GiB, so
//                       32-bit kernel indexing holds);
//   memory_capacity()   CL_DEVICE_GLOBAL_MEM_SIZE;
//   compile(layers)     uploads the weights once, plans device buffers for the intermediates
//                       (reused after their last reader), and binds every kernel launch;
//   Program::run        writes the slice inputs to the device, enqueues the launches in order on
//                       the program's own in-order queue, and reads the slice outputs back. Those
//                       two transfers are the only host<->device traffic;
//   upload/download     the raw transfers, for measuring their cost per byte.
//
// Failure handling: no platform, no device at the index, a context or probe allocation that
// fails, or kernels that do not build (the Status holds the build log) make open() fail and
// keep the device out of list_devices(); nothing here aborts.
#pragma once

#include <memory>
#include <string>

#include "backends/device.h"
#include "backends/opencl/opencl_runtime.h"
#include "backends/registry.h"

namespace tessera {

class OpenCLDevice final : public Device {
 public:
  // Opens opencl:`index` (see opencl::Runtime::open for what can fail).
  static Result<std::unique_ptr<OpenCLDevice>> open(int index);

  const std::string& name() const override { return name_; }
  std::string description() const override;
  Capability capabilities(const Graph& g, const Node& node) const override;
  // Device memory; concurrency 1 (one compute device, kernels of programs take turns).
  DeviceInfo info() const override;
  uint64_t memory_capacity() const override;
  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override;
  Status download(const Buffer& device, Tensor* host) override;

  // CL_DEVICE_MAX_MEM_ALLOC_SIZE: no single tensor may be larger.
  uint64_t max_allocation() const;
  opencl::Runtime& runtime() const { return *rt_; }

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override;

 private:
  explicit OpenCLDevice(std::shared_ptr<opencl::Runtime> rt);
  std::shared_ptr<opencl::Runtime> rt_;
  std::string name_;
};

extern const Backend kOpenCLBackend;

}  // namespace tessera
