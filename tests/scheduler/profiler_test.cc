#include "scheduler/profiler.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/registry.h"
#include "ops/split_rule.h"
#include "scheduler/cost_model.h"
#include "scheduler/executor/executor.h"
#include "scheduler/fidelity.h"
#include "scheduler/profile.h"
#include "tests/core/hostile_names.h"
#include "tests/scheduler/profile_test_util.h"
#include "tests/scoped_env.h"

namespace tessera {
namespace {

// A platform holding the reference device (and optionally one that cannot be opened here).
Platform test_platform(bool with_absent_device) {
  std::string text = R"({"format": "tessera-platform", "version": 1, "name": "test",
    "devices": [
      {"id": "ref", "kind": "reference", "device": "reference", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 1.0}], "dynamic_w": 4.0})";
  if (with_absent_device) {
    text += R"(,
      {"id": "npu", "kind": "npu", "device": "npu:7", "memory_bytes": 1000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.1}], "dynamic_w": 1.0})";
  }
  text += "]}";
  return Platform::from_json_text(text, "test").value();
}

TEST(ProfilerTest, LayerStatisticsAddUpToTheRunStatistic) {
  // Each run is delayed in a different layer: per-layer minimums sum to 3, no run took less
  // than 4.
  const std::vector<std::vector<double>> runs = {{1, 2, 1}, {2, 1, 1}, {1, 1, 2}};
  const std::vector<double> min = layer_statistics(runs, "min");
  ASSERT_EQ(min.size(), 3u);
  for (double x : min) EXPECT_NEAR(x, 4.0 / 3, 1e-12);
  // Shares follow the per-layer statistic; the total is the statistic of the sums.
  const std::vector<std::vector<double>> skewed = {{1, 3}, {2, 4}, {3, 5}, {10, 6}};
  const std::vector<double> med = layer_statistics(skewed, "median");
  ASSERT_EQ(med.size(), 2u);
  EXPECT_NEAR(med[0] + med[1], 0.5 * (6 + 8), 1e-12);  // median of the sums 4, 6, 8, 16
  EXPECT_NEAR(med[0] / med[1], 2.5 / 4.5, 1e-12);      // per-layer medians 2.5 and 4.5
  const std::vector<double> mean = layer_statistics(skewed, "mean");
  EXPECT_NEAR(mean[0], 4.0, 1e-12);
  EXPECT_NEAR(mean[1], 4.5, 1e-12);
  EXPECT_TRUE(layer_statistics({}, "min").empty());
}

TEST(ProfilerTest, ProfilesEveryLayerOnTheReferenceDevice) {
  auto m = testing::make_model(testing::skip_graph());
  std::vector<std::string> warnings;
  ProfileOptions o = testing::quick_profile_options(3);
  o.warn = [&](const std::string& w) { warnings.push_back(w); };
  int last_done = 0, last_total = 0;
  o.progress = [&](int done, int total, const std::string&) {
    last_done = done;
    last_total = total;
  };
  auto p = profile_model(*m.lg, test_platform(true), o, "skip", "fnv1a64:0123456789abcdef");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  // The absent NPU is skipped with a warning naming it, not an error.
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("npu:7"), std::string::npos) << warnings[0];
  EXPECT_EQ(last_done, last_total);
  ASSERT_EQ(p->devices.size(), 1u);
  EXPECT_EQ(p->platform.devices.size(), 1u);  // the platform records what was profiled
  const DeviceProfile& d = p->devices[0];
  EXPECT_EQ(d.device, "reference");
  EXPECT_TRUE(d.unsupported.empty());
  ASSERT_EQ(d.levels.size(), 1u);
  const LevelProfile& l = d.levels[0];
  // The reference backend times layers inside one run of the whole model, so none is timed
  // alone.
  ASSERT_EQ(l.layer_ms.size(), 4u);
  ASSERT_EQ(l.layer_chain_ms.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_FALSE(l.layer_ms[i].has_value());
    ASSERT_TRUE(l.layer_chain_ms[i].has_value());
    EXPECT_GT(*l.layer_chain_ms[i], 0);
  }
  // Calibration runs: inside the model, timed; the first is the whole chain (here the model).
  ASSERT_EQ(l.slice_runs.size(), 3u);
  EXPECT_EQ(l.slice_runs[0].first, 0);
  EXPECT_EQ(l.slice_runs[0].last, 4);
  for (const SliceRun& r : l.slice_runs) {
    EXPECT_GE(r.first, 0);
    EXPECT_GT(r.last, r.first);
    EXPECT_LE(r.last, 4);
    EXPECT_GT(r.ms, 0);
    // The reference backend times layers inside a run: the run's own layer sum is recorded,
    // and the same layers' sum in the chain runs right before each timed run.
    EXPECT_GT(r.layers_ms, 0);
    EXPECT_LE(r.layers_ms, r.ms);
    EXPECT_GT(r.chain_ms, 0);
  }
  EXPECT_TRUE(l.layer_dynamic_w.empty());  // no sensor: power is not measured
  EXPECT_EQ(l.upload.points.size(), 3u);
  EXPECT_GE(l.upload.alpha_ms_per_byte, 0);
  EXPECT_EQ(p->conditions.repeat, 2);
  EXPECT_FALSE(p->conditions.date.empty());
  EXPECT_EQ(p->cut_live_bytes.size(), 5u);

  // The JSON form round-trips and the cost model builds from it.
  auto again = Profile::from_json_text(p->to_json_text(), "p.json", "fnv1a64:0123456789abcdef");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->to_json_text(), p->to_json_text());
  auto cm = CostModel::build(*again, *m.lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  const int vd = cm->find("reference").value();
  EXPECT_TRUE(std::isfinite(cm->slice_ms(vd, 0, 4)));
  EXPECT_GT(cm->slice_ms(vd, 0, 4), 0);

  // The whole model measured as one program is within reach of the estimate (loose: CI noise).
  auto whole = measure_slice_ms(*m.lg, "reference", 0, 4, 1, 3);
  ASSERT_TRUE(whole.ok()) << whole.status().to_string();
  EXPECT_GT(*whole, 0);
}

