// Helpers shared by the tests of the `npu` device (tests/backends/npu_*_test.cc).
#pragma once

#include <cstdlib>
#include <string>

#include <gtest/gtest.h>

#include "backends/npu/npu_device.h"

namespace tessera::testing {

inline bool npu_required() {
  const char* r = std::getenv("TESSERA_REQUIRE_NPU");
  return r != nullptr && *r != '\0' && std::string(r) != "0";
}

// Skips the test when this build has no reference driver (fails when TESSERA_REQUIRE_NPU is set).
#define REQUIRE_REFERENCE_DRIVER()                                   \
  do {                                                               \
    if (NpuDriver::reference_driver_path().empty()) {                \
      if (::tessera::testing::npu_required())                        \
        FAIL() << "TESSERA_REQUIRE_NPU set but no reference driver"; \
      GTEST_SKIP() << "reference NPU driver not built";              \
    }                                                                \
  } while (0)

inline bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The reference driver of this build, in `precision`.
inline NpuOptions reference_options(uint32_t precision = TNPU_PRECISION_F16) {
  NpuOptions o;
  o.driver_path = NpuDriver::reference_driver_path();
  o.precision = precision;
  return o;
}

}  // namespace tessera::testing
