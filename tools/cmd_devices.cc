// tessera devices
#include <cstdio>

#include "backends/registry.h"
#include "tools/commands.h"

namespace tessera::tools {

int cmd_devices(int argc, char** argv) {
  (void)argv;
  if (argc > 2) {
    std::printf(
        "usage: tessera devices\n\nLists the devices this machine offers, by the names "
        "`--device` accepts.\n");
    return 0;
  }
  for (const DeviceListing& d : list_devices()) {
    std::printf("%-16s %s\n", d.name.c_str(), d.description.c_str());
  }
  return 0;
}

}  // namespace tessera::tools
