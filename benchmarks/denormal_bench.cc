// The cost of denormal inputs to the reference kernels, with and without flush-to-zero and
// denormals-are-zero (core/denormals.h): a 3x3 convolution (16 -> 16 channels, 28x28) and a
// Softmax over 64 x 1000, on inputs of normal floats and of denormals (1e-39).
//
//   tessera_denormal_bench --benchmark_repetitions=5 --benchmark_enable_random_interleaving=true
//                          --benchmark_report_aggregates_only=true
//
// The "flush" variants are what Tessera's devices run (the reference device sets the mode on the
// thread that executes); "noflush" is how the kernels ran before.
#include <benchmark/benchmark.h>

#include <vector>

#include "core/denormals.h"
#include "graph/graph.h"

namespace tessera {
namespace {

struct Case {
  Node node;
  std::vector<Tensor> inputs;
  std::vector<Tensor> outputs;
};

Case conv_case(float value) {
  Case c;
  c.node.name = "conv";
  c.node.kind = OpKind::kConv;
  c.node.inputs = {0, 1};
  c.node.outputs = {2};
  c.node.attrs.set("pads", std::vector<int64_t>{1, 1, 1, 1});
  std::vector<float> x(16 * 28 * 28, value), w(16 * 16 * 9);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 13) - 0.06f;
  c.inputs = {Tensor::from_floats(Shape{1, 16, 28, 28}, x),
              Tensor::from_floats(Shape{16, 16, 3, 3}, w)};
  c.outputs = {Tensor::create(DType::kF32, Shape{1, 16, 28, 28}).value()};
  return c;
}

Case softmax_case(float value) {
  Case c;
  c.node.name = "softmax";
  c.node.kind = OpKind::kSoftmax;
  c.node.inputs = {0};
  c.node.outputs = {1};
  std::vector<float> x(64 * 1000, value);
  c.inputs = {Tensor::from_floats(Shape{64, 1000}, x)};
  c.outputs = {Tensor::create(DType::kF32, Shape{64, 1000}).value()};
  return c;
}

void run(benchmark::State& state, Case (*make)(float), float value, bool flush) {
  Case c = make(value);
  NodeContext nc(c.node, c.inputs);
  const Status first = run_reference(nc.ctx(), c.inputs, c.outputs);
  if (!first.ok()) {
    state.SkipWithError(first.to_string().c_str());
    return;
  }
  for (auto _ : state) {
    if (flush) {
      const ScopedFlushDenormals f;
      benchmark::DoNotOptimize(run_reference(nc.ctx(), c.inputs, c.outputs).ok());
    } else {
      benchmark::DoNotOptimize(run_reference(nc.ctx(), c.inputs, c.outputs).ok());
    }
  }
}

BENCHMARK_CAPTURE(run, conv_normal_noflush, conv_case, 0.5f, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, conv_denormal_noflush, conv_case, 1e-39f, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, conv_normal_flush, conv_case, 0.5f, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, conv_denormal_flush, conv_case, 1e-39f, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, softmax_normal_noflush, softmax_case, 0.5f, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, softmax_denormal_noflush, softmax_case, 1e-39f, false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, softmax_normal_flush, softmax_case, 0.5f, true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(run, softmax_denormal_flush, softmax_case, 1e-39f, true)
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tessera

BENCHMARK_MAIN();
