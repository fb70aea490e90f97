#include "backends/cpu/activation.h"

#include <cstring>

namespace tessera::cpu {

Result<ActivationPass> ActivationPass::create(const Activation& a, const std::string& node_name) {
  ActivationPass p;
  p.a_ = a;
  p.node_ = node_name;
  return p;
}

Status ActivationPass::bind(const float* in, float* out, size_t rows, size_t channels,
                            ThreadPool& pool) {
  in_ = in;
  out_ = out;
  n_ = rows * channels;
  if (!active() || n_ == 0) return Status();
  RETURN_IF_ERROR(ensure_xnnpack());
  const std::string what = "node " + quote_name(node_) + " activation " + activation_name(a_.kind);
  xnn_operator_t op = nullptr;
  switch (a_.kind) {
    case ActivationKind::kRelu:
    case ActivationKind::kClip: {
      const ClampRange r = clamp_of(a_);
      // min >= max (XNNPACK refuses it) or NaN bounds: the generic loop below.
      if (!(r.min < r.max) || !activation_is_clamp(a_)) return Status();
      RETURN_IF_ERROR(xnn_check(
          xnn_create_clamp_nc_f32(channels, channels, channels, r.min, r.max, 0, &op), what));
      op_.reset(op);
      return xnn_check(xnn_setup_clamp_nc_f32(op, rows, in, out, pool.pthreadpool()), what);
    }
    case ActivationKind::kSigmoid:
      RETURN_IF_ERROR(
          xnn_check(xnn_create_sigmoid_nc_f32(channels, channels, channels, 0, &op), what));
      op_.reset(op);
      return xnn_check(xnn_setup_sigmoid_nc_f32(op, rows, in, out, pool.pthreadpool()), what);
    case ActivationKind::kHardSwish:
      RETURN_IF_ERROR(
          xnn_check(xnn_create_hardswish_nc_f32(channels, channels, channels, 0, &op), what));
      op_.reset(op);
      return xnn_check(xnn_setup_hardswish_nc_f32(op, rows, in, out, pool.pthreadpool()), what);
    case ActivationKind::kLeakyRelu:
      if (xnn_create_leaky_relu_nc_f32(channels, channels, channels, a_.alpha, 0, &op) !=
          xnn_status_success) {
        return Status();  // slopes XNNPACK rejects (non-finite): the generic loop
      }
      op_.reset(op);
      return xnn_check(xnn_setup_leaky_relu_nc_f32(op, rows, in, out, pool.pthreadpool()), what);
    default:
      return Status();  // tanh, hard-sigmoid: the generic loop
  }
}

Status ActivationPass::run(ThreadPool& pool) {
  if (!active() || n_ == 0) return Status();
  if (op_)
    return xnn_check(xnn_run_operator(op_.get(), pool.pthreadpool()), "node " + quote_name(node_));
  const Activation a = a_;
  const float* in = in_;
  float* out = out_;
  pool.parallel_for(n_, 4096, [&](size_t b, size_t e) {
    if (in != out) std::memcpy(out + b, in + b, (e - b) * sizeof(float));
    apply_activation(a, out + b, static_cast<int64_t>(e - b));
  });
  return Status();
}

}  // namespace tessera::cpu
