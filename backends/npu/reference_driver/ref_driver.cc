// The reference NPU driver's HAL entry points: handles, options, error messages and the
// exported table. Every entry point catches C++ exceptions so that none crosses the C ABI.
//
// Configuration (environment, read when a device is opened; set_device_option overrides):
//   TESSERA_NPU_REF_MEMORY_MB  memory cap per prepared subgraph in MB (default 100)
//   TESSERA_NPU_REF_CORES      cores (threads) a device computes on (default 1)
//   TESSERA_NPU_REF_DEVICES    how many devices the driver exposes (default 1, at most 8)
// Device options (set_device_option): memory_capacity_mb, num_cores, accumulator (fp32 | fp16:
// how fp16 convolutions, fully connected layers and average pooling accumulate; default fp32, as
// NPU MAC arrays), int8_calibration (minmax | percentile | mse: how int8 activation ranges are
// chosen from the calibration inputs, default mse; see ref_calibration.h), int8_layer_report (0 |
// 1: record each node's int8 error against fp16 over the calibration inputs while preparing, for
// the "tnpu_ref_node_error" extension; default 0).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <thread>

#include "backends/npu/hal.h"
#include "backends/npu/reference_driver/ref_model.h"

struct tnpu_device_s {
  uint32_t index = 0;
  uint64_t memory_cap = 100ull * 1000 * 1000;
  uint32_t num_cores = 1;
  bool fp16_accumulator = false;
  tnpu_ref::CalibrationMethod calibration_method = tnpu_ref::CalibrationMethod::kMse;
  bool layer_report = false;
  std::string last_error;
};

struct tnpu_prepared_s {
  tnpu_device_s* device = nullptr;
  std::unique_ptr<tnpu_ref::Program> program;
  std::string last_error;
};

namespace {

using tnpu_ref::Error;

constexpr uint32_t kDriverVersion = 1;
constexpr uint32_t kMaxDevices = 8;

thread_local std::string g_driver_error;

// Reads a positive integer from the environment, `def` when unset; false when malformed.
bool env_uint(const char* name, uint64_t def, uint64_t max, uint64_t* out) {
  const char* s = std::getenv(name);
  *out = def;
  if (s == nullptr || *s == '\0') return true;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s, &end, 10);
  if (*end != '\0' || v == 0 || v > max) return false;
  *out = v;
  return true;
}

uint32_t device_count() {
  uint64_t n = 1;
  if (!env_uint("TESSERA_NPU_REF_DEVICES", 1, kMaxDevices, &n)) return 1;
  return static_cast<uint32_t>(n);
}

tnpu_status set_error(std::string* slot, const Error& e) {
  *slot = e.message;
  return e.status;
}

// Copies a driver-filled struct into a caller's one of `out_size` bytes (the caller's
// struct_size), keeping the caller's struct_size: older callers get the prefix they know.
template <typename S>
void copy_out(const S& full, S* out) {
  const uint32_t n =
      out->struct_size < sizeof(S) ? out->struct_size : static_cast<uint32_t>(sizeof(S));
  const uint32_t keep = out->struct_size;
  std::memcpy(static_cast<void*>(out), &full, n);
  out->struct_size = keep;
}

template <typename F>
tnpu_status guarded(std::string* slot, F&& f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    *slot = "out of host memory";
    return TNPU_ERR_OUT_OF_MEMORY;
  } catch (...) {
    *slot = "internal error (exception in the reference driver)";
    return TNPU_ERR_INTERNAL;
  }
}

tnpu_status get_driver_info(tnpu_driver_info* out) {
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    g_driver_error = "get_driver_info: null output or struct_size 0";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  tnpu_driver_info info{};
  info.struct_size = sizeof(info);
  std::snprintf(info.name, sizeof(info.name), "tessera-reference-npu");
  std::snprintf(info.vendor, sizeof(info.vendor), "Tessera");
  info.driver_version = kDriverVersion;
  info.device_count = device_count();
  copy_out(info, out);
  return TNPU_OK;
}

