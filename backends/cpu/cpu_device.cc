#include "backends/cpu/cpu_device.h"

#include <cpuinfo.h>

#include "backends/cpu/cpu_program.h"
#include "backends/cpu/kernel_table.h"
#include "backends/cpu/onednn.h"
#include "backends/cpu/openblas.h"
#include "backends/cpu/xnn_util.h"
#include "core/allocator.h"

namespace tessera::cpu {

namespace {

class HostBuffer final : public Buffer {
 public:
  explicit HostBuffer(Tensor t) : tensor_(std::move(t)) {}
  size_t byte_size() const override { return tensor_.byte_size(); }
  const Tensor& tensor() const { return tensor_; }

 private:
  Tensor tensor_;
};

}  // namespace

std::string describe_cores(const CoreSet& cores) {
  std::string s = std::to_string(cores.size()) + (cores.size() == 1 ? " core (" : " cores (") +
                  cores.to_string() + ")";
  if (cpuinfo_initialize()) {
    if (cpuinfo_has_x86_avx512f()) {
      s += ", AVX-512";
    } else if (cpuinfo_has_x86_avx2()) {
      s += ", AVX2";
    } else if (cpuinfo_has_arm_neon()) {
      s += ", NEON";
    }
  }
  for (const Cluster& c : machine_topology().clusters) {
    if (c.max_freq_khz > 0 && c.cores.contains(cores.cores().front())) {
      s += ", " + std::to_string(c.max_freq_khz / 1000) + " MHz";
      break;
    }
  }
  return s;
}

Result<std::unique_ptr<CpuDevice>> CpuDevice::open(const std::string& name, const CoreSet& cores,
                                                   Precision precision) {
  // int8 runs on oneDNN or XNNPACK (kernel_table.h: use_xnnpack_int8), bf16 on oneDNN only.
  if (precision == Precision::kBf16 && !onednn_available()) {
    return unimplemented("device " + quote_name(name) + ": " + precision_name(precision) +
                         " needs oneDNN: " + onednn_note());
  }
  const Topology& topo = machine_topology();
  for (int c : cores.cores()) {
    if (!topo.online.contains(c)) {
      return not_found("device " + quote_name(name) + ": core " + std::to_string(c) +
                       " is not online (online cores: " + topo.online.to_string() + ")");
    }
  }
  RETURN_IF_ERROR(ensure_xnnpack());
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::create(cores);
  if (!pool.ok()) return pool.status().with_context("device " + quote_name(name));
  return std::unique_ptr<CpuDevice>(
      new CpuDevice(name, std::shared_ptr<ThreadPool>(std::move(*pool)), precision));
}

std::string CpuDevice::description() const {
  return "XNNPACK + " + openblas().note + " on " + describe_cores(pool_->cores()) +
         (pool_->pinned_per_core() ? ", one pinned thread per core"
                                   : ", threads confined to the core set") +
         (precision_ != Precision::kF32
              ? std::string(", ") + precision_name(precision_) + " on " + onednn_note()
              : std::string());
}

Capability CpuDevice::capabilities(const Graph& /*g*/, const Node& node) const {
  if (!op_is_registered(node.kind)) {
    return Capability::no(std::string("operator ") + op_name(node.kind) + " has no kernel");
  }
  // Every registered op runs: on an optimised kernel where a kernel-table entry accepts its
  // configuration, else on the reference kernel inside the device. Which one is decided (and its
  // weights packed) once, at compile(); CpuProgram::describe() names it per layer. Ops with no
  // entry at all say so here.
  if (!has_optimised_kernel(node.kind)) {
    return Capability{true, std::string("runs on the reference kernel inside the device (no ") +
                                "optimised kernel for " + op_name(node.kind) + ")"};
  }
  return Capability::yes();
}

bool CpuDevice::has_precision(Precision p) const {
  // int8 on oneDNN or XNNPACK (kernel_table.h: use_xnnpack_int8); bf16 on oneDNN.
  return p == Precision::kF32 || p == Precision::kInt8 || onednn_available();
}

uint64_t CpuDevice::memory_capacity() const {
  return host_memory_bytes();
}

DeviceInfo CpuDevice::info() const {
  return DeviceInfo{DeviceKind::kCpu, memory_capacity(), true, 1};
}

Result<std::unique_ptr<Program>> CpuDevice::compile_program(const Graph& g,
                                                            std::span<const NodeId> layers,
                                                            const CompileOptions& options) {
  RETURN_IF_ERROR(check_capabilities(*this, g, layers));
  const Precision precision = precision_ != Precision::kF32 ? precision_ : options.precision;
  ASSIGN_OR_RETURN(std::unique_ptr<CpuProgram> p,
                   CpuProgram::compile(g, layers, pool_, nullptr,
                                       options.keep_reduced && precision != Precision::kF32
                                           ? KernelChoice::kRules
                                           : default_kernel_choice(),
                                       precision, options.calibration.get()));
  return std::unique_ptr<Program>(std::move(p));
}

Result<std::unique_ptr<Buffer>> CpuDevice::upload(const Tensor& host) {
  ASSIGN_OR_RETURN(Tensor copy, host.clone());
  return std::unique_ptr<Buffer>(new HostBuffer(std::move(copy)));
}

Status CpuDevice::download(const Buffer& device, Tensor* host) {
  const auto* hb = dynamic_cast<const HostBuffer*>(&device);
  if (hb == nullptr)
    return invalid_argument("buffer does not belong to device " + quote_name(name_));
  ASSIGN_OR_RETURN(*host, hb->tensor().clone());
  return Status();
}

namespace {

void list_cpu(std::vector<DeviceListing>* out) {
  const Topology& topo = machine_topology();
  CoreSet all;
  {
    std::vector<int> cores;
    for (int c : topo.allowed.cores()) {
      if (topo.online.contains(c)) cores.push_back(c);
    }
    all = CoreSet(std::move(cores));
  }
  if (all.empty()) return;
  const std::string what = topo.clusters.size() > 1
                               ? std::to_string(topo.clusters.size()) + " clusters"
                               : std::string("one cluster");
  out->push_back({"cpu", "XNNPACK + OpenBLAS on all " + describe_cores(all) + "; " + what});
  if (topo.clusters.size() > 1) {
    for (size_t i = 0; i < topo.clusters.size(); ++i) {
      const Cluster& c = topo.clusters[i];
      out->push_back({"cpu:" + c.cores.to_string(),
                      std::string(i == 0                          ? "fastest"
                                  : i + 1 == topo.clusters.size() ? "slowest"
                                                                  : "middle") +
                          " cluster: " + describe_cores(c.cores) +
                          (c.capacity > 0 ? ", capacity " + std::to_string(c.capacity) : "")});
    }
  }
}

Result<std::unique_ptr<Device>> open_cpu(const DeviceName& name) {
  if (name.mhz != 0) {
    return unimplemented("device '" + name.to_string() +
                         "': setting CPU frequencies is not supported on this machine");
  }
  CoreSet cores;
  if (name.spec.empty()) {
    std::vector<int> c;
    const Topology& topo = machine_topology();
    for (int core : topo.allowed.cores()) {
      if (topo.online.contains(core)) c.push_back(core);
    }
    cores = CoreSet(std::move(c));
  } else {
    Result<CoreSet> parsed = CoreSet::parse(name.spec);
    if (!parsed.ok()) return parsed.status().with_context("device " + quote_name(name.to_string()));
    cores = *parsed;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CpuDevice> d,
                   CpuDevice::open(name.to_string(), cores, name.precision));
  return std::unique_ptr<Device>(std::move(d));
}

}  // namespace

}  // namespace tessera::cpu

namespace tessera {
const Backend kCpuBackend = {"cpu", cpu::list_cpu, cpu::open_cpu};
}  // namespace tessera
