// Fidelity as a plan constraint (docs/precision.md): a bound on the relative L2 error of a
// plan's outputs against f32, from the per-layer errors the profiler measures for each precision
// level (DeviceProfile::layer_output_error and layer_error, scheduler/profile.h).
//
// Composition (an estimate, stated as such): a plan's expected relative L2 error is
//     E = sqrt(sum over layers l of e_out(l, d_l)^2)
// where d_l is the device of the stage that runs layer l and e_out(l, d) the error at the
// model's outputs when layer l alone runs on d and every other layer in f32
// (DeviceProfile::layer_output_error: the layer's own error as the layers after it amplify or
// damp it), 0 on an f32 device that records none. It treats the layers' errors as independent.
// A profile made before output errors were measured has only e(l, d), the error device d adds to
// layer l's own outputs; e_out is then taken as g(d) * e(l, d) with g(d) the device's gain: its
// whole model's measured error (DeviceProfile::model_error) over sqrt(sum over all layers of
// e(l, d)^2), 1 where the profile has no whole-model error (a plan with every layer on one level
// then predicts that level's measured whole-model error exactly, mixed plans are interpolated
// by it and were underestimated 1.8-3.4x: an error made early is amplified by every later
// layer, whatever their precision). `tessera run --plan --fidelity` reports the measured error
// next to the estimate.
//
// The bound works as a filter every planner uses: bound_profile_error() marks, in a copy of the
// profile, the (layer, reduced-precision device) pairs whose output errors do not fit E^2 as
// unsupported, so that any plan the planners make from it has E within the bound whatever
// levels they choose among the admitted ones. Admission is greedy: pairs in decreasing order of
// the time they save against the level's f32 device per unit of squared error (free pairs, error
// 0, first), each admitted while the budget holds the largest admitted error of every layer.
// (A pair that saves no time comes last; the planners weigh it with the boundaries it avoids.) A
// pair whose error was not measured is not admitted.
//
// Plain functions of plain data: safe from any thread.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"

namespace tessera {

// sqrt(sum of e^2): the composition above. Errors must be finite and >= 0.
Result<double> compose_errors(std::span<const double> errors);

// The error device `device` adds to `layer` at the outputs: e_out above (the profile's
// layer_output_error, or its layer_error times the device's gain); 0 for a device at f32 (no
// `#PRECISION`) that records none. An error when
// the device is not profiled, or is a reduced-precision level without a measured error for the
// layer (a profile made without errors: profile the model again).
Result<double> profiled_layer_error(const Profile& profile, const std::string& device, int layer);

// The expected error of `plan` (the composition above) from `profile`. A split placement's layer
// takes the largest error of its shares' devices.
Result<double> plan_expected_error(const Profile& profile, const Plan& plan);

struct ErrorBound {
  double max_error = 0;
  double reserved = 0;  // sqrt of the sum over layers of the largest admitted squared error
  int admitted = 0;     // (layer, reduced-precision device) pairs admitted
  int refused = 0;      // pairs marked unsupported by the bound
};

// Marks in `profile` the pairs that do not fit `max_error` (see above) as unsupported, each with
// the reason. `max_error` must be finite and >= 0. Devices at f32 are untouched.
Result<ErrorBound> bound_profile_error(Profile* profile, double max_error);

// The filter's reservation is conservative: budget held for a pair the planner leaves unused is
// lost. search_error_budget plans (`make_plan`, any planner on the given profile) on the profile
// bounded at budgets B = max_error x {1, 1.25, 1.5, 2, 3, 4, 6, 8}, with every reduced-precision
// level admitted and then (where there are several) with each level alone, and keeps the plan of
// least cost (the plan's estimate for its objective: energy for "energy", the period of a streaming
// plan, else the latency) whose own composed error is within max_error; B = max_error always
// gives one (every plan from it is within). Errors of `make_plan` at B = max_error are returned;
// at larger budgets a failure only skips the budget.
struct BoundedPlan {
  Plan plan;
  double budget = 0;  // the filter's budget that gave it
  ErrorBound bound;   // the filter at that budget
  int tried = 0;      // budgets planned (make_plan calls)
  int call = 0;       // the make_plan call (from 0) that gave the plan
};
Result<BoundedPlan> search_error_budget(
    const Profile& profile, double max_error,
    const std::function<Result<Plan>(const Profile& bounded)>& make_plan);

}  // namespace tessera