// Split calibration: the heaviest splittable layer, one piece per method and share, timed
// against the whole layer; the runs survive the JSON form; bad arguments are refused.
TEST(ProfilerTest, SplitCalibrationTimesPiecesOfTheHeaviestLayer) {
  auto m = testing::make_model(testing::skip_graph());
  // The layers with a split rule, most expensive first; unmeasured ones are left out.
  const std::vector<int> by_time =
      split_calibration_layers(*m.lg, {1.0, 3.0, std::nullopt, 2.0}, 4);
  ASSERT_FALSE(by_time.empty());
  EXPECT_NE(std::find(by_time.begin(), by_time.end(), 0), by_time.end());
  EXPECT_EQ(std::find(by_time.begin(), by_time.end(), 2), by_time.end());
  for (size_t i = 1; i < by_time.size(); ++i) {
    const std::vector<double> t = {1.0, 3.0, 0.0, 2.0};
    EXPECT_GE(t[static_cast<size_t>(by_time[i - 1])], t[static_cast<size_t>(by_time[i])]);
  }
  EXPECT_EQ(split_calibration_layers(*m.lg, {1.0, 3.0, std::nullopt, 2.0}, 1).size(), 1u);

  ProfileOptions o = testing::quick_profile_options(1);
  o.split_layers = 4;  // every layer with a rule, whatever the machine's noise
  auto p = profile_model(*m.lg, test_platform(false), o, "skip", "fnv1a64:0123456789abcdef");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const LevelProfile& l = p->devices[0].levels[0];
  ASSERT_FALSE(l.piece_runs.empty());
  std::set<std::string> methods;
  std::set<double> shares;
  for (const PieceRun& r : l.piece_runs) {
    EXPECT_TRUE(parse_split_method(r.method).ok()) << r.method;
    EXPECT_GT(r.ms, 0);
    EXPECT_GT(r.whole_ms, 0);
    if (r.layer != 0) continue;  // the matmul
    methods.insert(r.method);
    if (r.method == "fc-out") shares.insert(r.flops / p->layers[0].flops);
  }
  EXPECT_EQ(methods, (std::set<std::string>{"fc-out", "fc-in"}));
  EXPECT_EQ(shares, (std::set<double>{0.25, 0.5}));
  auto again = Profile::from_json_text(p->to_json_text(), "p.json");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->to_json_text(), p->to_json_text());
  ASSERT_EQ(again->devices[0].levels[0].piece_runs.size(), l.piece_runs.size());
  auto cm = CostModel::build(*again, *m.lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  EXPECT_EQ(cm->piece_corrections(0, 0, SplitMethod::kFcOut).size(), 2u);

  auto device = open_device("reference");
  ASSERT_TRUE(device.ok());
  auto bad_share = measure_piece_runs(*m.lg, **device, {0}, {1.5}, 0, 1, "median");
  ASSERT_FALSE(bad_share.ok());
  EXPECT_NE(bad_share.status().message().find("1.5"), std::string::npos);
  auto bad_layer = measure_piece_runs(*m.lg, **device, {9}, {0.5}, 0, 1, "median");
  ASSERT_FALSE(bad_layer.ok());
  EXPECT_NE(bad_layer.status().message().find("layer 9"), std::string::npos);
  // A layer without a rule (sigmoid splits element-wise) and one with: only rules give runs;
  // equal pieces of one method (a share that apportions the same units) are timed once.
  auto runs = measure_piece_runs(*m.lg, **device, {0}, {0.5, 0.5}, 0, 1, "min");
  ASSERT_TRUE(runs.ok()) << runs.status().to_string();
  EXPECT_EQ(runs->size(), 2u);
}

