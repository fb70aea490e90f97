// Activations on the cpu device: standalone activation layers and the pass that applies a fused
// activation which an XNNPACK operator cannot clamp into its output (sigmoid, hard-swish, leaky
// relu, tanh, hard-sigmoid). XNNPACK's element-wise operators where it has one, otherwise a
// parallel loop over Tessera's activation function.
#pragma once

#include <cstddef>

#include "backends/cpu/thread_pool.h"
#include "backends/cpu/xnn_util.h"
#include "ops/activation.h"

namespace tessera::cpu {

class ActivationPass {
 public:
  // Creates the operator (none needed for kNone).
  static Result<ActivationPass> create(const Activation& a, const std::string& node_name);
  // out[i] = act(in[i]) over rows x channels floats (in may equal out).
  Status bind(const float* in, float* out, size_t rows, size_t channels, ThreadPool& pool);
  Status run(ThreadPool& pool);
  bool active() const { return a_.kind != ActivationKind::kNone; }
  const Activation& activation() const { return a_; }

 private:
  Activation a_;
  std::string node_;
  XnnOperator op_;
  const float* in_ = nullptr;
  float* out_ = nullptr;
  size_t n_ = 0;
};

}  // namespace tessera::cpu
