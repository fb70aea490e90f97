// Device names and the devices this build can open.
//
// One scheme for every backend:
//   reference           the portable reference kernels
//   cpu | cpu:A-B | cpu:A,B,...   a CPU device on all cores or on a core set
//   opencl:N | vulkan:N | npu:N   the N-th device of that backend
//   remote:HOST:PORT    a `tessera serve` process
//   split:METHOD:DEV=RATIO+DEV=RATIO...   one layer split over several devices
//                       (backends/split/split_device.h)
// A DVFS level is written DEVICE@MHz (e.g. cpu:4-7@1800). A precision level is a virtual device
// too, written DEVICE#PRECISION (cpu:0-1#bf16, cpu#int8; with a DVFS level cpu:4-7#bf16@1800):
// profiles and plans key devices by name, so each precision is measured and planned as a device
// of its own (docs/precision.md).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "ops/split_rule.h"

namespace tessera {

struct DeviceName {
  std::string kind;  // reference, cpu, opencl, vulkan, npu, remote
  std::string spec;  // what follows the first ':' (core set, index, host:port), may be empty
  int mhz = 0;       // DVFS level, 0 when not given
  Precision precision = Precision::kF32;  // f32 when not given

  // The name without its precision level ("cpu:0-1#bf16@1800" -> "cpu:0-1@1800").
  std::string base() const;

  std::string to_string() const;
};

// Parses and checks the syntax of a device name; the message says what is wrong and the forms
// accepted.
Result<DeviceName> parse_device_name(const std::string& name);

// A split device's members and ratios (split:METHOD:DEV=RATIO+DEV=RATIO...); the device itself
// is backends/split/split_device.h.
struct SplitSpec {
  SplitMethod method = SplitMethod::kConvChannel;
  std::vector<std::string> devices;  // member device names, one per piece
  std::vector<double> ratios;        // positive, one per device (normalised by their sum)
};

// "split:conv-channel:cpu:0=0.5+cpu:1=0.5" (ratios printed exactly enough to read back).
std::string split_device_name(const SplitSpec& spec);
// Parses a split device name; errors say which part is wrong.
Result<SplitSpec> parse_split_device_name(const std::string& name);
// The shortest decimal that reads back as `r` (how ratios are printed in names).
std::string format_ratio(double r);

// Opens a device by name. NotFound when the backend is not in this build or the device does not
// exist on this machine.
Result<std::unique_ptr<Device>> open_device(const std::string& name);

struct DeviceListing {
  std::string name;
  std::string description;
};
// Every device this machine offers, in the order `tessera devices` prints them.
std::vector<DeviceListing> list_devices();

// One backend as the registry sees it. Each backend folder defines one (e.g.
// backends/reference/reference_device.cc: kReferenceBackend) and registry.cc lists them.
struct Backend {
  const char* kind;  // the device-name kind it serves: "reference", "cpu", "opencl"...
  // Appends the devices this machine offers (probing may fail quietly: no device, no entry).
  void (*list)(std::vector<DeviceListing>* out);
  // Opens the device named `name` (its kind already matched).
  Result<std::unique_ptr<Device>> (*open)(const DeviceName& name);
};

}  // namespace tessera