// A timed Program::run gives one time per layer, no more than the run took, and the same outputs
// as run(), on every backend here that times layers in a run.
TEST(ProfilerTest, ChainTimingKeepsOutputsAndAddsUp) {
  auto m = testing::make_model(testing::skip_graph());
  std::vector<NodeId> nodes;
  for (int i = 0; i < m.lg->num_layers(); ++i) nodes.push_back(m.lg->layer(i).node);
  int timed = 0;
  for (const char* name : {"reference", "cpu", "opencl:0", "vulkan:0", "npu:0"}) {
    SCOPED_TRACE(name);
    auto device = open_device(name);
    if (!device.ok()) continue;  // not in this build or machine
    auto program = (*device)->compile(m.lg->graph(), nodes);
    if (!program.ok()) continue;  // e.g. an NPU without Sigmoid
    auto inputs = make_inputs(m.lg->graph(), (*program)->input_values()).value();
    std::vector<Tensor> plain(1), timed_out(1);
    ASSERT_TRUE((*program)->run(inputs, plain).ok());
    std::vector<double> ms;
    const auto t0 = std::chrono::steady_clock::now();
    Status st = (*program)->run(inputs, timed_out, RunOptions::timed(&ms));
    const double wall =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (st.code() == StatusCode::kUnimplemented) continue;
    ASSERT_TRUE(st.ok()) << st.to_string();
    ++timed;
    ASSERT_EQ(ms.size(), nodes.size());
    double sum = 0;
    for (double x : ms) {
      EXPECT_GE(x, 0);
      sum += x;
    }
    EXPECT_LE(sum, wall);
    ASSERT_EQ(timed_out[0].numel(), plain[0].numel());
    for (int64_t i = 0; i < plain[0].numel(); ++i) {
      EXPECT_EQ(timed_out[0].data<float>()[i], plain[0].data<float>()[i]) << i;
    }
  }
  EXPECT_GE(timed, 2);  // reference and cpu at least
}

TEST(ProfilerTest, RefusesUnknownDevicesAndBadOptions) {
  auto m = testing::make_model(testing::skip_graph());
  ProfileOptions o = testing::quick_profile_options(3);
  o.devices = {"vulkan:3"};
  auto p = profile_model(*m.lg, test_platform(false), o, "skip", "h");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("vulkan:3"), std::string::npos);
  o.devices = {"npu:7"};
  o.warn = [](const std::string&) {};
  p = profile_model(*m.lg, test_platform(true), o, "skip", "h");
  ASSERT_FALSE(p.ok());  // the only device asked for cannot be opened
  EXPECT_NE(p.status().message().find("no device could be profiled"), std::string::npos);
  o = testing::quick_profile_options(3);
  o.repeat = 0;
  EXPECT_FALSE(profile_model(*m.lg, test_platform(false), o, "skip", "h").ok());
  EXPECT_FALSE(measure_slice_ms(*m.lg, "reference", 2, 2, 0, 1).ok());
  EXPECT_FALSE(measure_slice_ms(*m.lg, "reference", 0, 5, 0, 1).ok());
}

#ifdef TESSERA_HAVE_ONEDNN
// A precision level of a platform device (docs/precision.md) is profiled as a device of its own,
// described by its device's entry under the level's name; a level of a device not in the
// platform is refused, and one whose backend lacks the precision cannot be profiled.
TEST(ProfilerTest, ProfilesPrecisionLevelsAsDevices) {
  auto m = testing::make_model(testing::skip_graph());
  const Platform platform = Platform::from_json_text(
                                R"({"format": "tessera-platform", "version": 1, "name": "test",
    "devices": [
      {"id": "cpu0", "kind": "cpu", "device": "cpu:0", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 1.0}], "dynamic_w": 4.0},
      {"id": "ref", "kind": "reference", "device": "reference", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 1.0}], "dynamic_w": 4.0}]})",
                                "test")
                                .value();
  ProfileOptions o = testing::quick_profile_options(2);
  o.devices = {"cpu:0", "cpu:0#bf16"};
  auto p = profile_model(*m.lg, platform, o, "skip", "h");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->devices.size(), 2u);
  EXPECT_EQ(p->devices[1].device, "cpu:0#bf16");
  ASSERT_EQ(p->platform.devices.size(), 2u);
  EXPECT_EQ(p->platform.devices[1].device, "cpu:0#bf16");
  EXPECT_EQ(p->platform.devices[1].id, "cpu0#bf16");
  ASSERT_EQ(p->devices[1].levels.size(), 1u);
  EXPECT_EQ(p->devices[1].levels[0].layer_ms.size(), 4u);
  o.devices = {"cpu:1#bf16"};
  auto absent = profile_model(*m.lg, platform, o, "skip", "h");
  ASSERT_FALSE(absent.ok());
  EXPECT_NE(absent.status().message().find("cpu:1#bf16"), std::string::npos);
  o.devices = {"reference#bf16"};
  o.warn = [](const std::string&) {};
  EXPECT_FALSE(profile_model(*m.lg, platform, o, "skip", "h").ok());
}

// Nearest-even bf16 rounding of a finite float, written here as the oracle's own.
float round_bf16(float x) {
  uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
  float y = 0;
  std::memcpy(&y, &u, 4);
  return y;
}

