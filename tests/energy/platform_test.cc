#include "energy/platform.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "energy/power_model.h"
#include "tests/core/hostile_names.h"
#include "tests/energy/fixture_tree.h"

namespace tessera {
namespace {

const char kMinimal[] = R"({
  "format": "tessera-platform", "version": 1, "name": "board",
  "devices": [
    {"id": "big", "kind": "cpu", "device": "cpu:4-7", "cores": [4,5,6,7],
     "memory_bytes": 1000000,
     "dvfs": [{"mhz": 500, "mv": 700, "static_w": 0.1}, {"mhz": 1000, "mv": 1000, "static_w": 0.3}],
     "dynamic_w": 2.0, "sources": {"dvfs": "test"}}
  ]})";

// Replaces the first occurrence of `from` in kMinimal by `to`.
std::string variant(const std::string& from, const std::string& to) {
  std::string s = kMinimal;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

void expect_refused(const std::string& text, const std::string& field) {
  auto p = Platform::from_json_text(text, "test.json");
  ASSERT_FALSE(p.ok()) << "accepted; expected an error naming " << field;
  EXPECT_NE(p.status().message().find(field), std::string::npos) << p.status().to_string();
}

TEST(PlatformTest, LoadsMinimalAndRoundTrips) {
  auto p = Platform::from_json_text(kMinimal, "test.json");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->devices.size(), 1u);
  const PlatformDevice& d = p->devices[0];
  EXPECT_EQ(d.device, "cpu:4-7");
  EXPECT_EQ(d.dvfs.size(), 2u);
  EXPECT_EQ(d.max_level().mhz, 1000);
  EXPECT_EQ(d.sources.at("dvfs"), "test");
  EXPECT_EQ(*d.level_index(500), 0);
  EXPECT_FALSE(d.level_index(700).ok());
  auto again = Platform::from_json_text(p->to_json_text(), "again");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->to_json_text(), p->to_json_text());
  EXPECT_EQ(p->find("big"), &p->devices[0]);
  EXPECT_EQ(p->find("cpu:4-7"), &p->devices[0]);
  EXPECT_EQ(p->find("npu:0"), nullptr);
}

TEST(PlatformTest, RefusesBadDocuments) {
  expect_refused("{\"format\": ", "malformed JSON at byte");
  expect_refused("[1,2]", "expected a JSON object");
  expect_refused(variant("\"version\": 1", "\"version\": 2"), "version: 2 is not supported");
  expect_refused(variant("\"tessera-platform\"", "\"tessera-plan\""), "format");
  expect_refused(variant("\"name\": \"board\",", ""), "name: required field missing");
  expect_refused(variant("\"kind\": \"cpu\"", "\"kind\": \"fpga\""), "devices[0].kind");
  expect_refused(variant("\"device\": \"cpu:4-7\"", "\"device\": \"tpu:0\""), "devices[0].device");
  expect_refused(variant("\"device\": \"cpu:4-7\"", "\"device\": \"cpu:4-7@1000\""),
                 "devices[0].device");
  expect_refused(variant("\"memory_bytes\": 1000000", "\"memory_bytes\": 0"),
                 "devices[0].memory_bytes");
  expect_refused(variant("\"memory_bytes\": 1000000", "\"memory_bytes\": \"1MB\""),
                 "devices[0].memory_bytes: expected an integer");
  expect_refused(variant("\"mhz\": 1000", "\"mhz\": 400"), "devices[0].dvfs[1].mhz");
  expect_refused(variant("\"mhz\": 500", "\"mhz\": -5"), "devices[0].dvfs[0].mhz");
  expect_refused(variant("\"mhz\": 500", "\"mhz\": 0"), "devices[0].dvfs[0].mhz");
  expect_refused(variant("\"mv\": 700", "\"mv\": 0"), "devices[0].dvfs[1].mv");
  expect_refused(variant("\"static_w\": 0.1", "\"static_w\": -0.1"), "devices[0].dvfs[0].static_w");
  expect_refused(variant("\"dynamic_w\": 2.0", "\"dynamic_w\": 1e9"), "devices[0].dynamic_w");
  expect_refused(variant("\"cores\": [4,5,6,7]", "\"cores\": [4,4]"), "devices[0].cores[1]");
  expect_refused(variant("\"dvfs\": [{\"mhz\": 500, \"mv\": 700, \"static_w\": 0.1}, ",
                         "\"dvfs\": [], \"x\": [{\"mhz\": 500, \"mv\": 700, \"static_w\": 0.1}, "),
                 "devices[0].dvfs: empty DVFS table");
  expect_refused(variant("\"devices\": [", "\"devices\": [], \"y\": ["), "devices: a platform");
  // Two devices with the same id.
  std::string twice = kMinimal;
  const size_t open = twice.find("{\"id\"");
  const size_t close = twice.rfind("}\n  ]");
  const std::string dev = twice.substr(open, close + 1 - open);
  std::string dup = dev;
  dup.replace(dup.find("cpu:4-7"), 7, "cpu:0-3");
  twice.insert(close + 1, ",\n" + dup);
  expect_refused(twice, "devices[1].id: 'big' is used twice");
}

