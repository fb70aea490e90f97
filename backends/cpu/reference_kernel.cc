// The fallback: a layer no optimised kernel accepts runs its ops/ reference kernel on the
// leader thread, reading and writing the program's arena in logical (NCHW) order.
#include <cstring>

#include "backends/cpu/kernel.h"

namespace tessera::cpu {

namespace {

class ReferenceKernel final : public Kernel {
 public:
  explicit ReferenceKernel(const Node& node) : node_(node) {}

  Status bind(std::span<const Operand> in, std::span<const Operand> out, ThreadPool&) override {
    ins_.clear();
    outs_.clear();
    for (const Operand& o : in) {
      if (o.is_constant) {
        ins_.push_back(*o.constant);
      } else if (o.data == nullptr) {
        ins_.emplace_back();
      } else {
        ins_.push_back(Tensor::view(o.dtype, o.shape, o.data, nullptr));
      }
    }
    for (const Operand& o : out) outs_.push_back(Tensor::view(o.dtype, o.shape, o.data, nullptr));
    ctx_ = std::make_unique<NodeContext>(node_, ins_);
    return Status();
  }

  Status run(ThreadPool&) override {
    // Reference kernels may accumulate into their (normally freshly zeroed) outputs.
    for (Tensor& t : outs_) {
      if (t.raw() != nullptr) std::memset(t.raw(), 0, t.byte_size());
    }
    return run_reference(ctx_->ctx(), ins_, outs_);
  }

  std::string describe() const override { return std::string("reference ") + op_name(node_.kind); }
  bool is_reference() const override { return true; }

 private:
  const Node& node_;
  std::vector<Tensor> ins_;
  std::vector<Tensor> outs_;
  std::unique_ptr<NodeContext> ctx_;
};

}  // namespace

std::unique_ptr<Kernel> make_reference_kernel(const Node& node) {
  return std::make_unique<ReferenceKernel>(node);
}

}  // namespace tessera::cpu
