#include "backends/opencl/opencl_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "backends/opencl/kernel_sources.h"
#include "core/dl_error.h"

namespace tessera::opencl {

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

const char* cl_error_name(cl_int err) {
  switch (err) {
#define TESSERA_CL_ERROR(e) \
  case e:                   \
    return #e;
    TESSERA_CL_ERROR(CL_SUCCESS)
    TESSERA_CL_ERROR(CL_DEVICE_NOT_FOUND)
    TESSERA_CL_ERROR(CL_DEVICE_NOT_AVAILABLE)
    TESSERA_CL_ERROR(CL_COMPILER_NOT_AVAILABLE)
    TESSERA_CL_ERROR(CL_MEM_OBJECT_ALLOCATION_FAILURE)
    TESSERA_CL_ERROR(CL_OUT_OF_RESOURCES)
    TESSERA_CL_ERROR(CL_OUT_OF_HOST_MEMORY)
    TESSERA_CL_ERROR(CL_PROFILING_INFO_NOT_AVAILABLE)
    TESSERA_CL_ERROR(CL_MEM_COPY_OVERLAP)
    TESSERA_CL_ERROR(CL_IMAGE_FORMAT_MISMATCH)
    TESSERA_CL_ERROR(CL_IMAGE_FORMAT_NOT_SUPPORTED)
    TESSERA_CL_ERROR(CL_BUILD_PROGRAM_FAILURE)
    TESSERA_CL_ERROR(CL_MAP_FAILURE)
    TESSERA_CL_ERROR(CL_MISALIGNED_SUB_BUFFER_OFFSET)
    TESSERA_CL_ERROR(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST)
    TESSERA_CL_ERROR(CL_COMPILE_PROGRAM_FAILURE)
    TESSERA_CL_ERROR(CL_LINKER_NOT_AVAILABLE)
    TESSERA_CL_ERROR(CL_LINK_PROGRAM_FAILURE)
    TESSERA_CL_ERROR(CL_DEVICE_PARTITION_FAILED)
    TESSERA_CL_ERROR(CL_KERNEL_ARG_INFO_NOT_AVAILABLE)
    TESSERA_CL_ERROR(CL_INVALID_VALUE)
    TESSERA_CL_ERROR(CL_INVALID_DEVICE_TYPE)
    TESSERA_CL_ERROR(CL_INVALID_PLATFORM)
    TESSERA_CL_ERROR(CL_INVALID_DEVICE)
    TESSERA_CL_ERROR(CL_INVALID_CONTEXT)
    TESSERA_CL_ERROR(CL_INVALID_QUEUE_PROPERTIES)
    TESSERA_CL_ERROR(CL_INVALID_COMMAND_QUEUE)
    TESSERA_CL_ERROR(CL_INVALID_HOST_PTR)
    TESSERA_CL_ERROR(CL_INVALID_MEM_OBJECT)
    TESSERA_CL_ERROR(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR)
    TESSERA_CL_ERROR(CL_INVALID_IMAGE_SIZE)
    TESSERA_CL_ERROR(CL_INVALID_SAMPLER)
    TESSERA_CL_ERROR(CL_INVALID_BINARY)
    TESSERA_CL_ERROR(CL_INVALID_BUILD_OPTIONS)
    TESSERA_CL_ERROR(CL_INVALID_PROGRAM)
    TESSERA_CL_ERROR(CL_INVALID_PROGRAM_EXECUTABLE)
    TESSERA_CL_ERROR(CL_INVALID_KERNEL_NAME)
    TESSERA_CL_ERROR(CL_INVALID_KERNEL_DEFINITION)
    TESSERA_CL_ERROR(CL_INVALID_KERNEL)
    TESSERA_CL_ERROR(CL_INVALID_ARG_INDEX)
    TESSERA_CL_ERROR(CL_INVALID_ARG_VALUE)
    TESSERA_CL_ERROR(CL_INVALID_ARG_SIZE)
    TESSERA_CL_ERROR(CL_INVALID_KERNEL_ARGS)
    TESSERA_CL_ERROR(CL_INVALID_WORK_DIMENSION)
    TESSERA_CL_ERROR(CL_INVALID_WORK_GROUP_SIZE)
    TESSERA_CL_ERROR(CL_INVALID_WORK_ITEM_SIZE)
    TESSERA_CL_ERROR(CL_INVALID_GLOBAL_OFFSET)
    TESSERA_CL_ERROR(CL_INVALID_EVENT_WAIT_LIST)
    TESSERA_CL_ERROR(CL_INVALID_EVENT)
    TESSERA_CL_ERROR(CL_INVALID_OPERATION)
    TESSERA_CL_ERROR(CL_INVALID_GL_OBJECT)
    TESSERA_CL_ERROR(CL_INVALID_BUFFER_SIZE)
    TESSERA_CL_ERROR(CL_INVALID_MIP_LEVEL)
    TESSERA_CL_ERROR(CL_INVALID_GLOBAL_WORK_SIZE)
    TESSERA_CL_ERROR(CL_INVALID_PROPERTY)
    TESSERA_CL_ERROR(CL_INVALID_IMAGE_DESCRIPTOR)
    TESSERA_CL_ERROR(CL_INVALID_COMPILER_OPTIONS)
    TESSERA_CL_ERROR(CL_INVALID_LINKER_OPTIONS)
    TESSERA_CL_ERROR(CL_INVALID_DEVICE_PARTITION_COUNT)
#undef TESSERA_CL_ERROR
    case -1001:
      return "CL_PLATFORM_NOT_FOUND_KHR";
    default:
      return "unknown OpenCL error";
  }
}

Status cl_check(cl_int err, const std::string& what) {
  if (err == CL_SUCCESS) return Status();
  std::string msg = what + ": " + cl_error_name(err) + " (" + std::to_string(err) + ")";
  if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES ||
      err == CL_OUT_OF_HOST_MEMORY) {
    return resource_exhausted(std::move(msg));
  }
  return internal_error(std::move(msg));
}