const char* driver_last_error() {
  return g_driver_error.c_str();
}

tnpu_status open_device(uint32_t index, tnpu_device* out) {
  return guarded(&g_driver_error, [&]() -> tnpu_status {
    if (out == nullptr) {
      g_driver_error = "open_device: null output";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    *out = nullptr;
    const uint32_t count = device_count();
    if (index >= count) {
      g_driver_error = "no NPU device " + std::to_string(index) + " (the reference driver has " +
                       std::to_string(count) + "; set TESSERA_NPU_REF_DEVICES for more)";
      return TNPU_ERR_NOT_FOUND;
    }
    uint64_t mem_mb = 100, cores = 1;
    if (!env_uint("TESSERA_NPU_REF_MEMORY_MB", 100, 1u << 20, &mem_mb)) {
      g_driver_error = "TESSERA_NPU_REF_MEMORY_MB must be a whole number of MB in [1, 1048576]";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    if (!env_uint("TESSERA_NPU_REF_CORES", 1, 256, &cores)) {
      g_driver_error = "TESSERA_NPU_REF_CORES must be a core count in [1, 256]";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    auto* d = new tnpu_device_s();
    d->index = index;
    d->memory_cap = mem_mb * 1000 * 1000;
    d->num_cores = static_cast<uint32_t>(cores);
    *out = d;
    return TNPU_OK;
  });
}

void close_device(tnpu_device device) {
  delete device;
}

tnpu_status get_device_info(tnpu_device d, tnpu_device_info* out) {
  if (d == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    d->last_error = "get_device_info: null output or struct_size 0";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  tnpu_device_info info{};
  info.struct_size = sizeof(info);
  const bool f16 = tnpu_ref::fp16_available();
  std::snprintf(info.name, sizeof(info.name), "reference NPU %u (fp16/int8, %u core%s)", d->index,
                d->num_cores, d->num_cores == 1 ? "" : "s");
  info.precisions = f16 ? (TNPU_PRECISION_F16 | TNPU_PRECISION_INT8) : 0;
  info.default_precision = f16 ? TNPU_PRECISION_F16 : 0;
  info.memory_capacity = d->memory_cap;
  info.num_cores = d->num_cores;
  info.max_rank = 4;
  info.max_batch = 0;
  info.max_channels = 65535;
  copy_out(info, out);
  return TNPU_OK;
}

const char* device_last_error(tnpu_device d) {
  return d ? d->last_error.c_str() : "";
}

uint32_t get_op_count(tnpu_device d) {
  return d ? static_cast<uint32_t>(tnpu_ref::op_support_table().size()) : 0;
}

tnpu_status get_op_support(tnpu_device d, uint32_t index, tnpu_op_support* out) {
  if (d == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  const auto& table = tnpu_ref::op_support_table();
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    d->last_error = "get_op_support: null output or struct_size 0";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  if (index >= table.size()) {
    d->last_error = "op index " + std::to_string(index) + " out of range (" +
                    std::to_string(table.size()) + " ops)";
    return TNPU_ERR_NOT_FOUND;
  }
  copy_out(table[index], out);
  return TNPU_OK;
}

tnpu_status prepare(tnpu_device d, const tnpu_graph* graph, const tnpu_prepare_options* options,
                    tnpu_prepared* out) {
  if (d == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  return guarded(&d->last_error, [&]() -> tnpu_status {
    if (out == nullptr)
      return set_error(&d->last_error,
                       tnpu_ref::fail(TNPU_ERR_INVALID_ARGUMENT, "prepare: null output"));
    *out = nullptr;
    tnpu_ref::Options opt;
    opt.precision = TNPU_PRECISION_F16;
    opt.memory_cap = d->memory_cap;
    opt.num_cores = d->num_cores;
    opt.fp16_accumulator = d->fp16_accumulator;
    opt.calibration_method = d->calibration_method;
    opt.layer_report = d->layer_report;
    if (options != nullptr) {
      if (options->struct_size < offsetof(tnpu_prepare_options, calibration) + sizeof(void*))
        return set_error(&d->last_error, tnpu_ref::fail(TNPU_ERR_INVALID_ARGUMENT,
                                                        "prepare options: struct_size too small"));
      if (options->precision != 0) opt.precision = options->precision;
      if (options->memory_limit != 0 && options->memory_limit < opt.memory_cap)
        opt.memory_cap = options->memory_limit;
      if (options->num_cores != 0)
        opt.num_cores = options->num_cores < d->num_cores ? options->num_cores : d->num_cores;
      opt.calibration = options->calibration;
    }
    tnpu_ref::Model model;
    Error e = tnpu_ref::parse_model(graph, &model);
    if (!e.ok()) return set_error(&d->last_error, e);
    std::unique_ptr<tnpu_ref::Program> program;
    e = tnpu_ref::prepare_program(std::move(model), opt, &program);
    if (!e.ok()) return set_error(&d->last_error, e);
    auto* p = new tnpu_prepared_s();
    p->device = d;
    p->program = std::move(program);
    *out = p;
    d->last_error.clear();
    return TNPU_OK;
  });
}

tnpu_status get_prepared_info(tnpu_prepared p, tnpu_prepared_info* out) {
  if (p == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    p->last_error = "get_prepared_info: null output or struct_size 0";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  tnpu_prepared_info info{};
  info.struct_size = sizeof(info);
  info.precision = p->program->precision();
  info.num_inputs = static_cast<uint32_t>(p->program->model().inputs.size());
  info.num_outputs = static_cast<uint32_t>(p->program->model().outputs.size());
  info.weight_bytes = p->program->weight_bytes();
  info.activation_bytes = p->program->activation_bytes();
  copy_out(info, out);
  return TNPU_OK;
}

tnpu_status get_io_desc(tnpu_prepared p, uint32_t is_output, uint32_t index, tnpu_io_desc* out) {
  if (p == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  if (out == nullptr || out->struct_size < sizeof(uint32_t)) {
    p->last_error = "get_io_desc: null output or struct_size 0";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  const auto& m = p->program->model();
  const size_t count = is_output ? m.outputs.size() : m.inputs.size();
  if (index >= count) {
    p->last_error = std::string(is_output ? "output" : "input") + " index " +
                    std::to_string(index) + " out of range (" + std::to_string(count) + ")";
    return TNPU_ERR_NOT_FOUND;
  }
  copy_out(p->program->io_desc(is_output != 0, index), out);
  return TNPU_OK;
}

tnpu_status execute(tnpu_prepared p, const tnpu_buffer* inputs, uint32_t num_inputs,
                    const tnpu_buffer* outputs, uint32_t num_outputs) {
  if (p == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  return guarded(&p->last_error, [&]() -> tnpu_status {
    const Error e = p->program->execute(inputs, num_inputs, outputs, num_outputs);
    if (!e.ok()) return set_error(&p->last_error, e);
    p->last_error.clear();
    return TNPU_OK;
  });
}

void release(tnpu_prepared p) {
  delete p;
}

const char* prepared_last_error(tnpu_prepared p) {
  return p ? p->last_error.c_str() : "";
}

tnpu_status check_node(tnpu_device d, const tnpu_graph* graph, uint32_t node_index) {
  if (d == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  return guarded(&d->last_error, [&]() -> tnpu_status {
    if (graph != nullptr && node_index >= graph->num_nodes)
      return set_error(&d->last_error,
                       tnpu_ref::fail(TNPU_ERR_NOT_FOUND, "node index out of range"));
    tnpu_ref::Model model;
    const Error e = tnpu_ref::parse_model(graph, &model, static_cast<int>(node_index));
    if (!e.ok()) return set_error(&d->last_error, e);
    d->last_error.clear();
    return TNPU_OK;
  });
}

tnpu_status set_device_option(tnpu_device d, const char* key, const char* value) {
  if (d == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  if (key == nullptr || value == nullptr) {
    d->last_error = "set_device_option: null key or value";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  char* end = nullptr;
  const unsigned long long v = std::strtoull(value, &end, 10);
  const bool number = *value != '\0' && *end == '\0' && v > 0;
  if (std::strcmp(key, "memory_capacity_mb") == 0) {
    if (!number || v > (1u << 20)) {
      d->last_error = "memory_capacity_mb must be a whole number in [1, 1048576], got '" +
                      std::string(value) + "'";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    d->memory_cap = v * 1000 * 1000;
    return TNPU_OK;
  }
  if (std::strcmp(key, "accumulator") == 0) {
    if (std::strcmp(value, "fp32") != 0 && std::strcmp(value, "fp16") != 0) {
      d->last_error = "accumulator must be fp32 or fp16, got '" + std::string(value) + "'";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    d->fp16_accumulator = std::strcmp(value, "fp16") == 0;
    return TNPU_OK;
  }
  if (std::strcmp(key, "int8_calibration") == 0) {
    if (!tnpu_ref::parse_calibration_method(value, &d->calibration_method)) {
      d->last_error =
          "int8_calibration must be minmax, percentile or mse, got '" + std::string(value) + "'";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    return TNPU_OK;
  }
  if (std::strcmp(key, "int8_layer_report") == 0) {
    if (std::strcmp(value, "0") != 0 && std::strcmp(value, "1") != 0) {
      d->last_error = "int8_layer_report must be 0 or 1, got '" + std::string(value) + "'";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    d->layer_report = std::strcmp(value, "1") == 0;
    return TNPU_OK;
  }
  if (std::strcmp(key, "num_cores") == 0) {
    if (!number || v > 256) {
      d->last_error = "num_cores must be in [1, 256], got '" + std::string(value) + "'";
      return TNPU_ERR_INVALID_ARGUMENT;
    }
    d->num_cores = static_cast<uint32_t>(v);
    return TNPU_OK;
  }
  d->last_error = "unknown device option '" + std::string(key) +
                  "' (the reference driver knows memory_capacity_mb, num_cores, accumulator, "
                  "int8_calibration and int8_layer_report)";
  return TNPU_ERR_NOT_FOUND;
}

tnpu_status get_perf_counters(tnpu_prepared p, tnpu_perf_counters* out) {
  if (p == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  if (out == nullptr ||
      out->struct_size < offsetof(tnpu_perf_counters, num_node_ns) + sizeof(uint32_t)) {
    p->last_error = "get_perf_counters: null output or struct_size too small";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  uint64_t* node_ns = out->node_ns;
  const uint32_t num = out->num_node_ns;
  tnpu_perf_counters c = p->program->counters();
  c.node_ns = node_ns;
  c.num_node_ns = num;
  copy_out(c, out);
  const auto& per_node = p->program->node_ns();
  for (uint32_t i = 0; node_ns != nullptr && i < num && i < per_node.size(); ++i)
    node_ns[i] = per_node[i];
  return TNPU_OK;
}

// HAL 1.1: execute, then the per-node times of that run (the same timers as get_perf_counters).
tnpu_status execute_profiled(tnpu_prepared p, const tnpu_buffer* inputs, uint32_t num_inputs,
                             const tnpu_buffer* outputs, uint32_t num_outputs,
                             tnpu_execute_profile* profile) {
  if (p == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  if (profile == nullptr || profile->struct_size < TNPU_EXECUTE_PROFILE_MIN_SIZE) {
    p->last_error = "execute_profiled: null profile or struct_size below " +
                    std::to_string(TNPU_EXECUTE_PROFILE_MIN_SIZE);
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  const uint32_t nodes = static_cast<uint32_t>(p->program->node_ns().size());
  profile->num_nodes = nodes;
  if (profile->node_ns == nullptr || profile->node_capacity < nodes) {
    p->last_error = "execute_profiled: node_ns holds " + std::to_string(profile->node_capacity) +
                    " entries" + (profile->node_ns ? "" : " at null") + ", the subgraph has " +
                    std::to_string(nodes) + " nodes";
    return TNPU_ERR_INVALID_ARGUMENT;
  }
  const tnpu_status st = execute(p, inputs, num_inputs, outputs, num_outputs);
  if (st != TNPU_OK) return st;
  const std::vector<uint64_t>& per_node = p->program->node_ns();
  std::copy(per_node.begin(), per_node.end(), profile->node_ns);
  const tnpu_perf_counters& c = p->program->counters();
  tnpu_execute_profile full = *profile;
  full.input_conversion_ns = c.input_conversion_ns;
  full.compute_ns = c.compute_ns;
  full.output_conversion_ns = c.output_conversion_ns;
  full.total_ns = c.total_ns;
  copy_out(full, profile);
  return TNPU_OK;
}

// Extension "tnpu_ref_tensor_range": the [lo, hi] that tensor `tensor` (an index into the
// description) of an int8 prepared subgraph is quantised to, as calibration chose it.
tnpu_status ext_tensor_range(tnpu_prepared p, uint32_t tensor, float* lo, float* hi) {
  if (p == nullptr || lo == nullptr || hi == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  if (!p->program->tensor_range(tensor, lo, hi)) {
    p->last_error = "no calibrated range for tensor " + std::to_string(tensor);
    return TNPU_ERR_NOT_FOUND;
  }
  return TNPU_OK;
}

// Extension "tnpu_ref_node_error": node `node`'s int8 error against fp16 over the calibration
// inputs (relative L2 of its output: `total` with everything before it, `own` its own
// quantisation), for subgraphs prepared with device option int8_layer_report=1.
tnpu_status ext_node_error(tnpu_prepared p, uint32_t node, double* total, double* own) {
  if (p == nullptr || total == nullptr || own == nullptr) return TNPU_ERR_INVALID_ARGUMENT;
  tnpu_ref::NodeError e;
  if (!p->program->node_error(node, &e)) {
    p->last_error = "no int8 error recorded for node " + std::to_string(node) +
                    " (prepare in int8 with device option int8_layer_report=1)";
    return TNPU_ERR_NOT_FOUND;
  }
  *total = e.total;
  *own = e.own;
  return TNPU_OK;
}

void* get_proc_address(const char* name) {
  if (name != nullptr && std::strcmp(name, "tnpu_ref_tensor_range") == 0)
    return reinterpret_cast<void*>(&ext_tensor_range);
  if (name != nullptr && std::strcmp(name, "tnpu_ref_node_error") == 0)
    return reinterpret_cast<void*>(&ext_node_error);
  return nullptr;
}

const tnpu_driver_api kApi = {
    .api_version = TNPU_API_VERSION,
    .struct_size = sizeof(tnpu_driver_api),
    .get_driver_info = get_driver_info,
    .driver_last_error = driver_last_error,
    .open_device = open_device,
    .close_device = close_device,
    .get_device_info = get_device_info,
    .device_last_error = device_last_error,
    .get_op_count = get_op_count,
    .get_op_support = get_op_support,
    .prepare = prepare,
    .get_prepared_info = get_prepared_info,
    .get_io_desc = get_io_desc,
    .execute = execute,
    .release = release,
    .prepared_last_error = prepared_last_error,
    .check_node = check_node,
    .set_device_option = set_device_option,
    .get_perf_counters = get_perf_counters,
    .get_proc_address = get_proc_address,
    .execute_profiled = execute_profiled,
};

}  // namespace

extern "C" __attribute__((visibility("default"))) const tnpu_driver_api* tessera_npu_get_driver(
    uint32_t requested_api_version) {
  if (TNPU_VERSION_MAJOR(requested_api_version) != TNPU_API_VERSION_MAJOR) {
    g_driver_error = "the reference driver implements HAL API " +
                     std::to_string(TNPU_API_VERSION_MAJOR) + ".x, asked for " +
                     std::to_string(TNPU_VERSION_MAJOR(requested_api_version)) + ".x";
    return nullptr;
  }
  return &kApi;
}
