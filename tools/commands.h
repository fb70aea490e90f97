// The `tessera` subcommands. Each returns the process exit code and prints its own errors.
#pragma once

#include "core/status.h"

namespace tessera {
class LayerGraph;
struct Plan;
}  // namespace tessera

namespace tessera::tools {

int cmd_convert(int argc, char** argv);
int cmd_info(int argc, char** argv);
// tessera calibrate MODEL: activation ranges for int8 (cmd_calibrate.cc).
int cmd_calibrate(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_devices(int argc, char** argv);
int cmd_profile(int argc, char** argv);
int cmd_plan(int argc, char** argv);
int cmd_simulate(int argc, char** argv);
int cmd_bench(int argc, char** argv);
// tessera bench MODEL...: latency, frames/s, memory and op-kind times (cmd_bench_models.cc).
int cmd_bench_models(int argc, char** argv);
int cmd_plot(int argc, char** argv);
int cmd_serve(int argc, char** argv);
int cmd_keygen(int argc, char** argv);

// Prints the plan's notation and its per-stage table of estimates (tessera plan, run --plan).
void print_plan_table(const Plan& p, const LayerGraph& lg);

// Prints "error: <message>" to stderr and returns 1.
int report_error(const char* command, const Status& s);

}  // namespace tessera::tools