// Names from a platform file (ids, kinds, devices, source keys, format) are printed escaped and
// bounded (quote_name), whatever bytes they hold.
TEST(PlatformTest, HostileNamesPrintEscapedAndBounded) {
  const nlohmann::json base = nlohmann::json::parse(kMinimal);
  for (const testing::HostileName& h : testing::hostile_names()) {
    SCOPED_TRACE(h.what);
    auto refusal = [](const nlohmann::json& j) {
      return Platform::from_json_text(j.dump(), "b.json").status();
    };
    nlohmann::json j = base;
    j["format"] = h.raw;
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["devices"][0]["kind"] = h.raw;
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["devices"][0]["device"] = h.raw;
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["devices"][0]["sources"][h.raw] = 5;
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["devices"][0]["id"] = h.raw;
    j["devices"].push_back(j["devices"][0]);
    j["devices"][1]["device"] = "cpu:0-3";
    testing::expect_safe_message(refusal(j), h);
  }
}

TEST(PlatformTest, SingleFixedLevelMayHaveUnknownFrequency) {
  auto p = Platform::from_json_text(
      variant("[{\"mhz\": 500, \"mv\": 700, \"static_w\": 0.1}, {\"mhz\": 1000, \"mv\": 1000, "
              "\"static_w\": 0.3}]",
              "[{\"mhz\": 0, \"mv\": 0, \"static_w\": 0.2}]"),
      "fixed");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_DOUBLE_EQ(dynamic_power_scale(p->devices[0], 0), 1.0);
  EXPECT_DOUBLE_EQ(power_w(p->devices[0], 0), 2.2);
}

TEST(PlatformTest, PowerModelFollowsEquation5) {
  auto p = Platform::from_json_text(kMinimal, "t");
  ASSERT_TRUE(p.ok());
  const PlatformDevice& d = p->devices[0];
  // (0.7^2 * 500) / (1.0^2 * 1000) = 0.245
  EXPECT_NEAR(dynamic_power_scale(d, 0), 0.245, 1e-12);
  EXPECT_NEAR(dynamic_power_scale(d, 1), 1.0, 1e-12);
  EXPECT_NEAR(power_w(d, 0), 0.1 + 0.245 * 2.0, 1e-12);
  EXPECT_NEAR(power_w(d, 0, 4.0), 0.1 + 0.245 * 4.0, 1e-12);
  EXPECT_NEAR(power_w(d, 1), 2.3, 1e-12);
}