// Each layer's error carried to the outputs (LayerErrors::layer_output_error) against an
// independent run: the plan with that layer alone on cpu:0#bf16 and the others on the reference
// device, through the executor, against the reference device alone, over the same samples.
TEST(ProfilerTest, CarriesEachLayersErrorToTheOutputs) {
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  auto m = testing::make_model(testing::matmul_chain(4));
  const LayerGraph& lg = *m.lg;
  std::mt19937 rng(12);
  std::vector<std::vector<Tensor>> samples;
  for (int i = 0; i < 3; ++i) samples.push_back(testing::random_inputs(lg.graph(), rng));
  auto ref = open_device("reference");
  auto bf16 = open_device("cpu:0#bf16");
  ASSERT_TRUE(ref.ok() && bf16.ok());
  auto low = measure_layer_errors(lg, **bf16, **ref, samples, {});
  ASSERT_TRUE(low.ok()) << low.status().to_string();
  ASSERT_EQ(low->layer_output_error.size(), 4u);
  auto all_f32 = Executor::create(lg, plan_from_slices(4, {{0, "reference"}}).value());
  ASSERT_TRUE(all_f32.ok());
  for (int l = 0; l < 4; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    std::vector<std::pair<int, std::string>> slices;
    if (l > 0) slices.emplace_back(0, "reference");
    slices.emplace_back(l, "cpu:0#bf16");
    if (l < 3) slices.emplace_back(l + 1, "reference");
    auto ex = Executor::create(lg, plan_from_slices(4, slices).value());
    ASSERT_TRUE(ex.ok()) << ex.status().to_string();
    FidelityMeter meter;
    for (const std::vector<Tensor>& s : samples) {
      std::vector<Tensor> got, want;
      ASSERT_TRUE((*ex)->run(s, &got).ok());
      ASSERT_TRUE((*all_f32)->run(s, &want).ok());
      ASSERT_TRUE(meter.add(got, want).ok());
    }
    const double oracle = meter.result().relative_l2;
    EXPECT_GT(oracle, 1e-4);  // every layer is a bf16 MatMul
    ASSERT_TRUE(low->layer_output_error[static_cast<size_t>(l)].has_value());
    EXPECT_NEAR(*low->layer_output_error[static_cast<size_t>(l)], oracle, 1e-6 + 1e-3 * oracle);
  }
}

// The per-layer error against f32 (DeviceProfile::layer_error): 0 where a device computes in f32,
// and for the bf16 MatMul of skip_graph the error of an oracle that rounds x, W and the result to
// bf16 and multiplies in double; the element-wise layers have no bf16 kernel (0).
TEST(ProfilerTest, MeasuresEachLayersErrorAgainstF32) {
  // The bf16 kernel's error is under test: measured choice could keep the tiny MatMul in f32.
  testing::ScopedEnv rules("TESSERA_CPU_KERNELS", "rules");
  auto m = testing::make_model(testing::skip_graph());
  const Graph& g = m.lg->graph();
  std::mt19937 rng(11);
  std::vector<std::vector<Tensor>> samples = {testing::random_inputs(g, rng),
                                              testing::random_inputs(g, rng)};
  auto ref = open_device("reference");
  auto cpu = open_device("cpu:0");
  auto bf16 = open_device("cpu:0#bf16");
  ASSERT_TRUE(ref.ok() && cpu.ok() && bf16.ok());
  auto same = measure_layer_errors(*m.lg, **cpu, **ref, samples, {});
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  ASSERT_EQ(same->layer_error.size(), 4u);
  for (const auto& e : same->layer_error) {
    ASSERT_TRUE(e.has_value());
    EXPECT_LT(*e, 1e-5);  // f32 against f32: kernels differ in summation order only
  }
  auto low = measure_layer_errors(*m.lg, **bf16, **ref, samples, {});
  ASSERT_TRUE(low.ok()) << low.status().to_string();
  // The oracle for layer 0, y = x W over both samples.
  const Tensor& w = g.value(g.node(m.lg->layer(0).node).inputs[1]).data;
  double err2 = 0, ref2 = 0;
  for (const std::vector<Tensor>& s : samples) {
    const auto x = s[0].span<float>();
    const auto wv = w.span<float>();
    for (int i = 0; i < 4; ++i) {
      for (int j = 0; j < 32; ++j) {
        double exact = 0, rounded = 0;
        for (int k = 0; k < 32; ++k) {
          exact += static_cast<double>(x[i * 32 + k]) * wv[k * 32 + j];
          rounded += static_cast<double>(round_bf16(x[i * 32 + k])) * round_bf16(wv[k * 32 + j]);
        }
        const double y = round_bf16(static_cast<float>(rounded));
        err2 += (y - exact) * (y - exact);
        ref2 += exact * exact;
      }
    }
  }
  const double oracle = std::sqrt(err2 / ref2);
  ASSERT_TRUE(low->layer_error[0].has_value());
  EXPECT_GT(oracle, 1e-4);
  EXPECT_NEAR(*low->layer_error[0], oracle, 0.1 * oracle);
  for (int l = 1; l < 4; ++l) {
    ASSERT_TRUE(low->layer_error[static_cast<size_t>(l)].has_value()) << l;
    EXPECT_LT(*low->layer_error[static_cast<size_t>(l)], 1e-6) << l;
  }
  ASSERT_TRUE(low->model_error.has_value());
  EXPECT_GT(*low->model_error, 0);
  EXPECT_LT(*low->model_error, 2e-2);
  // Refusals: no samples, a sample of the wrong input count.
  EXPECT_FALSE(measure_layer_errors(*m.lg, **bf16, **ref, {}, {}).ok());
  auto wrong = measure_layer_errors(*m.lg, **bf16, **ref, {{}}, {});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("error sample 0 has 0 tensors"), std::string::npos);
  // int8 without a calibration table: no layer compiles, so none has an error.
  auto int8 = open_device("cpu:0#int8");
  ASSERT_TRUE(int8.ok());
  auto none = measure_layer_errors(*m.lg, **int8, **ref, samples, {});
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  EXPECT_FALSE(none->layer_error[0].has_value());
  // ...and the profiler refuses the level up front, saying what is missing.
  ProfileOptions o = testing::quick_profile_options(0);
  o.devices = {"cpu:0#int8"};
  const Platform platform = Platform::from_json_text(
                                R"({"format": "tessera-platform", "version": 1, "name": "test",
    "devices": [{"id": "cpu0", "kind": "cpu", "device": "cpu:0", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 1.0}], "dynamic_w": 4.0}]})",
                                "test")
                                .value();
  auto refused = profile_model(*m.lg, platform, o, "skip", "h");
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("cpu:0#int8"), std::string::npos);
  EXPECT_NE(refused.status().message().find("tessera calibrate"), std::string::npos);
}
#endif

