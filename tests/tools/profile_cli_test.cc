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

}  // namespace
}  // namespace tessera