std::string DeviceInfo::type_name() const {
  if (type & CL_DEVICE_TYPE_GPU) return "GPU";
  if (type & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
  if (type & CL_DEVICE_TYPE_CPU) return "CPU";
  return "device";
}

// ---------------------------------------------------------------------------------------------
// Discovery
// ---------------------------------------------------------------------------------------------

namespace {

std::string platform_string(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  if (clGetPlatformInfo(p, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  if (clGetPlatformInfo(p, what, n, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string device_string(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS || n == 0) return "";
  std::string s(n, '\0');
  if (clGetDeviceInfo(d, what, n, s.data(), nullptr) != CL_SUCCESS) return "";
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T device_value(cl_device_id d, cl_device_info what) {
  T v{};
  if (clGetDeviceInfo(d, what, sizeof(T), &v, nullptr) != CL_SUCCESS) return T{};
  return v;
}

}  // namespace

Result<std::vector<DeviceEntry>> enumerate_devices() {
  cl_uint num_platforms = 0;
  cl_int err = clGetPlatformIDs(0, nullptr, &num_platforms);
  // The ICD loader looks its drivers' optional entry points up with dlsym on its first call;
  // take the messages the failed lookups leave in this thread's dlerror buffer
  // (core/dl_error.h).
  take_dl_error();
  if (err == -1001 /* CL_PLATFORM_NOT_FOUND_KHR */ || (err == CL_SUCCESS && num_platforms == 0)) {
    return not_found(
        "no OpenCL platform is installed (install an OpenCL driver, e.g. pocl-opencl-icd, or a "
        "GPU vendor's ICD)");
  }
  RETURN_IF_ERROR(cl_check(err, "clGetPlatformIDs"));
  std::vector<cl_platform_id> platforms(num_platforms);
  RETURN_IF_ERROR(
      cl_check(clGetPlatformIDs(num_platforms, platforms.data(), nullptr), "clGetPlatformIDs"));
  std::vector<DeviceEntry> out;
  for (cl_platform_id p : platforms) {
    cl_uint num_devices = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &num_devices) != CL_SUCCESS) continue;
    std::vector<cl_device_id> devices(num_devices);
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, num_devices, devices.data(), nullptr) != CL_SUCCESS) {
      continue;
    }
    for (cl_device_id d : devices) {
      DeviceEntry e;
      e.platform = p;
      e.device = d;
      DeviceInfo& i = e.info;
      i.platform_name = platform_string(p, CL_PLATFORM_NAME);
      i.platform_version = platform_string(p, CL_PLATFORM_VERSION);
      i.name = device_string(d, CL_DEVICE_NAME);
      i.vendor = device_string(d, CL_DEVICE_VENDOR);
      i.driver_version = device_string(d, CL_DRIVER_VERSION);
      i.device_version = device_string(d, CL_DEVICE_VERSION);
      i.opencl_c_version = device_string(d, CL_DEVICE_OPENCL_C_VERSION);
      i.type = device_value<cl_device_type>(d, CL_DEVICE_TYPE);
      i.global_mem_bytes = device_value<cl_ulong>(d, CL_DEVICE_GLOBAL_MEM_SIZE);
      i.max_alloc_bytes = device_value<cl_ulong>(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      i.local_mem_bytes = device_value<cl_ulong>(d, CL_DEVICE_LOCAL_MEM_SIZE);
      i.max_work_group_size = device_value<size_t>(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      i.compute_units = device_value<cl_uint>(d, CL_DEVICE_MAX_COMPUTE_UNITS);
      i.max_clock_mhz = device_value<cl_uint>(d, CL_DEVICE_MAX_CLOCK_FREQUENCY);
      out.push_back(std::move(e));
    }
  }
  if (out.empty()) return not_found("the installed OpenCL platforms offer no device");
  return out;
}

std::string default_program_cache_dir() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg != nullptr && xdg[0] != '\0') return std::string(xdg) + "/tessera/opencl";
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return std::string(home) + "/.cache/tessera/opencl";
  return "";
}

// ---------------------------------------------------------------------------------------------
// Program building and the disk cache
// ---------------------------------------------------------------------------------------------

namespace {

constexpr char kCacheMagic[8] = {'T', 'S', 'R', 'C', 'L', 'B', '0', '1'};
constexpr uint64_t kMaxCachedBinary = 256ull << 20;

uint64_t fnv1a64(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kDigits[v & 15];
  return s;
}

// Everything a cached binary depends on. Stored in the entry and compared in full on load.
std::string cache_key(const DeviceInfo& info, std::string_view source, const std::string& options) {
  std::string key = "tessera-opencl-program-cache-1\n";
  for (const std::string* s :
       {&info.platform_name, &info.platform_version, &info.name, &info.vendor, &info.driver_version,
        &info.device_version, &options}) {
    key += *s;
    key += '\n';
  }
  key += "source " + hex64(fnv1a64(source)) + " " + std::to_string(source.size());
  return key;
}

void append_u64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool read_u64(std::string_view in, size_t* pos, uint64_t* v) {
  if (in.size() < *pos + 8) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i) {
    *v |= static_cast<uint64_t>(static_cast<unsigned char>(in[*pos + static_cast<size_t>(i)]))
          << (8 * i);
  }
  *pos += 8;
  return true;
}

// The binary stored in a cache entry, or nothing if the entry is missing or fails any check.
std::optional<std::string> read_cache_entry(const std::string& path, const std::string& key) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::ostringstream ss;
  ss << f.rdbuf();
  const std::string data = ss.str();
  if (data.size() < sizeof(kCacheMagic) + 24 ||
      std::memcmp(data.data(), kCacheMagic, sizeof(kCacheMagic)) != 0) {
    return std::nullopt;
  }
  size_t pos = sizeof(kCacheMagic);
  uint64_t key_len = 0, bin_len = 0, checksum = 0;
  if (!read_u64(data, &pos, &key_len) || key_len != key.size() || data.size() - pos < key_len ||
      data.compare(pos, key_len, key) != 0) {
    return std::nullopt;
  }
  pos += key_len;
  if (!read_u64(data, &pos, &bin_len) || !read_u64(data, &pos, &checksum)) return std::nullopt;
  if (bin_len == 0 || bin_len > kMaxCachedBinary || data.size() - pos != bin_len) {
    return std::nullopt;
  }
  std::string binary = data.substr(pos);
  if (fnv1a64(binary) != checksum) return std::nullopt;
  return binary;
}

// Best effort: a cache that cannot be written only costs a rebuild next time.
void write_cache_entry(const std::string& path, const std::string& key, const std::string& binary) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return;
  std::string data(kCacheMagic, sizeof(kCacheMagic));
  append_u64(&data, key.size());
  data += key;
  append_u64(&data, binary.size());
  append_u64(&data, fnv1a64(binary));
  data += binary;
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return;
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!f) {
      f.close();
      std::filesystem::remove(tmp, ec);
      return;
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) std::filesystem::remove(tmp, ec);
}