// Two devices: each one's co-run factor is measured (its chains alone and while the other runs
// its own), recorded, round-tripped and read by the cost model; with no rounds, none.
TEST(ProfilerTest, MeasuresACoRunFactorPerDevice) {
  auto m = testing::make_model(testing::skip_graph());
  const Platform platform = Platform::from_json_text(
                                R"({"format": "tessera-platform", "version": 1, "name": "test",
    "devices": [
      {"id": "cpu0", "kind": "cpu", "device": "cpu:0", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 1.0}], "dynamic_w": 4.0},
      {"id": "ref", "kind": "reference", "device": "reference", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 1.0}], "dynamic_w": 4.0}]})",
                                "test")
                                .value();
  ProfileOptions o = testing::quick_profile_options(1);
  o.corun_rounds = 3;
  auto p = profile_model(*m.lg, platform, o, "skip", "h");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  ASSERT_EQ(p->devices.size(), 2u);
  for (const DeviceProfile& d : p->devices) {
    EXPECT_GE(d.corun_scale, 1) << d.device;
    EXPECT_TRUE(std::isfinite(d.corun_scale)) << d.device;
  }
  auto again = Profile::from_json_text(p->to_json_text(), "p.json");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->devices[1].corun_scale, p->devices[1].corun_scale);
  auto cm = CostModel::build(*again, *m.lg);
  ASSERT_TRUE(cm.ok()) << cm.status().to_string();
  EXPECT_EQ(cm->corun_scale(cm->find("reference").value()), p->devices[1].corun_scale);

  // One device alone, or no rounds: not measured, and the cost model's factor is 1.
  o.corun_rounds = 0;
  p = profile_model(*m.lg, platform, o, "skip", "h");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  for (const DeviceProfile& d : p->devices) EXPECT_EQ(d.corun_scale, 0) << d.device;
  EXPECT_EQ(p->to_json_text().find("corun_scale"), std::string::npos);
  o.corun_rounds = 3;
  o.devices = {"reference"};
  p = profile_model(*m.lg, platform, o, "skip", "h");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->devices[0].corun_scale, 0);
  cm = CostModel::build(*p, *m.lg);
  ASSERT_TRUE(cm.ok());
  EXPECT_EQ(cm->corun_scale(cm->find("reference").value()), 1);
}

// time_interleaved: every configuration once per round, its `before` right before it, in an
// order that changes between rounds; errors name the configuration.
TEST(ProfilerTest, TimesConfigurationsInShuffledRounds) {
  std::vector<std::string> log;
  std::vector<TimedRun> runs;
  for (int i = 0; i < 5; ++i) {
    const std::string id = std::to_string(i);
    runs.push_back({"config " + id,
                    [&log, id] {
                      log.push_back("before " + id);
                      return Status();
                    },
                    [&log, id] {
                      log.push_back("run " + id);
                      return Status();
                    }});
  }
  runs[4].before = nullptr;  // optional
  std::mt19937 rng(7);
  auto ms = time_interleaved(runs, 6, rng);
  ASSERT_TRUE(ms.ok()) << ms.status().to_string();
  ASSERT_EQ(ms->size(), 5u);
  for (const auto& per_round : *ms) {
    ASSERT_EQ(per_round.size(), 6u);
    for (double x : per_round) EXPECT_GE(x, 0);
  }
  std::vector<std::vector<std::string>> orders(6);
  size_t k = 0;
  for (int r = 0; r < 6; ++r) {
    std::set<std::string> seen;
    while (orders[static_cast<size_t>(r)].size() < 5) {
      ASSERT_LT(k, log.size());
      std::string id = log[k].substr(log[k].size() - 1);
      if (id != "4") {
        EXPECT_EQ(log[k], "before " + id);
        ++k;
      }
      ASSERT_LT(k, log.size());
      EXPECT_EQ(log[k], "run " + id);
      ++k;
      EXPECT_TRUE(seen.insert(id).second) << "config " << id << " twice in round " << r;
      orders[static_cast<size_t>(r)].push_back(id);
    }
  }
  EXPECT_EQ(k, log.size());
  EXPECT_EQ(std::set<std::vector<std::string>>(orders.begin(), orders.end()).size() > 1, true)
      << "every round ran in the same order";

  // A failing run stops the measurement, naming the configuration (and the run before it).
  runs[2].run = [] { return internal_error("boom"); };
  auto failed = time_interleaved(runs, 2, rng);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("config 2"), std::string::npos)
      << failed.status().to_string();
  runs[2].run = [] { return Status(); };
  runs[3].before = [] { return internal_error("boom"); };
  failed = time_interleaved(runs, 2, rng);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.status().message().find("config 3 (the untimed run before it)"),
            std::string::npos)
      << failed.status().to_string();
  EXPECT_FALSE(time_interleaved(runs, 0, rng).ok());
  auto none = time_interleaved({}, 3, rng);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  EXPECT_EQ(summarize_ms({3, 1, 2}, "min"), 1);
  EXPECT_EQ(summarize_ms({3, 1, 2}, "median"), 2);
  EXPECT_EQ(summarize_ms({3, 1, 2}, "mean"), 2);
  EXPECT_EQ(summarize_ms({}, "median"), 0);
}

