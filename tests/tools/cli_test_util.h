// Runs the real `tessera` binary (TESSERA_CLI_PATH, set by tests/CMakeLists.txt) for CLI tests.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace tessera::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_cli(const std::string& args) {
  CommandResult r;
  const std::string cmd = std::string(TESSERA_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.exit_code = 128 + WTERMSIG(status);
  return r;
}

}  // namespace tessera::testing
