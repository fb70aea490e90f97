// tessera plot profile PROFILE.json -o out.svg   per-layer time on every device and level
// tessera plot plan PLAN.json -o out.svg         stages over devices with their estimates
// tessera plot trace TRACE.json -o out.svg       a `run --trace` as a Gantt chart, with
//                                                throughput and frames in flight over time
// The charts are SVG (tools/plots.h): open them in a browser, or convert with rsvg-convert.
#include <cstdio>
#include <string>

#include "core/json.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"
#include "tools/cli.h"
#include "tools/commands.h"
#include "tools/plots.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--output", "-o", true, false, "write the SVG here (required)"},
    {"--help", "-h", false, false, "show this help"},
};

Result<std::string> chart(const std::string& kind, const std::string& path) {
  if (kind == "profile") {
    ASSIGN_OR_RETURN(Profile p, Profile::load(path));
    return profile_svg(p);
  }
  if (kind == "plan") {
    ASSIGN_OR_RETURN(Plan p, Plan::load(path));
    return plan_svg(p);
  }
  if (kind == "trace") {
    ASSIGN_OR_RETURN(json::Json j, json::parse_file(path));
    auto svg = trace_svg(j);
    if (!svg.ok()) return svg.status().with_context(path);
    return svg;
  }
  return invalid_argument("unknown chart " + quote_name(kind) +
                          ": expected profile, plan or trace");
}

}  // namespace

int cmd_plot(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("plot", args.status());
  if (args->has("--help") || args->positional.size() != 2 || !args->has("--output")) {
    std::printf(
        "usage: tessera plot profile|plan|trace FILE.json -o out.svg\n\n"
        "  profile  per-layer time of a profile on every device and DVFS level (log scale)\n"
        "  plan     a plan's stages as bars over devices along one frame's estimated time,\n"
        "           and for a streaming plan each device's busy time against the period\n"
        "  trace    a trace of `tessera run --trace` as a Gantt chart of the actors, with\n"
        "           throughput and frames in flight over time\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  auto svg = chart(args->positional[0], args->positional[1]);
  if (!svg.ok()) return report_error("plot", svg.status());
  Status st = json::write_text_file(args->get("--output"), *svg);
  if (!st.ok()) return report_error("plot", st);
  std::printf("wrote %s\n", args->get("--output").c_str());
  return 0;
}

}  // namespace tessera::tools
