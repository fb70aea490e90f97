// Static int8 calibration (docs/precision.md): runs a set of inputs through a model in f32 and
// records the range each activation is quantised to, by one of core/calibration.h's methods.
// `tessera calibrate` writes the result next to the model (core/calibration_table.h), and int8
// programs (CompileOptions::calibration) read it.
//
// Thread rule: calibrate() uses `device` for the duration of the call (one program, run from the
// calling thread); call it from one thread per device.
#pragma once

#include <vector>

#include "backends/device.h"
#include "core/calibration.h"
#include "core/calibration_table.h"
#include "graph/graph.h"

namespace tessera {

// Runs every sample (one tensor per graph input, in the graph's input order) through `g` on
// `device` at f32 and returns the range of every f32 activation: the graph inputs and each node
// output. Ranges follow `method`, except for the graph's outputs, which keep their observed
// extremes (min/max: nothing reads them in int8). Every range contains 0. Errors name the
// sample and the input: no samples, a wrong count, dtype or shape, a NaN or infinity.
Result<CalibrationTable> calibrate(const Graph& g, Device& device,
                                   const std::vector<std::vector<Tensor>>& samples,
                                   CalibrationMethod method);

// `count` samples around `base` (one set of graph inputs): in sample i every f32 input x becomes
// x + sigma * stddev(x) * n, with n standard normal noise per element drawn from a generator
// seeded with seed + i. For calibrating from one representative input such as the demo image.
Result<std::vector<std::vector<Tensor>>> perturbed_samples(const std::vector<Tensor>& base,
                                                           int count, float sigma, uint64_t seed);

}  // namespace tessera