std::string build_log(cl_program program, cl_device_id device) {
  size_t n = 0;
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n) != CL_SUCCESS ||
      n == 0) {
    return "(no build log)";
  }
  std::string log(n, '\0');
  if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr) !=
      CL_SUCCESS) {
    return "(no build log)";
  }
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  constexpr size_t kMaxLog = 8000;
  if (log.size() > kMaxLog) log = log.substr(0, kMaxLog) + "\n... (build log truncated)";
  return log;
}

// The device binary of a built program (one device).
std::string program_binary(cl_program program) {
  size_t size = 0;
  if (clGetProgramInfo(program, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, nullptr) !=
          CL_SUCCESS ||
      size == 0 || size > kMaxCachedBinary) {
    return "";
  }
  std::string binary(size, '\0');
  unsigned char* ptr = reinterpret_cast<unsigned char*>(binary.data());
  if (clGetProgramInfo(program, CL_PROGRAM_BINARIES, sizeof(ptr), &ptr, nullptr) != CL_SUCCESS) {
    return "";
  }
  return binary;
}

}  // namespace

std::string program_cache_path(const std::string& cache_dir, const DeviceInfo& info,
                               std::string_view source, const std::string& options) {
  return cache_dir + "/" + hex64(fnv1a64(cache_key(info, source, options))) + ".bin";
}

