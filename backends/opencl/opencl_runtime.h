// The OpenCL runtime under the opencl device: platform and device discovery, one context per
// device, RAII handles for OpenCL objects, and the program cache.
//
// Discovery. Devices are numbered across all platforms in clGetPlatformIDs order, and within a
// platform in clGetDeviceIDs(CL_DEVICE_TYPE_ALL) order: GPUs, accelerators and CPU devices alike
// (PoCL exposes the host CPU, which is how CI tests this backend). `opencl:N` names entry N.
//
// Programs. Kernels are OpenCL C 1.2 sources grouped by op family (backends/opencl/kernels/*.cl,
// embedded at build time). A family's program is built once per context, on first use. Built
// binaries are kept on disk, keyed by a hash of the device name, vendor, driver and platform
// versions, the build options and the source text, under $XDG_CACHE_HOME/tessera/opencl (or
// ~/.cache/tessera/opencl). A cache entry carries a header with the key and a checksum of the
// binary; an entry that fails any check, or that the driver refuses to build, is rebuilt from
// source and rewritten, never trusted.
//
// Every OpenCL call's error code becomes a Status naming the call and the code; a build failure
// carries the compiler's build log.
#pragma once

#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tessera::opencl {

// "CL_OUT_OF_RESOURCES" for -5, ...
const char* cl_error_name(cl_int err);
// OK when err == CL_SUCCESS, else "<what>: <CL_ERROR_NAME> (<code>)" with a code that matches
// the failure (ResourceExhausted for allocation failures, Internal otherwise).
Status cl_check(cl_int err, const std::string& what);

// A reference-counted OpenCL handle released by its clRelease* function.
template <typename T, cl_int (*Release)(T)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T h) : h_(h) {}
  ~Handle() { reset(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle(Handle&& o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = std::exchange(o.h_, nullptr);
    }
    return *this;
  }
  T get() const { return h_; }
  explicit operator bool() const { return h_ != nullptr; }
  void reset() {
    if (h_ != nullptr) Release(h_);
    h_ = nullptr;
  }

 private:
  T h_ = nullptr;
};

using ContextHandle = Handle<cl_context, clReleaseContext>;
using QueueHandle = Handle<cl_command_queue, clReleaseCommandQueue>;
using ProgramHandle = Handle<cl_program, clReleaseProgram>;
using KernelHandle = Handle<cl_kernel, clReleaseKernel>;
using MemHandle = Handle<cl_mem, clReleaseMemObject>;

// What a device says about itself.
struct DeviceInfo {
  std::string platform_name;
  std::string platform_version;
  std::string name;
  std::string vendor;
  std::string driver_version;
  std::string device_version;    // "OpenCL 3.0 ..."
  std::string opencl_c_version;  // "OpenCL C 1.2 ..."
  cl_device_type type = 0;
  uint64_t global_mem_bytes = 0;
  uint64_t max_alloc_bytes = 0;  // CL_DEVICE_MAX_MEM_ALLOC_SIZE
  uint64_t local_mem_bytes = 0;
  size_t max_work_group_size = 0;
  uint32_t compute_units = 0;
  uint32_t max_clock_mhz = 0;

  // "GPU", "CPU", "accelerator"
  std::string type_name() const;
};

// One device found by discovery.
struct DeviceEntry {
  cl_platform_id platform = nullptr;
  cl_device_id device = nullptr;
  DeviceInfo info;
};

// Every device of every platform, in `opencl:N` order. NotFound when there is no platform.
Result<std::vector<DeviceEntry>> enumerate_devices();

// The directory of the on-disk program cache ($XDG_CACHE_HOME/tessera/opencl or
// $HOME/.cache/tessera/opencl); empty when neither variable is set (no disk cache then).
std::string default_program_cache_dir();

// An open device: its context and the programs built for it. Shared by every Device object and
// Program naming the same `opencl:N` in a process (see Runtime::open).
class Runtime {
 public:
  // Opens device `index` (creating its context once per process; later calls share it). Fails,
  // with a Status saying why, when the index does not exist, the context cannot be created, a
  // probe allocation fails, or the kernel programs do not build.
  static Result<std::shared_ptr<Runtime>> open(int index);

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;
  ~Runtime();

  int index() const { return index_; }
  const DeviceInfo& info() const { return entry_.info; }
  cl_device_id device() const { return entry_.device; }
  cl_context context() const { return context_.get(); }

  // A new in-order command queue on this device.
  Result<QueueHandle> create_queue() const;
  // The queue for stand-alone transfers (weight uploads, Device::upload/download), created
  // once with the runtime. OpenCL 1.2 queues are safe to use from several threads.
  cl_command_queue transfer_queue() const { return transfer_queue_.get(); }

  // A device buffer of `bytes` (rounded up to 4, never 0). ResourceExhausted, and no call into
  // OpenCL, when `bytes` exceeds the device's max allocation; ResourceExhausted when the
  // driver cannot allocate.
  Result<MemHandle> create_buffer(uint64_t bytes, cl_mem_flags flags = CL_MEM_READ_WRITE) const;
  // A buffer holding a copy of `bytes` host bytes.
  Result<MemHandle> create_buffer_from(const void* data, uint64_t bytes,
                                       cl_mem_flags flags = CL_MEM_READ_ONLY) const;

  // A kernel of family program `family` (a kernels/<family>.cl file), building the program on
  // first use.
  Result<KernelHandle> kernel(std::string_view family, const char* kernel_name);

  // Builds every family program now (open() does this, so a device whose kernels do not build
  // is never offered).
  Status build_all_programs();

 private:
  Runtime(int index, DeviceEntry entry);
  Result<cl_program> program(std::string_view family);

  int index_;
  DeviceEntry entry_;
  ContextHandle context_;
  QueueHandle transfer_queue_;
  std::mutex mu_;
  std::map<std::string, ProgramHandle, std::less<>> programs_;
};

// Builds `source` for `device` in `context` through the disk cache in `cache_dir` (no disk
// cache when empty). On a build error the Status holds `name` and the build log. `from_cache`,
// when given, tells whether a cached binary was used.
Result<ProgramHandle> build_program(cl_context context, cl_device_id device, const DeviceInfo& info,
                                    std::string_view name, std::string_view source,
                                    const std::string& options, const std::string& cache_dir,
                                    bool* from_cache = nullptr);

// The file a program with these properties is cached in, inside `cache_dir`.
std::string program_cache_path(const std::string& cache_dir, const DeviceInfo& info,
                               std::string_view source, const std::string& options);

}  // namespace tessera::opencl
