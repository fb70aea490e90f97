#include "energy/meter.h"

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

#include "energy/power_model.h"
#include "tests/energy/fixture_tree.h"

namespace tessera {
namespace {

TEST(RaplTest, FindsZonesAndReadsCounters) {
  testing::FixtureTree t;
  // The control-type directory has no counter; package zones and subzones do.
  t.write("sys/class/powercap/intel-rapl/enabled", "1");
  t.write("sys/class/powercap/intel-rapl:0/name", "package-0");
  t.write("sys/class/powercap/intel-rapl:0/energy_uj", "123456789");
  t.write("sys/class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850");
  t.write("sys/class/powercap/intel-rapl:0:0/name", "core");
  t.write("sys/class/powercap/intel-rapl:0:0/energy_uj", "5000");
  t.write("sys/class/powercap/intel-rapl:0:0/max_energy_range_uj", "262143328850");
  auto zones = find_rapl_zones(t.root());
  ASSERT_EQ(zones.size(), 1u);
  EXPECT_EQ(zones[0].name, "package-0");
  EXPECT_EQ(zones[0].max_range_uj, 262143328850u);
  EXPECT_EQ(*read_energy_uj(zones[0]), 123456789u);
  EXPECT_EQ(find_rapl_zones(t.root(), true).size(), 2u);

  // A meter over the fixture: the counter advances by 2.5 J between begin and end.
  auto meter = make_rapl_meter(zones);
  ASSERT_TRUE(meter->begin().ok());
  t.write("sys/class/powercap/intel-rapl:0/energy_uj", "126</br>");
  EXPECT_FALSE(meter->end().ok());  // a garbled counter is an error, not a number
  t.write("sys/class/powercap/intel-rapl:0/energy_uj", "123456789");
  ASSERT_TRUE(meter->begin().ok());
  t.write("sys/class/powercap/intel-rapl:0/energy_uj", "125956789");
  auto r = meter->end();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->measured);
  EXPECT_NEAR(r->joules, 2.5, 1e-9);
  EXPECT_EQ(r->source, "rapl:package-0");
}

TEST(RaplTest, DeltaHandlesWraparound) {
  EXPECT_EQ(rapl_delta_uj(100, 350, 1000), 250u);
  // 990 -> wrap at 1000 -> 20: 10 to reach the top, +1 to roll over to 0, +20.
  EXPECT_EQ(rapl_delta_uj(990, 20, 1000), 31u);
  EXPECT_EQ(rapl_delta_uj(5, 5, 1000), 0u);
  // Unknown range: the best we can say is what has been counted since the wrap.
  EXPECT_EQ(rapl_delta_uj(990, 20, 0), 20u);

  testing::FixtureTree t;
  t.write("sys/class/powercap/intel-rapl:1/name", "package-1");
  t.write("sys/class/powercap/intel-rapl:1/energy_uj", "999000");
  t.write("sys/class/powercap/intel-rapl:1/max_energy_range_uj", "999999");
  auto meter = make_rapl_meter(find_rapl_zones(t.root()));
  ASSERT_TRUE(meter->begin().ok());
  t.write("sys/class/powercap/intel-rapl:1/energy_uj", "1000");
  auto r = meter->end();
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->joules, (999999 - 999000 + 1 + 1000) * 1e-6, 1e-12);
}

