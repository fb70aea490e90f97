// The int8 calibration table a command uses (docs/precision.md): the file named by a flag, else
// the model's sidecar MODEL.tsr.calib.json when it exists; and the refusal of an int8 level
// without one, naming the sidecar and the command that writes it. Shared by `tessera run`,
// `tessera profile` and `tessera bench`. Plain functions; safe from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/calibration_table.h"
#include "core/status.h"
#include "graph/graph.h"

namespace tessera::tools {

// `named`: the path given on the command line ("" for none). A named table of another model is
// an error; a sidecar of another model is ignored with a note on stderr. Null when there is none.
Result<std::shared_ptr<const CalibrationTable>> load_calibration_file(const std::string& model_path,
                                                                      const std::string& hash,
                                                                      const std::string& named);

// FailedPrecondition when one of `devices` (device names, plan labels) is an int8 level,
// `table` is null and `g` is no QDQ model (graph/qdq.h: those bring their own quantisation):
// names the device, the sidecar path looked for and `tessera calibrate`, and `flag` (the option
// that names a table). Names that do not parse are left to their command.
Status require_calibration(const std::vector<std::string>& devices,
                           const std::shared_ptr<const CalibrationTable>& table, const Graph& g,
                           const std::string& model_path, const std::string& flag);

}  // namespace tessera::tools
