// OpenCL microbenchmarks:
//   BM_Transfer/{upload,download}/BYTES   one host<->device copy (bytes/s)
//   BM_TransferFit                        t = alpha * bytes + beta fitted over 4 KiB..16 MiB, the
//                                         per-device transfer model of seed 000 eq. 1-2
//   BM_Op/<layer>                         one node on a real layer shape (FLOP/s)
//   BM_Model/<name>/<device>              a whole exported model ($TESSERA_MODEL_DIR or
//                                         ~/.cache/tessera/models) on each device of
//                                         TESSERA_BENCH_MODEL_DEVICES (default "opencl:0,cpu")
// Transfers and ops run on opencl:0 unless TESSERA_BENCH_DEVICE names another (e.g. reference).
// The model table of docs/performance.md: per model, medians of repetitions interleaved at
// random between the devices, so both see the same machine load (one model's sessions are kept
// loaded at a time):
//
//   for m in mobilenet_v2 resnet18 ...; do
//     build/benchmarks/tessera_opencl_bench --benchmark_filter="BM_Model/$m/"
//       --benchmark_repetitions=7 --benchmark_enable_random_interleaving=true
//       --benchmark_report_aggregates_only=true; done
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "api/tessera.h"
#include "backends/registry.h"
#include "core/npy.h"
#include "graph/graph.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes.h"

