// `tessera serve` and `tessera keygen`: the security rules a user meets before any socket opens.
// Runs the real binary.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "graph/format/model_file.h"
#include "graph/graph.h"
#include "tests/tools/cli_test_util.h"

namespace tessera {
namespace {

using testing::CommandResult;
using testing::run_cli;

std::string small_model() {
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{1, 4}});
  ValueId y = g.add_value("y");
  g.inputs().push_back(x);
  g.add_node(Node{"relu", OpKind::kRelu, {}, {x}, {y}});
  g.outputs().push_back(y);
  EXPECT_TRUE(g.infer_shapes().ok());
  const std::string path = ::testing::TempDir() + "serve_small.tsr";
  EXPECT_TRUE(save_model(g, path, ModelMetadata{"serve_cli_test", {}}).ok());
  return path;
}

TEST(ServeCli, RefusesPlaintextOffLoopbackAndHalfKeys) {
  const std::string model = small_model();
  CommandResult r = run_cli("serve " + model + " --device reference --bind 0.0.0.0 --port 1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("needs CURVE keys"), std::string::npos) << r.output;
  r = run_cli("serve " + model + " --key nonexistent.key");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("--key and --authorised-keys go together"), std::string::npos)
      << r.output;
  EXPECT_EQ(run_cli("serve --help").exit_code, 0);
}

TEST(ServeCli, KeygenWritesAPrivateKeyAndAPublicOne) {
  const std::string base = ::testing::TempDir() + "serve_cli_key";
  CommandResult r = run_cli("keygen " + base);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  namespace fs = std::filesystem;
  EXPECT_EQ(
      fs::status(base + ".key").permissions() & (fs::perms::group_all | fs::perms::others_all),
      fs::perms::none);
  EXPECT_TRUE(fs::exists(base + ".pub"));
  // The public key file alone cannot serve.
  const std::string model = small_model();
  r = run_cli("serve " + model + " --device reference --key " + base + ".pub --authorised-keys " +
              base + ".pub");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("secret key"), std::string::npos) << r.output;
  fs::remove(base + ".key");
  fs::remove(base + ".pub");
}

}  // namespace
}  // namespace tessera
