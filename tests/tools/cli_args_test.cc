// The flag parser of the `tessera` subcommands (tools/cli.h): device lists and DEVICE=FACTOR
// lists, whose cpu core sets hold commas themselves (cpu:0,3-5).
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/tools/cli_test_util.h"

namespace tessera {
namespace {

using Strings = std::vector<std::string>;

TEST(CliArgs, DeviceListsKeepCoreSetsWhole) {
  EXPECT_EQ(cli::split_device_list("cpu:0,3-5"), (Strings{"cpu:0,3-5"}));
  EXPECT_EQ(cli::split_device_list("cpu:0,3-5,npu:0"), (Strings{"cpu:0,3-5", "npu:0"}));
  EXPECT_EQ(cli::split_device_list("vulkan:0,cpu:0,3-5,,cpu:1-2"),
            (Strings{"vulkan:0", "cpu:0,3-5", "cpu:1-2"}));
  EXPECT_EQ(cli::split_device_list("cpu:0,cpu:1"), (Strings{"cpu:0", "cpu:1"}));
  EXPECT_EQ(cli::split_device_list("remote:10.0.0.1:5601,cpu"),
            (Strings{"remote:10.0.0.1:5601", "cpu"}));
  EXPECT_EQ(cli::split_device_list(""), Strings{});
  // A leading digit has no device to continue: kept as an item (and refused by who opens it).
  EXPECT_EQ(cli::split_device_list("3,cpu"), (Strings{"3", "cpu"}));
}

// Random lists of device names (some core sets with commas) joined by commas split back into
// the same names.
TEST(CliArgs, DeviceListsRoundTrip) {
  std::mt19937 rng(28);
  const Strings kinds = {"cpu", "npu", "opencl", "vulkan", "reference"};
  for (int trial = 0; trial < 200; ++trial) {
    Strings names;
    const int n = 1 + static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) {
      const std::string kind = kinds[rng() % kinds.size()];
      std::string name = kind;
      if (kind == "cpu") {
        const int parts = static_cast<int>(rng() % 4);
        for (int p = 0; p < parts; ++p) {
          name += (p == 0 ? ":" : ",") + std::to_string(rng() % 16);
          if (rng() % 2) name += "-" + std::to_string(16 + rng() % 16);
        }
      } else if (kind != "reference") {
        name += ":" + std::to_string(rng() % 4);
      }
      names.push_back(name);
    }
    std::string joined;
    for (const std::string& s : names) joined += (joined.empty() ? "" : ",") + s;
    EXPECT_EQ(cli::split_device_list(joined), names) << joined;
  }
}

TEST(CliArgs, DeviceFactorsNameCoreSetsAndRefuseMalformedItems) {
  auto f = cli::parse_device_factors("--scale", {"cpu:0,3-5=0.5,npu:0=2", "cpu:1-2=3"});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(*f, (std::map<std::string, double>{{"cpu:0,3-5", 0.5}, {"npu:0", 2}, {"cpu:1-2", 3}}));
  EXPECT_TRUE(cli::parse_device_factors("--scale", {}).value().empty());

  auto refused = [](const Strings& values, const std::string& says) {
    auto r = cli::parse_device_factors("--scale", values);
    ASSERT_FALSE(r.ok()) << values[0];
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  };
  refused({"cpu:0,3-5"}, "'cpu:0,3-5' is not DEVICE=FACTOR");  // no factor
  refused({"cpu:0=2,3"}, "--scale 'cpu:0' expects a number");  // "2,3" is no number
  refused({"=2"}, "'=2' is not DEVICE=FACTOR");                // no device
  refused({"cpu:0=x"}, "expects a number, got 'x'");
  refused({"cpu:0=1e999"}, "expects a number");
  refused({"cpu:0=1", "cpu:0=2"}, "'cpu:0' is given twice");
  refused({"cpu\n:0"}, "'cpu\\n:0' is not DEVICE=FACTOR");  // printed escaped
}

// `tessera simulate` takes the same syntax: a malformed value is refused before any file is
// read, a core set is accepted (the run then stops at the missing model).
TEST(CliArgs, SimulateScaleFlag) {
  auto r = testing::run_cli("simulate none.tsr --plan p.json --profile q.json --scale cpu:0=2,3");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--scale 'cpu:0' expects a number, got '2,3'"), std::string::npos)
      << r.output;
  r = testing::run_cli("simulate none.tsr --plan p.json --profile q.json --scale cpu:0,3-5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("'cpu:0,3-5' is not DEVICE=FACTOR"), std::string::npos) << r.output;
  r = testing::run_cli(
      "simulate none.tsr --plan p.json --profile q.json --scale cpu:0,3-5=0.2 --scale npu:0=4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.output.find("--scale"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("none.tsr"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessera
