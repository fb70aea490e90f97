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

TEST(ProfileCli, ProfilesChecksAndRefuses) {
  const std::string dir = ::testing::TempDir();
  const std::string model = dir + "profile_cli_skip.tsr";
  const std::string other = dir + "profile_cli_chain.tsr";
  const std::string out = dir + "profile_cli_skip.json";
  Graph skip = testing::skip_graph();
  Graph chain = testing::matmul_chain(3);
  ASSERT_TRUE(skip.infer_shapes().ok());
  ASSERT_TRUE(chain.infer_shapes().ok());
  ASSERT_TRUE(save_model(skip, model, ModelMetadata{"profile_cli_test", {}}).ok());
  ASSERT_TRUE(save_model(chain, other, ModelMetadata{"profile_cli_test", {}}).ok());

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
  r = run_cli("profile " + model + " --check " + out + " --slices 2 --repeat 2 --memory-budget 0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("configurations timed in 2 interleaved rounds"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("whole model *"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("timed each in its own block of 2 runs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" *"), std::string::npos) << r.output;
  // Bad check arguments name the flag.
  r = run_cli("profile " + model + " --check " + out + " --memory-budget -5");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--memory-budget"), std::string::npos) << r.output;
  r = run_cli("profile " + model + " --check " + out + " --repeat 0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--repeat"), std::string::npos) << r.output;
  r = run_cli("profile " + model + " --check " + out + " --slices x");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--slices"), std::string::npos) << r.output;
  r = run_cli("profile " + model + " --check " + dir + "missing.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("missing.json"), std::string::npos) << r.output;

  // --hot times each slice in a loop of itself instead of with cold caches.
  r = run_cli("profile " + model + " --check " + out + " --slices 1 --repeat 1 --hot");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("whole model"), std::string::npos) << r.output;

  // The profile is of another model: refused by hash, naming the field.
  r = run_cli("profile " + other + " --check " + out);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("model.hash"), std::string::npos) << r.output;
  // An unknown device, a bad repeat count, a missing platform file.
  r = run_cli("profile " + model + " -o " + out + " --devices vulkan:9");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("vulkan:9"), std::string::npos) << r.output;
  r = run_cli("profile " + model + " -o " + out + " --repeat 0");
  EXPECT_EQ(r.exit_code, 1);
  r = run_cli("profile " + model + " -o " + out + " --calibration -1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--calibration"), std::string::npos) << r.output;
  r = run_cli("profile " + model + " -o " + out + " --statistic mode");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("median, min or mean"), std::string::npos) << r.output;
  r = run_cli("profile " + model + " -o " + out + " --platform " + dir + "nope.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("nope.json"), std::string::npos) << r.output;
  r = run_cli("profile " + model);
  EXPECT_EQ(r.exit_code, 2);
}

// Split plans over two devices run through the executor, with transfers at the cuts.
TEST(ProfileCli, ChecksPlansAcrossDevices) {
  const std::string dir = ::testing::TempDir();
  const std::string model = dir + "profile_cli_two.tsr";
  const std::string out = dir + "profile_cli_two.json";
  Graph skip = testing::skip_graph();
  ASSERT_TRUE(skip.infer_shapes().ok());
  ASSERT_TRUE(save_model(skip, model, ModelMetadata{"profile_cli_test", {}}).ok());
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
