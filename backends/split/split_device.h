// The composite split device (seed 004; ggml's meta backend): N opened devices and a split
// method with ratios, seen by the executor as one ordinary Device.
//
// compile() takes one layer, cuts it with its split rule (ops/split_rule.h) into one piece graph
// per member device (graph/split.h) and compiles each piece as an ordinary program on its
// device; backends need no change. A run scatters the input regions to the pieces (whole inputs
// and contiguous row ranges are shared, not copied), runs the pieces concurrently (the first on
// the caller's thread, the others on threads of their own), then merges on the host: concatenate,
// or sum then the activation (the bias is in the first piece only, so it is added once).
//
// Name: split:METHOD:DEVICE=RATIO+DEVICE=RATIO..., e.g. split:conv-channel:cpu:0=0.6+cpu:1=0.4
// (Placement::device_name() writes it for a split placement; the registry opens it).
//
// Thread rule: as backends/device.h. The device is safe to use from several threads; a Program
// is run by one thread at a time and runs its pieces on the member devices' own programs, which
// serialise what their hardware cannot overlap.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/registry.h"
#include "ops/split_rule.h"

namespace tessera {

using DeviceOpener = std::function<Result<std::unique_ptr<Device>>(const std::string&)>;

// Opens every member with `open` (the registry's open_device, or a test's), then the composite.
Result<std::unique_ptr<Device>> open_split_device(const SplitSpec& spec, const DeviceOpener& open);

}  // namespace tessera