// SliceProgram refuses empty or out-of-range layer ranges and runs a valid one.
TEST(ProfilerTest, SliceProgramChecksItsRange) {
  auto m = testing::make_model(testing::skip_graph());
  auto device = open_device("reference");
  ASSERT_TRUE(device.ok());
  EXPECT_FALSE(SliceProgram::compile(*m.lg, **device, 2, 2).ok());
  EXPECT_FALSE(SliceProgram::compile(*m.lg, **device, -1, 2).ok());
  auto bad = SliceProgram::compile(*m.lg, **device, 0, 5);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[0, 5)"), std::string::npos);
  auto s = SliceProgram::compile(*m.lg, **device, 1, 3);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(s->run().ok());
  ASSERT_EQ(s->outputs.size(), s->program->output_values().size());
  EXPECT_NE(s->outputs[0].raw(), nullptr);
}

TEST(TransferFitTest, RecoversALineAndReportsR2) {
  std::vector<std::pair<uint64_t, double>> pts;
  for (uint64_t b : {1000u, 5000u, 20000u, 80000u}) pts.emplace_back(b, 2e-6 * b + 0.05);
  auto f = TransferFit::fit(pts);
  ASSERT_TRUE(f.ok());
  EXPECT_NEAR(f->alpha_ms_per_byte, 2e-6, 1e-12);
  EXPECT_NEAR(f->beta_ms, 0.05, 1e-9);
  EXPECT_NEAR(f->r2, 1.0, 1e-12);
  EXPECT_NEAR(f->ms(10000, 2), 2e-6 * 10000 + 0.1, 1e-9);
  EXPECT_EQ(f->ms(10000, 0), 0);
  // Noisy points: R^2 below one.
  pts[1].second *= 1.5;
  f = TransferFit::fit(pts);
  ASSERT_TRUE(f.ok());
  EXPECT_LT(f->r2, 1.0);
  EXPECT_GT(f->r2, 0.9);
  EXPECT_FALSE(TransferFit::fit({{1000, 1.0}, {1000, 1.1}}).ok());
  EXPECT_FALSE(TransferFit::fit({{1000, -1.0}, {2000, 1.1}}).ok());
}

// A sweep whose cost per byte grows past a cache (as a CPU copy's does): each tensor is priced
// on the measured points, not on the line through them, which the largest size dominates.
TEST(TransferFitTest, PricesEachTensorOnTheMeasuredPoints) {
  const uint64_t kib = 1024, mib = 1024 * kib;
  // Given out of order, with a repeat of one size.
  auto f = TransferFit::fit(
      {{16 * mib, 5.0}, {4 * kib, 0.001}, {mib, 0.1}, {4 * mib, 0.6}, {4 * mib, 0.6}});
  ASSERT_TRUE(f.ok());
  ASSERT_EQ(f->points.front().first, 4 * kib);
  EXPECT_NEAR(f->ms(mib), 0.1, 1e-12);                     // on a point
  EXPECT_NEAR(f->ms(2 * mib), 0.1 + 0.5 / 3, 1e-9);        // between 1 and 4 MiB
  EXPECT_NEAR(f->ms(kib), 0.001, 1e-12);                   // below the sweep: its smallest
  EXPECT_NEAR(f->ms(20 * mib), 5.0 + 4.4 / 12 * 4, 1e-9);  // above: the last slope
  EXPECT_NEAR(f->ms(2 * mib, 2), 2 * 0.1, 1e-12);          // two 1 MiB tensors
  EXPECT_EQ(f->ms(mib, 0), 0);
  // The line through the points prices 1.6 MiB by the 16 MiB point: over twice the sweep's cost.
  const uint64_t b = 1600 * kib;
  EXPECT_GT(f->alpha_ms_per_byte * static_cast<double>(b) + f->beta_ms, 2 * f->ms(b));
  // Never negative, whatever the noise between two sizes.
  auto g = TransferFit::fit({{4 * kib, 0.01}, {8 * kib, 0.002}, {64 * kib, 0.02}});
  ASSERT_TRUE(g.ok());
  for (uint64_t x : {kib, 5 * kib, 8 * kib, 30 * kib, mib}) EXPECT_GE(g->ms(x), 0) << x;
  EXPECT_NEAR(g->ms(6 * kib), 0.006, 1e-12);
  // Without points (a fit built by hand): eq. 1-2.
  TransferFit line;
  line.alpha_ms_per_byte = 1e-6;
  line.beta_ms = 0.5;
  EXPECT_NEAR(line.ms(1000, 2), 1e-3 + 1.0, 1e-12);
}

