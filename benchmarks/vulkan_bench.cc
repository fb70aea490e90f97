// Vulkan backend benchmarks.
//
//   per op:    single layers with real shapes from the foundation models (ResNet-50 3x3 and
//              1x1 convolutions, MobileNetV2 depthwise, the VGG16/AlexNet FC layers, pooling,
//              element-wise); wall time of Program::run (staging copies included) and the GPU
//              time between the node's timestamps (counter gpu_ms).
//   per model: Session::run of each foundation model (from $TESSERA_MODEL_DIR or
//              ~/.cache/tessera/models; models missing there are skipped).
//   vs cpu:    ModelVsCpu/<model> compiles the whole model on the device and on `cpu` and runs
//              them alternately (so machine load hits both alike); counters: median ms of each,
//              their ratio, and the device's memory (activation arena against one buffer per
//              activation, constants).
// The device is $TESSERA_BENCH_DEVICE (default vulkan:0), so the same shapes can be timed on
// reference or cpu for comparison:
//   build/benchmarks/tessera_vulkan_bench --benchmark_filter=Model
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "api/tessera.h"
#include "backends/registry.h"
#include "backends/vulkan/vulkan_program.h"
#include "core/npy.h"
#include "core/stats.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"

namespace tessera {
namespace {

std::string bench_device() {
  const char* d = std::getenv("TESSERA_BENCH_DEVICE");
  return d != nullptr ? d : "vulkan:0";
}

Tensor random_tensor(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, s).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

struct LayerCase {
  const char* name;
  OpKind kind;
  std::vector<std::pair<const char*, AttributeValue>> attrs;
  std::vector<Shape> inputs;  // input 0 is the activation; the others are constants
};

const std::vector<LayerCase>& layer_cases() {
  using Ints = std::vector<int64_t>;
  static const std::vector<LayerCase> cases = {
      {"conv3x3_resnet50_56x56x64",
       OpKind::kConv,
       {{"pads", Ints{1, 1, 1, 1}}, {"activation", std::string("relu")}},
       {{1, 64, 56, 56}, {64, 64, 3, 3}, {64}}},
      {"conv3x3_resnet50_7x7x512",
       OpKind::kConv,
       {{"pads", Ints{1, 1, 1, 1}}, {"activation", std::string("relu")}},
       {{1, 512, 7, 7}, {512, 512, 3, 3}, {512}}},
      {"conv1x1_resnet50_56x56x64to256",
       OpKind::kConv,
       {},
       {{1, 64, 56, 56}, {256, 64, 1, 1}, {256}}},
      {"conv7x7s2_resnet50_stem",
       OpKind::kConv,
       {{"pads", Ints{3, 3, 3, 3}}, {"strides", Ints{2, 2}}},
       {{1, 3, 224, 224}, {64, 3, 7, 7}, {64}}},
      {"dwconv3x3_mobilenetv2_112x112x96s2",
       OpKind::kConv,
       {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}, {"group", int64_t{96}}},
       {{1, 96, 112, 112}, {96, 1, 3, 3}, {96}}},
      {"fc_vgg16_25088x4096",
       OpKind::kGemm,
       {{"transB", int64_t{1}}},
       {{1, 25088}, {4096, 25088}, {4096}}},
      {"fc_alexnet_4096x4096",
       OpKind::kGemm,
       {{"transB", int64_t{1}}},
       {{1, 4096}, {4096, 4096}, {4096}}},
      {"maxpool3x3s2_resnet50",
       OpKind::kMaxPool,
       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}},
       {{1, 64, 112, 112}}},
      {"add_relu_resnet50_56x56x256",
       OpKind::kAdd,
       {{"activation", std::string("relu")}},
       {{1, 256, 56, 56}, {1, 256, 56, 56}}},
      {"global_avgpool_resnet50", OpKind::kGlobalAveragePool, {}, {{1, 2048, 7, 7}}},
  };
  return cases;
}

void BM_Layer(benchmark::State& state, const LayerCase& c) {
  auto dev = open_device(bench_device());
  if (!dev.ok()) {
    state.SkipWithError(dev.status().to_string().c_str());
    return;
  }
  Graph g;
  Node n;
  n.name = c.name;
  n.kind = c.kind;
  for (const auto& [k, v] : c.attrs) n.attrs.set(k, v);
  ValueId x = g.add_value("x", TensorInfo{DType::kF32, c.inputs[0]});
  g.inputs().push_back(x);
  n.inputs.push_back(x);
  if (c.kind == OpKind::kAdd) {
    ValueId x2 = g.add_value("x2", TensorInfo{DType::kF32, c.inputs[1]});
    g.inputs().push_back(x2);
    n.inputs.push_back(x2);
  } else {
    for (size_t i = 1; i < c.inputs.size(); ++i) {
      n.inputs.push_back(g.add_constant("w" + std::to_string(i),
                                        random_tensor(c.inputs[i], static_cast<uint32_t>(i))));
    }
  }
  ValueId y = g.add_value("y");
  g.outputs().push_back(y);
  n.outputs = {y};
  g.add_node(n);
  if (Status s = g.infer_shapes(); !s.ok()) {
    state.SkipWithError(s.to_string().c_str());
    return;
  }
  NodeId layers[] = {0};
  auto program = (*dev)->compile(g, layers);
  if (!program.ok()) {
    state.SkipWithError(program.status().to_string().c_str());
    return;
  }
  std::vector<Tensor> ins;
  for (ValueId v : (*program)->input_values())
    ins.push_back(random_tensor(g.value(v).info.shape, 7));
  std::vector<Tensor> outs(1);
  double gpu_ms = 0;
  for (auto _ : state) {
    Status s = (*program)->run(ins, outs);
    if (!s.ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
    if (auto* vp = dynamic_cast<VulkanProgram*>(program->get()); vp && !vp->node_times().empty())
      gpu_ms += vp->node_times()[0].ms;
  }
  NodeContext nc(g, g.node(0));
  std::vector<TensorInfo> outs_info = {g.value(y).info};
  const double flops = node_cost(nc.ctx(), outs_info).flops;
  state.counters["GFLOPS"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) * 1e-9, benchmark::Counter::kIsRate);
  state.counters["gpu_ms"] = gpu_ms / static_cast<double>(std::max<int64_t>(1, state.iterations()));
}

