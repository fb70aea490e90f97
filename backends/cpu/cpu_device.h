// The `cpu` device: XNNPACK, OpenBLAS and Tessera's own kernels on a set of CPU cores.
//
// Names: `cpu` (every core this process may use), `cpu:0-3`, `cpu:0,2` (a core set). Each device
// owns a ThreadPool with one thread per core, pinned one to a core (thread_pool.h), so devices
// on disjoint core sets — a phone's big and little clusters — run side by side without sharing
// threads. Memory is host memory.
#pragma once

#include <memory>

#include "backends/cpu/thread_pool.h"
#include "backends/device.h"
#include "backends/registry.h"

namespace tessera::cpu {

class CpuDevice final : public Device {
 public:
  // Opens a device on `cores`; `name` is what the user typed. Fails when a core is not online
  // or not allowed for this process.
  // `precision`: the level the device compiles at when CompileOptions ask for f32 (a device
  // opened as `cpu:0-1#bf16` is that precision level as a device of its own). Fails when the
  // precision has no kernels in this build.
  static Result<std::unique_ptr<CpuDevice>> open(const std::string& name, const CoreSet& cores,
                                                 Precision precision = Precision::kF32);

  const std::string& name() const override { return name_; }
  std::string description() const override;
  // Every registered op runs; `detail` names the kernel (an optimised one, or "reference ..."
  // for the fallback).
  Capability capabilities(const Graph& g, const Node& node) const override;
  // Host memory; concurrency 1: the device's pinned pool runs one program at a time.
  DeviceInfo info() const override;
  uint64_t memory_capacity() const override;
  // f32 always; bf16 with oneDNN (onednn.h); int8 not yet.
  bool has_precision(Precision p) const override;
  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override;
  Status download(const Buffer& device, Tensor* host) override;

  const CoreSet& cores() const { return pool_->cores(); }
  Precision precision() const { return precision_; }
  ThreadPool& pool() { return *pool_; }

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override;

 private:
  CpuDevice(std::string name, std::shared_ptr<ThreadPool> pool, Precision precision)
      : name_(std::move(name)), pool_(std::move(pool)), precision_(precision) {}
  std::string name_;
  std::shared_ptr<ThreadPool> pool_;
  Precision precision_ = Precision::kF32;
};

// A description of a core set for listings: "2 cores (0-1), AVX-512, 2.0 GHz".
std::string describe_cores(const CoreSet& cores);

}  // namespace tessera::cpu

namespace tessera {
extern const Backend kCpuBackend;
}  // namespace tessera