// ---- profile JSON refusals ----

class ProfileJsonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    m_ = testing::make_model(testing::skip_graph());
    ProfileOptions o = testing::quick_profile_options(3);
    o.repeat = 1;
    text_ = profile_model(*m_.lg, test_platform(false), o, "skip", "fnv1a64:00000000000000aa")
                .value()
                .to_json_text();
  }
  void expect_refused(const std::string& from, const std::string& to, const std::string& field,
                      const std::string& hash = "") {
    std::string t = text_;
    const size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    t.replace(at, from.size(), to);
    auto p = Profile::from_json_text(t, "p.json", hash);
    ASSERT_FALSE(p.ok()) << "accepted " << to;
    EXPECT_NE(p.status().message().find(field), std::string::npos) << p.status().to_string();
  }
  testing::TestModel m_;
  std::string text_;
};

TEST_F(ProfileJsonTest, RefusesWhatCannotBeTrusted) {
  ASSERT_TRUE(Profile::from_json_text(text_, "p.json", "fnv1a64:00000000000000aa").ok());
  auto p = Profile::from_json_text(text_, "p.json", "fnv1a64:00000000000000bb");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("model.hash"), std::string::npos);
  EXPECT_NE(p.status().message().find("p.json"), std::string::npos);
  expect_refused("\"version\": 3", "\"version\": 9", "version: 9 is not supported");
  // Version 1 profiles timed layers alone only: refused, with what to do.
  expect_refused("\"version\": 3", "\"version\": 1", "profile the model again");
  {
    auto j = nlohmann::json::parse(text_);
    j["devices"][0]["levels"][0]["layer_chain_ms"][2] = -0.5;
    auto neg = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_FALSE(neg.ok());
    EXPECT_NE(neg.status().message().find("devices[0].levels[0].layer_chain_ms[2]"),
              std::string::npos)
        << neg.status().to_string();
    j = nlohmann::json::parse(text_);
    j["devices"][0]["levels"][0]["slice_runs"] = {{3, 9, 1.0}};
    auto range = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_FALSE(range.ok());
    EXPECT_NE(range.status().message().find("devices[0].levels[0].slice_runs[0]: [3, 9)"),
              std::string::npos)
        << range.status().to_string();
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 0.0}};
    auto zero = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_FALSE(zero.ok());
    EXPECT_NE(zero.status().message().find("slice_runs[0]: ms must be positive"), std::string::npos)
        << zero.status().to_string();
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 1.0, 1.5}};
    auto over = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_FALSE(over.ok());
    EXPECT_NE(over.status().message().find("slice_runs[0]: layers_ms must be in [0, ms]"),
              std::string::npos)
        << over.status().to_string();
    {
      // Split calibration runs: every field checked, named.
      auto k = nlohmann::json::parse(text_);
      auto refused = [&](const nlohmann::json& run, const std::string& needle) {
        k["devices"][0]["levels"][0]["piece_runs"] = nlohmann::json::array({run});
        auto q = Profile::from_json_text(k.dump(), "p.json");
        ASSERT_FALSE(q.ok()) << run.dump();
        EXPECT_NE(q.status().message().find(needle), std::string::npos) << q.status().to_string();
      };
      const double flops = k["model"]["layers"][0]["flops"].get<double>();
      nlohmann::json ok = {{"layer", 0},   {"method", "fc-out"}, {"flops", flops / 2},
                           {"bytes", 100}, {"ms", 0.5},          {"whole_ms", 1.0}};
      k["devices"][0]["levels"][0]["piece_runs"] = nlohmann::json::array({ok});
      auto good = Profile::from_json_text(k.dump(), "p.json");
      ASSERT_TRUE(good.ok()) << good.status().to_string();
      EXPECT_EQ(good->devices[0].levels[0].piece_runs[0].method, "fc-out");
      nlohmann::json bad = ok;
      bad["method"] = "diagonal";
      refused(bad, "piece_runs[0].method: 'diagonal' is not a split method");
      bad = ok;
      bad["layer"] = 9;
      refused(bad, "piece_runs[0].layer");
      bad = ok;
      bad["flops"] = flops * 3;
      refused(bad, "piece_runs[0].flops");
      bad = ok;
      bad["ms"] = 0;
      refused(bad, "piece_runs[0].ms");
      bad = ok;
      bad["whole_ms"] = -1.0;
      refused(bad, "piece_runs[0].whole_ms");
      refused(nlohmann::json::array({0, 1}), "piece_runs[0]");
    }
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 1.0, 0.75}};
    auto four = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_TRUE(four.ok()) << four.status().to_string();
    EXPECT_EQ(four->devices[0].levels[0].slice_runs[0].layers_ms, 0.75);
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 1.0, 0.75, 0.5}};
    auto five = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_TRUE(five.ok()) << five.status().to_string();
    EXPECT_EQ(five->devices[0].levels[0].slice_runs[0].chain_ms, 0.5);
    EXPECT_NE(five->to_json_text().find("0.5"), std::string::npos);
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 1.0, 0.75, -0.5}};
    auto neg_chain = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_FALSE(neg_chain.ok());
    EXPECT_NE(neg_chain.status().message().find("slice_runs[0]: chain_ms must be >= 0"),
              std::string::npos)
        << neg_chain.status().to_string();
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 1.0, 0.0, 0.5}};
    EXPECT_FALSE(Profile::from_json_text(j.dump(), "p.json").ok());  // chain_ms without layers_ms
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 1.0, 0.75, 0.5, 1.0}};
    EXPECT_FALSE(Profile::from_json_text(j.dump(), "p.json").ok());
    j["devices"][0]["levels"][0]["slice_runs"] = {{0, 2, 1.0, "x"}};
    EXPECT_FALSE(Profile::from_json_text(j.dump(), "p.json").ok());
    j["devices"][0]["levels"][0]["slice_runs"] = {"x"};
    EXPECT_FALSE(Profile::from_json_text(j.dump(), "p.json").ok());
  }
  expect_refused("\"tessera-profile\"", "\"tessera-plan\"", "format");
  {
    auto j = nlohmann::json::parse(text_);
    j["devices"][0]["levels"][0]["layer_ms"][1] = -1.5;
    auto neg = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_FALSE(neg.ok());
    EXPECT_NE(neg.status().message().find("devices[0].levels[0].layer_ms[1]"), std::string::npos)
        << neg.status().to_string();
  }
  expect_refused("\"layer_ms\": [\n", "\"layer_ms\": [\n 1.0,", "layer_ms: has 5 entries");
  expect_refused("\"device\": \"reference\",\n   \"levels\"",
                 "\"device\": \"opencl:0\",\n   \"levels\"", "devices[0].device: 'opencl:0'");
  expect_refused("\"cut_live_bytes\": [", "\"cut_live_bytes\": [1,", "model.cut_live_bytes");
  expect_refused("\"unsupported\": {}", "\"unsupported\": {\"9\": \"x\"}",
                 "unsupported: key '9' is not a layer index");
  expect_refused("\"repeat\": 1", "\"repeat\": 0", "conditions.repeat");
  expect_refused("\"unsupported\": {}", "\"unsupported\": {}, \"corun_scale\": 0.5",
                 "devices[0].corun_scale");
  expect_refused("\"beta_ms\": ", "\"beta_ms\": -1, \"x\": ", "download.beta_ms");
  expect_refused("{", "{,", "malformed JSON at byte");
  // A profile of another model (layer names) is caught by check_matches.
  auto other = testing::make_model(testing::matmul_chain(4));
  auto ok = Profile::from_json_text(text_, "p.json");
  ASSERT_TRUE(ok.ok());
  Status s = ok->check_matches(*other.lg);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("model.layers[0]"), std::string::npos) << s.to_string();
}

