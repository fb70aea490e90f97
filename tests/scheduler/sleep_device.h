// A test device whose programs sleep before they compute on the reference kernels, at a speed a
// test changes while frames flow: the adaptation tests (adapt_test.cc, queue_monitor_test.cc)
// load one device and watch the cut move. Sleeping needs no core, so their timings hold on a
// machine busy with other tests.
//
// Threads: a SleepDevice and its programs are used as any Device (one executor thread per
// program at a time); Speed::factor is atomic, set from the test's thread while programs run.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/device.h"
#include "backends/registry.h"
#include "graph/graph.h"
#include "ops/op.h"

namespace tessera::testing {

// The sleep multiplier of a device: 1 at full speed, 3 for a device three times as slow.
struct Speed {
  std::atomic<double> factor{1.0};
};

class SleepProgram final : public Program {
 public:
  // Sleeps `ms * speed->factor` milliseconds, then runs `inner`.
  SleepProgram(std::unique_ptr<Program> inner, double ms, std::shared_ptr<Speed> speed)
      : inner_(std::move(inner)), ms_(ms), speed_(std::move(speed)) {}
  const std::vector<ValueId>& input_values() const override { return inner_->input_values(); }
  const std::vector<ValueId>& output_values() const override { return inner_->output_values(); }

 protected:
  Status execute(std::span<const Tensor> inputs, std::span<Tensor> outputs,
                 const RunOptions& options) override {
    std::this_thread::sleep_for(
        std::chrono::duration<double, std::milli>(ms_ * speed_->factor.load()));
    return inner_->run(inputs, outputs, options);
  }

 private:
  std::unique_ptr<Program> inner_;
  double ms_;
  std::shared_ptr<Speed> speed_;
};

class SleepDevice final : public Device {
 public:
  // How long a program over `layers` of `g` sleeps at speed 1, in milliseconds.
  using SleepMs = std::function<double(const Graph& g, std::span<const NodeId> layers)>;

  // `ms` per layer compiled into one program.
  static SleepMs per_layer(double ms) {
    return [ms](const Graph&, std::span<const NodeId> layers) {
      return ms * static_cast<double>(layers.size());
    };
  }
  // `ms` per `flops` FLOPs the program computes (a split piece sleeps for its share).
  static SleepMs per_flops(double ms, double flops) {
    return [ms, flops](const Graph& g, std::span<const NodeId> layers) {
      double total = 0;
      for (NodeId id : layers) {
        const Node& n = g.node(id);
        NodeContext nc(g, n);
        std::vector<TensorInfo> outs;
        for (ValueId v : n.outputs) outs.push_back(g.value(v).info);
        total += node_cost(nc.ctx(), outs).flops;
      }
      return ms * total / flops;
    };
  }

  SleepDevice(std::string name, SleepMs sleep_ms, std::shared_ptr<Speed> speed)
      : name_(std::move(name)),
        inner_(open_device("reference").value()),
        sleep_ms_(std::move(sleep_ms)),
        speed_(std::move(speed)) {}
  const std::string& name() const override { return name_; }
  std::string description() const override { return "sleeps, then " + inner_->description(); }
  DeviceInfo info() const override { return inner_->info(); }
  Capability capabilities(const Graph& g, const Node& n) const override {
    return inner_->capabilities(g, n);
  }
  uint64_t memory_capacity() const override { return inner_->memory_capacity(); }
  Result<std::unique_ptr<Buffer>> upload(const Tensor& t) override { return inner_->upload(t); }
  Status download(const Buffer& b, Tensor* t) override { return inner_->download(b, t); }

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& o) override {
    ASSIGN_OR_RETURN(std::unique_ptr<Program> p, inner_->compile(g, layers, o));
    return std::unique_ptr<Program>(new SleepProgram(std::move(p), sleep_ms_(g, layers), speed_));
  }

 private:
  std::string name_;
  std::unique_ptr<Device> inner_;
  SleepMs sleep_ms_;
  std::shared_ptr<Speed> speed_;
};

}  // namespace tessera::testing