TEST(HwmonTest, ReadsPowerAndVoltageCurrentChannels) {
  testing::FixtureTree t;
  // A chip with a direct power reading (microwatts).
  t.write("sys/class/hwmon/hwmon0/name", "acpi_power_meter");
  t.write("sys/class/hwmon/hwmon0/power1_input", "12500000");
  // INA3221 under the mainline driver (JetPack 5): bus voltage in mV, current in mA, labels.
  t.write("sys/class/hwmon/hwmon1/name", "ina3221");
  t.write("sys/class/hwmon/hwmon1/in1_label", "VDD_IN");
  t.write("sys/class/hwmon/hwmon1/in1_input", "5000");
  t.write("sys/class/hwmon/hwmon1/curr1_input", "1200");
  t.write("sys/class/hwmon/hwmon1/in2_label", "VDD_CPU_GPU_CV");
  t.write("sys/class/hwmon/hwmon1/in2_input", "5008");
  t.write("sys/class/hwmon/hwmon1/curr2_input", "400");
  t.write("sys/class/hwmon/hwmon1/in4_input", "12");  // shunt voltage: no current, no channel
  // A temperature sensor is not a power channel.
  t.write("sys/class/hwmon/hwmon2/name", "coretemp");
  t.write("sys/class/hwmon/hwmon2/temp1_input", "45000");
  auto chans = find_power_channels(t.root());
  ASSERT_EQ(chans.size(), 3u);
  EXPECT_EQ(chans[0].label, "acpi_power_meter:1");
  EXPECT_NEAR(*read_power_w(chans[0]), 12.5, 1e-9);
  EXPECT_EQ(chans[1].label, "VDD_IN");
  EXPECT_NEAR(*read_power_w(chans[1]), 6.0, 1e-9);
  EXPECT_NEAR(*read_voltage_v(chans[1]), 5.0, 1e-12);
  EXPECT_NEAR(*read_current_a(chans[1]), 1.2, 1e-12);
  EXPECT_EQ(chans[2].label, "VDD_CPU_GPU_CV");
  EXPECT_NEAR(*read_power_w(chans[2]), 5.008 * 0.4, 1e-9);
  EXPECT_FALSE(read_voltage_v(chans[0]).ok());
}

