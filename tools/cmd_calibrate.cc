// tessera calibrate MODEL.tsr -i DIR|x.npy... [--samples N] [--method percentile] [-o FILE]
//
// Static int8 calibration (docs/precision.md): runs the inputs through the model in f32 and
// writes the range of every activation to MODEL.tsr.calib.json (core/calibration_table.h), which
// `tessera run --precision int8` and the int8 devices (cpu#int8) read.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "api/internal.h"
#include "backends/registry.h"
#include "scheduler/calibrate.h"
#include "tools/bench_model.h"
#include "tools/cli.h"
#include "tools/commands.h"

namespace tessera::tools {

namespace {

const std::vector<cli::FlagSpec> kFlags = {
    {"--input", "-i", true, true,
     "calibration input .npy files or directories of them (one-input models: one file per "
     "sample); keep the inputs you measure fidelity on apart"},
    {"--samples", "-n", true, false,
     "make N seeded perturbations of each input file instead of using it as it is (e.g. of the "
     "demo image)"},
    {"--sigma", "", true, false,
     "with --samples: noise of each perturbation, in standard deviations of the input "
     "(default 0.1)"},
    {"--seed", "", true, false, "with --samples: seed of the first perturbation (default 1)"},
    {"--method", "-m", true, false,
     "range of each activation: percentile (default: 99.99% two-sided), minmax or mse"},
    {"--device", "-d", true, false, "f32 device that runs the calibration (default: cpu)"},
    {"--output", "-o", true, false, "the table to write (default: MODEL.tsr.calib.json)"},
    {"--help", "-h", false, false, "show this help"},
};

Result<std::vector<std::string>> input_files(const std::vector<std::string>& specs) {
  std::vector<std::string> files;
  for (const std::string& spec : specs) {
    if (std::filesystem::is_directory(spec)) {
      std::vector<std::string> in_dir;
      for (const auto& e : std::filesystem::directory_iterator(spec)) {
        if (e.is_regular_file() && e.path().extension() == ".npy") in_dir.push_back(e.path());
      }
      if (in_dir.empty()) return not_found(spec + ": no .npy files in the directory");
      std::sort(in_dir.begin(), in_dir.end());
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else {
      files.push_back(spec);
    }
  }
  if (files.empty()) return invalid_argument("no calibration inputs: give --input FILE|DIR");
  return files;
}

Status calibrate_command(const cli::Args& args) {
  const std::string& path = args.positional[0];
  ASSIGN_OR_RETURN(std::shared_ptr<const Model> model, Model::load(path));
  const Graph& g = model_graph(*model);
  if (model->inputs().size() != 1) {
    return unimplemented("calibrate takes models with one input; this one has " +
                         std::to_string(model->inputs().size()));
  }
  ASSIGN_OR_RETURN(CalibrationMethod method, [&]() -> Result<CalibrationMethod> {
    CalibrationMethod m = CalibrationMethod::kPercentile;
    const std::string name = args.get("--method", "percentile");
    if (!parse_calibration_method(name, &m)) {
      return invalid_argument("--method " + name + ": expected percentile, minmax or mse");
    }
    return m;
  }());
  ASSIGN_OR_RETURN(int count, args.get_int("--samples", 0, 1, 100000));
  ASSIGN_OR_RETURN(double sigma, args.get_double("--sigma", 0.1, 0, 100));
  ASSIGN_OR_RETURN(int seed, args.get_int("--seed", 1, 0, 1 << 30));
  ASSIGN_OR_RETURN(std::vector<std::string> files, input_files(args.all("--input")));
  const TensorDesc& d = model->inputs()[0];
  std::vector<std::vector<Tensor>> samples;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(Tensor t, read_input(d, f));
    if (count > 0) {
      ASSIGN_OR_RETURN(
          std::vector<std::vector<Tensor>> p,
          perturbed_samples({t}, count, static_cast<float>(sigma), static_cast<uint64_t>(seed)));
      for (auto& s : p) samples.push_back(std::move(s));
    } else {
      samples.push_back({std::move(t)});
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Device> device, open_device(args.get("--device", "cpu")));
  ASSIGN_OR_RETURN(CalibrationTable table, calibrate(g, *device, samples, method));
  table.model_hash = model->hash();
  const std::string out = args.get("--output", CalibrationTable::default_path(path));
  RETURN_IF_ERROR(table.save(out));
  std::printf("calibrated %zu activation ranges of %s over %d sample(s) (%s, on %s): %s\n",
              table.ranges.size(), path.c_str(), table.samples, table.method.c_str(),
              device->name().c_str(), out.c_str());
  return Status();
}

}  // namespace

int cmd_calibrate(int argc, char** argv) {
  auto args = cli::parse(argc, argv, 2, kFlags);
  if (!args.ok()) return report_error("calibrate", args.status());
  if (args->has("--help") || args->positional.size() != 1) {
    std::printf(
        "usage: tessera calibrate MODEL.tsr --input DIR|x.npy... [--samples N] "
        "[--method percentile|minmax|mse] [--output FILE]\n\n%s",
        cli::usage(kFlags).c_str());
    return args->has("--help") ? 0 : 2;
  }
  Status st = calibrate_command(*args);
  return st.ok() ? 0 : report_error("calibrate", st);
}

}  // namespace tessera::tools
