// Small graphs for the profiler and cost-model tests.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/internal.h"
#include "energy/platform.h"
#include "graph/graph.h"
#include "graph/layer_graph.h"
#include "scheduler/profile.h"
#include "scheduler/profiler.h"

namespace tessera::testing {

// One f32 tensor per graph input, uniform in [-1, 1).
inline std::vector<Tensor> random_inputs(const Graph& g, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<Tensor> in;
  for (ValueId v : g.inputs()) {
    Tensor t = Tensor::create(g.value(v).info.dtype, g.value(v).info.shape).value();
    for (float& x : t.span<float>()) x = u(rng);
    in.push_back(t);
  }
  return in;
}

// Profiler options for quick tests: no warm-up, two repeats, three transfer sizes, no sysfs.
inline ProfileOptions quick_profile_options(int calibration_slices) {
  ProfileOptions o;
  o.warmup = 0;
  o.repeat = 2;
  o.calibration_slices = calibration_slices;
  o.transfer_sizes = {4096, 65536, 262144};
  o.sysfs_root = "/nonexistent-sysfs";
  return o;
}

// x[4,32] -> MatMul(W) -> Relu -> Add(x) -> Sigmoid: four layers; x skips over the first two.
inline Graph skip_graph() {
  Graph g;
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, Shape{4, 32}});
  g.inputs().push_back(x);
  std::vector<float> w(32 * 32);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
  ValueId wv = g.add_constant("w", Tensor::from_floats(Shape{32, 32}, w));
  ValueId mm = g.add_value("mm"), r = g.add_value("r"), a = g.add_value("a"), y = g.add_value("y");
  g.add_node(Node{"matmul", OpKind::kMatMul, {}, {x, wv}, {mm}});
  g.add_node(Node{"relu", OpKind::kRelu, {}, {mm}, {r}});
  g.add_node(Node{"add", OpKind::kAdd, {}, {r, x}, {a}});
  g.add_node(Node{"sigmoid", OpKind::kSigmoid, {}, {a}, {y}});
  g.outputs() = {y};
  return g;
}

// A chain of `n` MatMuls of varying widths (for the regression).
inline Graph matmul_chain(int n) {
  Graph g;
  auto width = [](int i) { return 8 + 8 * ((i * 5) % 7); };
  ValueId cur = g.add_value("x", TensorInfo{DType::kF32, Shape{2, width(0)}});
  g.inputs().push_back(cur);
  for (int i = 0; i < n; ++i) {
    const int64_t k = width(i), m = width(i + 1);
    std::vector<float> w(static_cast<size_t>(k * m), 0.01f);
    ValueId wv = g.add_constant("w" + std::to_string(i), Tensor::from_floats(Shape{k, m}, w));
    ValueId out = g.add_value("h" + std::to_string(i));
    g.add_node(Node{"mm" + std::to_string(i), OpKind::kMatMul, {}, {cur, wv}, {out}});
    cur = out;
  }
  g.outputs() = {cur};
  return g;
}

struct TestModel {
  std::shared_ptr<const Model> model;
  std::unique_ptr<LayerGraph> lg;
};

inline TestModel make_model(Graph g) {
  TestModel t;
  t.model = Model::from_graph(std::move(g)).value();
  t.lg = std::make_unique<LayerGraph>(LayerGraph::build(model_graph(*t.model)).value());
  return t;
}

// A two-device platform: "cpu:0-1" with three levels (1000, 1500, 2000 MHz) and "npu:0" with one.
inline Platform two_devices(uint64_t npu_memory) {
  return Platform::from_json_text(
             R"({"format": "tessera-platform", "version": 1, "name": "t", "devices": [
      {"id": "cpu", "kind": "cpu", "device": "cpu:0-1", "memory_bytes": 1000000000,
       "dvfs": [{"mhz": 1000, "mv": 800, "static_w": 0.2}, {"mhz": 1500, "mv": 900, "static_w": 0.3},
                {"mhz": 2000, "mv": 1000, "static_w": 0.5}], "dynamic_w": 3.0},
      {"id": "npu", "kind": "npu", "device": "npu:0", "memory_bytes": )" +
                 std::to_string(npu_memory) + R"(,
       "dvfs": [{"mhz": 0, "mv": 0, "static_w": 0.1}], "dynamic_w": 1.0}]})",
             "t")
      .value();
}

// A transfer fit c = alpha * bytes + beta (ms).
inline TransferFit line(double alpha, double beta) {
  TransferFit f;
  f.alpha_ms_per_byte = alpha;
  f.beta_ms = beta;
  f.r2 = 1;
  return f;
}

}  // namespace tessera::testing