Result<ProgramHandle> build_program(cl_context context, cl_device_id device, const DeviceInfo& info,
                                    std::string_view name, std::string_view source,
                                    const std::string& options, const std::string& cache_dir,
                                    bool* from_cache) {
  if (from_cache != nullptr) *from_cache = false;
  const std::string key = cache_key(info, source, options);
  const std::string path =
      cache_dir.empty() ? "" : program_cache_path(cache_dir, info, source, options);
  // Phase 1: a cached binary, if one passes every check and the driver accepts it.
  if (!path.empty()) {
    if (std::optional<std::string> binary = read_cache_entry(path, key)) {
      const size_t size = binary->size();
      const unsigned char* ptr = reinterpret_cast<const unsigned char*>(binary->data());
      cl_int binary_status = CL_SUCCESS, err = CL_SUCCESS;
      ProgramHandle p(
          clCreateProgramWithBinary(context, 1, &device, &size, &ptr, &binary_status, &err));
      if (err == CL_SUCCESS && binary_status == CL_SUCCESS && p &&
          clBuildProgram(p.get(), 1, &device, options.c_str(), nullptr, nullptr) == CL_SUCCESS) {
        if (from_cache != nullptr) *from_cache = true;
        return p;
      }
      // Rejected by the driver: fall through and rebuild (the entry is overwritten below).
    }
  }
  // Phase 2: from source.
  const char* text = source.data();
  const size_t length = source.size();
  cl_int err = CL_SUCCESS;
  ProgramHandle p(clCreateProgramWithSource(context, 1, &text, &length, &err));
  RETURN_IF_ERROR(
      cl_check(err, "clCreateProgramWithSource for kernel program '" + std::string(name) + "'"));
  err = clBuildProgram(p.get(), 1, &device, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    return internal_error("OpenCL kernel program '" + std::string(name) + "' failed to build on " +
                          quote_name(info.name) + " (" + cl_error_name(err) + "); build log:\n" +
                          build_log(p.get(), device));
  }
  // Phase 3: keep the binary for next time.
  if (!path.empty()) {
    const std::string binary = program_binary(p.get());
    if (!binary.empty()) write_cache_entry(path, key, binary);
  }
  return p;
}

// ---------------------------------------------------------------------------------------------
// Runtime
// ---------------------------------------------------------------------------------------------

namespace {

constexpr char kBuildOptions[] = "-cl-std=CL1.2";

struct RuntimeTable {
  std::mutex mu;
  std::map<int, std::shared_ptr<Runtime>> open;
};

RuntimeTable& runtime_table() {
  // Never destroyed: OpenCL drivers may already be torn down when static destructors run.
  static RuntimeTable* table = new RuntimeTable();
  return *table;
}

}  // namespace

Runtime::Runtime(int index, DeviceEntry entry) : index_(index), entry_(std::move(entry)) {}
Runtime::~Runtime() = default;

