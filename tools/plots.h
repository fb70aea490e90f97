// The charts of `tessera plot`, as SVG documents (tools/svg.h):
//   profile_svg  the per-layer time of a profile on every device and DVFS level (log scale);
//   plan_svg     a plan's stages as bars on device rows along one frame's estimated time, and
//                for a streaming plan each device's busy time per frame against the period;
//   trace_svg    an executor trace (`tessera run --trace`) as a Gantt chart of the actors'
//                step runs coloured by frame, with throughput and frames in flight over time.
//
// Thread rule: free functions without shared state.
#pragma once

#include <string>

#include "core/json.h"
#include "core/status.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"

namespace tessera::tools {

std::string profile_svg(const Profile& profile);
std::string plan_svg(const Plan& plan);
// `trace` is the Chrome trace JSON the executor writes; an error names the event that is not one.
Result<std::string> trace_svg(const json::Json& trace);

}  // namespace tessera::tools
