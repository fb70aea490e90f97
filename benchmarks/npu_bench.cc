// Reference NPU driver microbenchmarks: per-op latency on real layer shapes (MobileNetV2,
// ResNet, VGG) in fp16 and int8, and the transfer cost of the boundary (host f32 NCHW ->
// driver dtype -> on-chip NHWC8 and back) as a function of tensor size.
//
//   build/benchmarks/tessera_npu_bench --benchmark_counters_tabular=true
//
// Counters: driver_in_ns / driver_out_ns are the driver's layout conversions (perf counters),
// host_ns Tessera's precision conversion, bytes the boundary bytes in + out. A linear fit of
// (driver_in_ns + driver_out_ns + host_ns) on bytes gives the transfer model c = alpha*bytes+beta.
#include <benchmark/benchmark.h>

#include <random>

#include "backends/npu/npu_device.h"

namespace tessera {
namespace {

Tensor random_tensor(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::create(DType::kF32, shape).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (float& v : t.span<float>()) v = d(rng);
  return t;
}

struct OneOp {
  Graph g;
  Tensor input;
};

// Conv (+ fused relu6) of `c` -> `m` channels at h x w, kernel k, stride s, groups.
OneOp conv(int64_t c, int64_t m, int64_t h, int64_t k, int64_t s, int64_t groups) {
  OneOp o;
  const ValueId x = o.g.add_value("x", TensorInfo{DType::kF32, Shape{1, c, h, h}});
  o.g.inputs().push_back(x);
  const ValueId w = o.g.add_constant("w", random_tensor(Shape{m, c / groups, k, k}, 2));
  const int64_t oh = (h + 2 * (k / 2) - k) / s + 1;
  const ValueId y = o.g.add_value("y", TensorInfo{DType::kF32, Shape{1, m, oh, oh}});
  Node n{"conv", OpKind::kConv, {}, {x, w}, {y}};
  n.attrs.set("pads", std::vector<int64_t>{k / 2, k / 2, k / 2, k / 2});
  n.attrs.set("strides", std::vector<int64_t>{s, s});
  n.attrs.set("group", groups);
  n.attrs.set("activation", std::string("clip"));
  n.attrs.set("activation_alpha", 0.f);
  n.attrs.set("activation_beta", 6.f);
  o.g.add_node(n);
  o.g.outputs().push_back(y);
  o.input = random_tensor(Shape{1, c, h, h}, 1);
  return o;
}

OneOp gemm(int64_t k, int64_t n_out) {
  OneOp o;
  const ValueId x = o.g.add_value("x", TensorInfo{DType::kF32, Shape{1, k}});
  o.g.inputs().push_back(x);
  const ValueId w = o.g.add_constant("w", random_tensor(Shape{n_out, k}, 2));
  const ValueId y = o.g.add_value("y", TensorInfo{DType::kF32, Shape{1, n_out}});
  Node n{"fc", OpKind::kGemm, {}, {x, w}, {y}};
  n.attrs.set("transB", int64_t{1});
  o.g.add_node(n);
  o.g.outputs().push_back(y);
  o.input = random_tensor(Shape{1, k}, 1);
  return o;
}

// A Relu over 1 x c x h x h: almost no compute, so its time is the boundary transfer.
OneOp relu(int64_t c, int64_t h) {
  OneOp o;
  const ValueId x = o.g.add_value("x", TensorInfo{DType::kF32, Shape{1, c, h, h}});
  o.g.inputs().push_back(x);
  const ValueId y = o.g.add_value("y", TensorInfo{DType::kF32, Shape{1, c, h, h}});
  o.g.add_node(Node{"relu", OpKind::kRelu, {}, {x}, {y}});
  o.g.outputs().push_back(y);
  o.input = random_tensor(Shape{1, c, h, h}, 1);
  return o;
}

void run(benchmark::State& state, OneOp o, uint32_t precision) {
  NpuOptions opt;
  opt.driver_path = NpuDriver::reference_driver_path();
  opt.precision = precision;
  opt.driver_options = {{"memory_capacity_mb", "1000"}};
  if (precision == TNPU_PRECISION_INT8) opt.calibration = {{o.input}};
  auto d = NpuDevice::open(0, opt);
  if (!d.ok()) return state.SkipWithError(d.status().to_string().c_str());
  auto p = (*d)->compile(o.g, std::vector<NodeId>{0});
  if (!p.ok()) return state.SkipWithError(p.status().to_string().c_str());
  auto* np = dynamic_cast<NpuProgram*>(p->get());
  std::vector<Tensor> in{o.input}, out(1);
  double in_ns = 0, out_ns = 0, compute_ns = 0, host_ns = 0;
  for (auto _ : state) {
    if (!(*p)->run(in, out).ok()) return state.SkipWithError("run failed");
    const NpuRunStats& s = np->last_run();
    in_ns += static_cast<double>(s.input_conversion_ns);
    out_ns += static_cast<double>(s.output_conversion_ns);
    compute_ns += static_cast<double>(s.compute_ns);
    host_ns += static_cast<double>(s.host_conversion_ns);
  }
  const NpuRunStats& s = np->last_run();
  const double iters = static_cast<double>(state.iterations());
  state.counters["bytes"] = static_cast<double>(s.bytes_in + s.bytes_out);
  state.counters["driver_in_ns"] = in_ns / iters;
  state.counters["driver_out_ns"] = out_ns / iters;
  state.counters["compute_ns"] = compute_ns / iters;
  state.counters["host_ns"] = host_ns / iters;
}

void register_all() {
  struct ConvShape {
    const char* name;
    int64_t c, m, h, k, s, g;
  };
  const ConvShape convs[] = {
      {"mobilenet_v2/conv0_3x3s2", 3, 32, 224, 3, 2, 1},
      {"mobilenet_v2/dw_3x3_144@56", 144, 144, 56, 3, 1, 144},
      {"mobilenet_v2/pw_1x1_144to24@56", 144, 24, 56, 1, 1, 1},
      {"resnet18/conv_3x3_64@56", 64, 64, 56, 3, 1, 1},
      {"resnet50/pw_1x1_256to64@56", 256, 64, 56, 1, 1, 1},
      {"vgg16/conv_3x3_256@56", 256, 256, 56, 3, 1, 1},
  };
  for (uint32_t precision : {TNPU_PRECISION_F16, TNPU_PRECISION_INT8}) {
    const std::string pname = npu_precision_name(precision);
    for (const ConvShape& c : convs) {
      benchmark::RegisterBenchmark(
          ("npu_op/" + pname + "/" + c.name).c_str(),
          [=](benchmark::State& st) { run(st, conv(c.c, c.m, c.h, c.k, c.s, c.g), precision); })
          ->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark(
        ("npu_op/" + pname + "/mobilenet_v2/fc_1280to1000").c_str(),
        [=](benchmark::State& st) { run(st, gemm(1280, 1000), precision); })
        ->Unit(benchmark::kMicrosecond);
    // Transfer: 1 x 32 x h x h for h = 8 .. 256 (8 KB .. 8 MB of f32 each way).
    for (int64_t h : {8, 16, 32, 64, 128, 256}) {
      benchmark::RegisterBenchmark(
          ("npu_transfer/" + pname + "/1x32x" + std::to_string(h) + "x" + std::to_string(h))
              .c_str(),
          [=](benchmark::State& st) { run(st, relu(32, h), precision); })
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace
}  // namespace tessera

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (tessera::NpuDriver::reference_driver_path().empty()) {
    std::fprintf(stderr, "tessera_npu_bench: the reference NPU driver is not built\n");
    return 1;
  }
  tessera::register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
