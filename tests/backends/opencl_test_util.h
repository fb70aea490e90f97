// Shared by the OpenCL backend tests: opening opencl:0 (skipping when this machine has no OpenCL
// device, unless TESSERA_REQUIRE_OPENCL is set, as in CI) and running one-node graphs on a device.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "backends/device.h"
#include "backends/registry.h"
#include "graph/graph.h"
#include "tests/backends/op_cases.h"
#include "tests/ops/op_test_util.h"

namespace tessera::testing {

inline bool opencl_required() {
  const char* v = std::getenv("TESSERA_REQUIRE_OPENCL");
  return v != nullptr && v[0] != '\0' && std::string(v) != "0";
}

// opencl:0, or null with the reason in *why.
inline std::unique_ptr<Device> open_opencl_device(std::string* why) {
  Result<std::unique_ptr<Device>> d = open_device("opencl:0");
  if (!d.ok()) {
    *why = d.status().to_string();
    return nullptr;
  }
  return std::move(*d);
}

// In a test body: `Device* dev = ...; TESSERA_OPENCL_DEVICE_OR_SKIP(dev);`
#define TESSERA_OPENCL_DEVICE_OR_SKIP(dev)                                                      \
  std::string tessera_why_;                                                                     \
  std::unique_ptr<Device> tessera_dev_ = ::tessera::testing::open_opencl_device(&tessera_why_); \
  if (!tessera_dev_) {                                                                          \
    if (::tessera::testing::opencl_required()) {                                                \
      FAIL() << "TESSERA_REQUIRE_OPENCL is set but opencl:0 does not open: " << tessera_why_;   \
    }                                                                                           \
    GTEST_SKIP() << "no OpenCL device: " << tessera_why_;                                       \
  }                                                                                             \
  dev = tessera_dev_.get()

// one_node_graph, run_layers and the NodeInput helpers come from the op case harness.

}  // namespace tessera::testing