Result<std::shared_ptr<Runtime>> Runtime::open(int index) {
  RuntimeTable& table = runtime_table();
  std::lock_guard<std::mutex> lock(table.mu);
  auto it = table.open.find(index);
  if (it != table.open.end()) return it->second;

  ASSIGN_OR_RETURN(std::vector<DeviceEntry> devices, enumerate_devices());
  if (index < 0 || index >= static_cast<int>(devices.size())) {
    return not_found("opencl:" + std::to_string(index) + " does not exist: this machine has " +
                     std::to_string(devices.size()) +
                     " OpenCL device(s), opencl:0 to opencl:" + std::to_string(devices.size() - 1));
  }
  std::shared_ptr<Runtime> rt(new Runtime(index, devices[static_cast<size_t>(index)]));
  const std::string where = "opencl:" + std::to_string(index) + " (" + rt->info().name + ")";
  cl_int err = CL_SUCCESS;
  const cl_context_properties props[] = {
      CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(rt->entry_.platform), 0};
  cl_device_id dev = rt->entry_.device;
  rt->context_ = ContextHandle(clCreateContext(props, 1, &dev, nullptr, nullptr, &err));
  RETURN_IF_ERROR(cl_check(err, where + ": clCreateContext"));
  if (rt->info().max_alloc_bytes == 0 || rt->info().global_mem_bytes == 0) {
    return failed_precondition(where + " reports no global memory");
  }
  // Probe: a queue, an allocation and a transfer must work before the device is offered.
  {
    Result<QueueHandle> q = rt->create_queue();
    if (!q.ok()) return q.status().with_context(where);
    rt->transfer_queue_ = std::move(*q);
    Result<MemHandle> probe = rt->create_buffer(4096);
    if (!probe.ok()) return probe.status().with_context(where + ": probe allocation");
    std::vector<unsigned char> bytes(4096, 0x5a);
    RETURN_IF_ERROR(cl_check(clEnqueueWriteBuffer(rt->transfer_queue(), probe->get(), CL_TRUE, 0,
                                                  bytes.size(), bytes.data(), 0, nullptr, nullptr),
                             where + ": probe transfer"));
  }
  Status built = rt->build_all_programs();
  if (!built.ok()) return built.with_context(where);
  table.open[index] = rt;
  return rt;
}

Result<QueueHandle> Runtime::create_queue() const {
  cl_int err = CL_SUCCESS;
  QueueHandle q(clCreateCommandQueue(context_.get(), entry_.device, 0, &err));
  RETURN_IF_ERROR(cl_check(err, "clCreateCommandQueue"));
  return q;
}

Result<MemHandle> Runtime::create_buffer(uint64_t bytes, cl_mem_flags flags) const {
  const uint64_t size = std::max<uint64_t>(4, (bytes + 3) / 4 * 4);
  if (size > info().max_alloc_bytes) {
    return resource_exhausted("a buffer of " + std::to_string(bytes) +
                              " bytes exceeds the device's maximum allocation of " +
                              std::to_string(info().max_alloc_bytes) + " bytes");
  }
  cl_int err = CL_SUCCESS;
  MemHandle m(clCreateBuffer(context_.get(), flags, static_cast<size_t>(size), nullptr, &err));
  RETURN_IF_ERROR(cl_check(err, "clCreateBuffer(" + std::to_string(size) + " bytes)"));
  return m;
}

Result<MemHandle> Runtime::create_buffer_from(const void* data, uint64_t bytes,
                                              cl_mem_flags flags) const {
  ASSIGN_OR_RETURN(MemHandle m, create_buffer(bytes, flags));
  if (bytes == 0) return m;
  RETURN_IF_ERROR(
      cl_check(clEnqueueWriteBuffer(transfer_queue(), m.get(), CL_TRUE, 0,
                                    static_cast<size_t>(bytes), data, 0, nullptr, nullptr),
               "clEnqueueWriteBuffer(" + std::to_string(bytes) + " bytes)"));
  return m;
}

Result<cl_program> Runtime::program(std::string_view family) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = programs_.find(family);
  if (it != programs_.end()) return it->second.get();
  const std::string_view body = kernel_family_source(family);
  if (body.empty() || family == "common") {
    return internal_error("no OpenCL kernel family '" + std::string(family) + "'");
  }
  std::string source(kernel_family_source("common"));
  source += "\n";
  source += body;
  ASSIGN_OR_RETURN(ProgramHandle p,
                   build_program(context_.get(), entry_.device, info(), family, source,
                                 kBuildOptions, default_program_cache_dir()));
  cl_program raw = p.get();
  programs_.emplace(std::string(family), std::move(p));
  return raw;
}

Result<KernelHandle> Runtime::kernel(std::string_view family, const char* kernel_name) {
  ASSIGN_OR_RETURN(cl_program p, program(family));
  cl_int err = CL_SUCCESS;
  KernelHandle k(clCreateKernel(p, kernel_name, &err));
  RETURN_IF_ERROR(cl_check(err, "clCreateKernel(" + std::string(kernel_name) + ")"));
  return k;
}

Status Runtime::build_all_programs() {
  for (const KernelFamilySource& f : kernel_family_sources()) {
    if (std::string_view(f.family) == "common") continue;
    Result<cl_program> p = program(f.family);
    if (!p.ok()) return p.status();
  }
  return Status();
}

}  // namespace tessera::opencl