TEST(HwmonTest, ReadsIna3221xIioLayoutOfJetsonTx2) {
  testing::FixtureTree t;
  // L4T 32 on TX2: two INA3221 at 0x40 and 0x41, milliwatts/millivolts/milliamps.
  const std::string a = "sys/bus/i2c/drivers/ina3221x/0-0040/iio:device0/";
  t.write(a + "rail_name_0", "VDD_SYS_GPU");
  t.write(a + "in_power0_input", "3040");
  t.write(a + "in_voltage0_input", "19040");
  t.write(a + "in_current0_input", "160");
  t.write(a + "rail_name_1", "VDD_SYS_SOC");
  t.write(a + "in_power1_input", "1216");
  const std::string b = "sys/bus/i2c/drivers/ina3221x/0-0041/iio:device1/";
  t.write(b + "rail_name_1", "VDD_SYS_CPU");
  t.write(b + "in_voltage1_input", "19000");
  t.write(b + "in_current1_input", "80");
  auto chans = find_power_channels(t.root());
  ASSERT_EQ(chans.size(), 3u);
  EXPECT_EQ(chans[0].label, "VDD_SYS_GPU");
  EXPECT_NEAR(*read_power_w(chans[0]), 3.04, 1e-9);  // the power file wins over V*I
  EXPECT_NEAR(*read_voltage_v(chans[0]), 19.04, 1e-9);
  EXPECT_EQ(chans[1].label, "VDD_SYS_SOC");
  EXPECT_NEAR(*read_power_w(chans[1]), 1.216, 1e-9);
  EXPECT_EQ(chans[2].label, "VDD_SYS_CPU");
  EXPECT_NEAR(*read_power_w(chans[2]), 19.0 * 0.08, 1e-9);

  // make_meter picks the device's rail and integrates it over time.
  PlatformDevice gpu;
  gpu.device = "vulkan:0";
  gpu.kind = "gpu";
  gpu.power_rail = "VDD_SYS_GPU";
  gpu.dvfs = {DvfsLevel{1300, 0, 0.5}};
  auto meter = make_meter(t.root(), gpu, 0);
  EXPECT_TRUE(meter->measured());
  EXPECT_EQ(meter->source(), "hwmon:VDD_SYS_GPU");
  ASSERT_TRUE(meter->begin().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  auto r = meter->end();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NEAR(r->watts(), 3.04, 1e-6);  // constant power: the mean is exact however the thread ran
}

TEST(FrequencyTest, ReadsCpufreqAndDevfreq) {
  testing::FixtureTree t;
  t.write("sys/devices/system/cpu/cpufreq/policy4/scaling_cur_freq", "2362000");
  t.write("sys/class/devfreq/17000000.gp10b/cur_freq", "1300500000");
  EXPECT_EQ(*cpufreq_current_mhz(t.root(), "policy4"), 2362);
  EXPECT_EQ(*devfreq_current_mhz(t.root(), "17000000.gp10b"), 1300);
  EXPECT_FALSE(cpufreq_current_mhz(t.root(), "policy0").ok());
  PlatformDevice d;
  d.device = "cpu:4-7";
  d.cpufreq_policy = "policy4";
  EXPECT_EQ(*current_mhz(t.root(), d), 2362);
  d.cpufreq_policy.clear();
  EXPECT_FALSE(current_mhz(t.root(), d).ok());
}

TEST(MeterTest, WithoutSensorsEnergyIsModelled) {
  testing::FixtureTree t;
  PlatformDevice d;
  d.device = "reference";
  d.kind = "reference";
  d.dvfs = {DvfsLevel{1000, 800, 1.0}, DvfsLevel{2000, 1000, 2.0}};
  d.dynamic_w = 10;
  auto meter = make_meter(t.root(), d, 0);
  EXPECT_FALSE(meter->measured());
  EXPECT_NE(meter->source().find("modelled"), std::string::npos);
  ASSERT_TRUE(meter->begin().ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto r = meter->end();
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->measured);
  // eq. 4-5 at level 0: 1.0 + (0.8^2 * 1000) / (1.0^2 * 2000) * 10 = 4.2 W.
  EXPECT_NEAR(r->watts(), 4.2, 1e-9);
  EXPECT_GE(r->seconds, 0.005);
}

TEST(PowerTraceTest, ParsesIntegratesAndAligns) {
  // 1 s idle at 2 W (5 V, 0.4 A), then 1 s at 5 W (5 V, 1 A), then idle again.
  std::string csv = "# monitor export\n";
  for (int i = 0; i <= 300; ++i) {
    const double t = i * 0.01;
    const double amps = (t >= 1.0 && t < 2.0) ? 1.0 : 0.4;
    csv += std::to_string(t) + "," + "5.0," + std::to_string(amps) + "\n";
  }
  auto trace = PowerTrace::parse_csv(csv, "trace.csv");
  ASSERT_TRUE(trace.ok()) << trace.status().to_string();
  EXPECT_EQ(trace->samples().size(), 301u);
  EXPECT_NEAR(trace->energy_j(0.0, 0.5), 1.0, 1e-9);
  EXPECT_NEAR(trace->energy_j(1.2, 1.7), 2.5, 1e-9);
  EXPECT_NEAR(trace->average_power_w(1.25, 1.75), 5.0, 1e-9);
  auto start = trace->detect_start(0.5, 1.0);
  ASSERT_TRUE(start.ok());
  EXPECT_NEAR(*start, 1.0, 0.011);
  auto e = trace->run_energy_j(-1, 0.5);  // detect the start
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_NEAR(*e, 2.5, 0.05);
  EXPECT_NEAR(*trace->run_energy_j(1.0, 0.5), 2.5, 1e-9);
  EXPECT_FALSE(trace->run_energy_j(2.8, 1.0).ok());  // past the end of the trace
}

TEST(PowerTraceTest, MonsoonHeaderAndUnits) {
  auto trace = PowerTrace::parse_csv(
      "Time(ms),Main(mA),Main Voltage(V)\n0,100,4.0\n1,100,4.0\n2,300,4.0\n", "monsoon.csv");
  ASSERT_TRUE(trace.ok()) << trace.status().to_string();
  EXPECT_NEAR(trace->end_s(), 0.002, 1e-12);
  // 1 ms at 0.4 W + 1 ms trapezoid 0.4 -> 1.2 W.
  EXPECT_NEAR(trace->energy_j(0, 0.002), 0.0004 + 0.0008, 1e-12);
}

TEST(PowerTraceTest, RefusesBadTraces) {
  auto expect_error = [](const std::string& csv, const std::string& what) {
    auto t = PowerTrace::parse_csv(csv, "x.csv");
    ASSERT_FALSE(t.ok()) << csv;
    EXPECT_NE(t.status().message().find(what), std::string::npos) << t.status().to_string();
  };
  expect_error("0,5,1\n0,5,1\n", "x.csv:2: time does not ascend");
  expect_error("0,5,1\n1,5\n", "x.csv:2: expected 3 columns");
  expect_error("0,5,1\n1,abc,1\n", "x.csv:2: volts is not a number");
  expect_error("0,5,1\n", "at least two samples");
  expect_error("when,where,who\n0,1,2\n", "x.csv:1: header");
  expect_error("0,-5,1\n1,5,1\n", "x.csv:1: negative volts");
}

}  // namespace
}  // namespace tessera