TEST(PlatformTest, ShippedBoardsLoad) {
  for (const char* board :
       {"hikey970", "jetson_tx2", "jetson_tx2_cores", "jetson_agx_xavier", "raspberry_pi3"}) {
    SCOPED_TRACE(board);
    auto p = Platform::load(shipped_platform_dir() + "/" + board + ".json");
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(p->name, board);
    EXPECT_FALSE(p->sources.empty());
    for (const PlatformDevice& d : p->devices) {
      // Every figure names its source.
      for (const char* field : {"dvfs", "memory_bytes", "static_w", "dynamic_w"}) {
        EXPECT_TRUE(d.sources.count(field)) << d.id << " lacks a source for " << field;
      }
    }
  }
  // A shipped board by name; a name that is neither a file nor a board is refused by name.
  auto by_name = Platform::load_file_or_board("jetson_tx2");
  ASSERT_TRUE(by_name.ok()) << by_name.status().to_string();
  EXPECT_EQ(by_name->name, "jetson_tx2");
  auto unknown = Platform::load_file_or_board("no_such_board");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no_such_board"), std::string::npos);
  auto hikey = Platform::load(shipped_platform_dir() + "/hikey970.json");
  ASSERT_TRUE(hikey.ok());
  // Seed 000 Table II: 9 big, 7 little, 8 GPU levels; the NPU has one and a 100 MB cap.
  EXPECT_EQ(hikey->find("big")->dvfs.size(), 9u);
  EXPECT_EQ(hikey->find("big")->max_level().mhz, 2362);
  EXPECT_EQ(hikey->find("big")->max_level().mv, 1100);
  EXPECT_EQ(hikey->find("little")->dvfs.size(), 7u);
  EXPECT_EQ(hikey->find("little")->min_level().mhz, 509);
  EXPECT_EQ(hikey->find("gpu")->dvfs.size(), 8u);
  EXPECT_EQ(hikey->find("gpu")->max_level().mhz, 767);
  EXPECT_EQ(hikey->find("npu")->dvfs.size(), 1u);
  EXPECT_EQ(hikey->find("npu")->memory_bytes, 100u * 1000 * 1000);
  // Seed 000 eq. 7: 9 + 7 + 8 + 1 = 25 virtual devices for energy optimisation.
  size_t levels = 0;
  for (const PlatformDevice& d : hikey->devices) levels += d.dvfs.size();
  EXPECT_EQ(levels, 25u);
}

TEST(PlatformTest, DetectReadsCpufreqPolicies) {
  testing::FixtureTree t;
  t.write("sys/devices/system/cpu/online", "0-7");
  t.write("sys/devices/system/cpu/cpufreq/policy0/related_cpus", "0 1 2 3");
  t.write("sys/devices/system/cpu/cpufreq/policy0/scaling_available_frequencies",
          "509000 1018000 1844000 ");
  t.write("sys/devices/system/cpu/cpufreq/policy4/related_cpus", "4 5 6 7");
  t.write("sys/devices/system/cpu/cpufreq/policy4/cpuinfo_min_freq", "682000");
  t.write("sys/devices/system/cpu/cpufreq/policy4/cpuinfo_max_freq", "2362000");
  const Platform p = Platform::detect(t.root());
  const PlatformDevice* little = p.find("cpu:0-3");
  const PlatformDevice* big = p.find("cpu:4-7");
  ASSERT_NE(little, nullptr) << p.to_json_text();
  ASSERT_NE(big, nullptr);
  EXPECT_EQ(little->dvfs.size(), 3u);
  EXPECT_EQ(little->max_level().mhz, 1844);
  EXPECT_EQ(little->cpufreq_policy, "policy0");
  EXPECT_EQ(big->dvfs.size(), 2u);
  EXPECT_EQ(big->min_level().mhz, 682);
  EXPECT_EQ(big->cores, (std::vector<int>{4, 5, 6, 7}));
  // Two clusters: no per-core devices.
  EXPECT_EQ(p.find("cpu:0"), nullptr) << p.to_json_text();
  // The registry's reference device is always there.
  ASSERT_NE(p.find("reference"), nullptr);
  // What detect() writes loads back.
  auto again = Platform::from_json_text(p.to_json_text(), "detected");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
}

TEST(PlatformTest, DetectWithoutCpufreqGivesOneUnknownLevel) {
  testing::FixtureTree t;
  t.write("sys/devices/system/cpu/online", "0-1");
  const Platform p = Platform::detect(t.root());
  const PlatformDevice* ref = p.find("reference");
  ASSERT_NE(ref, nullptr);
  EXPECT_EQ(ref->cores, (std::vector<int>{0, 1}));
  ASSERT_EQ(ref->dvfs.size(), 1u);
  EXPECT_EQ(ref->dvfs[0].mhz, 0);
  EXPECT_GT(ref->memory_bytes, 0u);
  auto again = Platform::from_json_text(p.to_json_text(), "detected");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
}

