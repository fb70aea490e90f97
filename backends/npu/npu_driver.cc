#include "backends/npu/npu_driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "core/dl_error.h"
#include "core/install_paths.h"

namespace tessera {

std::string driver_text(const char* message) {
  if (message == nullptr || *message == '\0') return "(the driver gave no message)";
  // Read at most a little past the cap: a driver's string need not be short.
  const size_t cap = 1024;
  return untrusted_text(std::string_view(message, strnlen(message, cap + 1)), cap);
}

Status npu_status(tnpu_status code, const std::string& what, const char* driver_message) {
  const std::string msg = what + ": " + driver_text(driver_message);
  switch (code) {
    case TNPU_OK:
      return Status();
    case TNPU_ERR_INVALID_ARGUMENT:
      return invalid_argument(msg);
    case TNPU_ERR_UNSUPPORTED:
      return unimplemented(msg);
    case TNPU_ERR_OUT_OF_MEMORY:
      return resource_exhausted(msg);
    case TNPU_ERR_NOT_FOUND:
      return not_found(msg);
    case TNPU_ERR_VERSION:
      return failed_precondition(msg);
    case TNPU_ERR_DEVICE:
    case TNPU_ERR_INTERNAL:
      return internal_error(msg);
  }
  return internal_error(msg + " (unknown HAL status " + std::to_string(static_cast<int>(code)) +
                        ")");
}

std::string NpuDriver::reference_driver_path() {
  std::string installed = find_installed(InstalledFile::kNpuReferenceDriver);
  if (!installed.empty()) return installed;
#ifdef TESSERA_NPU_REFERENCE_DRIVER
  return TESSERA_NPU_REFERENCE_DRIVER;
#else
  return "";
#endif
}

std::string NpuDriver::default_path() {
  const char* env = std::getenv("TESSERA_NPU_DRIVER");
  if (env != nullptr && *env != '\0') return env;
  return reference_driver_path();
}

namespace {

// The mandatory slots of a 1.0 table, by name, for the error message.
struct Slot {
  const char* name;
  bool set;
};

std::vector<Slot> mandatory_slots(const tnpu_driver_api& a) {
  return {{"get_driver_info", a.get_driver_info != nullptr},
          {"driver_last_error", a.driver_last_error != nullptr},
          {"open_device", a.open_device != nullptr},
          {"close_device", a.close_device != nullptr},
          {"get_device_info", a.get_device_info != nullptr},
          {"device_last_error", a.device_last_error != nullptr},
          {"get_op_count", a.get_op_count != nullptr},
          {"get_op_support", a.get_op_support != nullptr},
          {"prepare", a.prepare != nullptr},
          {"get_prepared_info", a.get_prepared_info != nullptr},
          {"get_io_desc", a.get_io_desc != nullptr},
          {"execute", a.execute != nullptr},
          {"release", a.release != nullptr},
          {"prepared_last_error", a.prepared_last_error != nullptr}};
}

Result<std::shared_ptr<const NpuDriver>> load_uncached(const std::string& path) {
  const std::string where = "NPU driver " + quote_name(path);
  // RTLD_NODELETE: a driver is never unmapped, even when refused, so thread-local state and
  // threads it started stay valid for the life of the process.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr) {
    const std::string err = take_dl_error();
    return not_found(where + " cannot be loaded: " + (err.empty() ? "dlopen failed" : err) +
                     " (set TESSERA_NPU_DRIVER to a driver library)");
  }
  auto close_and = [handle](Status s) {
    dlclose(handle);
    return s;
  };
  take_dl_error();
  void* sym = dlsym(handle, TNPU_ENTRY_SYMBOL);
  if (sym == nullptr) {
    take_dl_error();
    return close_and(failed_precondition(where + " does not export " TNPU_ENTRY_SYMBOL
                                                 ": it is not a Tessera NPU HAL driver"));
  }
  auto entry = reinterpret_cast<tnpu_get_driver_fn>(sym);
  const tnpu_driver_api* api = entry(TNPU_API_VERSION);
  if (api == nullptr) {
    return close_and(failed_precondition(where + " does not implement HAL API " +
                                         std::to_string(TNPU_API_VERSION_MAJOR) +
                                         ".x (its entry point returned no table when asked for " +
                                         std::to_string(TNPU_API_VERSION_MAJOR) + "." +
                                         std::to_string(TNPU_API_VERSION_MINOR) + ")"));
  }
  if (TNPU_VERSION_MAJOR(api->api_version) != TNPU_API_VERSION_MAJOR) {
    return close_and(failed_precondition(
        where + " implements HAL API " + std::to_string(TNPU_VERSION_MAJOR(api->api_version)) +
        "." + std::to_string(TNPU_VERSION_MINOR(api->api_version)) + ", this Tessera speaks " +
        std::to_string(TNPU_API_VERSION_MAJOR) + ".x"));
  }
  if (api->struct_size < TNPU_API_V1_MIN_SIZE) {
    return close_and(
        failed_precondition(where + ": its function table is " + std::to_string(api->struct_size) +
                            " bytes, smaller than the " + std::to_string(TNPU_API_V1_MIN_SIZE) +
                            " bytes of the mandatory HAL 1.0 slots"));
  }
  std::string missing;
  for (const Slot& s : mandatory_slots(*api)) {
    if (!s.set) missing += (missing.empty() ? "" : ", ") + std::string(s.name);
  }
  if (!missing.empty()) {
    return close_and(
        failed_precondition(where + " leaves mandatory HAL slot(s) unset: " + missing));
  }
  tnpu_driver_info info{};
  info.struct_size = sizeof(info);
  const tnpu_status st = api->get_driver_info(&info);
  if (st != TNPU_OK) {
    return close_and(npu_status(st, where + ": get_driver_info failed", api->driver_last_error()));
  }
  info.name[sizeof(info.name) - 1] = '\0';
  info.vendor[sizeof(info.vendor) - 1] = '\0';
  return std::shared_ptr<const NpuDriver>(new NpuDriver(path, handle, api, info));
}

}  // namespace

Result<std::shared_ptr<const NpuDriver>> NpuDriver::load(const std::string& path) {
  if (path.empty()) {
    return not_found(
        "no NPU driver: set TESSERA_NPU_DRIVER to a HAL driver library (this build has no "
        "reference driver)");
  }
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const NpuDriver>> loaded;
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded.find(path);
  if (it != loaded.end()) return it->second;
  ASSIGN_OR_RETURN(std::shared_ptr<const NpuDriver> d, load_uncached(path));
  loaded[path] = d;
  return d;
}

}  // namespace tessera