namespace tessera {
namespace {

std::string bench_device() {
  const char* d = std::getenv("TESSERA_BENCH_DEVICE");
  return d != nullptr ? d : "opencl:0";
}

Device* device_or_skip(benchmark::State& state) {
  static std::unique_ptr<Device> dev;
  static std::string error;
  if (!dev && error.empty()) {
    Result<std::unique_ptr<Device>> d = open_device(bench_device());
    if (d.ok()) {
      dev = std::move(*d);
    } else {
      error = d.status().to_string();
    }
  }
  if (!dev) state.SkipWithError(error.c_str());
  return dev.get();
}

Tensor rnd(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, s).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

// ---- Transfers ------------------------------------------------------------------------------

void BM_Transfer(benchmark::State& state, bool upload) {
  Device* dev = device_or_skip(state);
  if (dev == nullptr) return;
  const int64_t bytes = state.range(0);
  Tensor t = Tensor::create(DType::kU8, Shape({bytes})).value();
  Result<std::unique_ptr<Buffer>> buf = dev->upload(t);
  if (!buf.ok()) return state.SkipWithError(buf.status().to_string().c_str());
  for (auto _ : state) {
    if (upload) {
      Result<std::unique_ptr<Buffer>> b = dev->upload(t);
      if (!b.ok()) return state.SkipWithError(b.status().to_string().c_str());
    } else {
      Tensor back;
      if (!dev->download(**buf, &back).ok()) return state.SkipWithError("download failed");
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}
BENCHMARK_CAPTURE(BM_Transfer, upload, true)
    ->RangeMultiplier(8)
    ->Range(4 << 10, 64 << 20)
    ->UseRealTime();
BENCHMARK_CAPTURE(BM_Transfer, download, false)
    ->RangeMultiplier(8)
    ->Range(4 << 10, 64 << 20)
    ->UseRealTime();

// Least-squares fit of upload+download time against bytes: counters alpha (ns per byte, per
// direction) and beta (us per transfer).
void BM_TransferFit(benchmark::State& state) {
  Device* dev = device_or_skip(state);
  if (dev == nullptr) return;
  const std::vector<int64_t> sizes = {4 << 10, 64 << 10, 1 << 20, 4 << 20, 16 << 20};
  double alpha = 0, beta = 0;
  for (auto _ : state) {
    std::vector<double> xs, ys;
    for (int64_t bytes : sizes) {
      Tensor t = Tensor::create(DType::kU8, Shape({bytes})).value();
      std::vector<double> reps;
      for (int rep = 0; rep < 7; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        Result<std::unique_ptr<Buffer>> b = dev->upload(t);
        Tensor back;
        if (!b.ok() || !dev->download(**b, &back).ok()) return state.SkipWithError("transfer");
        const auto t1 = std::chrono::steady_clock::now();
        reps.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / 2);
      }
      std::sort(reps.begin(), reps.end());
      xs.push_back(static_cast<double>(bytes));
      ys.push_back(reps[reps.size() / 2]);  // the median: robust to a busy machine
    }
    double mx = 0, my = 0;
    for (size_t i = 0; i < xs.size(); ++i) mx += xs[i], my += ys[i];
    mx /= static_cast<double>(xs.size());
    my /= static_cast<double>(ys.size());
    double sxy = 0, sxx = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      sxy += (xs[i] - mx) * (ys[i] - my);
      sxx += (xs[i] - mx) * (xs[i] - mx);
    }
    const double slope_us = sxy / sxx;
    alpha = slope_us * 1e3;  // ns per byte
    beta = my - slope_us * mx;
  }
  state.counters["alpha_ns_per_byte"] = alpha;
  state.counters["beta_us"] = beta;
}
BENCHMARK(BM_TransferFit)->Iterations(1)->Unit(benchmark::kMillisecond);

// ---- Ops on real layer shapes ---------------------------------------------------------------

struct LayerShape {
  const char* name;
  OpKind kind;
  Shape x;
  std::vector<Shape> weights;  // constant inputs after x
  Attributes attrs;
};

Attributes attrs(std::initializer_list<std::pair<const char*, AttributeValue>> list) {
  Attributes a;
  for (const auto& [k, v] : list) a.set(k, v);
  return a;
}

using Ints = std::vector<int64_t>;

const std::vector<LayerShape>& layer_shapes() {
  static const std::vector<LayerShape> shapes = {
      {"resnet_conv3x3_64x56",
       OpKind::kConv,
       Shape({1, 64, 56, 56}),
       {Shape({64, 64, 3, 3}), Shape({64})},
       attrs({{"pads", Ints{1, 1, 1, 1}}, {"activation", "relu"}})},
      {"resnet_conv1x1_256to64x56",
       OpKind::kConv,
       Shape({1, 256, 56, 56}),
       {Shape({64, 256, 1, 1}), Shape({64})},
       attrs({})},
      {"resnet_stem_7x7s2",
       OpKind::kConv,
       Shape({1, 3, 224, 224}),
       {Shape({64, 3, 7, 7}), Shape({64})},
       attrs({{"pads", Ints{3, 3, 3, 3}}, {"strides", Ints{2, 2}}})},
      {"mobilenet_dw3x3_144x56",
       OpKind::kConv,
       Shape({1, 144, 56, 56}),
       {Shape({144, 1, 3, 3}), Shape({144})},
       attrs({{"group", int64_t{144}}, {"pads", Ints{1, 1, 1, 1}}})},
      {"vgg_conv3x3_256x56",
       OpKind::kConv,
       Shape({1, 256, 56, 56}),
       {Shape({256, 256, 3, 3}), Shape({256})},
       attrs({{"pads", Ints{1, 1, 1, 1}}})},
      {"vgg_fc_25088to4096",
       OpKind::kGemm,
       Shape({1, 25088}),
       {Shape({4096, 25088}), Shape({4096})},
       attrs({{"transB", int64_t{1}}})},
      {"resnet_maxpool3x3s2_112",
       OpKind::kMaxPool,
       Shape({1, 64, 112, 112}),
       {},
       attrs({{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}})},
      {"resnet_gap_2048x7", OpKind::kGlobalAveragePool, Shape({1, 2048, 7, 7}), {}, attrs({})},
      {"resnet_add_256x56",
       OpKind::kAdd,
       Shape({1, 256, 56, 56}),
       {Shape({1, 256, 56, 56})},
       attrs({})},
      {"shufflenet_transpose",
       OpKind::kTranspose,
       Shape({1, 2, 58, 28, 28}),
       {},
       attrs({{"perm", Ints{0, 2, 1, 3, 4}}})},
      {"squeezenet_concat",
       OpKind::kConcat,
       Shape({1, 64, 55, 55}),
       {Shape({1, 64, 55, 55})},
       attrs({{"axis", int64_t{1}}})},
      {"classifier_softmax_1000", OpKind::kSoftmax, Shape({1, 1000}), {}, attrs({})},
  };
  return shapes;
}

void BM_Op(benchmark::State& state, const LayerShape& layer) {
  Device* dev = device_or_skip(state);
  if (dev == nullptr) return;
  Graph g;
  const ValueId x = g.add_value("x", TensorInfo{DType::kF32, layer.x});
  g.inputs().push_back(x);
  Node n;
  n.name = layer.name;
  n.kind = layer.kind;
  n.attrs = layer.attrs;
  n.inputs = {x};
  for (size_t i = 0; i < layer.weights.size(); ++i) {
    n.inputs.push_back(g.add_constant("w" + std::to_string(i),
                                      rnd(layer.weights[i], static_cast<uint32_t>(i + 1))));
  }
  const ValueId y = g.add_value("y");
  n.outputs = {y};
  g.outputs().push_back(y);
  g.add_node(n);
  if (Status s = g.infer_shapes(); !s.ok()) return state.SkipWithError(s.to_string().c_str());
  Result<std::unique_ptr<Program>> p = dev->compile(g, std::vector<NodeId>{0});
  if (!p.ok()) return state.SkipWithError(p.status().to_string().c_str());
  std::vector<Tensor> ins = {rnd(layer.x, 99)};
  std::vector<Tensor> outs(1);
  if (!(*p)->run(ins, outs).ok()) return state.SkipWithError("run failed");  // warm-up
  for (auto _ : state) {
    if (!(*p)->run(ins, outs).ok()) return state.SkipWithError("run failed");
  }
  NodeContext nc(g, g.node(0));
  const TensorInfo out_info = g.value(y).info;
  const OpCost cost = node_cost(nc.ctx(), std::span<const TensorInfo>(&out_info, 1));
  // Rates use real time (UseRealTime): the work happens on the device, not this thread.
  state.counters["FLOP/s"] =
      benchmark::Counter(cost.flops, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- Whole models ---------------------------------------------------------------------------

std::string model_dir() {
  if (const char* d = std::getenv("TESSERA_MODEL_DIR")) return d;
  const char* home = std::getenv("HOME");
  return home != nullptr ? std::string(home) + "/.cache/tessera/models" : "";
}

// One timed run per iteration after a warm-up; the session is opened once per (model, device)
// and kept, so repetitions time only runs.
void BM_Model(benchmark::State& state, const std::string& name, const std::string& device) {
  struct Loaded {
    std::unique_ptr<Session> session;
    Tensor input;
    std::string error;
  };
  static std::map<std::string, Loaded> loaded;  // "model@device"; only one model's kept
  std::erase_if(loaded, [&](const auto& kv) { return kv.first.rfind(name + "@", 0) != 0; });
  Loaded& m = loaded[name + "@" + device];
  if (!m.session && m.error.empty()) {
    const std::string base = model_dir() + "/" + name;
    auto load = [&]() -> Status {
      ASSIGN_OR_RETURN(ImportedModel imported, convert_onnx(base + ".onnx"));
      ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                       Model::from_graph(std::move(imported.graph)));
      ASSIGN_OR_RETURN(m.session, Session::create(model, device));
      ASSIGN_OR_RETURN(m.input, read_npy(base + ".input.npy"));
      return m.session->run({m.input}).status();  // warm-up
    };
    if (!std::filesystem::exists(base + ".onnx")) {
      m.error = base + ".onnx not found";
    } else if (Status s = load(); !s.ok()) {
      m.error = s.to_string();
      m.session.reset();
    }
  }
  if (!m.session) return state.SkipWithError(m.error.c_str());
  for (auto _ : state) {
    if (!m.session->run({m.input}).ok()) return state.SkipWithError("run failed");
  }
}

std::vector<std::string> model_devices() {
  const char* env = std::getenv("TESSERA_BENCH_MODEL_DEVICES");
  std::string list = env != nullptr ? env : "opencl:0,cpu";
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (comma > start) out.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

int register_benchmarks() {
  for (const LayerShape& l : layer_shapes()) {
    benchmark::RegisterBenchmark((std::string("BM_Op/") + l.name).c_str(), BM_Op, l)
        ->Unit(benchmark::kMillisecond)
        ->MinTime(0.2)
        ->UseRealTime();
  }
  // The six foundation models, then the five extra exports.
  for (const char* m : {"mobilenet_v2", "resnet18", "resnet50", "squeezenet1_1", "vgg16", "alexnet",
                        "mobilenet_v3_small", "googlenet", "shufflenet_v2_x0_5", "densenet121",
                        "efficientnet_b0"}) {
    for (const std::string& d : model_devices()) {
      benchmark::RegisterBenchmark((std::string("BM_Model/") + m + "/" + d).c_str(), BM_Model,
                                   std::string(m), d)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1)
          ->UseRealTime();
    }
  }
  return 0;
}
const int kRegistered = register_benchmarks();

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
