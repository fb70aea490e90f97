// tessera: convert, inspect and run models; list devices; profile them.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/commands.h"

namespace {

const char kUsage[] =
    "usage: tessera <command> [options]\n"
    "\n"
    "commands:\n"
    "  convert   convert an ONNX model to a .tsr file (graph passes applied)\n"
    "  calibrate record activation ranges over sample inputs for int8 (MODEL.tsr.calib.json)\n"
    "  info      print the layers, parameters, FLOPs and live bytes at each cut of a model\n"
    "  run       run a model (on one device or by a plan) on .npy inputs; print its latency\n"
    "  devices   list the devices this machine offers\n"
    "  profile   measure every layer on every device; fit the cost models\n"
    "  plan      slice a model across devices from its profile (latency or energy)\n"
    "  simulate  a discrete-event run of a plan over a profile's cost model\n"
    "  bench     latency, frames/s, memory, op times per model and device; pack, hop: remote hops\n"
    "  plot      draw a profile, a plan or a trace as SVG\n"
    "  serve     host a model and a local device for remote:HOST:PORT devices\n"
    "  keygen    make a CURVE key pair for serve and remote devices\n"
    "\n"
    "Run `tessera <command> --help` for the options of a command.\n";

int dispatch(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "convert") return tessera::tools::cmd_convert(argc, argv);
  if (cmd == "calibrate") return tessera::tools::cmd_calibrate(argc, argv);
  if (cmd == "info") return tessera::tools::cmd_info(argc, argv);
  if (cmd == "run") return tessera::tools::cmd_run(argc, argv);
  if (cmd == "devices") return tessera::tools::cmd_devices(argc, argv);
  if (cmd == "profile") return tessera::tools::cmd_profile(argc, argv);
  if (cmd == "plan") return tessera::tools::cmd_plan(argc, argv);
  if (cmd == "simulate") return tessera::tools::cmd_simulate(argc, argv);
  if (cmd == "bench") return tessera::tools::cmd_bench(argc, argv);
  if (cmd == "plot") return tessera::tools::cmd_plot(argc, argv);
  if (cmd == "serve") return tessera::tools::cmd_serve(argc, argv);
  if (cmd == "keygen") return tessera::tools::cmd_keygen(argc, argv);
  std::fprintf(stderr, "tessera: unknown command '%s'\n\n%s", cmd.c_str(), kUsage);
  return 2;
}

}  // namespace

// The one place the CLI catches: Tessera reports errors as Status, but an allocation that fails
// (std::bad_alloc), a length_error or a library's exception must still end in a message and a
// non-zero exit, not in terminate.
int main(int argc, char** argv) {
  try {
    return dispatch(argc, argv);
  } catch (...) {
    const char* command = argc >= 2 ? argv[1] : "";
    try {
      return tessera::tools::report_error(command, tessera::status_from_current_exception(""));
    } catch (...) {  // no memory even for the message
      std::fprintf(stderr, "tessera %s: error: out of memory\n", command);
      return 1;
    }
  }
}
