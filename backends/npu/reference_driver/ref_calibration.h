// The reference NPU driver's names for the shared calibration code (core/calibration.h, which
// the driver compiles into its own library: it links no Tessera library).
#pragma once

#include "core/calibration.h"

namespace tnpu_ref {

using tessera::calibration_method_name;
using tessera::CalibrationMethod;
using tessera::choose_range;
using tessera::Histogram;
using tessera::parse_calibration_method;

}  // namespace tnpu_ref
