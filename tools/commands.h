// The `tessera` subcommands. Each returns the process exit code and prints its own errors.
#pragma once

#include "core/status.h"

namespace tessera::tools {

int cmd_convert(int argc, char** argv);
int cmd_info(int argc, char** argv);
int cmd_run(int argc, char** argv);
int cmd_devices(int argc, char** argv);
int cmd_profile(int argc, char** argv);

// Prints "error: <message>" to stderr and returns 1.
int report_error(const char* command, const Status& s);

}  // namespace tessera::tools