std::string model_dir() {
  if (const char* d = std::getenv("TESSERA_MODEL_DIR")) return d;
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : ".") + "/.cache/tessera/models";
}

void BM_Model(benchmark::State& state, const std::string& name) {
  const std::string base = model_dir() + "/" + name;
  if (!std::filesystem::exists(base + ".onnx")) {
    state.SkipWithError((base + ".onnx is missing (scripts/export_models.py)").c_str());
    return;
  }
  auto imported = convert_onnx(base + ".onnx");
  if (!imported.ok()) {
    state.SkipWithError(imported.status().to_string().c_str());
    return;
  }
  auto model = Model::from_graph(std::move(imported->graph));
  auto input = read_npy(base + ".input.npy");
  if (!model.ok() || !input.ok()) {
    state.SkipWithError("cannot load the model or its input");
    return;
  }
  auto session = Session::create(*model, bench_device());
  if (!session.ok()) {
    state.SkipWithError(session.status().to_string().c_str());
    return;
  }
  for (auto _ : state) {
    auto out = (*session)->run({*input});
    if (!out.ok()) {
      state.SkipWithError(out.status().to_string().c_str());
      return;
    }
  }
}

void BM_ModelVsCpu(benchmark::State& state, const std::string& name) {
  const std::string base = model_dir() + "/" + name;
  auto imported = convert_onnx(base + ".onnx");
  auto input = read_npy(base + ".input.npy");
  if (!imported.ok() || !input.ok()) {
    state.SkipWithError((base + ": cannot load the model or its input").c_str());
    return;
  }
  const Graph& g = imported->graph;
  std::vector<NodeId> layers;
  for (NodeId i = 0; i < g.num_nodes(); ++i) layers.push_back(i);
  std::unique_ptr<Device> devices[2];
  std::unique_ptr<Program> programs[2];
  const std::string names[2] = {bench_device(), "cpu"};
  for (int d = 0; d < 2; ++d) {
    auto dev = open_device(names[d]);
    if (!dev.ok()) {
      state.SkipWithError(dev.status().to_string().c_str());
      return;
    }
    devices[d] = std::move(*dev);
    auto p = devices[d]->compile(g, layers);
    if (!p.ok()) {
      state.SkipWithError(p.status().to_string().c_str());
      return;
    }
    programs[d] = std::move(*p);
  }
  std::vector<double> ms[2];
  std::vector<Tensor> ins = {*input};
  for (auto _ : state) {
    for (int d = 0; d < 2; ++d) {
      std::vector<Tensor> outs(programs[d]->output_values().size());
      const auto t0 = std::chrono::steady_clock::now();
      Status s = programs[d]->run(ins, outs);
      const auto t1 = std::chrono::steady_clock::now();
      if (!s.ok()) {
        state.SkipWithError(s.to_string().c_str());
        return;
      }
      ms[d].push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
  }
  state.counters["dev_ms"] = median(ms[0]);
  state.counters["cpu_ms"] = median(ms[1]);
  state.counters["dev/cpu"] = median(ms[0]) / std::max(1e-9, median(ms[1]));
  if (auto* vp = dynamic_cast<VulkanProgram*>(programs[0].get())) {
    const double mib = 1.0 / (1 << 20);
    state.counters["arena_MiB"] = static_cast<double>(vp->memory().arena_bytes) * mib;
    state.counters["separate_MiB"] = static_cast<double>(vp->memory().separate_bytes) * mib;
    state.counters["const_MiB"] = static_cast<double>(vp->memory().constant_bytes) * mib;
  }
}

const bool kRegistered = [] {
  for (const LayerCase& c : layer_cases()) {
    benchmark::RegisterBenchmark((std::string("Layer/") + c.name).c_str(), BM_Layer, c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const char* m :
       {"mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1", "vgg16", "alexnet"}) {
    benchmark::RegisterBenchmark((std::string("Model/") + m).c_str(), BM_Model, std::string(m))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(2);
  }
  // Alternating device/cpu runs; TESSERA_BENCH_REPS runs of each (default 5).
  const char* reps = std::getenv("TESSERA_BENCH_REPS");
  const int n = reps != nullptr ? std::max(1, std::atoi(reps)) : 5;
  for (const char* m : {"mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1", "vgg16", "alexnet",
                        "mobilenet_v3_small", "googlenet", "shufflenet_v2_x0_5", "densenet121",
                        "efficientnet_b0"}) {
    benchmark::RegisterBenchmark((std::string("ModelVsCpu/") + m).c_str(), BM_ModelVsCpu,
                                 std::string(m))
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime()
        ->Iterations(n);
  }
  return true;
}();

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
