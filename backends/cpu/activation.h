// Activations on the cpu device: standalone activation layers and the pass that applies a fused
// activation which an XNNPACK operator cannot clamp into its output (sigmoid, hard-swish, leaky
// relu, tanh, hard-sigmoid). XNNPACK's element-wise operators where it has one, otherwise a
// parallel loop over Tessera's activation function. Also the base of kernels that run one XNNPACK
// operator followed by that pass.
#pragma once

#include <cstddef>
#include <string>

#include "backends/cpu/kernel.h"
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

// A layer run by one XNNPACK operator, then the pass for a fused activation its output clamp
// cannot express. Subclasses create the operator at build time and set it up (and bind post_)
// in bind().
class XnnOperatorKernel : public Kernel {
 public:
  Status run(ThreadPool& pool) override {
    RETURN_IF_ERROR(xnn_check(xnn_run_operator(op_.get(), pool.pthreadpool()), what_));
    return post_.run(pool);
  }
  std::string describe() const override { return desc_; }
  uint64_t owned_bytes() const override { return packed_bytes_; }

  // Takes ownership of the created operator and prepares the pass for `act` if its clamp does
  // not express it.
  Status adopt(xnn_operator_t op, const Activation& act, const std::string& node_name) {
    op_.reset(op);
    if (activation_is_clamp(act)) return Status();
    ASSIGN_OR_RETURN(post_, ActivationPass::create(act, node_name));
    return Status();
  }

  XnnOperator op_;
  ActivationPass post_;
  std::string what_;  // "node 'name' (Op)", for errors
  std::string desc_;
  uint64_t packed_bytes_ = 0;
};

}  // namespace tessera::cpu
