// A device for fault-injection tests of the executor: it wraps a real device and makes its
// programs fail, throw or stall on chosen runs.
//
// Programs are numbered in compile order (the executor compiles one program per step, in plan
// order), and each program counts its runs. `schedule(program, run)` says what the run-th run of
// a program does. Because an executor step runs frames in submission order and skips frames that
// failed earlier, a test can replay the schedule to know which frame fails where.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <stdexcept>
#include <thread>

#include "backends/device.h"
#include "backends/registry.h"

namespace tessera::testing {

// kSlow: runs correctly after 5 ms (a busy server).
enum class Fault { kNone, kFail, kThrow, kStall, kSlow };

using FaultSchedule = std::function<Fault(int program, int run)>;

class FaultProgram final : public Program {
 public:
  FaultProgram(std::unique_ptr<Program> inner, int index, FaultSchedule schedule)
      : inner_(std::move(inner)), index_(index), schedule_(std::move(schedule)) {}

  const std::vector<ValueId>& input_values() const override { return inner_->input_values(); }
  const std::vector<ValueId>& output_values() const override { return inner_->output_values(); }

 protected:
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override {
    const int run = runs_++;
    switch (schedule_(index_, run)) {
      case Fault::kNone:
        return inner_->run(inputs, outputs, options);
      case Fault::kFail:
        return internal_error("injected failure (program " + std::to_string(index_) + ", run " +
                              std::to_string(run) + ")");
      case Fault::kThrow:
        throw std::runtime_error("injected exception");
      case Fault::kSlow:
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        return inner_->run(inputs, outputs, options);
      case Fault::kStall:
        // A hung kernel that still honours cancellation and deadlines between "layers".
        while (!options.stop_requested()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return options.check("stalled program " + std::to_string(index_));
    }
    return internal_error("unknown fault");
  }

 private:
  std::unique_ptr<Program> inner_;
  int index_;
  FaultSchedule schedule_;
  int runs_ = 0;  // a Program is run by one thread at a time
};

class FaultDevice final : public Device {
 public:
  FaultDevice(std::unique_ptr<Device> inner, FaultSchedule schedule,
              std::shared_ptr<std::atomic<int>> compiled)
      : inner_(std::move(inner)), schedule_(std::move(schedule)), compiled_(std::move(compiled)) {}

  const std::string& name() const override { return inner_->name(); }
  std::string description() const override { return "faults over " + inner_->description(); }
  DeviceInfo info() const override { return inner_->info(); }
  Capability capabilities(const Graph& g, const Node& node) const override {
    return inner_->capabilities(g, node);
  }
  uint64_t memory_capacity() const override { return inner_->memory_capacity(); }
  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override {
    return inner_->upload(host);
  }
  Status download(const Buffer& device, Tensor* host) override {
    return inner_->download(device, host);
  }

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Program> p, inner_->compile(g, layers, options));
    return std::unique_ptr<Program>(new FaultProgram(std::move(p), (*compiled_)++, schedule_));
  }

 private:
  std::unique_ptr<Device> inner_;
  FaultSchedule schedule_;
  std::shared_ptr<std::atomic<int>> compiled_;  // shared by every device of one executor
};

// An ExecutorOptions::open_device that wraps every device in a FaultDevice with `schedule`.
inline std::function<Result<std::unique_ptr<Device>>(const std::string&)> fault_opener(
    FaultSchedule schedule) {
  auto compiled = std::make_shared<std::atomic<int>>(0);
  return [schedule, compiled](const std::string& name) -> Result<std::unique_ptr<Device>> {
    ASSIGN_OR_RETURN(std::unique_ptr<Device> d, open_device(name));
    return std::unique_ptr<Device>(new FaultDevice(std::move(d), schedule, compiled));
  };
}

}  // namespace tessera::testing
