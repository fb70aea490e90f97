// `tessera profile` end to end on a small model: writes a profile, checks it, refuses bad input.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "scheduler/profile.h"
#include "tests/scheduler/profile_test_util.h"
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
  EXPECT_EQ(r.output.find("own block"), std::string::npos) << r.output;
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
  expect_refused(profile + " --calibration -1", "--calibration");
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
                            " --devices reference,cpu --repeat 2 --warmup 0 --calibration 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
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

}  // namespace
}  // namespace tessera
