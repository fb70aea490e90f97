// `tessera profile` end to end on a small model: writes a profile, checks it, refuses bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <string>

#include "core/npy.h"
#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "scheduler/plan.h"
#include "scheduler/profile.h"
#include "tests/scheduler/profile_test_util.h"
#include "tests/scoped_env.h"
#include "tests/tools/cli_test_util.h"

namespace tessera {
namespace {

using testing::CommandResult;
using testing::run_cli;

// Saves `g` (shapes inferred) as a model file at `path`.
void save_graph(Graph g, const std::string& path) {
  ASSERT_TRUE(g.infer_shapes().ok());
  ASSERT_TRUE(save_model(g, path, ModelMetadata{"profile_cli_test", {}}).ok());
}

// Runs `tessera ARGS` and expects it refused (exit 1) with a message holding `needle`.
void expect_refused(const std::string& args, const std::string& needle) {
  const CommandResult r = run_cli(args);
  EXPECT_EQ(r.exit_code, 1) << args;
  EXPECT_NE(r.output.find(needle), std::string::npos) << args << "\n" << r.output;
}

TEST(ProfileCli, ProfilesChecksAndRefuses) {
  const std::string dir = ::testing::TempDir();
  const std::string model = dir + "profile_cli_skip.tsr";
  const std::string other = dir + "profile_cli_chain.tsr";
  const std::string out = dir + "profile_cli_skip.json";
  save_graph(testing::skip_graph(), model);
  save_graph(testing::matmul_chain(3), other);

  CommandResult r = run_cli("profile " + model + " -o " + out + " --repeat 2 --warmup 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("reference"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("slice ms"), std::string::npos) << r.output;  // the overhead fit
  auto hash = model_file_hash(model);
  ASSERT_TRUE(hash.ok());
  auto p = Profile::load(out, *hash);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->num_layers(), 4);
  ASSERT_NE(p->find("reference"), nullptr);

  r = run_cli("profile " + model + " --check " + out + " --slices 2 --repeat 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("whole model"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("mean absolute error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference: mean absolute error"), std::string::npos) << r.output;
  // The interleaved check: rows for the whole model, slices and split plans run by the
  // executor (with their sum of slices next to them), the drift-normalised error and the
  // machine's drift since profiling (reference times layers inside a run).
  r = run_cli("profile " + model + " --check " + out + " --slices 3 --repeat 3 --markdown");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| reference | whole model |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| reference | slice ["), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| plan | split "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("| plan |   as the sum of its slices |"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("drift-normalised error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("drift-normalised mean absolute error"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("split plans as the sum of their slices"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("interleaved rounds"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference: machine drift"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("each run settled by 3 untimed rounds"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("own block"), std::string::npos) << r.output;
  r = run_cli("profile " + model + " --check " + out + " --slices 2 --repeat 2 --settle 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("each run settled by 0 untimed rounds"), std::string::npos) << r.output;
  // With no memory to spare, everything but the whole models (one per device profiled: 6 or
  // more here) is timed in its own block.
  r = run_cli("profile " + model + " --check " + out + " --slices 2 --repeat 2 --interleave-mib 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("configurations timed in 2 interleaved rounds"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("whole model *"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timed each in its own block of 2 runs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" *"), std::string::npos) << r.output;
  // Bad check arguments name the flag or file.
  const std::string check = "profile " + model + " --check ";
  expect_refused(check + out + " --interleave-mib -5", "--interleave-mib");
  expect_refused(check + out + " --repeat 0", "--repeat");
  expect_refused(check + out + " --settle -1", "--settle");
  expect_refused(check + out + " --slices x", "--slices");
  expect_refused(check + dir + "missing.json", "missing.json");

  // --hot times each slice in a loop of itself instead of with cold caches.
  r = run_cli("profile " + model + " --check " + out + " --slices 1 --repeat 1 --hot");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("whole model"), std::string::npos) << r.output;

  // The profile is of another model: refused by hash, naming the field.
  expect_refused("profile " + other + " --check " + out, "model.hash");
  // An unknown device, a bad repeat count, a missing platform file.
  const std::string profile = "profile " + model + " -o " + out;
  expect_refused(profile + " --devices vulkan:9", "vulkan:9");
  expect_refused(profile + " --repeat 0", "--repeat");
  expect_refused(profile + " --calibration-slices -1", "--calibration-slices");
  expect_refused(profile + " --statistic mode", "median, min or mean");
  expect_refused(profile + " --platform " + dir + "nope.json", "nope.json");
  r = run_cli("profile " + model);
  EXPECT_EQ(r.exit_code, 2);
}

// Split plans over two devices run through the executor, with transfers at the cuts.
TEST(ProfileCli, ChecksPlansAcrossDevices) {
  const std::string dir = ::testing::TempDir();
  const std::string model = dir + "profile_cli_two.tsr";
  const std::string out = dir + "profile_cli_two.json";
  save_graph(testing::skip_graph(), model);
  CommandResult r = run_cli("profile " + model + " -o " + out +
                            " --devices reference,cpu --repeat 2 --warmup 0 "
                            "--calibration-slices 2 --split-layers 1 --split-shares 0.5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("split calibration: "), std::string::npos) << r.output;
  {
    auto p = Profile::load(out);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    for (const DeviceProfile& d : p->devices) {
      // The matmul, the one layer of this model with a rule for more than element-wise splits
      // and the heaviest: fc-out and fc-in at share 0.5.
      ASSERT_FALSE(d.levels.back().piece_runs.empty()) << d.device;
      for (const PieceRun& pr : d.levels.back().piece_runs) {
        EXPECT_EQ(pr.flops * 2, p->layers[static_cast<size_t>(pr.layer)].flops) << pr.method;
      }
    }
  }
  // Layer splits through the composite device, priced with and without that calibration.
  r = run_cli("profile " + model + " --check " + out + " --slices 0 --repeat 2 --layer-splits 1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("without split calibration"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("layer splits: mean absolute error"), std::string::npos) << r.output;
  expect_refused("profile " + model + " -o " + out + " --split-shares 0.5,1", "--split-shares");
  expect_refused("profile " + model + " -o " + out + " --split-layers -1", "--split-layers");
  r = run_cli("profile " + model + " --check " + out + " --slices 6 --repeat 2 --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cpu: machine drift"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("reference: machine drift"), std::string::npos) << r.output;
  // At least one plan uses both devices (6 random 2-3 stage plans over 2 devices).
  bool mixed = false;
  size_t at = 0;
  while ((at = r.output.find("split ", at)) != std::string::npos) {
    const std::string line = r.output.substr(at, r.output.find('\n', at) - at);
    mixed = mixed || (line.find("cpu[") != std::string::npos &&
                      line.find("reference[") != std::string::npos);
    ++at;
  }
  EXPECT_TRUE(mixed) << r.output;
}

#ifdef TESSERA_HAVE_ONEDNN
// Precision levels: an int8 level without a calibration table is refused by profile and bench,
// naming the sidecar and `tessera calibrate`; with one, the profile records each level's
// per-layer error, `plan --max-error` bounds the composed error and `run --plan --fidelity`
// prints the measured one next to it.
TEST(ProfileCli, PrecisionLevelsNeedATableAndRecordTheirErrors) {
  // The levels' errors are under test: measured choice could keep the tiny layers in f32 (the
  // CLI inherits the variable).
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  const std::string dir = ::testing::TempDir();
  const std::string model = dir + "profile_cli_int8.tsr";
  const std::string out = dir + "profile_cli_int8.json";
  const std::string plan = dir + "profile_cli_int8.plan.json";
  const std::string input = dir + "profile_cli_int8.x.npy";
  std::remove((model + ".calib.json").c_str());
  save_graph(testing::skip_graph(), model);
  std::mt19937 rng(3);
  ASSERT_TRUE(write_npy(input, testing::random_inputs(testing::skip_graph(), rng)[0]).ok());

  const std::string profile = "profile " + model + " -o " + out +
                              " --repeat 1 --warmup 0 --calibration-slices 0 --corun-rounds 0 -q";
  expect_refused(profile + " --devices cpu:0,cpu:0#int8", model + ".calib.json");
  expect_refused(profile + " --devices cpu:0#int8", "tessera calibrate " + model);
  expect_refused(profile + " --devices cpu:0#int8", "--calibration");
  expect_refused(profile + " --devices cpu:0#int8 --calibration " + dir + "none.json", "none.json");
  expect_refused("bench " + model + " --devices cpu:0#int8 --runs 1 --stream 0 -q",
                 "tessera calibrate " + model);
  expect_refused(profile + " --devices cpu:0#bf16 --error-samples -1", "--error-samples");

  CommandResult r = run_cli("calibrate " + model + " -i " + input + " --samples 4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_cli(profile + " --devices cpu:0,cpu:0#int8,cpu:0#bf16 --error-input " + input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("error against f32"), std::string::npos) << r.output;
  auto p = Profile::load(out);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  for (const char* level : {"cpu:0#int8", "cpu:0#bf16"}) {
    const DeviceProfile* d = p->find(level);
    ASSERT_NE(d, nullptr) << level;
    ASSERT_EQ(d->layer_error.size(), 4u) << level;
    ASSERT_TRUE(d->layer_error[0].has_value()) << level;
    // The MatMul rounds (bf16) or quantises (int8): a small error, not none.
    EXPECT_GT(*d->layer_error[0], 0) << level;
    EXPECT_LT(*d->layer_error[0], 0.1) << level;
    ASSERT_TRUE(d->model_error.has_value()) << level;
  }
  EXPECT_TRUE(p->find("cpu:0")->layer_error.empty());
  r = run_cli("bench " + model + " --devices cpu:0#int8 --runs 1 --stream 0 --no-op-times -q");
  EXPECT_EQ(r.exit_code, 0) << r.output;

  // A bound of 0 keeps every layer that adds an error at f32.
  r = run_cli("plan " + model + " --profile " + out + " --max-error 0 -o " + plan);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("expected relative L2 error against f32 0 "), std::string::npos)
      << r.output;
  auto pl = Plan::load(plan);
  ASSERT_TRUE(pl.ok()) << pl.status().to_string();
  ASSERT_TRUE(pl->estimated_error.has_value());
  EXPECT_EQ(*pl->estimated_error, 0.0);
  EXPECT_EQ(pl->max_error, std::optional<double>(0.0));
  r = run_cli("run " + model + " --plan " + plan + " --fidelity -i " + input);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("plan's expected relative L2 0"), std::string::npos) << r.output;
  expect_refused("plan " + model + " --profile " + out + " --max-error -1", "--max-error");
  expect_refused("plan " + model + " --profile " + out + " --max-error x", "--max-error");
}
#endif

}  // namespace
}  // namespace tessera