TEST(PlatformTest, DetectListsEachCoreOfASmallUniformMachine) {
  testing::FixtureTree t;
  t.write("sys/devices/system/cpu/online", "0-1");
  t.write("sys/devices/system/cpu/cpu0/cpu_capacity", "1024");
  t.write("sys/devices/system/cpu/cpu1/cpu_capacity", "1024");
  const Platform p = Platform::detect(t.root());
  for (int c : {0, 1}) {
    const PlatformDevice* core = p.find("cpu:" + std::to_string(c));
    ASSERT_NE(core, nullptr) << p.to_json_text();
    EXPECT_EQ(core->kind, "cpu");
    EXPECT_EQ(core->id, "cpu" + std::to_string(c));
    EXPECT_EQ(core->cores, std::vector<int>{c});
    ASSERT_EQ(core->dvfs.size(), 1u);
    EXPECT_EQ(core->dvfs[0].mhz, 0);
  }
  // The whole cpu is one cluster: no `cpu:0-1` beside `cpu` (which the registry lists).
  EXPECT_EQ(p.find("cpu:0-1"), nullptr);
  auto again = Platform::from_json_text(p.to_json_text(), "detected");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->devices.size(), p.devices.size());
}

TEST(PlatformTest, DetectGroupsClustersByCapacity) {
  // A phone-like 4+2 system without cpufreq: capacities 446 (little) and 1024 (big).
  testing::FixtureTree t;
  t.write("sys/devices/system/cpu/online", "0-5");
  for (int c = 0; c < 6; ++c) {
    t.write("sys/devices/system/cpu/cpu" + std::to_string(c) + "/cpu_capacity",
            c < 4 ? "446" : "1024");
  }
  const Platform p = Platform::detect(t.root());
  const PlatformDevice* little = p.find("cpu:0-3");
  const PlatformDevice* big = p.find("cpu:4-5");
  ASSERT_NE(little, nullptr) << p.to_json_text();
  ASSERT_NE(big, nullptr) << p.to_json_text();
  EXPECT_EQ(big->cores, (std::vector<int>{4, 5}));
  EXPECT_EQ(little->dynamic_w, 4 * 3.0);
  EXPECT_EQ(p.find("cpu:4"), nullptr);
}

TEST(PlatformTest, DetectListsNoPerCoreDevicesOnALargeUniformMachine) {
  testing::FixtureTree t;
  t.write("sys/devices/system/cpu/online", "0-15");
  const Platform p = Platform::detect(t.root());
  EXPECT_EQ(p.find("cpu:0"), nullptr) << p.to_json_text();
  EXPECT_EQ(p.find("cpu:0-15"), nullptr);
  ASSERT_NE(p.find("reference"), nullptr);
  EXPECT_EQ(p.find("reference")->cores.size(), 16u);
}

// The shipped boards' CPU topology as their kernels expose it in sysfs (online CPUs and the
// cpufreq policies: which CPUs share a frequency domain, and the top frequency of each).
struct BoardPolicy {
  const char* name;
  std::vector<int> cpus;
  int max_khz;
};
struct BoardTopology {
  const char* board;
  const char* online;
  std::vector<BoardPolicy> policies;
};
const BoardTopology kBoardTopologies[] = {
    // HiKey 970: cpu0-3 Cortex-A53 (1844 MHz), cpu4-7 Cortex-A73 (2362 MHz).
    {"hikey970", "0-7", {{"policy0", {0, 1, 2, 3}, 1844000}, {"policy4", {4, 5, 6, 7}, 2362000}}},
    // Jetson TX2: the A57 cluster is cpu0 and cpu3-5, the Denver 2 cluster cpu1-2; both top out
    // at 2035 MHz, so only the frequency domains tell them apart.
    {"jetson_tx2", "0-5", {{"policy0", {0, 3, 4, 5}, 2035200}, {"policy1", {1, 2}, 2035200}}},
    // Jetson AGX Xavier: 4 Carmel clusters of 2, one cpufreq policy each.
    {"jetson_agx_xavier",
     "0-7",
     {{"policy0", {0, 1}, 2265600},
      {"policy2", {2, 3}, 2265600},
      {"policy4", {4, 5}, 2265600},
      {"policy6", {6, 7}, 2265600}}},
    // Raspberry Pi 3: 4 Cortex-A53 in one frequency domain.
    {"raspberry_pi3", "0-3", {{"policy0", {0, 1, 2, 3}, 1200000}}},
};

