// Loading an NPU driver: a shared library implementing backends/npu/hal.h.
//
// A driver is found by an explicit path, else the TESSERA_NPU_DRIVER environment variable, else
// the reference driver built with this Tessera. Loading checks everything that could make a
// later call crash: the library opens, exports tessera_npu_get_driver, serves HAL API major 1,
// its table is large enough and every mandatory slot is set. Each failure is a Status naming
// the file and the defect.
//
// Drivers stay loaded for the life of the process (vendor libraries are rarely safe to
// unload); loading the same path twice returns the same NpuDriver.
#pragma once

#include <memory>
#include <string>

#include "backends/npu/hal.h"
#include "core/status.h"

namespace tessera {

class NpuDriver {
 public:
  // Loads (or returns the already loaded) driver at `path`.
  static Result<std::shared_ptr<const NpuDriver>> load(const std::string& path);
  // TESSERA_NPU_DRIVER if set, else the reference driver of this build ("" if none was built).
  static std::string default_path();
  // The reference driver built with this Tessera, or "".
  static std::string reference_driver_path();

  const tnpu_driver_api& api() const { return *api_; }
  const tnpu_driver_info& info() const { return info_; }
  const std::string& path() const { return path_; }

  NpuDriver(std::string path, void* handle, const tnpu_driver_api* api, tnpu_driver_info info)
      : path_(std::move(path)), handle_(handle), api_(api), info_(info) {}

 private:
  std::string path_;
  void* handle_;
  const tnpu_driver_api* api_;
  tnpu_driver_info info_;
};

// A driver's message as Tessera prints it (untrusted_text: control bytes escaped, at most 1024
// bytes read and shown); "(the driver gave no message)" for null or empty.
std::string driver_text(const char* message);
// A Status for a failed HAL call: the code mapped to Tessera's, the message prefixed by `what`
// (driver_text of the driver's message).
Status npu_status(tnpu_status code, const std::string& what, const char* driver_message);

}  // namespace tessera
