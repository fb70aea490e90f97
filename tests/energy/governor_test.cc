#include "energy/governor.h"

#include <gtest/gtest.h>

#include "tests/energy/fixture_tree.h"

namespace tessera {
namespace {

const char kPolicy[] = "sys/devices/system/cpu/cpufreq/policy4/";

PlatformDevice big_cluster() {
  PlatformDevice d;
  d.device = "cpu:4-7";
  d.cpufreq_policy = "policy4";
  d.dvfs = {DvfsLevel{682, 700, 0}, DvfsLevel{2362, 1100, 0}};
  return d;
}

TEST(GovernorTest, CpufreqUserspaceSetspeedAndRestore) {
  testing::FixtureTree t;
  const std::string p = kPolicy;
  t.write(p + "scaling_available_governors", "conservative ondemand userspace powersave");
  t.write(p + "scaling_governor", "schedutil");
  t.write(p + "scaling_available_frequencies", "682000 1018000 2362000");
  t.write(p + "scaling_setspeed", "<unsupported>");
  {
    Governor g(t.root(), big_cluster());
    ASSERT_TRUE(g.has_domain());
    EXPECT_EQ(g.available_mhz(), (std::vector<int>{682, 1018, 2362}));
    ASSERT_TRUE(g.set_mhz(680).ok());  // snaps to the listed 682 MHz
    EXPECT_EQ(t.read(p + "scaling_governor"), "userspace");
    EXPECT_EQ(t.read(p + "scaling_setspeed"), "682000");
    ASSERT_TRUE(g.set_mhz(2362).ok());
    EXPECT_EQ(t.read(p + "scaling_setspeed"), "2362000");
  }
  // Destroying the governor restores the original governor.
  EXPECT_EQ(t.read(p + "scaling_governor"), "schedutil");
}

TEST(GovernorTest, CpufreqWithoutUserspacePinsMinAndMax) {
  testing::FixtureTree t;
  const std::string p = kPolicy;
  t.write(p + "scaling_available_governors", "performance schedutil");
  t.write(p + "scaling_governor", "schedutil");
  t.write(p + "scaling_min_freq", "682000");
  t.write(p + "scaling_max_freq", "2362000");
  Governor g(t.root(), big_cluster());
  ASSERT_TRUE(g.set_mhz(1018).ok());
  EXPECT_EQ(t.read(p + "scaling_min_freq"), "1018000");
  EXPECT_EQ(t.read(p + "scaling_max_freq"), "1018000");
  EXPECT_EQ(t.read(p + "scaling_governor"), "schedutil");
  ASSERT_TRUE(g.restore().ok());
  EXPECT_EQ(t.read(p + "scaling_min_freq"), "682000");
  EXPECT_EQ(t.read(p + "scaling_max_freq"), "2362000");
}

TEST(GovernorTest, DevfreqUserspaceSetFreq) {
  testing::FixtureTree t;
  const std::string d = "sys/class/devfreq/17000000.gp10b/";
  t.write(d + "available_governors", "wmark_active userspace performance");
  t.write(d + "governor", "wmark_active");
  t.write(d + "available_frequencies", "114750000 1300500000");
  t.write(d + "userspace/set_freq", "0");
  PlatformDevice gpu;
  gpu.device = "vulkan:0";
  gpu.devfreq = "17000000.gp10b";
  gpu.dvfs = {DvfsLevel{114, 0, 0}, DvfsLevel{1300, 0, 0}};
  Governor g(t.root(), gpu);
  EXPECT_EQ(g.available_mhz(), (std::vector<int>{114, 1300}));
  ASSERT_TRUE(g.set_mhz(114).ok());
  EXPECT_EQ(t.read(d + "governor"), "userspace");
  EXPECT_EQ(t.read(d + "userspace/set_freq"), "114750000");
}

TEST(GovernorTest, RefusedOrMissingDomainWarnsAndContinues) {
  testing::FixtureTree t;
  // No policy directory at all (as on this build machine).
  Governor none(t.root(), big_cluster());
  EXPECT_FALSE(none.has_domain());
  Status s = none.set_mhz(682);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cpu:4-7"), std::string::npos) << s.to_string();
  EXPECT_FALSE(set_level_or_warn(none, "cpu:4-7", 682));

  // A policy whose setspeed file cannot be written (a directory stands in for a refused write).
  const std::string p = kPolicy;
  t.write(p + "scaling_available_governors", "userspace");
  t.write(p + "scaling_governor", "performance");
  t.write(p + "scaling_setspeed/x", "");
  Governor refused(t.root(), big_cluster());
  s = refused.set_mhz(682);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("scaling_setspeed"), std::string::npos) << s.to_string();
  EXPECT_FALSE(set_level_or_warn(refused, "cpu:4-7", 682));
}

}  // namespace
}  // namespace tessera