// Platform::detect on each board's sysfs finds the core clusters its shipped platform file names
// (device names as `tessera devices` lists them on the board, their cores and cpufreq policy).
TEST(PlatformTest, DetectFindsTheClustersOfEachShippedBoard) {
  for (const BoardTopology& b : kBoardTopologies) {
    SCOPED_TRACE(b.board);
    auto shipped = Platform::load(shipped_platform_dir() + "/" + b.board + ".json");
    ASSERT_TRUE(shipped.ok()) << shipped.status().to_string();
    testing::FixtureTree t;
    t.write("sys/devices/system/cpu/online", b.online);
    for (const BoardPolicy& pol : b.policies) {
      std::string related, freqs;
      for (int c : pol.cpus) {
        related += (related.empty() ? "" : " ") + std::to_string(c);
        t.write("sys/devices/system/cpu/cpu" + std::to_string(c) + "/cpufreq/cpuinfo_max_freq",
                std::to_string(pol.max_khz));
      }
      const PlatformDevice* d = nullptr;
      for (const PlatformDevice& s : shipped->devices) {
        if (s.kind == "cpu" && s.cpufreq_policy == pol.name) d = &s;
      }
      ASSERT_NE(d, nullptr) << "no cpu device of " << pol.name;
      for (const DvfsLevel& l : d->dvfs) freqs += std::to_string(l.mhz * 1000) + " ";
      const std::string dir = std::string("sys/devices/system/cpu/cpufreq/") + pol.name;
      t.write(dir + "/related_cpus", related);
      t.write(dir + "/scaling_available_frequencies", freqs);
      t.write(dir + "/cpuinfo_max_freq", std::to_string(pol.max_khz));
      // The board file's top level is the policy's top frequency.
      EXPECT_EQ(d->max_level().mhz, pol.max_khz / 1000) << d->id;
    }
    const Platform p = Platform::detect(t.root());
    // The core-set devices detect lists (not the registry's whole-cpu `cpu` or `reference`).
    std::map<std::string, const PlatformDevice*> detected;
    for (const PlatformDevice& d : p.devices) {
      if (d.kind == "cpu" && d.device.rfind("cpu:", 0) == 0) detected[d.device] = &d;
    }
    std::vector<const PlatformDevice*> board_cpus;
    for (const PlatformDevice& d : shipped->devices) {
      if (d.kind == "cpu") board_cpus.push_back(&d);
    }
    if (board_cpus.size() == 1 && board_cpus[0]->device == "cpu") {
      // One uniform cluster: the board names the whole-cpu device; detect lists it too (from the
      // registry) over the same cores, and splits it into single cores.
      const PlatformDevice* whole = p.find("cpu");
      ASSERT_NE(whole, nullptr) << p.to_json_text();
      EXPECT_EQ(whole->cores, board_cpus[0]->cores);
      EXPECT_EQ(whole->cpufreq_policy, board_cpus[0]->cpufreq_policy);
      EXPECT_EQ(detected.size(), board_cpus[0]->cores.size()) << p.to_json_text();
      for (int c : board_cpus[0]->cores) EXPECT_EQ(detected.count("cpu:" + std::to_string(c)), 1u);
      continue;
    }
    EXPECT_EQ(detected.size(), board_cpus.size()) << p.to_json_text();
    for (const PlatformDevice* d : board_cpus) {
      SCOPED_TRACE(d->id);
      auto it = detected.find(d->device);
      ASSERT_NE(it, detected.end()) << "detect does not list " << d->device << "\n"
                                    << p.to_json_text();
      EXPECT_EQ(it->second->cores, d->cores);
      EXPECT_EQ(it->second->cpufreq_policy, d->cpufreq_policy);
      EXPECT_EQ(it->second->max_level().mhz, d->max_level().mhz);
    }
  }
}

// json_number_overflow.platform.json (issue 28): a number no double holds used to throw out of
// the reader and terminate the process; now it is an error naming the file.
TEST(Platform, NumberOverflowIsAnErrorNamingTheFile) {
  auto p = Platform::from_json_text(R"({"format": "tessera-platform", "version": 1e999})",
                                    "x.platform.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("x.platform.json: number out of range"), std::string::npos)
      << p.status().message();
}

}  // namespace
}  // namespace tessera