// Names from a profile file (devices, layers, keys, format, statistic) are printed escaped and
// bounded (quote_name), whatever bytes they hold.
TEST_F(ProfileJsonTest, HostileNamesPrintEscapedAndBounded) {
  const nlohmann::json base = nlohmann::json::parse(text_);
  for (const testing::HostileName& h : testing::hostile_names()) {
    SCOPED_TRACE(h.what);
    auto refusal = [&](const nlohmann::json& j) {
      return Profile::from_json_text(j.dump(), "p.json").status();
    };
    nlohmann::json j = base;
    j["devices"][0]["device"] = h.raw;
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["format"] = h.raw;
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["conditions"]["statistic"] = h.raw;
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["devices"][0]["unsupported"] = {{h.raw, "x"}};
    testing::expect_safe_message(refusal(j), h);
    j = base;
    j["model"]["hash"] = h.raw;
    testing::expect_safe_message(
        Profile::from_json_text(j.dump(), "p.json", "fnv1a64:00000000000000aa").status(), h);
    // A layer name is only compared with the model's.
    j = base;
    j["model"]["layers"][0]["name"] = h.raw;
    auto renamed = Profile::from_json_text(j.dump(), "p.json");
    ASSERT_TRUE(renamed.ok()) << renamed.status().to_string();
    testing::expect_safe_message(renamed->check_matches(*m_.lg), h);
  }
}

TEST(ModelHashTest, HashesBytes) {
  EXPECT_EQ(bytes_hash("", 0), "fnv1a64:cbf29ce484222325");
  EXPECT_EQ(bytes_hash("a", 1), "fnv1a64:af63dc4c8601ec8c");
  EXPECT_NE(bytes_hash("ab", 2), bytes_hash("ba", 2));
  EXPECT_FALSE(model_file_hash("/nonexistent/model.tsr").ok());
}

// json_number_overflow.profile.json (issue 28): a number no double holds used to throw out of
// the reader and terminate the process; now it is an error naming the file.
TEST(Profile, NumberOverflowIsAnErrorNamingTheFile) {
  auto p = Profile::from_json_text(R"({"format": "tessera-profile", "version": 1e999})",
                                   "x.profile.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("x.profile.json: number out of range"), std::string::npos)
      << p.status().message();
}

}  // namespace
}  // namespace tessera
