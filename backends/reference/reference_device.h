// The reference device: runs every layer with the portable reference kernels of ops/.
//
// It is the oracle every other backend is tested against, always built and always available
// under the name "reference". Its memory is host memory.
#pragma once

#include "backends/device.h"
#include "backends/registry.h"

namespace tessera {

class ReferenceDevice final : public Device {
 public:
  ReferenceDevice();
  const std::string& name() const override { return name_; }
  std::string description() const override;
  DeviceInfo info() const override;
  Capability capabilities(const Graph& g, const Node& node) const override;
  uint64_t memory_capacity() const override;
  Result<std::unique_ptr<Buffer>> upload(const Tensor& host) override;
  Status download(const Buffer& device, Tensor* host) override;

 protected:
  Result<std::unique_ptr<Program>> compile_program(const Graph& g, std::span<const NodeId> layers,
                                                   const CompileOptions& options) override;

 private:
  std::string name_ = "reference";
};

extern const Backend kReferenceBackend;

}  // namespace tessera
